"""PodDisruptionBudget arithmetic and the Eviction API's decision (vocabulary.py), case by case
from Kubernetes' own tests, then the twin's evictions over the same objects."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.base import TransientClusterError
from brickadmin.cluster.twin import TwinGateway

NS = "default"
FOO_BAR = {"foo": "bar"}
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
_uids = itertools.count(1)


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def new_pod(name, labels=None, ready=True, owner=None, phase="Running", deleting=False):
    md = {"name": name, "namespace": NS, "uid": f"pod-{next(_uids)}", "labels": dict(labels or FOO_BAR)}
    if owner is not None:
        md["ownerReferences"] = [owner]
    if deleting:
        md["deletionTimestamp"] = stamp(NOW)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}] if ready else []},
    }


def workload(kind, replicas, name="foobar", api_version="apps/v1", labels=None, owner=None):
    md = {"name": name, "namespace": NS, "uid": f"{kind.lower()}-{next(_uids)}", "labels": dict(labels or FOO_BAR)}
    if owner is not None:
        md["ownerReferences"] = [owner]
    return {"apiVersion": api_version, "kind": kind, "metadata": md, "spec": {"replicas": replicas}}


def owner_ref(obj, api_version=None, kind=None, controller=True):
    return {
        "apiVersion": api_version or obj["apiVersion"],
        "kind": kind or obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
    }


def min_available(value, selector=None):
    return budget({"minAvailable": value}, selector)


def max_unavailable(value, selector=None):
    return budget({"maxUnavailable": value}, selector)


def budget(spec, selector=None):
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "foobar", "namespace": NS, "generation": 1},
        "spec": {**spec, "selector": {"matchLabels": FOO_BAR} if selector is None else selector},
    }


def numbers(pdb, pods, workloads=(), now=NOW):
    """(disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods): VerifyPdbStatus's order."""
    st = v.pdb_status(pdb, pods, list(workloads), now)
    return st["disruptionsAllowed"], st["currentHealthy"], st["desiredHealthy"], st["expectedPods"]


# --- intstr.GetScaledValueFromIntOrPercent ---------------------------------------------
# staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr_test.go (TestGetIntFromIntOrPercent)


@pytest.mark.parametrize(
    "value,total,round_up,expected",
    [
        (123, 100, True, 123),
        ("90%", 100, True, 90),
        ("90%", 95, True, 86),
        ("90%", 95, False, 85),
        ("%", 100, None, ValueError),
        ("90#", 100, None, ValueError),
        ("#%", 100, None, ValueError),
        ("90", 100, None, ValueError),
        ("34%", 3, True, 2),  # disruption_test.go: "34% should round up to 2"
        ("28%", 11, True, 4),
        ("30%", 7, True, 3),
        ("0%", 5, True, 0),
    ],
)
def test_scaled_value(value, total, round_up, expected):
    if expected is ValueError:
        with pytest.raises(ValueError):
            v.scaled_value(value, total, True)
        with pytest.raises(ValueError):
            v.scaled_value(value, total, False)
    else:
        assert v.scaled_value(value, total, round_up) == expected


# --- the disruption controller --------------------------------------------------------
# pkg/controller/disruption/disruption_test.go (Kubernetes v1.34), one test per upstream test.


def test_no_selector():  # TestNoSelector: an empty selector takes every pod of the namespace
    pdb = min_available(3, selector={})
    assert numbers(pdb, []) == (0, 0, 3, 0)
    assert numbers(pdb, [new_pod("yo-yo-yo", labels={"other": "label"})]) == (0, 1, 3, 1)


def test_unavailable():  # TestUnavailable
    pdb = min_available(3)
    pods = []
    for i in range(4):
        assert numbers(pdb, pods) == (0, i, 3, i)
        pods.append(new_pod(f"yo-yo-yo {i}"))
    assert numbers(pdb, pods) == (1, 4, 3, 4)
    pods[0]["status"]["conditions"] = []  # Running, not Ready: not healthy
    assert numbers(pdb, pods) == (0, 3, 3, 4)


