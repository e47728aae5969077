"""The objects Kueue reads, built from a grant, and the borrowing and lending arithmetic
(brickadmin/cluster/kueue.py), against Kueue v0.17's API (apis/kueue/v1beta2)."""

import threading

import pytest

from brickadmin.cluster import kueue
from brickadmin.cluster.base import NotFound
from brickadmin.cluster.kube import KubeGateway


def test_a_grant_is_a_cluster_queue_in_its_gpu_types_cohort():
    cq = kueue.cluster_queue("team-a", "exclusive", "nvidia.com/gpu", kueue.Grant(2, 2, 1), cpu="8", memory="32Gi")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2" and cq["kind"] == "ClusterQueue"
    assert cq["metadata"]["name"] == "brick-ws-team-a"
    spec = cq["spec"]
    assert spec["cohortName"] == "brick-gpu-exclusive"
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    gpu, cpu_mem = spec["resourceGroups"]
    assert gpu == {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [
            {
                "name": "brick-gpu-exclusive",
                "resources": [
                    {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "2", "lendingLimit": "1"}
                ],
            }
        ],
    }
    assert cpu_mem["coveredResources"] == ["cpu", "memory"]
    assert {r["name"]: r["borrowingLimit"] for r in cpu_mem["flavors"][0]["resources"]} == {"cpu": "0", "memory": "0"}
    lq = kueue.local_queue("team-a")
    assert lq["metadata"] == {"name": "default", "namespace": "team-a", "labels": lq["metadata"]["labels"]}
    assert lq["spec"] == {"clusterQueue": "brick-ws-team-a"}


def test_lend_all_leaves_lending_limit_out_and_the_ceiling_is_guarantee_plus_burst():
    grant = kueue.Grant(3, 1)
    cq = kueue.cluster_queue("b", "shared", "nvidia.com/gpu.shared", grant)
    (res,) = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert "lendingLimit" not in res and len(cq["spec"]["resourceGroups"]) == 1
    assert grant.ceiling == 4
    assert kueue.Grant(2, 0, 3).problem() == "lend-above-guarantee"
    assert kueue.Grant(2, 0, 2).problem() == ""


def test_defaults_are_percentages_of_the_guarantee_rounded_up():
    assert kueue.default_grant(3, 50, 100) == kueue.Grant(3, 2, 3)
    assert kueue.default_grant(1, 100, 0) == kueue.Grant(1, 1, 0)


def test_a_flavor_carries_the_labels_every_node_of_its_type_shares():
    def node(name, labels, alloc):
        return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}

    nodes = [
        node("a", {"brick.cloud/gpu.sharing": "none", "nvidia.com/gpu.product": "A100"}, {"nvidia.com/gpu": "4"}),
        node("b", {"brick.cloud/gpu.sharing": "none", "nvidia.com/gpu.product": "H100"}, {"nvidia.com/gpu": "8"}),
        node("c", {"brick.cloud/gpu.sharing": "timeslicing"}, {"nvidia.com/gpu.shared": "4"}),
    ]
    assert kueue.flavor_node_labels(nodes, "nvidia.com/gpu") == {"brick.cloud/gpu.sharing": "none"}
    flavor = kueue.resource_flavor("exclusive", {"brick.cloud/gpu.sharing": "none"})
    assert flavor["spec"] == {"nodeLabels": {"brick.cloud/gpu.sharing": "none"}}
    # nodes of the type sharing no label: still an object (the real Kueue refused a null spec)
    assert kueue.resource_flavor("exclusive", {})["spec"] == {"nodeLabels": {}}
    assert kueue.flavor_node_labels(nodes, "nvidia.com/mig-1g.10gb") == {}


def queue(name, cohort, nominal, borrowing=None, lending=None, total=0, borrowed=0, pending=0):
    res = {"name": "nvidia.com/gpu", "nominalQuota": str(nominal)}
    if borrowing is not None:
        res["borrowingLimit"] = str(borrowing)
    if lending is not None:
        res["lendingLimit"] = str(lending)
    usage = [
        {
            "name": "brick-gpu-exclusive",
            "resources": [{"name": "nvidia.com/gpu", "total": str(total), "borrowed": str(borrowed)}],
        }
    ]
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "brick-gpu-exclusive", "resources": [res]}],
                }
            ],
        },
        "status": {"flavorsReservation": usage, "flavorsUsage": usage, "pendingWorkloads": pending},
    }


