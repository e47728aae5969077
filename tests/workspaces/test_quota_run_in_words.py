"""A quota run reads as what it changed: its page and the run list title it "Quota of team-a:
3 → 1" and lead back to the quota page and its undo; its parameters and its writes read in words,
never as keys or calls; the admin's notice of its end names the Workspace, never "on -"."""

import pytest
from django.urls import reverse
from django.utils import translation

from brickadmin.accounts.models import Notification
from gpus.models import ProcedureRun
from gpus.tasks import execute_run
from workspaces import quota

from .conftest import text

SHARED = "nvidia.com/gpu.shared"


@pytest.fixture(autouse=True)
def fast_engine(monkeypatch):
    for knob in ("BRICK_PROCEDURE_RETRY_BACKOFF", "BRICK_PROCEDURE_VERIFY_TIMEOUT", "BRICK_PROCEDURE_STEP_PAUSE"):
        monkeypatch.setenv(knob, "0")


@pytest.fixture
def lowered(approved, alice, admin_user, twin):
    approved(alice, "team-a", gpu=3)
    run = quota.change_quota("team-a", 1, actor=admin_user, reason="idle for a week", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    return run


def test_a_quota_run_is_titled_by_what_it_changed_and_leads_back_to_the_quota_page_and_its_undo(
    lowered, login, admin_user
):
    admin = login(admin_user)
    page = admin.get(reverse("run_detail", args=[lowered.pk])).content.decode()
    assert f"Run #{lowered.pk}: Quota of team-a: 3 → 1" in text(page)
    quota_page = reverse("workspace_quota", args=["team-a"])
    assert f'<a href="{quota_page}" id="what-next-quota">GPU quota of team-a</a>' in page
    undo = f"{quota_page}?gpu=3&amp;undo_of={lowered.pk}&amp;reason=Undo+of+run+%23{lowered.pk}"
    assert f'<a href="{undo}" id="what-next-undo">Undo: back to 3</a>' in page
    # the undo link lands on the quota page's preview of going back to 3
    landed = text(admin.get(undo.replace("&amp;", "&")).content)
    assert f"{SHARED} quota: 1 → 3." in landed
    listed = text(admin.get(reverse("run_list")).content)
    assert "Quota of team-a: 3 → 1" in listed and "all time-slicing nodes" not in listed


def test_once_undone_the_run_no_longer_offers_its_undo(lowered, login, admin_user):
    back = quota.change_quota(
        "team-a", 3, actor=admin_user, reason="back", undo_of=lowered.pk, acknowledged=2, dispatch=False
    )
    execute_run(back.pk)
    page = login(admin_user).get(reverse("run_detail", args=[lowered.pk])).content.decode()
    assert 'id="what-next-quota"' in page and 'id="what-next-undo"' not in page


def test_its_parameters_and_writes_read_in_words(lowered, login, admin_user):
    page = login(admin_user).get(reverse("run_detail", args=[lowered.pk])).content.decode()
    header = page[page.index("parameters: <code>") :]
    header = header[: header.index("</code>")]
    assert (
        f"Workspace: team-a · GPU resource: {SHARED} · New GPU quota: 1 · Quota before: 3 · Why: idle for a week"
        in header
    )
    assert "reason" not in header and "acknowledged" not in header  # nothing over the Total was asked
    shown = text(page)
    assert "sent: apply ResourceQuota team-a/workspace-compute" in shown
    assert 'apply({"apiVersion"' not in page and "apply({&quot;" not in page
    with translation.override("ko"):
        ko = text(login(admin_user).get(reverse("run_detail", args=[lowered.pk]), HTTP_ACCEPT_LANGUAGE="ko").content)
    assert "ResourceQuota team-a/workspace-compute 적용" in ko


def test_the_admins_notice_of_its_end_names_the_workspace(lowered, admin_user):
    note = Notification.objects.filter(recipient=admin_user, kind="run-ended").latest("pk")
    assert note.subject == f"Run #{lowered.pk} Succeeded: Quota of team-a: 3 → 1"
    assert " on -" not in note.subject and "node -" not in note.body
    assert ProcedureRun.objects.get(pk=lowered.pk).get_absolute_url() in note.link