def test_integer_max_unavailable_allows_nothing_without_a_controller():  # TestIntegerMaxUnavailable
    pdb = max_unavailable(1)
    assert numbers(pdb, [])[0] == 0
    assert numbers(pdb, [new_pod("naked")])[0] == 0


def test_integer_max_unavailable_follows_the_scale():  # TestIntegerMaxUnavailableWithScaling
    rs = workload("ReplicaSet", 7)
    pods = [new_pod("pod", owner=owner_ref(rs))]
    assert numbers(max_unavailable(2), pods, [rs]) == (0, 1, 5, 7)
    rs["spec"]["replicas"] = 5
    assert numbers(max_unavailable(2), pods, [rs]) == (0, 1, 3, 5)


def test_percentage_max_unavailable_follows_the_scale():  # TestPercentageMaxUnavailableWithScaling
    rs = workload("ReplicaSet", 7)
    pods = [new_pod("pod", owner=owner_ref(rs))]
    assert numbers(max_unavailable("30%"), pods, [rs]) == (0, 1, 4, 7)
    rs["spec"]["replicas"] = 3
    assert numbers(max_unavailable("30%"), pods, [rs]) == (0, 1, 2, 3)


def test_naked_pod_under_a_percentage():  # TestNakedPod, TestStatusForUnmanagedPod
    pdb = min_available("28%")
    assert numbers(pdb, [])[0] == 0
    assert numbers(pdb, [new_pod("naked")])[0] == 0
    assert v.expected_scale([new_pod("unmanaged")], []) == (0, ["unmanaged"])  # TestTotalUnmanagedPods


def test_unsupported_controller_pod():  # TestUnsupportedControllerPod: the controller's fail-safe
    pod = new_pod(
        "naked",
        owner={
            "apiVersion": "apps.test.io/v1",
            "kind": "TestWorkload",
            "name": "fake-controller",
            "uid": "b7329742-8daa-493a-8881-6ca07139172b",
            "controller": True,
        },
    )
    pdb = min_available("28%")
    pdb["status"] = {"disruptionsAllowed": 3, "currentHealthy": 5}
    status = v.pdb_status(pdb, [pod], [], NOW)
    assert status["disruptionsAllowed"] == 0 and status["currentHealthy"] == 5  # the rest left as it was
    assert status["conditions"][0]["reason"] == "SyncFailed"


def test_replica_set():  # TestReplicaSet
    rs = workload("ReplicaSet", 10)
    assert numbers(min_available("20%"), [new_pod("pod", owner=owner_ref(rs))], [rs]) == (0, 1, 2, 10)


def test_scale_resource():  # TestScaleResource: a custom resource's scale subresource
    cr = workload("customresource", 10, api_version="custom.k8s.io/v1")
    pods = [new_pod(f"pod-{i}", owner=owner_ref(cr)) for i in range(4)]
    replicas, max_unavail = 10, 5
    allowed = max_unavail - (replicas - 4) if replicas - 4 < max_unavail else 0
    assert numbers(max_unavailable(max_unavail), pods, [cr]) == (allowed, 4, replicas - max_unavail, replicas)


def test_multiple_controllers():  # TestMultipleControllers
    pods = [new_pod(f"pod {i}") for i in range(2)]
    assert numbers(min_available("1%"), pods)[0] == 0  # no controllers yet
    rc = workload("ReplicationController", 1, name="rc 1", api_version="v1")
    for p in pods:
        p["metadata"]["ownerReferences"] = [owner_ref(rc)]
    assert numbers(min_available("1%"), pods, [rc])[0] == 1  # one RC, 200% > 1% healthy


@pytest.mark.parametrize("kind,api_version", [("ReplicationController", "v1"), ("StatefulSet", "apps/v1")])
def test_controller_with_more_labels_than_the_budget(
    kind, api_version
):  # TestReplicationController, TestStatefulSetController
    labels = {"foo": "bar", "baz": "quux"}
    ctrl = workload(kind, 3, api_version=api_version, labels=labels)
    pdb = min_available("34%")  # 34% of 3 rounds up to 2
    # with no pods the budget does not know the controller yet (a known upstream bug)
    assert numbers(pdb, [], [ctrl]) == (0, 0, 0, 0)
    pods = []
    for i in range(3):
        pods.append(new_pod(f"foobar {i}", labels=labels, owner=owner_ref(ctrl)))
        assert numbers(pdb, pods, [ctrl]) == ((0, i + 1, 2, 3) if i < 2 else (1, 3, 2, 3))
    if kind == "ReplicationController":
        # a rogue pod with only foo=bar matches the budget but has no controller
        pods.append(new_pod("rogue"))
        assert numbers(pdb, pods, [ctrl])[0] == 2


