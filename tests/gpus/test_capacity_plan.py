"""Every procedure's plan shows the capacity per GPU type before and after it, and a run that
leaves a type with less capacity than its allocated quota needs an acknowledgement the run keeps."""

import pytest
from django.test import Client
from django.urls import reverse

from brickadmin.cluster import vocabulary as vocab
from gpus.models import ProcedureRun
from gpus.numbers import capacity, ledger
from gpus.procedures import service
from gpus.tasks import execute_run

pytestmark = pytest.mark.usefixtures("fast_engine")


def _ledger(rows):
    return ledger.Ledger(
        nodes=[],
        by_type=[],
        by_resource=[ledger.ResourceRow(r, logical=t, allocated=a) for r, t, a in rows],
        allocated_by_namespace={},
        device_source="twin",
    )


@pytest.mark.parametrize(
    "rows, total_change, allocated_change, expect",
    [
        # an exclusive node of 4 GPUs to time-slicing at replicas 4: 8 → 4 exclusive, 0 → 16 shared
        (
            [("nvidia.com/gpu", 8, 4)],
            {"nvidia.com/gpu": -4, vocab.GPU_SHARED: 16},
            {},
            {"nvidia.com/gpu": (8, 4, 4, 0, False), vocab.GPU_SHARED: (0, 16, 0, 16, False)},
        ),
        # the same conversion with 6 allocated: 2 over afterwards
        ([("nvidia.com/gpu", 8, 6)], {"nvidia.com/gpu": -4}, {}, {"nvidia.com/gpu": (8, 4, 2, -2, True)}),
        # already over and untouched: not this change's doing
        (
            [("nvidia.com/gpu", 2, 4), (vocab.GPU_SHARED, 8, 0)],
            {vocab.GPU_SHARED: 4},
            {},
            {"nvidia.com/gpu": (2, 2, -2, -2, False), vocab.GPU_SHARED: (8, 12, 8, 12, False)},
        ),
        # a quota lowered by 3: Available grows, Total stays
        ([("nvidia.com/gpu", 8, 8)], {}, {"nvidia.com/gpu": -3}, {"nvidia.com/gpu": (8, 8, 0, 3, False)}),
        # a Total never goes below 0
        ([("nvidia.com/gpu", 2, 1)], {"nvidia.com/gpu": -5}, {}, {"nvidia.com/gpu": (2, 0, 1, -1, True)}),
    ],
)
def test_capacity_after_a_change(rows, total_change, allocated_change, expect):
    lines = {line.resource: line for line in capacity.capacity_after(_ledger(rows), total_change, allocated_change)}
    got = {
        r: (line.total, line.total_after, line.available, line.available_after, line.leaves_over)
        for r, line in lines.items()
    }
    assert got == expect


@pytest.mark.parametrize("available, shown", [(3, (3, 0)), (0, (0, 0)), (-2, (0, 2))])
def test_available_is_never_shown_below_zero(available, shown):
    assert capacity.shown_available(available) == shown


def _exclusive_row(gw):
    return ledger.compute(__import__("brickadmin.cluster.snapshot", fromlist=["x"]).take_snapshot(gw)).resource(
        vocab.GPU
    )


def _over_allocate_exclusive(gw, extra):
    """Give a Workspace exclusive quota so that the Total has only ``extra`` left."""
    row = _exclusive_row(gw)
    gw.create_namespace("ws-big", {vocab.WORKSPACE_LABEL: "true", vocab.OWNER_LABEL: "carol"})
    gw.create_resource_quota(
        "ws-big", "workspace-compute", {"requests." + vocab.GPU: str(row.logical - row.allocated - extra)}
    )


def test_a_plan_shows_the_capacity_now_and_after(twin, admin_client):
    row = _exclusive_row(twin)
    node_gpus = (
        ledger.compute(__import__("brickadmin.cluster.snapshot", fromlist=["x"]).take_snapshot(twin))
        .node("dev-a1-ws04")
        .resources[vocab.GPU]
        .allocatable
    )
    page = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"}).content.decode()
    assert 'data-testid="capacity-plan"' in page
    assert f'data-testid="capacity-{vocab.GPU}"' in page and f'data-testid="capacity-{vocab.GPU_SHARED}"' in page
    assert f'<td class="num">{row.logical}</td><td class="num">{row.logical - node_gpus}</td>' in page
    # the seed's only exclusive node holds its whole exclusive quota: converting it leaves that quota over
    assert row.available < node_gpus and f"none available; over-allocated by {node_gpus - row.available}" in page


