"""The Workspace checks (workspaces/health.py) and the Workspace lines they read
(gpus/occupancy.py) on plain in-memory snapshots: no database, no twin."""

from datetime import UTC, datetime, timedelta

from django.urls import reverse

from gpus.numbers import health, ledger, occupancy
from gpus.numbers.occupancy import idle_totals
from workspaces.health import Record, WorkspaceInputs

from .inmemory import GPU, SHARED, gpu_pod, node, quota, snapshot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def namespace(name, owner="", workspace=True):
    labels = {"brick.cloud/owner": owner} if owner else {}
    if workspace:
        labels["brick.cloud/workspace"] = "true"
    return {"metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-11-01T00:00:00Z"}}


def lines_of(snap, idle_since=None):
    lines = list(occupancy.compute(snap, ledger.compute(snap)).values())
    for line in lines:
        line.idle_since = (idle_since or {}).get(line.namespace)
    return lines


def found(records, lines, approving=(), idle_hours=24):
    inputs = health.HealthInputs(
        ledger=None,
        now=NOW,
        workspaces=WorkspaceInputs(
            records=records,
            lines=lines,
            approving=set(approving),
            idle_hours=idle_hours,
            adopt_url={line.namespace: f"/adopt/{line.namespace}/" for line in lines},
        ),
    )
    return [p for p in health.problems(inputs, reads="records") if p.kind.startswith("workspace-")]


def kinds(problems):
    return [(p.subject, p.kind, p.severity) for p in problems]


def test_an_approved_workspace_without_its_namespace_points_to_fix_w():
    snap = snapshot([node("ex-1")])
    (p,) = found([Record("team-a", "alice", 1, GPU)], lines_of(snap))
    assert kinds([p]) == [("team-a", "workspace-namespace-missing", "bad")]
    assert "owner alice" in p.message
    assert p.fix_plan_url == reverse("fix_plan", args=["W"]) + "?workspace=team-a"


def test_a_workspace_being_approved_is_not_out_of_step_yet():
    assert found([], lines_of(snapshot([node("ex-1")])), approving={"team-a"}) == []


def test_an_approved_workspace_whose_quota_is_gone_points_to_fix_w():
    snap = snapshot([node("ex-1")])
    snap.namespaces = [namespace("team-a", "alice")]
    (p,) = found([Record("team-a", "alice", 1, GPU)], lines_of(snap))
    assert kinds([p]) == [("team-a", "workspace-quota-missing", "bad")]
    assert "no ResourceQuota" in p.message and p.fix == "W"


def test_a_gpu_quota_removed_from_a_quota_that_remains_is_missing_too():
    snap = snapshot([node("ex-1")], quotas=[quota("team-a", {"cpu": 2})])
    snap.namespaces = [namespace("team-a", "alice")]
    (p,) = found([Record("team-a", "alice", 1, GPU)], lines_of(snap))
    assert (p.kind, "no GPU quota" in p.message) == ("workspace-quota-missing", True)


def test_a_quota_edited_outside_the_product_says_both_amounts():
    snap = snapshot([node("ex-1", physical=4)], quotas=[quota("team-a", {GPU: 3})])
    snap.namespaces = [namespace("team-a", "alice")]
    (p,) = found([Record("team-a", "alice", 1, GPU)], lines_of(snap))
    assert kinds([p]) == [("team-a", "workspace-quota-edited", "warn")]
    assert "nvidia.com/gpu 3" in p.message and "says nvidia.com/gpu 1" in p.message


def test_a_quota_moved_to_another_resource_is_an_edit():
    snap = snapshot([node("ex-1")], quotas=[quota("team-a", {SHARED: 1})])
    snap.namespaces = [namespace("team-a", "alice")]
    assert kinds(found([Record("team-a", "alice", 1, GPU)], lines_of(snap))) == [
        ("team-a", "workspace-quota-edited", "warn")
    ]


def test_a_quota_as_approved_is_in_step():
    snap = snapshot([node("ex-1")], quotas=[quota("team-a", {GPU: 1})])
    snap.namespaces = [namespace("team-a", "alice")]
    assert found([Record("team-a", "alice", 1, GPU)], lines_of(snap)) == []


def test_a_gpu_quota_without_a_record_is_shown_and_adoptable():
    snap = snapshot([node("ex-1")], quotas=[quota("legacy", {GPU: 2}), quota("no-gpu", {"cpu": 4})])
    snap.namespaces = [namespace("legacy", "dave", workspace=False), namespace("no-gpu", workspace=False)]
    (p,) = found([], lines_of(snap))
    assert kinds([p]) == [("legacy", "workspace-unrecorded", "info")]
    assert "owner label: dave" in p.message and p.link == "/adopt/legacy/" and "Adopt legacy" in p.link_text


def test_an_allocation_idle_for_the_window_names_owner_and_reclaimable_quota():
    snap = snapshot([node("ex-1")], quotas=[quota("team-a", {GPU: 2}), quota("team-b", {GPU: 1})])
    snap.namespaces = [namespace("team-a", "alice"), namespace("team-b", "bob")]
    lines = lines_of(snap, {"team-a": NOW - timedelta(hours=25), "team-b": NOW - timedelta(hours=23)})
    records = [Record("team-a", "alice", 2, GPU), Record("team-b", "bob", 1, GPU)]
    (p,) = found(records, lines)
    assert kinds([p]) == [("team-a", "workspace-idle", "warn")]
    assert "owner alice" in p.message and "nvidia.com/gpu 2" in p.message and "no Running GPU pod" in p.message
    assert idle_totals(lines, NOW, 24) == {GPU: 2}
    assert [q.subject for q in found(records, lines, idle_hours=1)] == ["team-a", "team-b"]  # the window is a setting


