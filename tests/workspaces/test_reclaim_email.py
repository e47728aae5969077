"""Asking before reclaiming reaches the owner: the question and the reclaim arrive by email
through a real SMTP server on loopback (aiosmtpd), in the owner's language, beside the notice
on their Workspace page; the owner's own answers are not mailed back to them."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from brickadmin.accounts.models import Notification
from gpus.models import OwnerNotice
from gpus.tasks import execute_run
from workspaces import reclaim
from workspaces.models import ReclaimAsk

from .test_notifications import choose, receiver, smtp  # noqa: F401  (fixtures)
from .test_quota_edit import fast_engine, team  # noqa: F401  (fixtures)


def test_the_owner_is_mailed_the_question_and_the_reclaim_in_their_language(
    team,  # noqa: F811  (fixtures imported above)
    alice,
    admin_user,
    smtp,  # noqa: F811
    worker_inline,
    twin,
    django_capture_on_commit_callbacks,
):
    alice.email = "alice@example.test"
    alice.save()
    choose(alice, language="ko")
    with django_capture_on_commit_callbacks(execute=True):
        ask = reclaim.ask_owner("team-a", actor=admin_user, days=3, message="idle?")

    ((rcpt, mail),) = smtp.messages
    assert rcpt == ["alice@example.test"]
    assert "team-a" in mail["Subject"] and "Does Workspace" not in mail["Subject"]  # Korean
    assert "nvidia.com/gpu.shared" in mail.get_content()
    note = Notification.objects.get(recipient=alice, kind="reclaim-ask")
    assert note.link == reverse("workspace_detail", args=[team.pk])

    # the owner's own answer is recorded on their page, not mailed to them
    with django_capture_on_commit_callbacks(execute=True):
        reclaim.answer_keep(ask, alice, until=timezone.now().date() + timedelta(days=2), reason="paper")
    assert len(smtp.messages) == 1

    # the date passes without a release: the admin reclaims, and the owner is told at once
    ReclaimAsk.objects.filter(pk=ask.pk).update(keep_until=timezone.now().date() - timedelta(days=1))
    ask.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        done = reclaim.reclaim(ask, actor=admin_user, after=1, gateway=twin)
    execute_run(done.quota_run_id)
    (_, reclaimed) = smtp.messages[1]
    assert "team-a" in reclaimed["Subject"] and "reclaimed" not in reclaimed["Subject"]
    assert f"#{done.quota_run_id}" in reclaimed.get_content()
    assert Notification.objects.filter(recipient=alice, kind="reclaimed").count() == 1
    assert OwnerNotice.objects.filter(namespace="team-a", subject=f"reclaim-ask:{ask.pk}:reclaimed").exists()


def test_an_owner_who_chose_english_reads_the_question_in_english(
    team,  # noqa: F811
    alice,
    admin_user,
    smtp,  # noqa: F811
    worker_inline,
    django_capture_on_commit_callbacks,
):
    alice.email = "alice@example.test"
    alice.save()
    choose(alice, language="en")
    with django_capture_on_commit_callbacks(execute=True):
        reclaim.ask_owner("team-a", actor=admin_user, days=3)
    ((_, mail),) = smtp.messages
    assert mail["Subject"].startswith("Does Workspace team-a still need its GPUs? Answer by ")
    assert "An admin (root) asks whether Workspace team-a still needs its 3 nvidia.com/gpu.shared" in (
        mail.get_content()
    )