def test_what_one_borrows_the_idle_other_lends():
    (cohort,) = kueue.cohort_lines(
        [
            queue("brick-ws-a", "c", 4, borrowing=4, total=8, borrowed=4),
            queue("brick-ws-b", "c", 4, borrowing=4, total=0),
        ]
    )
    a, b = cohort.lines
    assert (a.workspace, a.guarantee, a.in_use, a.borrowed, a.lent, a.ceiling) == ("a", 4, 8, 4, 0, 8)
    assert (b.workspace, b.borrowed, b.lent, b.idle_lendable) == ("b", 0, 4, 4)
    assert (cohort.guaranteed, cohort.borrowed, cohort.lent, cohort.idle_lendable) == (8, 4, 4, 0)
    assert cohort.may_use_now(a) == 8 and cohort.may_use_now(b) == 4  # b's guarantee is reclaimed for it


def test_no_borrowing_limit_is_no_limit_never_zero():
    (line,) = kueue.queue_lines(queue("brick-ws-a", "c", 2))
    assert line.burst is None and line.ceiling is None
    (alone,) = kueue.queue_lines(queue("other", "", 2))
    assert alone.burst == 0 and alone.workspace == ""  # no cohort: nothing to borrow from


def test_lending_is_bounded_by_the_lend_ceiling_and_spread_over_lenders():
    (cohort,) = kueue.cohort_lines(
        [
            queue("brick-ws-a", "c", 2, total=5, borrowed=3),
            queue("brick-ws-b", "c", 4, lending=1),
            queue("brick-ws-c", "c", 4, total=1),
        ]
    )
    lent = {x.workspace: x.lent for x in cohort.lines}
    assert lent == {"a": 0, "b": 1, "c": 2}  # b lends at most 1; c has 3 idle of its 4
    assert cohort.idle_lendable == 1
    assert cohort.may_use_now(cohort.lines[0]) == 2 + 4  # no burst limit: what it borrows and the 1 left


def test_a_borrower_while_another_of_its_cohort_waits():
    cohorts = kueue.cohort_lines(
        [queue("brick-ws-a", "c", 2, total=4, borrowed=2), queue("brick-ws-b", "c", 2, total=2, pending=1)]
    )
    ((borrower, waiting),) = kueue.borrowing_while_waiting(cohorts)
    assert (borrower.workspace, waiting.workspace) == ("a", "b")
    assert kueue.borrowing_while_waiting(kueue.cohort_lines([queue("brick-ws-a", "c", 2, total=4, borrowed=2)])) == []


def test_with_grant_changes_only_the_gpu_quota():
    cq = kueue.cluster_queue("a", "exclusive", "nvidia.com/gpu", kueue.Grant(2, 2), cpu="4", memory="8Gi")
    changed = kueue.with_grant(cq, "nvidia.com/gpu", kueue.Grant(3, 1, 1))
    assert changed["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "3", "borrowingLimit": "1", "lendingLimit": "1"}
    ]
    assert changed["spec"]["resourceGroups"][1] == cq["spec"]["resourceGroups"][1]
    assert changed["spec"]["cohortName"] == "brick-gpu-exclusive"


class Discovery(KubeGateway):
    """KubeGateway whose API server answers discovery only."""

    def __init__(self, served):  # no super(): no kubeconfig, no transport
        self.served = served
        self._discovery = {}
        self._lock = threading.Lock()
        self.asked = []

    def _request(self, method, path, **kw):
        self.asked.append(path)
        if path == "/apis/kueue.x-k8s.io/v1beta2" and self.served:
            return {"resources": [{"kind": "ClusterQueue", "name": "clusterqueues", "namespaced": False}]}
        raise NotFound(f"GET {path}: 404", status=404)

    def _list(self, path, **kw):
        return [{"metadata": {"name": "brick-ws-a"}}]


@pytest.mark.parametrize("served", [True, False])
def test_the_real_gateway_asks_discovery_whether_kueue_is_served(served):
    gw = Discovery(served)
    assert gw.kueue_served() is served
    assert gw.asked == ["/apis/kueue.x-k8s.io/v1beta2"]
    assert gw.list_kueue("ClusterQueue") == ([{"metadata": {"name": "brick-ws-a"}}] if served else [])