def test_two_controllers():  # TestTwoControllers
    rc_labels, d_labels = {"foo": "bar", "baz": "quux"}, {"foo": "bar", "baz": "quuux"}
    collection, minimum_one, minimum_two = 11, 4, 7
    pdb = min_available("28%")
    rc = workload("ReplicationController", collection, api_version="v1", labels=rc_labels)
    workloads = [rc]
    assert numbers(pdb, [], workloads) == (0, 0, 0, 0)
    pods = []
    unavailable = collection - minimum_one - 1
    for i in range(1, collection + 1):
        pods.append(new_pod(f"quux {i}", labels=rc_labels, owner=owner_ref(rc), ready=i > unavailable))
        got = numbers(pdb, pods, workloads)
        if i <= unavailable:
            assert got == (0, 0, minimum_one, collection)
        elif i - unavailable <= minimum_one:
            assert got == (0, i - unavailable, minimum_one, collection)
        else:
            assert got == (1, i - unavailable, minimum_one, collection)

    workloads.append(workload("Deployment", collection, labels=d_labels))
    assert numbers(pdb, pods, workloads) == (1, minimum_one + 1, minimum_one, collection)
    rs = workload("ReplicaSet", collection, labels=d_labels)
    workloads.append(rs)
    assert numbers(pdb, pods, workloads) == (1, minimum_one + 1, minimum_one, collection)

    unavailable = 2 * collection - (minimum_two + 2) - unavailable
    for i in range(1, collection + 1):
        pods.append(new_pod(f"quuux {i}", labels=d_labels, owner=owner_ref(rs), ready=i > unavailable))
        got = numbers(pdb, pods, workloads)
        if i <= unavailable:
            assert got == (0, minimum_one + 1, minimum_two, 2 * collection)
        elif i - unavailable <= minimum_two - (minimum_one + 1):
            assert got == (0, minimum_one + 1 + i - unavailable, minimum_two, 2 * collection)
        else:
            assert got == (
                i - unavailable - (minimum_two - (minimum_one + 1)),
                minimum_one + 1 + i - unavailable,
                minimum_two,
                2 * collection,
            )

    # one pod down still allows a disruption, two do not; one back allows it again
    assert numbers(pdb, pods, workloads) == (2, 2 + minimum_two, minimum_two, 2 * collection)
    pods[collection - 1]["status"]["conditions"] = []
    assert numbers(pdb, pods, workloads) == (1, 1 + minimum_two, minimum_two, 2 * collection)
    pods[collection - 2]["status"]["conditions"] = []
    assert numbers(pdb, pods, workloads) == (0, minimum_two, minimum_two, 2 * collection)
    pods[collection - 1]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert numbers(pdb, pods, workloads) == (1, 1 + minimum_two, minimum_two, 2 * collection)


def test_update_disrupted_pods():  # TestUpdateDisruptedPods
    pdb = min_available(1)
    pdb["status"] = {
        "disruptedPods": {
            "p1": stamp(NOW),  # removed: its deletion started
            "p2": stamp(NOW - timedelta(minutes=3)),  # removed: expired
            "p3": stamp(NOW - timedelta(minutes=1)),  # kept: pod untouched
            "notthere": stamp(NOW),  # removed: pod gone
        }
    }
    pods = [new_pod("p1", deleting=True), new_pod("p2"), new_pod("p3")]
    status = v.pdb_status(pdb, pods, [], NOW)
    assert (
        status["disruptionsAllowed"],
        status["currentHealthy"],
        status["desiredHealthy"],
        status["expectedPods"],
    ) == (0, 1, 1, 3)
    assert status["disruptedPods"] == {"p3": stamp(NOW - timedelta(minutes=1))}


