"""An admin changes a Workspace's GPU quota: a preview (quota before and after, the pods that run,
capacity after), never below what its pods request, one confirmation, an audited run that the
owner is told of and that can be undone; the findings about quotas lead there."""

from datetime import UTC

import pytest
from django.urls import reverse

from gpus.models import OwnerNotice, ProcedureRun
from gpus.tasks import execute_run
from workspaces import quota
from workspaces.models import Decision, WorkspaceRequest

from .conftest import text

SHARED = "nvidia.com/gpu.shared"


@pytest.fixture(autouse=True)
def fast_engine(monkeypatch):
    monkeypatch.setenv("BRICK_PROCEDURE_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0")
    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0")


def gpu_pod(name, namespace, amount=1, phase="Running"):
    resources = {"limits": {SHARED: str(amount)}, "requests": {SHARED: str(amount)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": "dev-a1-ws02",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
        "status": {"phase": phase},
    }


def hard(twin, ns):
    return {k: v for q in twin.list_resource_quotas(ns) for k, v in ((q.get("spec") or {}).get("hard") or {}).items()}


@pytest.fixture
def team(approved, alice, twin):
    """alice's Workspace with 3 shared GPUs of quota and one Running pod holding 1."""
    req = approved(alice, "team-a", gpu=3)
    twin.apply(gpu_pod("train-0", "team-a"))
    twin.apply(gpu_pod("done", "team-a", phase="Succeeded"))  # finished: holds nothing
    return req


@pytest.mark.parametrize(
    "after, requested, problem", [(2, 1, ""), (1, 1, ""), (0, 1, "cannot go below"), (-1, 0, "negative")]
)
def test_a_quota_is_never_set_below_what_the_pods_request(after, requested, problem):
    found = quota.quota_problem(SHARED, after, requested)
    assert (problem in found) if problem else found == ""


def test_the_preview_shows_the_quota_before_and_after_and_the_pods_that_run(team, login, admin_user, twin):
    page = login(admin_user).get(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reason": "idle"})
    body = text(page.content)
    assert page.status_code == 200
    assert f"{SHARED} quota: 3 → 1." in body
    assert "train-0 · Running · 1" in body and "done" not in body
    assert f'data-testid="capacity-{SHARED}"' in page.content.decode()
    assert 'data-confirm="Set the nvidia.com/gpu.shared quota of team-a from 3 to 1?' in page.content.decode()
    assert hard(twin, "team-a")["requests." + SHARED] == "3"  # a preview changes nothing
    assert not ProcedureRun.objects.exists()


def test_below_the_pods_request_nothing_is_offered_nor_accepted(team, login, admin_user, twin):
    client = login(admin_user)
    page = client.get(reverse("workspace_quota", args=["team-a"]), {"gpu": "0", "reason": "reclaim"})
    assert "cannot go below" in text(page.content) and 'data-testid="quota-confirm"' not in page.content.decode()
    r = client.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "0", "reason": "reclaim"})
    assert r.status_code == 400 and not ProcedureRun.objects.exists()
    assert hard(twin, "team-a")["requests." + SHARED] == "3"


