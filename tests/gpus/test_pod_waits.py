"""Why a GPU pod waits: the classification, case by case (pure)."""

import pytest

from gpus.numbers import pod_waits as pw

GPU, SHARED, MIG = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-3g.40gb"


def cap(exist, free=0, most_free=None, tainted=0, cordoned=0, cordoned_free=0, taints=()):
    return {
        "exist": exist,
        "free": free,
        "most_free": free if most_free is None else most_free,
        "tainted_most_free": tainted,
        "taints": list(taints),
        "tainted_nodes": ["t1"] if tainted else [],
        "cordoned": cordoned,
        "cordoned_most_free": cordoned_free,
        "cordoned_nodes": ["c1"] if cordoned else [],
    }


def line(phase="Pending", res=GPU, n=1, node="", **wait):
    return {"name": "p", "phase": phase, "node": node, "requests": {res: n} if res else {}, "wait": wait}


FIT = "0/3 nodes are available: 1 node(s) had untolerated taint {team: llm}, 2 Insufficient nvidia.com/gpu."

CASES = [
    # (why, pod line, capacity, expected kind)
    ("running: nothing to say", line("Running"), {GPU: cap(8, 8)}, None),
    ("two shared GPUs, pending", line(res=SHARED, n=2), {SHARED: cap(8, 8)}, pw.SHARED_MANY),
    (
        "two shared GPUs, refused",
        line("Failed", SHARED, 2, "n1", reason="UnexpectedAdmissionError"),
        {},
        pw.SHARED_MANY,
    ),
    (
        "kubelet refused one GPU",
        line("Failed", GPU, 1, "n1", reason="UnexpectedAdmissionError", message="m"),
        {},
        pw.ADMISSION,
    ),
    ("failed otherwise", line("Failed", GPU, 1, "n1", reason="Evicted"), {}, pw.FAILED),
    ("no node offers it", line(res=MIG), {GPU: cap(8, 8)}, pw.NO_SUCH_TYPE),
    ("every node offering it cordoned", line(res=MIG), {MIG: cap(2, cordoned=2, cordoned_free=2)}, pw.CORDONED_ONLY),
    ("room only on a tainted node", line(n=4, scheduler=FIT), {GPU: cap(12, 1, tainted=8)}, pw.TAINT),
    ("room only on a cordoned node", line(n=4), {GPU: cap(12, 1, cordoned=8, cordoned_free=8)}, pw.CORDONED_ONLY),
    ("free in total but split across nodes", line(n=4), {GPU: cap(12, 4, most_free=2)}, pw.NO_FREE),
    ("nothing free", line(n=1), {GPU: cap(8, 0)}, pw.NO_FREE),
    (
        "room, but the scheduler says no (selector)",
        line(n=1, scheduler="0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."),
        {GPU: cap(8, 8)},
        pw.SCHEDULER,
    ),
    ("room, not placed yet", line(n=1), {GPU: cap(8, 8)}, pw.STARTING),
    (
        "placed, image cannot be pulled",
        line(node="n1", containers=[{"state": "waiting", "reason": "ImagePullBackOff", "message": "x"}]),
        {GPU: cap(8, 8)},
        pw.CONTAINER,
    ),
]


@pytest.mark.parametrize("why,pod,capacity,kind", CASES, ids=[c[0] for c in CASES])
def test_each_pod_gets_its_cause(why, pod, capacity, kind):
    got = pw.classify(pod, capacity)
    assert (got.kind if got else None) == kind


def test_the_figures_travel_with_the_cause():
    got = pw.classify(line(n=4, scheduler=FIT), {GPU: cap(12, 1, tainted=8, taints=["team=llm:NoSchedule"])})
    assert got.facts == {
        "resource": GPU,
        "want": 4,
        "said": FIT,
        "exist": 12,
        "free": 1,
        "most_free": 1,
        "taints": ["team=llm:NoSchedule"],
        "nodes": ["t1"],
    }


def test_a_quota_is_used_up_by_its_live_pods_only():
    pods = [
        {"name": "a", "phase": "Running", "requests": {GPU: 2}},
        {"name": "b", "phase": "Pending", "requests": {GPU: 2}},
        {"name": "c", "phase": "Failed", "requests": {GPU: 2}},
    ]
    (full,) = pw.quota_used_up({GPU: 4, SHARED: 2}, pods)
    assert full.facts == {"resource": GPU, "hard": 4, "used": 4, "pods": [["a", 2], ["b", 2]]}
    assert pw.quota_used_up({GPU: 5}, pods) == []


def test_a_quota_is_used_up_only_by_the_pods_its_scope_selects():
    """The Workspace quota's scope leaves the product's Jobs out (PriorityClass NotIn
    brick-job-priority), so a Job's pod holds none of it, as the API server counts."""
    from brickadmin.cluster import quotascope as qs

    scope = {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["brick-job-priority"]}
    quota = qs.quota_scope("workspace-compute", {"requests.nvidia.com/gpu": "1"}, [scope])
    facts = {"terminating": False, "best_effort": False, "cross_namespace_affinity": False}
    job = {
        "name": "job-pod",
        "phase": "Running",
        "requests": {GPU: 1},
        "scope": {**facts, "priority_class": "brick-job-priority"},
    }
    own = {"name": "notebook", "phase": "Running", "requests": {GPU: 1}, "scope": {**facts, "priority_class": ""}}
    assert pw.quota_used_up({GPU: 1}, [job], [quota]) == []
    (full,) = pw.quota_used_up({GPU: 1}, [job, own], [quota])
    assert full.facts["pods"] == [["notebook", 1]]
    # without the quotas' scopes (an older view line) every live pod counts, as before
    assert len(pw.quota_used_up({GPU: 1}, [job])) == 1


@pytest.mark.parametrize(
    "message,expected",
    [
        (FIT, {"nodes": 3, "insufficient": {GPU: 2}, "taint_keys": ["team"], "untolerated": 1, "unschedulable": 0}),
        (
            "0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient nvidia.com/gpu.shared. preemption: "
            "0/5 nodes are available: 5 Preemption is not helpful for scheduling.",
            {"nodes": 5, "insufficient": {SHARED: 4}, "taint_keys": [], "untolerated": 0, "unschedulable": 1},
        ),
        (
            "0/17 nodes are available: 17 node(s) had untolerated taint(s). no new claims to deallocate",
            {"nodes": 17, "insufficient": {}, "taint_keys": [], "untolerated": 17, "unschedulable": 0},
        ),
        ("no nodes available to schedule pods", {}),
    ],
)
def test_the_scheduler_message_is_read_as_kube_scheduler_writes_it(message, expected):
    got = pw.scheduler_reasons(message)
    assert {k: v for k, v in got.items() if k != "reasons"} == expected


def test_what_the_watcher_keeps_of_a_waiting_pod():
    pod = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": FIT}],
            "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        }
    }
    assert pw.facts(pod) == {
        "unschedulable": "Unschedulable",
        "scheduler": FIT,
        "containers": [{"name": "main", "state": "waiting", "reason": "ContainerCreating", "message": ""}],
    }
    assert pw.facts({"status": {"phase": "Running"}}) is None
