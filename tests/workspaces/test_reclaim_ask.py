"""Asking before reclaiming: the admin asks the owner of an idle Workspace, the owner answers in
the product (keep it until a date, or release part or all), and only after the deadline the admin
reclaims, through the same preview, confirmation and audited quota run as any quota change."""

from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from gpus.models import OwnerNotice, ProcedureRun
from gpus.tasks import execute_run
from workspaces.models import Decision, ReclaimAsk

from .conftest import text
from .test_quota_edit import SHARED, fast_engine, gpu_pod, hard, team  # noqa: F401  (fixtures)


def ask(login, admin_user, days=7):
    return login(admin_user).post(reverse("reclaim_ask", args=["team-a"]), {"days": str(days), "message": "idle?"})


def test_the_owner_is_asked_and_keeps_it_then_the_admin_reclaims_after_the_date(
    team,  # noqa: F811  (a fixture imported above)
    login,
    admin_user,
    alice,
    bob,
    twin,
):
    admin = login(admin_user)
    assert ask(login, admin_user).status_code == 302
    question = ReclaimAsk.objects.get()
    assert question.quota_at_ask == 3 and question.resource == SHARED
    assert Decision.objects.filter(action=Decision.Action.RECLAIM_ASK, subject="team-a").exists()
    owner = login(alice)
    page = text(owner.get(reverse("workspace_detail", args=[team.pk])).content)
    assert "root asks whether this Workspace still needs its 3 nvidia.com/gpu.shared" in page
    assert OwnerNotice.objects.filter(namespace="team-a", subject__startswith="reclaim-ask").exists()
    # before the deadline there is no reclaim
    quota_page = admin.get(reverse("workspace_quota", args=["team-a"])).content.decode()
    assert "No answer yet." in quota_page and 'data-testid="reclaim-preview"' not in quota_page
    early = admin.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reclaim_of": str(question.pk)})
    assert early.status_code == 400 and not ProcedureRun.objects.exists()
    # someone else cannot answer for the owner
    assert (
        login(bob)
        .post(reverse("reclaim_keep", args=[team.pk, question.pk]), {"until": "2099-01-01", "reason": "mine"})
        .status_code
        == 404
    )
    until = (timezone.now() + timedelta(days=10)).date()
    owner.post(
        reverse("reclaim_keep", args=[team.pk, question.pk]), {"until": until.isoformat(), "reason": "paper deadline"}
    )
    question.refresh_from_db()
    assert question.answer == "keep" and question.keep_until == until
    assert f"alice keeps it until {until.isoformat()}: paper deadline" in text(
        admin.get(reverse("workspace_quota", args=["team-a"])).content
    )
    # the date passes: the admin previews the reclaim down to what the pods request, and confirms once
    ReclaimAsk.objects.filter(pk=question.pk).update(keep_until=timezone.now().date() - timedelta(days=1))
    quota_page = admin.get(reverse("workspace_quota", args=["team-a"])).content.decode()
    assert f"?gpu=1&amp;reclaim_of={question.pk}" in quota_page
    preview = admin.get(
        reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reclaim_of": str(question.pk), "reason": "reclaim"}
    )
    assert f"{SHARED} quota: 3 → 1." in text(preview.content) and "data-confirm" in preview.content.decode()
    r = admin.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reclaim_of": str(question.pk)})
    run = ProcedureRun.objects.get()
    assert r.status_code == 302 and r["Location"] == run.get_absolute_url()
    execute_run(run.pk)
    assert hard(twin, "team-a")["requests." + SHARED] == "1"
    question.refresh_from_db()
    assert question.quota_run_id == run.pk
    assert "changed the nvidia.com/gpu.shared quota of your Workspace from 3 to 1" in text(
        owner.get(reverse("workspace_detail", args=[team.pk])).content
    )


def test_with_no_answer_by_the_deadline_the_reclaim_is_offered(team, login, admin_user):  # noqa: F811  (team: a fixture imported above)
    ask(login, admin_user, days=1)
    ReclaimAsk.objects.update(deadline=timezone.now() - timedelta(minutes=1))
    page = login(admin_user).get(reverse("workspace_quota", args=["team-a"])).content.decode()
    assert 'data-testid="reclaim-preview"' in page


def test_the_owner_releases_part_through_the_quota_path(team, login, admin_user, alice, twin):  # noqa: F811  (team: a fixture imported above)
    ask(login, admin_user)
    question = ReclaimAsk.objects.get()
    owner = login(alice)
    too_much = owner.post(reverse("reclaim_release", args=[team.pk, question.pk]), {"amount": "3"})
    assert too_much.status_code == 302 and not ProcedureRun.objects.exists()  # its pod requests 1: at most 2
    owner.post(reverse("reclaim_release", args=[team.pk, question.pk]), {"amount": "2"})
    run = ProcedureRun.objects.get()
    assert run.actor == alice and run.params["gpu"] == 1
    execute_run(run.pk)
    assert hard(twin, "team-a")["requests." + SHARED] == "1"
    question.refresh_from_db()
    assert question.answer == "release" and question.released == 2 and question.quota_run_id == run.pk
    assert Decision.objects.filter(action=Decision.Action.RECLAIM_ANSWER, actor_name="alice").exists()


def test_asking_is_for_admins_with_csrf(team, login, alice, admin_user):  # noqa: F811  (team: a fixture imported above)
    assert login(alice).post(reverse("reclaim_ask", args=["team-a"]), {"days": "7"}).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(reverse("reclaim_ask", args=["team-a"]), {"days": "7"}).status_code == 403
    assert not ReclaimAsk.objects.exists()


def test_the_owners_own_release_reads_as_theirs_with_the_reason_in_their_language(
    team,  # noqa: F811  (team: a fixture imported above)
    login,
    admin_user,
    alice,
    twin,
):
    from gpus.models import OwnerNotice

    ask(login, admin_user)
    question = ReclaimAsk.objects.get()
    login(alice).post(reverse("reclaim_release", args=[team.pk, question.pk]), {"amount": "2"})
    run = ProcedureRun.objects.get()
    assert run.params["reason_said"]["code"] == "reason.released"
    execute_run(run.pk)
    notice = OwnerNotice.objects.get(run_id=run.pk)
    with translation.override("en"):
        assert str(notice.shown_message).startswith(f"You released 2 {SHARED}: the quota of your Workspace is 1")
    with translation.override("ko"):
        assert "반납했습니다" in str(notice.shown_message) and "Released" not in str(notice.shown_message)