# --- what Kueue did to a Workload (apis/kueue/v1beta2/workload_types.go) -------------------


def condition(kind, status, reason, message="", at="2026-05-04T12:00:05Z"):
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def a_workload(conditions, *, uid="u-1", gpus=1, count=2, owners=None):
    return {
        "metadata": {
            "name": "job-train-1",
            "namespace": "team-a",
            "uid": uid,
            "ownerReferences": owners if owners is not None else [{"kind": "Job", "name": "train", "controller": True}],
        },
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "a", "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "4"}}},
                                {"name": "b", "resources": {"requests": {"cpu": "1"}}},
                            ]
                        }
                    },
                }
            ]
        },
        "status": {"conditions": conditions},
    }


RECLAIMED = (
    "Preempted to accommodate a workload (UID: u-9, JobUID: j-9) due to reclamation within the cohort; "
    "preemptor path: /brick-gpu-exclusive/brick-ws-team-b; preemptee path: /brick-gpu-exclusive/brick-ws-team-a"
)


def test_a_reclaim_names_what_was_lost_for_whom_and_when():
    wl = a_workload(
        [
            condition("Evicted", "True", "Preempted", RECLAIMED),
            condition("Preempted", "True", "InCohortReclamation", RECLAIMED),
            condition("QuotaReserved", "False", "Pending", "waiting"),
        ]
    )
    e = kueue.eviction(wl)
    assert (e.namespace, e.owner, e.gpus, e.at) == (
        "team-a",
        "Job/train",
        (("nvidia.com/gpu", 2),),
        "2026-05-04T12:00:05Z",
    )
    assert (e.reason, e.preempted, e.borrowed) == ("InCohortReclamation", True, True)
    assert (e.by_queue, e.by_workspace) == ("brick-ws-team-b", "team-b")


def test_an_eviction_is_the_same_however_its_conditions_arrive():
    """Kueue writes Evicted and Preempted together; read between them, or with Evicted a
    second later, the eviction keeps its key."""
    only_preempted = a_workload([condition("Preempted", "True", "InCohortReclaimWhileBorrowing", RECLAIMED)])
    both = a_workload(
        [
            condition("Preempted", "True", "InCohortReclaimWhileBorrowing", RECLAIMED),
            condition("Evicted", "True", "Preempted", RECLAIMED, at="2026-05-04T12:00:06Z"),
        ]
    )
    assert kueue.eviction(only_preempted).key == kueue.eviction(both).key == "u-1@2026-05-04T12:00:05Z"
    assert kueue.eviction(both).borrowed