def test_a_confirmed_change_is_an_audited_run_the_owner_is_told_of_and_an_undo_reverts(
    team, login, admin_user, alice, twin
):
    admin = login(admin_user)
    r = admin.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reason": "idle for a week"})
    run = ProcedureRun.objects.get()
    assert r.status_code == 302 and r["Location"] == run.get_absolute_url()
    assert run.actor == admin_user and run.params["before"] == 3 and run.params["gpu"] == 1
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert hard(twin, "team-a")["requests." + SHARED] == "1"
    assert hard(twin, "team-a")["requests.cpu"] == "2"  # the rest of the quota kept
    assert WorkspaceRequest.objects.get(name="team-a").gpu == 1  # the record follows: no "edited outside" finding
    decision = Decision.objects.get(action=Decision.Action.QUOTA)
    assert decision.actor_name == "root" and "3 → 1" in decision.detail and "idle for a week" in decision.detail
    # the owner reads it on their Workspace page
    owner_page = text(login(alice).get(reverse("workspace_detail", args=[team.pk])).content)
    assert "changed the nvidia.com/gpu.shared quota of your Workspace from 3 to 1: idle for a week" in owner_page
    # the history offers the undo: the same preview and confirmation, back to 3
    history = admin.get(reverse("workspace_quota", args=["team-a"])).content.decode()
    assert "Undo: back to 3" in history
    # the seed's shared quota was over its Total before: going back takes it over again, which the
    # undo acknowledges as a plan would
    undo_preview = admin.get(
        reverse("workspace_quota", args=["team-a"]), {"gpu": "3", "reason": "x", "undo_of": str(run.pk)}
    )
    assert "I understand 2 GPUs of allocated quota will be over the Total." in text(undo_preview.content)
    undo = admin.post(
        reverse("workspace_quota", args=["team-a"]),
        {"gpu": "3", "reason": f"Undo of run #{run.pk}", "undo_of": str(run.pk), "capacity_acknowledged": "2"},
    )
    back = ProcedureRun.objects.exclude(pk=run.pk).get()
    assert undo.status_code == 302 and back.params["undo_of"] == run.pk
    execute_run(back.pk)
    assert hard(twin, "team-a")["requests." + SHARED] == "3"
    assert WorkspaceRequest.objects.get(name="team-a").gpu == 3
    assert OwnerNotice.objects.filter(namespace="team-a").count() == 2
    # only the latest change can be undone
    history = admin.get(reverse("workspace_quota", args=["team-a"])).content.decode()
    assert "Undo: back to 1" in history and "Undo: back to 3" not in history


def test_the_quota_page_is_for_admins_and_needs_csrf(team, login, alice, admin_user):
    assert login(alice).get(reverse("workspace_quota", args=["team-a"])).status_code == 403
    assert (
        login(alice).post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reason": "x"}).status_code == 403
    )
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reason": "x"}).status_code == 403
    assert not ProcedureRun.objects.exists()


def test_pods_started_after_the_preview_stop_the_run_before_any_change(team, admin_user, twin):
    run = quota.change_quota("team-a", 1, actor=admin_user, reason="idle", dispatch=False)
    twin.apply(gpu_pod("late", "team-a"))  # now 2 requested: 1 is too low
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "cannot go below" in run.message
    assert hard(twin, "team-a")["requests." + SHARED] == "3"
    assert not Decision.objects.filter(action=Decision.Action.QUOTA).exists()


def test_an_idle_allocation_links_to_the_quota_page(db):
    from datetime import datetime, timedelta

    from gpus.numbers import health as health_mod
    from workspaces import health

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    line = health._Line(
        namespace="team-i",
        owner="alice",
        quota=2,
        requested=0,
        utilisation=None,
        idle_since=now - timedelta(hours=48),
        labelled=True,
        gpu_quotas={SHARED: 2},
        quotas=[],
    )
    inputs = health_mod.HealthInputs(ledger=None, now=now, workspaces=health.workspace_inputs([line], records=()))
    idle = [p for p in health_mod.problems(inputs, reads="records") if p.kind == "workspace-idle"]
    assert idle and idle[0].link == reverse("workspace_quota", args=["team-i"])
    assert idle[0].link_text == "Lower or reclaim the quota of team-i"


def test_the_quota_messages_read_in_korean():
    from django.utils import translation

    with translation.override("ko"):
        assert str(quota.quota_problem(SHARED, 0, 1)).startswith("현재 Pod가")
        from gpus.numbers.capacity import shown_available  # noqa: F401  (the template tag reads it)
        from gpus.templatetags.brick import available

        assert available({"request": None}, -2) == "가용 없음"


def test_a_quota_change_started_in_english_reads_its_prechecks_in_korean(team, login, admin_user):
    from django.utils import translation

    from gpus.models import RUN_EVENT_KEY

    with translation.override("en"):
        login(admin_user).post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reason": "idle"})
    run = ProcedureRun.objects.get()
    execute_run(run.pk)
    prechecks = [e for e in run.steps.exclude(step_key=RUN_EVENT_KEY) if e.step_key == "precheck"]
    assert prechecks and all((e.said or {}).get("output") for e in prechecks if e.state == "succeeded")
    admin = login(admin_user)
    admin.cookies["django_language"] = "ko"
    korean = text(admin.get(reverse("run_detail", args=[run.pk]), HTTP_ACCEPT_LANGUAGE="ko").content)
    assert "쿼터 3 → 1; Pod 요청 1." in korean and "변경 후 용량:" in korean
    assert "its pods request" not in korean and "Capacity after the change:" not in korean
