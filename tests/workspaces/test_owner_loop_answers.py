"""The owner loop closes both ways: the admin who asked is told of each answer, in their
language, with the quota page to act from; no one is told of a run they cannot open (an owner's
own release is told on their Workspace page, the run page being for admins)."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from brickadmin.accounts.models import Notification, Preference
from gpus.models import OwnerNotice, ProcedureRun
from gpus.tasks import execute_run
from workspaces.models import ReclaimAsk

from .test_quota_edit import SHARED, fast_engine, gpu_pod, hard, team  # noqa: F401  (fixtures)


def asked(login, admin_user):
    login(admin_user).post(reverse("reclaim_ask", args=["team-a"]), {"days": "7", "message": "idle?"})
    return ReclaimAsk.objects.get()


def test_the_asking_admin_is_told_when_the_owner_keeps_it(team, login, admin_user, alice):  # noqa: F811
    question = asked(login, admin_user)
    until = (timezone.now() + timedelta(days=10)).date()
    login(alice).post(
        reverse("reclaim_keep", args=[team.pk, question.pk]), {"until": until.isoformat(), "reason": "paper deadline"}
    )
    note = Notification.objects.get(recipient=admin_user, kind="reclaim-answer")
    assert note.subject == f"alice keeps the GPUs of Workspace team-a until {until.isoformat()}"
    assert note.body == f"alice keeps 3 {SHARED} until {until.isoformat()}: paper deadline"
    assert note.link == reverse("workspace_quota", args=["team-a"])
    assert not Notification.objects.filter(recipient=alice, kind="reclaim-answer").exists()  # their own answer


def test_the_asking_admin_is_told_of_a_release_and_the_owner_of_no_run_they_cannot_open(
    team,  # noqa: F811
    login,
    admin_user,
    alice,
    twin,
):
    question = asked(login, admin_user)
    Preference.objects.update_or_create(user=admin_user, defaults={"ui_language": "ko"})  # reads the console in Korean
    owner = login(alice)
    owner.post(reverse("reclaim_release", args=[team.pk, question.pk]), {"amount": "2"})
    run = ProcedureRun.objects.get()
    execute_run(run.pk)
    assert hard(twin, "team-a")["requests." + SHARED] == "1"
    note = Notification.objects.get(recipient=admin_user, kind="reclaim-answer")
    assert note.subject == f"alice이(가) Workspace team-a의 {SHARED} 2개를 반납했습니다"  # the admin's language
    # alice started the quota run by releasing, but its page is for admins: she is told on her page
    assert owner.get(run.get_absolute_url()).status_code == 403
    assert not Notification.objects.filter(recipient=alice, link__contains=run.get_absolute_url()).exists()
    assert OwnerNotice.objects.filter(run_id=run.pk, namespace="team-a").exists()


def test_notices_are_headed_in_words_never_by_their_keys(team, login, admin_user, alice):  # noqa: F811
    from workspaces import quota

    from .conftest import text

    question = asked(login, admin_user)
    until = (timezone.now() + timedelta(days=10)).date()
    owner = login(alice)
    owner.post(reverse("reclaim_keep", args=[team.pk, question.pk]), {"until": until.isoformat(), "reason": "paper"})
    execute_run(quota.change_quota("team-a", 2, actor=admin_user, reason="idle", dispatch=False).pk)
    page = text(owner.get(reverse("workspace_detail", args=[team.pk])).content)
    assert "root asked on " in page and " · answer by " in page
    assert "You keep the GPUs until " in page and "root changed the GPU quota on " in page
    assert "reclaim-ask:" not in page and "quota:team-a" not in page
    admin_page = text(login(admin_user).get(reverse("cluster_workspace", args=["team-a"])).content)
    assert "You changed the GPU quota on " in admin_page and "alice keeps the GPUs until " in admin_page
    assert "reclaim-ask:" not in admin_page