def test_preemption_inside_the_queue_and_other_evictions_are_not_borrowed_quota():
    in_queue = a_workload([condition("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload")])
    timeout = a_workload([condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout")])
    assert not kueue.eviction(in_queue).borrowed and kueue.eviction(in_queue).by_queue == ""
    assert kueue.eviction(timeout).preempted is False and kueue.eviction(timeout).reason == "PodsReadyTimeout"
    readmitted = a_workload([condition("Evicted", "False", "QuotaReserved"), condition("QuotaReserved", "True", "x")])
    assert kueue.eviction(readmitted) is None
    assert kueue.workload_owner(a_workload([], owners=[])) == "Workload/job-train-1"


def counted(wl, *entries):
    """The Workload with Kueue's eviction counts (status.schedulingStats.evictions)."""
    wl["status"]["schedulingStats"] = {
        "evictions": [{"reason": r, "underlyingCause": c, "count": n} for r, c, n in entries]
    }
    return wl


def readmitted_after(message, *, preempted=True, at="2026-05-04T12:00:09Z"):
    """Conditions as Kueue leaves them once the Workload holds quota again
    (pkg/workload/workload.go SetQuotaReservation, resetActiveCondition)."""
    out = [
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue brick-ws-team-a", at=at),
        condition("Evicted", "False", "QuotaReserved", "Previously: " + message, at=at),
    ]
    if preempted:
        out.append(condition("Preempted", "False", "QuotaReserved", "Previously: " + message, at=at))
    return out


@pytest.mark.parametrize(
    "words, reason",
    [
        # pkg/scheduler/preemption/preemption.go HumanReadablePreemptionReasons, case by case
        ("prioritization in the ClusterQueue", "InClusterQueue"),
        ("reclamation within the cohort", "InCohortReclamation"),
        ("Fair Sharing within the cohort", "InCohortFairSharing"),
        ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
        ("UNKNOWN", ""),
    ],
)
def test_a_preemptions_message_names_its_reason(words, reason):
    message = f"Preempted to accommodate a workload (UID: u-9, JobUID: j-9) due to {words}; preemptor path: /c/q"
    assert kueue.preemption_reason(message) == reason


def test_an_eviction_that_ended_before_it_was_read_is_still_seen_once():
    """Evicted and admitted again between two reads: Kueue's reset conditions and its count say so."""
    wl = counted(a_workload(readmitted_after(RECLAIMED)), ("Preempted", "InCohortReclamation", 1))
    assert kueue.eviction(wl) is None  # nothing is evicted now
    (e,) = kueue.evictions([wl])
    assert (e.key, e.reason, e.preempted, e.borrowed, e.by_workspace) == (
        "u-1#1",
        "InCohortReclamation",
        True,
        True,
        "team-b",
    )
    assert (e.at, e.message, e.gpus) == ("2026-05-04T12:00:09Z", RECLAIMED, (("nvidia.com/gpu", 2),))


def test_an_eviction_keeps_its_key_from_evicted_to_admitted_again():
    evicted = counted(
        a_workload(
            [
                condition("Evicted", "True", "Preempted", RECLAIMED),
                condition("Preempted", "True", "InCohortReclamation", RECLAIMED),
            ]
        ),
        ("Preempted", "InCohortReclamation", 1),
    )
    again = counted(a_workload(readmitted_after(RECLAIMED)), ("Preempted", "InCohortReclamation", 1))
    assert [e.key for e in kueue.evictions([evicted])] == [e.key for e in kueue.evictions([again])] == ["u-1#1"]


def test_evictions_between_two_reads_are_each_one_and_the_last_says_most():
    """Preempted, admitted, then timed out and admitted again before a read: two evictions, the
    older known by its count, the later by its conditions (the Preempted one is the older's)."""
    conditions = readmitted_after("Exceeded the PodsReady timeout team-a/job-train-1", preempted=False)
    conditions.append(condition("Preempted", "False", "QuotaReserved", "Previously: " + RECLAIMED))
    wl = counted(a_workload(conditions), ("Preempted", "InCohortReclamation", 1), ("PodsReadyTimeout", "", 1))
    first, last = sorted(kueue.evictions([wl]), key=lambda e: e.key)
    assert (first.key, first.reason, first.preempted, first.borrowed) == ("u-1#1", "InCohortReclamation", True, True)
    assert (last.key, last.reason, last.preempted) == ("u-1#2", "PodsReadyTimeout", False)
    assert last.message == "Exceeded the PodsReady timeout team-a/job-train-1"


def test_without_counts_the_current_eviction_is_keyed_by_its_time():
    current = a_workload([condition("Evicted", "True", "PodsReadyTimeout", "Exceeded")])
    assert [e.key for e in kueue.evictions([current])] == ["u-1@2026-05-04T12:00:05Z"]
    assert kueue.evictions([a_workload(readmitted_after(RECLAIMED))]) == []


def test_waiting_workloads_are_placed_by_priority_then_age_in_each_queue():
    def pending(name, ns, priority, created):
        wl = a_workload([condition("QuotaReserved", "False", "Pending", f"no room for {name}")])
        wl["metadata"].update(name=name, namespace=ns, creationTimestamp=created)
        wl["spec"].update(priority=priority, queueName="default")
        return wl

    admitted = a_workload([condition("QuotaReserved", "True", "QuotaReserved")])
    finished = a_workload([condition("Finished", "True", "Succeeded")])
    found = kueue.waiting_in_queues(
        [
            pending("old-low", "team-a", -10, "2026-05-04T08:00:00Z"),
            pending("new-high", "team-a", 1000, "2026-05-04T09:00:00Z"),
            pending("other", "team-b", 0, "2026-05-04T07:00:00Z"),
            admitted,
            finished,
        ]
    )
    assert [(w.namespace, w.workload, w.position) for w in found] == [
        ("team-a", "new-high", 1),
        ("team-a", "old-low", 2),
        ("team-b", "other", 1),
    ]
    assert found[0].message == "no room for new-high" and found[0].reason == "Pending"
