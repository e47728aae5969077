"""One guard wherever capacity goes over the Total: a quota raised on its page, an undo of a
quota change and a wizard's plan ask the same acknowledgement, in the same words, naming by how
many GPUs; the run started keeps the count and its pre-check holds it to that. A quota lowered
is never asked about. On a node whose GPUs are in MIG mode the MIG wizard is offered first, and
converting it to time-slicing says what becomes of those GPUs."""

import pytest
from django.urls import reverse

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.models import TwinHardware
from gpus.models import ProcedureRun
from gpus.tasks import execute_run
from tests import mig_node
from workspaces import quota
from workspaces.models import Decision

from .conftest import text

SHARED = "nvidia.com/gpu.shared"
ACK = "capacity_acknowledged"


@pytest.fixture(autouse=True)
def fast_engine(monkeypatch):
    monkeypatch.setenv("BRICK_PROCEDURE_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0")
    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0")


def hard(twin, ns):
    return {k: v for q in twin.list_resource_quotas(ns) for k, v in ((q.get("spec") or {}).get("hard") or {}).items()}


def over_now(twin):
    """How far the shared type's Workspace quotas are over its Total now (the seed's are)."""
    line = next(x for x in quota.preview(twin, "team-a", 0).capacity if x.resource == SHARED)
    return line.over_now


@pytest.fixture
def team(approved, alice, twin):
    return approved(alice, "team-a", gpu=3)


def page_for(client, gpu, **more):
    return client.get(reverse("workspace_quota", args=["team-a"]), {"gpu": str(gpu), "reason": "more", **more})


def post(client, gpu, **more):
    return client.post(reverse("workspace_quota", args=["team-a"]), {"gpu": str(gpu), "reason": "more", **more})


def test_a_raise_over_the_total_asks_the_plans_acknowledgement_and_the_run_keeps_it(team, login, admin_user, twin):
    admin = login(admin_user)
    over = over_now(twin) + 2
    preview = page_for(admin, 5)
    body = text(preview.content)
    assert f"This run leaves {SHARED} ({over}) with less capacity than its allocated quota" in body
    assert f"I understand {over} GPUs of allocated quota will be over the Total." in body
    assert f'name="{ACK}" value="{over}" required' in preview.content.decode()
    # a plain confirm is not enough: refused, nothing started, the quota unchanged
    refused = post(admin, 5)
    assert refused.status_code == 400 and not ProcedureRun.objects.exists()
    assert "Tick the acknowledgement that names how much allocated quota will be over the Total" in text(
        refused.content
    )
    # acknowledging less than the preview names is refused too
    assert post(admin, 5, **{ACK: str(over - 1)}).status_code == 400 and not ProcedureRun.objects.exists()
    started = post(admin, 5, **{ACK: str(over)})
    run = ProcedureRun.objects.get()
    assert started.status_code == 302 and run.params[ACK] == over
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert hard(twin, "team-a")["requests." + SHARED] == "5"
    assert Decision.objects.filter(action=Decision.Action.QUOTA, subject="team-a", amount=5).exists()
    recorded = " ".join(s.output for s in run.steps.filter(step_key="precheck"))
    assert "with less capacity than its allocated quota" in recorded  # what the admin acknowledged


def test_the_quota_page_and_a_wizards_plan_ask_in_the_same_words(team, twin):
    from gpus.procedures.catalogue.common import over_total_check

    over = over_now(twin) + 1
    seen = quota.preview(twin, "team-a", 4)
    guard = over_total_check(seen.capacity)
    assert guard is not None and guard.ack == ACK and guard.ack_count == over
    assert guard.ack_label == f"I understand {over} GPUs of allocated quota will be over the Total."
    assert seen.over_total == guard  # the quota page asks exactly what a plan asks


def test_an_undo_that_goes_over_the_total_asks_it_too(team, login, admin_user, twin):
    admin = login(admin_user)
    assert over_now(twin) == 2  # the seed's shared GPUs: 2 more allocated than the Total
    post(admin, 1)  # lowering is never asked about
    lowered = ProcedureRun.objects.get()
    execute_run(lowered.pk)
    assert over_now(twin) == 0
    assert "Undo: back to 3" in admin.get(reverse("workspace_quota", args=["team-a"])).content.decode()
    undo = page_for(admin, 3, undo_of=str(lowered.pk))
    assert "I understand 2 GPUs of allocated quota will be over the Total." in text(undo.content)
    refused = post(admin, 3, undo_of=str(lowered.pk))
    assert refused.status_code == 400 and ProcedureRun.objects.count() == 1
    post(admin, 3, undo_of=str(lowered.pk), **{ACK: "2"})
    back = ProcedureRun.objects.exclude(pk=lowered.pk).get()
    assert back.params["undo_of"] == lowered.pk and back.params[ACK] == 2
    execute_run(back.pk)
    back.refresh_from_db()
    assert back.status == "succeeded", back.message
    assert hard(twin, "team-a")["requests." + SHARED] == "3"