def test_idle_means_no_running_pod_or_measured_utilisation_under_the_threshold():
    snap = snapshot(
        [node("ex-1", physical=2)], quotas=[quota("team-a", {GPU: 1})], gpu_pods=[gpu_pod("team-a", "train", "ex-1")]
    )
    snap.namespaces = [namespace("team-a", "alice")]
    (line,) = lines_of(snap)
    assert not line.idle(5)  # a Running pod, utilisation not measured: not called idle
    snap.usage = {"team-a/train": {"GPU-0": [2.0, 1024.0]}}
    (line,) = lines_of(snap)
    assert line.idle(5) and not line.idle(1)
    finished = snapshot(
        [node("ex-1")],
        quotas=[quota("team-a", {GPU: 1})],
        gpu_pods=[gpu_pod("team-a", "train", "ex-1", phase="Succeeded")],
    )
    finished.namespaces = [namespace("team-a", "alice")]
    assert lines_of(finished)[0].idle(5)  # a finished pod holds no GPU
    pulling = snapshot(
        [node("ex-1")],
        quotas=[quota("team-a", {GPU: 1})],
        gpu_pods=[gpu_pod("team-a", "train", "ex-1", phase="Pending")],
    )
    pulling.namespaces = [namespace("team-a", "alice")]
    # bound to its node, still pulling its image: the scheduler counts its GPU as taken
    (line,) = lines_of(pulling)
    assert (line.requested, line.waiting, line.idle(5)) == (1, 0, False)


def test_a_workspace_whose_gpu_pods_cannot_be_scheduled_is_waiting_never_idle():
    snap = snapshot(
        [node("ex-1")],
        quotas=[quota("team-a", {GPU: 2}), quota("team-b", {GPU: 2})],
        gpu_pods=[gpu_pod("team-a", "train", "", amount=2, phase="Pending")],  # no node has room for it
    )
    snap.namespaces = [namespace("team-a", "alice"), namespace("team-b", "bob")]
    lines = {line.namespace: line for line in lines_of(snap)}
    assert (lines["team-a"].requested, lines["team-a"].waiting, lines["team-a"].idle(5)) == (0, 1, False)
    assert (lines["team-b"].requested, lines["team-b"].waiting, lines["team-b"].idle(5)) == (0, 0, True)
    # even a line stored as idle long ago is not offered for reclaiming while its pods wait
    for line in lines.values():
        line.idle_since = NOW - timedelta(hours=48)
    records = [Record("team-a", "alice", 2, GPU), Record("team-b", "bob", 2, GPU)]
    assert kinds(found(records, list(lines.values()))) == [("team-b", "workspace-idle", "warn")]
    assert idle_totals(list(lines.values()), NOW, 24) == {GPU: 2}


def test_a_workspace_line_counts_requests_of_pods_bound_to_nodes_and_distinct_physical_gpus():
    # two shared pods on one physical GPU (replicas 2), one exclusive pod, one pending pod
    snap = snapshot(
        [node("ts-1", sharing="timeslicing", physical=1, resources={SHARED: (2, 2)}), node("ex-1", physical=2)],
        quotas=[quota("team-a", {SHARED: 2}), quota("team-b", {GPU: 2})],
        replicas=2,
        gpu_pods=[
            gpu_pod("team-a", "nb-1", "ts-1", SHARED),
            gpu_pod("team-a", "nb-2", "ts-1", SHARED),
            gpu_pod("team-b", "train", "ex-1"),
            gpu_pod("team-b", "wait", "ex-1", phase="Pending"),
            gpu_pod("team-b", "unplaced", "", phase="Pending"),
        ],
    )
    snap.namespaces = [namespace("team-a", "alice"), namespace("team-b", "bob")]
    lines = {line.namespace: line for line in lines_of(snap)}
    a, b = lines["team-a"], lines["team-b"]
    assert (a.quota, a.requested, a.physical, a.resource) == (2, 2, 1, SHARED)
    # the pending pod bound to ex-1 holds its GPU as the scheduler counts it; the unplaced one waits
    assert (b.quota, b.requested, b.waiting, b.physical, b.owner) == (2, 2, 1, 1, "bob")
    assert [p["name"] for p in b.pods] == ["train", "unplaced", "wait"]
    assert b.pods[0]["gpus"] == ["ex-1 · GPU 0"] and b.pods[2]["gpus"] == []
    assert a.utilisation is None and a.memory_mib is None  # not measured: None, never 0


def test_utilisation_counts_each_device_once_per_workspace():
    snap = snapshot(
        [node("ts-1", sharing="timeslicing", physical=1, resources={SHARED: (2, 2)})],
        quotas=[quota("team-a", {SHARED: 2})],
        replicas=2,
        gpu_pods=[gpu_pod("team-a", "nb-1", "ts-1", SHARED), gpu_pod("team-a", "nb-2", "ts-1", SHARED)],
    )
    snap.namespaces = [namespace("team-a", "alice")]
    # dcgm-exporter repeats a time-sliced GPU's figures for each pod using it
    snap.usage = {"team-a/nb-1": {"GPU-ts": [60.0, 4096.0]}, "team-a/nb-2": {"GPU-ts": [60.0, 4096.0]}}
    (line,) = lines_of(snap)
    assert (line.utilisation, line.memory_mib) == (60.0, 4096.0)  # the Workspace holds the whole device
    # no pod's own share of a time-sliced GPU is measurable: each shows the device's figure as the device's
    assert [p["utilisation"] for p in line.pods] == [None, None]
    assert [p["device_utilisation"] for p in line.pods] == [60.0, 60.0]