def test_a_terminating_pod_is_not_healthy():  # countHealthyPods: DeletionTimestamp
    pods = [new_pod("a"), new_pod("b"), new_pod("c", deleting=True)]
    assert numbers(min_available(2), pods) == (0, 2, 2, 3)


# --- the finders (controller_scale runs them in the controller's order, scale last) ------
# TestBasicFinderFunctions, TestDeploymentFinderFunction


def _basic():
    return (
        workload("ReplicaSet", 10),
        workload("ReplicationController", 12, api_version="v1"),
        workload("StatefulSet", 14),
    )


@pytest.mark.parametrize(
    "name,ref,expected",
    [
        ("replicaset controller with apps group", lambda rs, rc, ss: owner_ref(rs), lambda rs, rc, ss: (rs, 10)),
        (
            "replicaset controller with invalid group",
            lambda rs, rc, ss: owner_ref(rs, api_version="invalid/v1"),
            lambda *_: ValueError,
        ),  # no finder, and no REST mapping for the scale
        (
            "replicationcontroller with empty group",
            lambda rs, rc, ss: owner_ref(rc, api_version="/v1"),
            lambda rs, rc, ss: (rc, 12),
        ),
        (
            "replicationcontroller with invalid group",
            lambda rs, rc, ss: owner_ref(rc, api_version="apps/v1"),
            lambda *_: ValueError,
        ),
        ("statefulset controller with apps group", lambda rs, rc, ss: owner_ref(ss), lambda rs, rc, ss: (ss, 14)),
        (
            "statefulset controller with invalid kind",
            lambda rs, rc, ss: owner_ref(ss, kind="ReplicaSet"),
            lambda *_: None,
        ),  # a ReplicaSet of that name exists with another uid
    ],
)
def test_basic_finders(name, ref, expected):
    rs, rc, ss = _basic()
    want = expected(rs, rc, ss)
    if want is ValueError:
        with pytest.raises(ValueError):
            v.controller_scale(ref(rs, rc, ss), NS, [rs, rc, ss])
        return
    got = v.controller_scale(ref(rs, rc, ss), NS, [rs, rc, ss])
    assert got == (None if want is None else (want[0]["metadata"]["uid"], want[1]))


@pytest.mark.parametrize(
    "rs_api,rs_kind,dep_api,dep_kind,expected",
    [
        ("apps/v1", "ReplicaSet", "extensions/v1", "Deployment", "deployment"),  # happy path
        ("invalid/v1", "ReplicaSet", "apps/v1", "Deployment", ValueError),
        ("apps/v1", "InvalidKind", "apps/v1", "Deployment", ValueError),
        # the Deployment finder finds nothing; the scale finder then reads the ReplicaSet's scale
        ("extensions/v1", "ReplicaSet", "deployment/v1", "Deployment", ValueError),  # extensions is not served
        ("apps/v1", "ReplicaSet", "deployment/v1", "Deployment", "replicaset"),
        ("apps/v1", "ReplicaSet", "extensions/v1", "InvalidKind", "replicaset"),
    ],
)
def test_deployment_finder(rs_api, rs_kind, dep_api, dep_kind, expected):
    dep = workload("Deployment", 10)
    rs = workload(
        "ReplicaSet",
        5,
        owner={
            "apiVersion": dep_api,
            "kind": dep_kind,
            "name": dep["metadata"]["name"],
            "uid": dep["metadata"]["uid"],
            "controller": True,
        },
    )
    ref = {"apiVersion": rs_api, "kind": rs_kind, "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"]}
    if expected is ValueError:
        with pytest.raises(ValueError):
            v.controller_scale(ref, NS, [dep, rs])
        return
    want = (dep["metadata"]["uid"], 10) if expected == "deployment" else (rs["metadata"]["uid"], 5)
    assert v.controller_scale(ref, NS, [dep, rs]) == want