def test_a_conversion_that_overcommits_exclusive_gpus_needs_an_acknowledgement_kept_on_the_run(
    twin, admin_client, alice
):
    _over_allocate_exclusive(twin, 0)  # every exclusive GPU allocated: taking a node away leaves quota over
    snap = __import__("brickadmin.cluster.snapshot", fromlist=["x"]).take_snapshot(twin)
    node_gpus = ledger.compute(snap).node("dev-a1-ws04").resources[vocab.GPU].allocatable
    plan = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"}).content.decode()
    assert f"none available; over-allocated by {node_gpus}" in plan
    assert f'value="{node_gpus}" required' in plan  # the checkbox names how far over
    # without the acknowledgement nothing starts
    refused = admin_client.post(reverse("wizard_start", args=["A"]), {"node": "dev-a1-ws04"})
    assert refused.status_code == 400 and not ProcedureRun.objects.exists()
    assert "allocated quota will be over the Total" in refused.content.decode()
    started = admin_client.post(
        reverse("wizard_start", args=["A"]), {"node": "dev-a1-ws04", "capacity_acknowledged": str(node_gpus)}
    )
    run = ProcedureRun.objects.get()
    assert started.status_code == 302 and run.params["capacity_acknowledged"] == node_gpus
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"
    recorded = " ".join(s.output + s.error for s in run.steps.filter(step_key="precheck"))
    assert f"Available 0 → none (over-allocated by {node_gpus})" in recorded
    # users see no negative Available anywhere afterwards; admins see by how much
    alice_client = Client()
    alice_client.force_login(alice)
    users = alice_client.get(reverse("availability")).content.decode()
    assert "none available" in users and "over-allocated" not in users
    admins = admin_client.get(reverse("availability")).content.decode()
    assert f"none available; over-allocated by {node_gpus}" in admins


@pytest.mark.parametrize("acknowledged", [False, 1])
def test_more_over_allocation_at_run_time_than_acknowledged_stops_at_its_precheck(twin, acknowledged):
    # the plan was confirmed over by 1 (or not at all); another Workspace took exclusive quota meanwhile
    twin.create_namespace("ws-late", {vocab.WORKSPACE_LABEL: "true", vocab.OWNER_LABEL: "dave"})
    twin.create_resource_quota("ws-late", "workspace-compute", {"requests." + vocab.GPU: "1"})
    run = service.start_run(
        "A", "dev-a1-ws04", {"capacity_acknowledged": acknowledged}, actor_name="root", dispatch=False
    )
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "less capacity than its allocated quota" in run.message
    node = twin.get_node("dev-a1-ws04")
    assert node["metadata"]["labels"].get(vocab.SHARING_LABEL) != "timeslicing"
    assert not (node.get("spec") or {}).get("unschedulable")  # nothing touched


def test_c_plan_shows_the_shared_total_after(twin, admin_client):
    page = admin_client.get(reverse("wizard_plan", args=["C"]), {"replicas": "8"}).content.decode()
    assert f'data-testid="capacity-{vocab.GPU_SHARED}"' in page and "Total after" in page


def test_a_cordoned_node_is_uncordoned_by_a_fix(twin, admin_client):
    from gpus.numbers import health

    twin.cordon("dev-a1-ws04")
    problem = health.Problem("info", "cordoned", "dev-a1-ws04", "cordoned", "uncordon").resolve_fixes()
    assert problem.fix == "U"
    plan = admin_client.get(problem.fix_plan_url).content.decode()
    assert "kubectl uncordon dev-a1-ws04" in plan and 'data-confirm="Uncordon dev-a1-ws04?' in plan
    r = admin_client.post(reverse("fix_start", args=["U"]), {"node": "dev-a1-ws04"})
    run = ProcedureRun.objects.get()
    assert r.status_code == 302
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.actor_name == "root"
    assert not (twin.get_node("dev-a1-ws04").get("spec") or {}).get("unschedulable")


def test_quota_over_the_total_links_to_the_workspaces_quotas(twin):
    from gpus.numbers import health

    _over_allocate_exclusive(twin, -2)
    snap = __import__("brickadmin.cluster.snapshot", fromlist=["x"]).take_snapshot(twin)
    found = [
        p
        for p in health.problems(health.HealthInputs(ledger=ledger.compute(snap), snapshot=snap))
        if p.kind == "quota-over-total"
    ]
    assert found and found[0].link == reverse("cluster_workspaces")