def test_a_reclaim_that_raises_the_quota_over_the_total_asks_it_too(team, login, admin_user, twin):
    from datetime import timedelta

    from django.utils import timezone

    from workspaces.models import ReclaimAsk

    admin = login(admin_user)
    admin.post(reverse("reclaim_ask", args=["team-a"]), {"days": "1", "message": "idle?"})
    question = ReclaimAsk.objects.get()
    ReclaimAsk.objects.update(deadline=timezone.now() - timedelta(minutes=1))
    over = over_now(twin) + 2
    preview = page_for(admin, 5, reclaim_of=str(question.pk))
    assert f"I understand {over} GPUs of allocated quota will be over the Total." in text(preview.content)
    assert f'name="reclaim_of" value="{question.pk}"' in preview.content.decode()
    # confirmed without the acknowledgement: refused with the reason, nothing started or changed
    refused = post(admin, 5, reclaim_of=str(question.pk))
    assert refused.status_code == 400 and not ProcedureRun.objects.exists()
    assert "Tick the acknowledgement that names how much allocated quota will be over the Total" in text(
        refused.content
    )
    question.refresh_from_db()
    assert question.quota_run_id is None and hard(twin, "team-a")["requests." + SHARED] == "3"
    started = post(admin, 5, reclaim_of=str(question.pk), **{ACK: str(over)})
    run = ProcedureRun.objects.get()
    assert started.status_code == 302 and run.params[ACK] == over
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert hard(twin, "team-a")["requests." + SHARED] == "5"
    question.refresh_from_db()
    assert question.quota_run_id == run.pk


def test_more_over_the_total_at_run_time_than_acknowledged_stops_at_the_pre_check(
    team, admin_user, approved, bob, twin
):
    over = over_now(twin) + 1
    run = quota.change_quota("team-a", 4, actor=admin_user, reason="more", acknowledged=over, dispatch=False)
    approved(bob, "team-b", gpu=2)  # another Workspace took quota before the run began
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "less capacity than its allocated quota" in run.message
    assert hard(twin, "team-a")["requests." + SHARED] == "3"  # nothing changed


def test_a_quota_lowered_while_over_the_total_is_not_asked_about(team, login, admin_user, twin):
    assert over_now(twin) > 0
    page = page_for(login(admin_user), 2)
    assert "allocated quota will be over the Total" not in text(page.content)
    assert 'data-testid="quota-confirm"' in page.content.decode()
    run = quota.change_quota("team-a", 2, actor=admin_user, reason="idle", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message


MIG = "gpu-mig-01"


@pytest.fixture
def mig(twin):
    twin.apply(mig_node.node(MIG))
    TwinHardware.objects.create(node=MIG, gpus=mig_node.hardware(MIG))
    for obj in mig_node.operator_objects():
        twin.apply(obj)
    return twin


def test_a_node_in_mig_mode_offers_its_mig_layout_first_and_alone_as_primary(mig, admin_client):
    before = admin_client.get(reverse("node_detail", args=[MIG])).content.decode()
    whole = before[before.index('class="node-actions"') :]
    assert whole.index('data-testid="action-M"') > whole.index("<a ")  # whole GPUs: one choice among others
    mig.label_node(MIG, {"nvidia.com/mig.config": "all-3g.40gb"})
    page = admin_client.get(reverse("node_detail", args=[MIG])).content.decode()
    actions = page[page.index('class="node-actions"') :]
    first = actions[: actions.index("</a>")]
    assert 'class="button primary"' in first and 'data-testid="action-M"' in first
    assert actions.count("button primary") == 1


def test_converting_a_node_in_mig_mode_to_time_slicing_says_its_gpus_stay_in_mig_mode(mig, admin_client):
    mig.label_node(MIG, {"nvidia.com/mig.config": "all-3g.40gb"})
    mig.label_node(MIG, {vocab.GPU_TYPE_LABEL: "nvidia", vocab.SHARING_LABEL: "none"})  # a BRICK node in MIG mode
    node = admin_client.get(reverse("node_detail", args=[MIG])).content.decode()
    actions = node[node.index('class="node-actions"') :]
    assert actions.index('data-testid="action-M"') < actions.index('data-testid="action-A"')
    plan = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": MIG})
    body = text(plan.content)
    assert (
        f"4 GPUs of {MIG} are in MIG mode (3g.40gb ×8) and stay in MIG mode: the time-slicing plugin shares "
        "whole GPUs only, so their MIG instances are no longer offered to pods" in body
    )
    assert "To time-slice them too, set the layout all-disabled with M. Change a node&#x27;s MIG layout first." in body
    link = plan.content.decode()
    assert f'<a class="button" href="/procedures/M/?node={MIG}" data-testid="check-link">' in link