def test_owners_without_a_scale_allow_nothing_under_max_unavailable():
    """A Job's or a DaemonSet's pods: their owner has no scale subresource, the controller's
    sync fails and its fail-safe allows no disruption (for maxUnavailable and percentages)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NS, "uid": "job-1"},
        "spec": {"parallelism": 2},
    }
    pods = [new_pod(f"train-{i}", owner=owner_ref(job)) for i in range(2)]
    assert v.disruptions_allowed(max_unavailable(1), pods, [job], NOW) == 0
    assert v.disruptions_allowed(min_available("50%"), pods, [job], NOW) == 0
    assert v.disruptions_allowed(min_available(1), pods, [job], NOW) == 1  # integer minAvailable counts pods


def test_a_deployment_is_found_through_its_replica_set():
    dep = workload("Deployment", 4)
    rs = workload("ReplicaSet", 4, name="foobar-5d8f", owner=owner_ref(dep))
    pods = [new_pod(f"foobar-5d8f-{i}", owner=owner_ref(rs), ready=i != 0) for i in range(4)]
    assert numbers(max_unavailable(1), pods, [dep, rs]) == (0, 3, 3, 4)
    dep["spec"]["replicas"] = 6  # scaled up, the new pods not there yet
    assert numbers(max_unavailable(1), pods, [dep, rs]) == (0, 3, 5, 6)
    assert numbers(max_unavailable(1), pods, [rs]) == (0, 3, 3, 4)  # Deployment gone: the ReplicaSet's scale


# --- the Eviction API ------------------------------------------------------------------
# pkg/registry/core/pod/storage/eviction_test.go (Kubernetes v1.35: TestEviction, TestEvictionIgnorePDB): the
# decision, for each unhealthyPodEvictionPolicy the upstream case runs with.

POLICIES = (None, "IfHealthyBudget", "AlwaysAllow")
NEEDS_0 = "The disruption budget foo needs 0 healthy pods and has 0 currently"


def eviction_budget(status, selector=None, policy=None):
    pdb = {
        "metadata": {"name": "foo", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"a": "true"}} if selector is None else selector},
        "status": status,
    }
    if policy:
        pdb["spec"]["unhealthyPodEvictionPolicy"] = policy
    return pdb


def eviction_pod(phase="Running", ready=None, deleting=False):
    pod = new_pod("t", labels={"a": "true"}, phase=phase, deleting=deleting)
    pod["status"]["conditions"] = [] if ready is None else [{"type": "Ready", "status": str(ready)}]
    return pod


@pytest.mark.parametrize(
    "name,status,selector,pod,policies,refused",
    [
        # TestEviction (the pods there have no Ready condition)
        (
            "no disruptions allowed, pod running",
            {"disruptionsAllowed": 0},
            None,
            dict(phase="Running"),
            (None, "IfHealthyBudget"),
            NEEDS_0,
        ),
        (
            "no disruptions allowed, pod running, AlwaysAllow",
            {"disruptionsAllowed": 0},
            None,
            dict(phase="Running"),
            ("AlwaysAllow",),
            None,
        ),
        ("no disruptions allowed, pod pending", {"disruptionsAllowed": 0}, None, dict(phase="Pending"), POLICIES, None),
        (
            "no disruptions allowed, pod succeeded",
            {"disruptionsAllowed": 0},
            None,
            dict(phase="Succeeded"),
            POLICIES,
            None,
        ),
        ("no disruptions allowed, pod failed", {"disruptionsAllowed": 0}, None, dict(phase="Failed"), POLICIES, None),
        ("disruptions allowed", {"disruptionsAllowed": 1}, None, dict(phase="Running"), POLICIES, None),
        (
            "non-matching pdbs",
            {"disruptionsAllowed": 0},
            {"matchLabels": {"b": "true"}},
            dict(phase="Running"),
            POLICIES,
            None,
        ),
        (
            "no disruptions allowed, pod running, empty selector",
            {"disruptionsAllowed": 0},
            {},
            dict(phase="Running"),
            (None, "IfHealthyBudget"),
            NEEDS_0,
        ),
        # TestEvictionIgnorePDB (the decision; the store's conflicts are the API server's own)
        (
            "no disruptions allowed, pod terminating",
            {"disruptionsAllowed": 0},
            None,
            dict(phase="Running", deleting=True),
            POLICIES,
            None,
        ),
        (
            "no disruptions allowed, pod healthy, unhealthy pod not ours",
            {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2},
            None,
            dict(ready=True),
            POLICIES,
            "The disruption budget foo needs 2 healthy pods and has 2 currently",
        ),
        (
            "disruptions allowed, pod healthy, deletes pod by honoring the PDB",
            {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 3},
            None,
            dict(ready=True),
            POLICIES,
            None,
        ),
        (
            "no disruptions allowed, pod unhealthy, unhealthy pod ours",
            {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2},
            None,
            dict(ready=False),
            POLICIES,
            None,
        ),
        (
            "no disruptions allowed, pod unhealthy, skips the PDB check and deletes",
            {"disruptionsAllowed": 0},
            None,
            dict(ready=False),
            ("AlwaysAllow",),
            None,
        ),
        (
            "no disruptions allowed, pod unhealthy, IfHealthyBudget with no desired healthy",
            {"disruptionsAllowed": 0},
            None,
            dict(ready=False),
            (None, "IfHealthyBudget"),
            NEEDS_0,
        ),
        (
            "no disruptions allowed, pod healthy, empty selector",
            {"disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 3},
            {},
            dict(ready=True),
            POLICIES,
            "The disruption budget foo needs 3 healthy pods and has 3 currently",
        ),
        (
            "the error is about sync failure when the condition reason is SyncFailedReason",
            {
                "disruptionsAllowed": 0,
                "conditions": [
                    {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": "hoge"}
                ],
            },
            {},
            dict(ready=True),
            POLICIES,
            "The disruption budget foo does not allow evicting pods currently because it failed sync: hoge",
        ),
        (
            "the error includes the reason when the condition.Status is False",
            {
                "disruptionsAllowed": 0,
                "currentHealthy": 4,
                "desiredHealthy": 3,
                "conditions": [
                    {"type": "DisruptionAllowed", "status": "False", "reason": "bar-reason", "message": "hoge"}
                ],
            },
            {},
            dict(ready=True),
            POLICIES,
            "The disruption budget foo does not allow evicting pods currently (bar-reason): hoge",
        ),
    ],
)
def test_eviction_decision(name, status, selector, pod, policies, refused):
    for policy in policies:
        got = v.eviction_refusal(eviction_pod(**pod), [eviction_budget(status, selector, policy)])
        if refused is None:
            assert got is None, (name, policy)
        else:
            assert (got.status, got.reason, got.message, got.cause) == (
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                refused,
            ), (name, policy)


def test_eviction_waits_for_the_controller_to_see_a_new_generation():
    pdb = eviction_budget({"disruptionsAllowed": 5, "observedGeneration": 1})
    pdb["metadata"]["generation"] = 2
    got = v.eviction_refusal(eviction_pod(ready=True), [pdb])
    assert (got.status, got.cause) == (429, "The disruption budget foo is still being processed by the server.")


def test_eviction_refuses_a_negative_budget_and_two_budgets():
    got = v.eviction_refusal(eviction_pod(ready=True), [eviction_budget({"disruptionsAllowed": -1})])
    assert got.status == 403 and "pdb disruptions allowed is negative" in got.message
    two = [
        eviction_budget({"disruptionsAllowed": 1}),
        dict(eviction_budget({"disruptionsAllowed": 1}), metadata={"name": "bar", "namespace": NS}),
    ]
    got = v.eviction_refusal(eviction_pod(ready=True), two)
    assert (got.status, got.message) == (
        500,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
    )


@pytest.mark.parametrize(
    "allowed,expected_allowed,expected_reason",
    [
        (1, 0, "InsufficientPods"),  # TestEvictionPDBStatus: status is updated after eviction
        (3, 2, "SufficientPods"),  # the reason only changes when it reaches 0
    ],
)
def test_status_after_eviction(allowed, expected_allowed, expected_reason):
    status = {
        "disruptionsAllowed": allowed,
        "conditions": [{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods"}],
    }
    after = v.status_after_eviction(status, "foo-1", NOW)
    assert after["disruptionsAllowed"] == expected_allowed
    assert after["conditions"][0]["reason"] == expected_reason
    assert after["disruptedPods"] == {"foo-1": stamp(NOW)}
    # the controller does not count the evicted pod until it is deleted (or two minutes pass)
    pdb = dict(min_available(1, selector={"matchLabels": {"a": "true"}}), status=after)
    pods = [new_pod("foo-1", labels={"a": "true"}), new_pod("foo-2", labels={"a": "true"})]
    assert numbers(pdb, pods, now=NOW + timedelta(seconds=30))[1] == 1
    assert numbers(pdb, pods, now=NOW + timedelta(minutes=3))[1] == 2


# --- the twin evicts as the API server does -------------------------------------------


def _twin(*objects):
    gw = TwinGateway()
    gw.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, *objects], {})
    return gw


def _evict(gw, name):
    try:
        gw.evict_pod(NS, name)
    except TransientClusterError as e:
        assert e.status == 429 and e.message.startswith(v.EVICTION_REFUSED), e.message
        return e.message
    return "evicted"


@pytest.mark.django_db
def test_twin_refuses_a_ready_pod_and_lets_the_unready_one_go_under_min_available():
    gw = _twin(min_available(2), new_pod("r1"), new_pod("r2"), new_pod("u", ready=False))
    assert gw.pdb_status(min_available(2))["disruptionsAllowed"] == 0
    assert _evict(gw, "r1") == (
        f"{v.EVICTION_REFUSED} The disruption budget foobar needs 2 healthy pods and has 2 currently"
    )
    assert _evict(gw, "u") == "evicted"  # unready, and the budget is met without it
    assert sorted(p["metadata"]["name"] for p in gw.list_pods(NS)) == ["r1", "r2"]


@pytest.mark.django_db
def test_twin_max_unavailable_counts_the_deployment_not_the_budget_alone():
    dep = workload("Deployment", 4)
    rs = workload("ReplicaSet", 4, name="foobar-5d8f", owner=owner_ref(dep))
    pods = [new_pod(f"foobar-5d8f-{i}", owner=owner_ref(rs), ready=i != 0) for i in range(4)]
    gw = _twin(dep, rs, *pods, max_unavailable(1))
    assert _evict(gw, "foobar-5d8f-1").endswith("needs 3 healthy pods and has 3 currently")
    assert _evict(gw, "foobar-5d8f-0") == "evicted"


@pytest.mark.django_db
def test_twin_percentage_and_always_allow():
    ss = workload("StatefulSet", 4)
    pods = [new_pod(f"foobar-{i}", owner=owner_ref(ss), ready=i != 3) for i in range(4)]
    gw = _twin(ss, *pods, max_unavailable("30%"))  # ceil(1.2) = 2 may be down: 2 healthy needed, 3 there
    assert _evict(gw, "foobar-0") == "evicted"
    assert _evict(gw, "foobar-1").endswith("needs 2 healthy pods and has 2 currently")
    strict = budget({"minAvailable": "100%", "unhealthyPodEvictionPolicy": "AlwaysAllow"})
    gw = _twin(ss, *pods, strict)
    assert _evict(gw, "foobar-3") == "evicted"  # unready: AlwaysAllow lets it go
    assert _evict(gw, "foobar-0").endswith("needs 4 healthy pods and has 3 currently")


@pytest.mark.django_db
def test_twin_does_not_count_a_terminating_pod():
    gw = _twin(min_available(2), new_pod("a"), new_pod("b"), new_pod("c", deleting=True))
    assert _evict(gw, "a").endswith("needs 2 healthy pods and has 2 currently")
    assert _evict(gw, "c") == "evicted"  # already going: the budget is not asked


@pytest.mark.django_db
def test_twin_drain_reports_the_api_servers_refusal():
    gw = _twin(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}, "status": {}},
        min_available(2),
        new_pod("r1"),
        new_pod("r2"),
        new_pod("u", ready=False),
    )
    result = gw.drain("n1")
    assert result.evicted == [f"{NS}/u"]
    assert result.blocked == {
        f"{NS}/{n}": f"{v.EVICTION_REFUSED} The disruption budget foobar needs 2 healthy pods and has 2 currently"
        for n in ("r1", "r2")
    }
