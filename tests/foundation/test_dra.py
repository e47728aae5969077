"""Tests for dra.py: ported upstream tables + rules on the example objects."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from brickadmin.cluster import dra
from tests import dra_objects as ex

JSON = dict[str, Any]
GB = "gpu.deviceclass.resource.k8s.io/devices"
TB = "tpu.deviceclass.resource.k8s.io/devices"
IMPL_G = "requests.deviceclass.resource.kubernetes.io/gpu"
IMPL_T = "requests.deviceclass.resource.kubernetes.io/tpu"
CNT = "count/resourceclaims.resource.k8s.io"


# ===========================================================================
# Upstream: kubernetes/kubernetes v1.38.0-beta.0
#   pkg/quota/v1/evaluator/core/resource_claims_test.go TestResourceClaimEvaluatorUsage
# (DRAExtendedResource enabled in every row, as upstream sets it.)
# ===========================================================================


def _claim(requests: list[JSON], name: str = "foo", extended_pod: str | None = None) -> JSON:
    c: JSON = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": {"requests": requests}}}
    if extended_pod is not None:
        c["metadata"]["annotations"] = {dra.EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
        c["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": extended_pod, "uid": "uid", "controller": True}
        ]
    return c


def _ex(name: str, cls: str = "gpu", mode: str = "ExactCount", count: int = 1, **kw: Any) -> JSON:
    e: JSON = {"deviceClassName": cls, "allocationMode": mode, "count": count, **kw}
    return {"name": name, "exactly": e}


def _sub(name: str, cls: str = "gpu", mode: str = "ExactCount", count: int = 0) -> JSON:
    return {"name": name, "deviceClassName": cls, "allocationMode": mode, "count": count}


VALID = _claim([_ex("req-0")])
PRIO = _claim([{"name": "req-0", "firstAvailable": [_sub("subreq-0", count=1)]}])


def _pod(
    name: str,
    containers: list[dict[str, str]],
    init: list[dict[str, str]] = (),  # type: ignore[assignment]
    status_claim: str | None = "foo",
) -> JSON:
    p: JSON = {
        "apiVersion": "v1",
        "metadata": {"namespace": "ns", "name": name, "uid": "uid"},
        "spec": {
            "containers": [{"resources": {"requests": r}} for r in containers],
            "initContainers": [{"resources": {"requests": r}} for r in init],
        },
        "status": {},
    }
    if status_claim is not None:
        p["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": status_claim}
    return p


DC = "deviceclass.resource.kubernetes.io/gpu"
PODS = [
    _pod("pod-implicit", [{DC: "1"}]),
    _pod("pod-explicit", [], init=[{"example.com/gpu": "1"}]),
    _pod("pod-hybrid", [{"example.com/gpu": "1", DC: "1"}], init=[{"example.com/gpu": "1", DC: "1"}]),
    _pod("pod-nil-status", [{DC: "1"}], init=[{"example.com/gpu": "1"}], status_claim=None),
    _pod(
        "pod-init",
        [{"example.com/gpu": "1", DC: "1"}],
        init=[{"example.com/gpu": "1", DC: "1"}, {"example.com/gpu": "1", DC: "1"}],
    ),
]
MAPPING = {"gpu": "example.com/gpu"}  # DeviceClass gpu has extendedResourceName example.com/gpu


def _two(prefix: str) -> list[JSON]:
    return [_ex(f"{prefix}-request-0"), _ex(f"{prefix}-request-1")]


NIL_STATUS = _claim([_ex("request-0"), _ex("container-1-request-0")], name="foo-copy", extended_pod="pod-nil-status")
NIL_STATUS_ORIG = dict(NIL_STATUS, metadata={**NIL_STATUS["metadata"], "name": "foo"})


def _mut(base: JSON, f: Any) -> JSON:
    c = copy.deepcopy(base)
    f(c)
    return c


def _reqs(c: JSON) -> list[JSON]:
    r: list[JSON] = c["spec"]["devices"]["requests"]
    return r


USAGE_ROWS: list[tuple[str, bool, JSON, list[JSON], dict[str, int]]] = [
    # name, evaluatorWithDeviceMapping?, claim, otherClaims, usage
    (
        "implicit-extended-resource-claim",
        True,
        _claim([_ex("container-0-request-0")], extended_pod="pod-implicit"),
        [],
        {CNT: 1, GB: 1, "requests.example.com/gpu": 1},
    ),
    (
        "explicit-extended-resource-claim",
        True,
        _claim([_ex("container-0-request-0")], extended_pod="pod-explicit"),
        [],
        {CNT: 1, GB: 1, IMPL_G: 1},
    ),
    (
        "hybrid-extended-resource-claim",
        True,
        _claim(_two("container-1"), extended_pod="pod-hybrid"),
        [],
        {CNT: 1, GB: 2, IMPL_G: 1, "requests.example.com/gpu": 1},
    ),
    (
        "nil-status-extended-resource-claim",
        True,
        NIL_STATUS,
        [],
        {CNT: 1, GB: 2, IMPL_G: 1, "requests.example.com/gpu": 1},
    ),
    # both claims set the same pod as owner, the second claim cannot get the usage subtraction
    (
        "nil-status-two-extended-resource-claims",
        True,
        NIL_STATUS,
        [NIL_STATUS_ORIG],
        {CNT: 1, GB: 2, IMPL_G: 2, "requests.example.com/gpu": 2},
    ),
    (
        "init-extended-resource-claim",
        True,
        _claim(_two("container-2"), extended_pod="pod-init"),
        [],
        {CNT: 1, GB: 2, IMPL_G: 1, "requests.example.com/gpu": 1},
    ),
    ("simple", False, VALID, [], {CNT: 1, GB: 1, IMPL_G: 1}),
    (
        "many-requests",
        False,
        _mut(VALID, lambda c: _reqs(c).extend([copy.deepcopy(_reqs(c)[0]) for _ in range(4)])),
        [],
        {CNT: 1, GB: 5, IMPL_G: 5},
    ),
    ("count", False, _mut(VALID, lambda c: _reqs(c)[0]["exactly"].update(count=5)), [], {CNT: 1, GB: 5, IMPL_G: 5}),
    (
        "all",
        False,
        _mut(VALID, lambda c: _reqs(c)[0]["exactly"].update(allocationMode="All")),
        [],
        {CNT: 1, GB: dra.ALLOCATION_RESULTS_MAX_SIZE, IMPL_G: dra.ALLOCATION_RESULTS_MAX_SIZE},
    ),
    (
        "unknown-count-mode",
        False,
        _mut(VALID, lambda c: _reqs(c)[0]["exactly"].update(allocationMode="future-mode")),
        [],
        {CNT: 1, GB: 0},
    ),
    # Admins are *not* exempt from quota.
    (
        "admin",
        False,
        _mut(VALID, lambda c: _reqs(c)[0]["exactly"].update(adminAccess=True)),
        [],
        {CNT: 1, GB: 1, IMPL_G: 1},
    ),
    ("prioritized-list", False, PRIO, [], {CNT: 1, GB: 1, IMPL_G: 1}),
    (
        "prioritized-list-multiple-subrequests",
        False,
        _mut(
            PRIO,
            lambda c: (
                _reqs(c)[0]["firstAvailable"][0].update(count=2),
                _reqs(c)[0]["firstAvailable"].append(_sub("subreq-1", count=1)),
            ),
        ),
        [],
        {CNT: 1, GB: 2, IMPL_G: 2},
    ),
    (
        "prioritized-list-multiple-subrequests-allocation-mode-all",
        False,
        _mut(PRIO, lambda c: _reqs(c)[0]["firstAvailable"].append(_sub("subreq-1", mode="All"))),
        [],
        {CNT: 1, GB: 32, IMPL_G: 32},
    ),
    (
        "prioritized-list-multiple-subrequests-different-device-classes",
        False,
        _mut(PRIO, lambda c: _reqs(c)[0]["firstAvailable"].append(_sub("subreq-1", cls="tpu", mode="All"))),
        [],
        {CNT: 1, GB: 1, IMPL_G: 1, TB: 32, IMPL_T: 32},
    ),
]


@pytest.mark.parametrize("name,with_mapping,claim,others,usage", USAGE_ROWS, ids=[r[0] for r in USAGE_ROWS])
def test_resource_claim_evaluator_usage(
    name: str, with_mapping: bool, claim: JSON, others: list[JSON], usage: dict[str, int]
) -> None:
    pod_usage = dra.verified_pod_usage(claim, PODS, others) if with_mapping else None
    got = dra.claim_quota_usage(
        claim,
        dra_extended_resource=True,
        extended_resource_by_class=MAPPING if with_mapping else None,
        pod_usage=pod_usage,
    )
    assert got == usage


# resource_claims_test.go TestResourceClaimEvaluatorMatchingResources
MATCH_ROWS = [
    (
        "supported-resources",
        [CNT, GB, "requests.example.com/gpu", IMPL_G],
        [CNT, GB, "requests.example.com/gpu", IMPL_G],
    ),
    (
        "unsupported-resources",
        [
            "resourceclaims",
            "storage",
            "ephemeral-storage",
            "bronze.deviceclass.resource.k8s.io/storage",
            "gpu.storage.k8s.io/requests.storage",
        ],
        [],
    ),
]


@pytest.mark.parametrize("name,items,want", MATCH_ROWS, ids=[r[0] for r in MATCH_ROWS])
def test_resource_claim_evaluator_matching_resources(name: str, items: list[str], want: list[str]) -> None:
    assert dra.quota_matching_resources(items, extended_resource_by_class=MAPPING) == want


# resource_claims_test.go TestResourceClaimEvaluatorHandles
HANDLES_ROWS = [
    ("create", "CREATE", "", True),
    ("update", "UPDATE", "", True),
    ("delete", "DELETE", "", False),
    ("connect", "CONNECT", "", False),
    ("create-subresource", "CREATE", "subresource", False),
    ("update-subresource", "UPDATE", "subresource", False),
]


@pytest.mark.parametrize("name,op,sub,want", HANDLES_ROWS, ids=[r[0] for r in HANDLES_ROWS])
def test_resource_claim_evaluator_handles(name: str, op: str, sub: str, want: bool) -> None:
    assert dra.quota_handles(op, sub) is want


def test_quota_without_extended_resource_gate_and_nvidia_class() -> None:
    # v1.34/1.35 default (DRAExtendedResource off): only count + devices per class.
    c = _claim([_ex("gpu", cls="gpu.nvidia.com", count=2)])
    assert dra.claim_quota_usage(c, dra_extended_resource=False) == {
        CNT: 1,
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2,
    }
    # gate on + the chart's DeviceClass (extendedResourceName nvidia.com/gpu)
    assert dra.claim_quota_usage(c, extended_resource_by_class={"gpu.nvidia.com": "nvidia.com/gpu"}) == {
        CNT: 1,
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 2,
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": 2,
        "requests.nvidia.com/gpu": 2,
    }


def test_quota_of_example_claims() -> None:
    by = {c["metadata"]["name"]: dra.claim_device_usage(c) for c in ex.claims()}
    assert by["mig-small"]["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == 2  # max(2, 1)
    assert by["all-gpus"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == 32
    assert by["dcgm-admin"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == 1  # admin not exempt


# ===========================================================================
# Upstream: k8s.io/dynamic-resource-allocation v0.38.0-beta.0
#   structured/internal/allocatortesting/allocator_testing.go (rows that exercise
#   GatherPools in structured/internal/stable/pools_stable.go). Expectation is the
#   pool state seen from `node`; comment = upstream expected allocation.
# ===========================================================================

A, P1, P2 = "driver-a", "pool-1", "pool-2"


def _s(
    name: str,
    node: str,
    pool: str,
    devices: list[JSON] | None = None,
    count: int = 1,
    gen: int = 1,
    shared: list[JSON] | None = None,
) -> JSON:
    spec: JSON = {"driver": A, "nodeName": node, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count}}
    if devices is not None:
        spec["devices"] = devices
    if shared is not None:
        spec["sharedCounters"] = shared
    return {"metadata": {"name": name}, "spec": spec}


def _d(name: str, cset: str | None = None, counters: dict[str, str] | None = None) -> JSON:
    d: JSON = {"name": name}
    if cset is not None:
        d["consumesCounters"] = [
            {"counterSet": cset, "counters": {k: {"value": v} for k, v in (counters or {}).items()}}
        ]
    return d


def _cs(name: str, counters: dict[str, str] | None = None) -> JSON:
    return {"name": name, "counters": {k: {"value": v} for k, v in (counters or {}).items()}}


def _node(name: str) -> JSON:
    return {"metadata": {"name": name, "labels": {"region": "region-1"}}}


# name, slices, node, partitionable, expected {pool: state or (state, devices)}
POOL_ROWS: list[tuple[str, list[JSON], str, bool, dict[str, Any]]] = [
    # expect: device-1 from pool-1 and pool-2
    (
        "devices-split-across-different-slices",
        [_s("slice-1", "node-1", P1, [_d("device-1")]), _s("slice-2", "node-1", P2, [_d("device-1")])],
        "node-1",
        False,
        {P1: ("ok", ["device-1"]), P2: ("ok", ["device-1"])},
    ),
    # expect: not allocated (newer generation replaces, pool incomplete)
    (
        "obsolete-slice",
        [
            _s("slice-1-obsolete", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-1-obsolete", "node-1", P1, [_d("device-2")], count=2, gen=2),
        ],
        "node-1",
        False,
        {P1: "incomplete"},
    ),
    # expect: error "invalid resource pools were encountered"
    (
        "duplicate-slice",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-1-2", "node-1", P1, [_d("device-1")], count=2),
        ],
        "node-1",
        False,
        {P1: "invalid"},
    ),
    ("no-slices", [], "node-1", False, {}),
    # expect: error "... resource pool driver-a/pool-1 is currently invalid" (All mode)
    (
        "all-devices-of-invalid-pool",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-1-2", "node-1", P1, [_d("device-1")], count=2),
        ],
        "node-1",
        False,
        {P1: "invalid"},
    ),
    # expect: device-1 (All mode, counters in a separate slice of the same pool)
    (
        "all-devices-with-consumed-counters",
        [
            _s("slice-1", "node-1", P1, [_d("device-1", "counter-set-1", {"memory": "4Gi"})], count=2),
            _s("slice-2", "node-1", P1, None, count=2, shared=[_cs("counter-set-1", {"memory": "8Gi"})]),
        ],
        "node-1",
        True,
        {P1: ("ok", ["device-1"])},
    ),
    # expect: error "... resource pool driver-a/pool-1 is currently being updated"
    (
        "all-devices-of-the-incomplete-pool",
        [_s("slice-1", "node-1", P1, [_d("device-1")], count=2)],
        "node-1",
        False,
        {P1: "incomplete"},
    ),
    # expect: device-1 only (the other slice targets node-2 but completes the pool)
    (
        "allocation-mode-all-with-multi-host-resource-pool",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-2", "node-2", P1, [_d("device-2")], count=2),
        ],
        "node-1",
        False,
        {P1: ("ok", ["device-1"])},
    ),
    # expect: nothing (stale gen-1 slice on node-1, gen 2 elsewhere -> pool obsolete, ignored)
    (
        "multi-host-resource-pool-with-stale-slice-for-current-node",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2, gen=1),
            _s("slice-2", "node-2", P1, [_d("device-2")], count=2, gen=2),
        ],
        "node-1",
        False,
        {},
    ),
    # expect: device-1 from the *old* gen-1 slices (upstream: "we'd like this to not be allocated")
    (
        "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2, gen=1),
            _s("slice-1", "node-1", P1, [_d("device-2")], count=2, gen=1),
            _s("slice-2", "node-2", P1, [_d("device-1")], count=2, gen=2),
            _s("slice-2", "node-2", P1, [_d("device-2")], count=2, gen=2),
        ],
        "node-1",
        False,
        {P1: ("ok", ["device-1", "device-2"])},
    ),
    # expect: device-1
    (
        "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
        [
            _s("slice-1", "node-2", P1, [_d("device-1")], count=2, gen=1),
            _s("slice-1", "node-2", P1, [_d("device-2")], count=2, gen=1),
            _s("slice-2", "node-1", P1, [_d("device-1")], count=2, gen=2),
            _s("slice-2", "node-1", P1, [_d("device-2")], count=2, gen=2),
        ],
        "node-1",
        False,
        {P1: ("ok", ["device-1", "device-2"])},
    ),
    # expect: device-1 from the old generation
    (
        "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2, gen=1),
            _s("slice-1", "node-1", P1, [_d("device-2")], count=2, gen=1),
            _s("slice-2", "node-2", P1, [_d("device-1")], count=2, gen=2),
        ],
        "node-1",
        False,
        {P1: ("ok", ["device-1", "device-2"])},
    ),
    # expect: nothing ("does not get allocated since slice2 is incomplete")
    (
        "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
        [
            _s("slice-1", "node-2", P1, [_d("device-1")], count=2, gen=1),
            _s("slice-1", "node-2", P1, [_d("device-2")], count=2, gen=1),
            _s("slice-2", "node-1", P1, [_d("device-1")], count=2, gen=2),
        ],
        "node-1",
        False,
        {P1: "incomplete"},
    ),
    # expect: error (duplicate counter set name)
    (
        "partitionable-devices-same-counter-set-name-in-different-resource-slices",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=4),
            _s("slice-2", "node-1", P1, None, count=4, shared=[_cs("counter-set-1")]),
            _s("slice-3", "node-1", P1, [_d("device-2")], count=4),
            _s("slice-4", "node-1", P1, None, count=4, shared=[_cs("counter-set-1")]),
        ],
        "node-1",
        True,
        {P1: "invalid"},
    ),
    # expect: error (unknown counter set)
    (
        "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
        [
            _s("slice-1", "node-1", P1, [_d("device-1", "counter-set-2")], count=2),
            _s("slice-2", "node-1", P1, None, count=2, shared=[_cs("counter-set-1")]),
        ],
        "node-1",
        True,
        {P1: "invalid"},
    ),
    # expect: error (unknown counter in set)
    (
        "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
        [
            _s("slice-1", "node-1", P1, [_d("device-1", "counter-set-1", {"memory": "8Gi"})], count=2),
            _s("slice-2", "node-1", P1, None, count=2, shared=[_cs("counter-set-1", {"other-memory": "8Gi"})]),
        ],
        "node-1",
        True,
        {P1: "invalid"},
    ),
    # expect: error (counter sets are per pool)
    (
        "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
        [
            _s("slice-1", "node-1", P1, [_d("device-1", "counter-set-1", {"memory": "8Gi"})]),
            _s("slice-2", "node-1", P2, None, shared=[_cs("counter-set-1", {"memory": "8Gi"})]),
        ],
        "node-1",
        True,
        {P1: "invalid", P2: ("ok", [])},
    ),
    # expect: device-2 (device-3 on node-2 is allocated and drains the shared counters)
    (
        "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
        [
            _s("slice-1", "node-1", P1, None, count=3, shared=[_cs("counter-set-1", {"memory": "8Gi"})]),
            _s(
                "slice-2",
                "node-1",
                P1,
                [
                    _d("device-1", "counter-set-1", {"memory": "6Gi"}),
                    _d("device-2", "counter-set-1", {"memory": "2Gi"}),
                ],
                count=3,
            ),
            _s("slice-3", "node-2", P1, [_d("device-3", "counter-set-1", {"memory": "6Gi"})], count=3),
        ],
        "node-1",
        True,
        {P1: ("ok", ["device-1", "device-2"])},
    ),
    # expect: device-3 on node-2
    (
        "partitionable-devices-devices-consume-counter-set-in-different-nodes",
        [
            _s("slice-1", "node-1", P1, None, count=3, shared=[_cs("counter-set-1", {"memory": "8Gi"})]),
            _s("slice-2", "node-1", P1, [_d("device-1", "counter-set-1", {"memory": "6Gi"})], count=3),
            _s(
                "slice-3",
                "node-2",
                P1,
                [
                    _d("device-2", "counter-set-1", {"memory": "6Gi"}),
                    _d("device-3", "counter-set-1", {"memory": "2Gi"}),
                ],
                count=3,
            ),
        ],
        "node-2",
        True,
        {P1: ("ok", ["device-2", "device-3"])},
    ),
    # expect: error (non-targeting slice references unknown counter set)
    (
        "partitionable-devices-validation-error-on-non-targeting-slice",
        [
            _s("slice-1", "node-1", P1, None, count=3, shared=[_cs("counter-set-1", {"memory": "8Gi"})]),
            _s("slice-2", "node-1", P1, [_d("device-1", "counter-set-1", {"memory": "6Gi"})], count=3),
            _s("slice-3", "node-2", P1, [_d("device-3", "counter-set-2", {"memory": "6Gi"})], count=3),
        ],
        "node-1",
        True,
        {P1: "invalid"},
    ),
    # expect: device-2
    (
        "different-resourceslices-in-pool-can-target-different-nodes",
        [
            _s("slice-1", "node-2", P1, [_d("device-1")], count=2),
            _s("slice-2", "node-1", P1, [_d("device-2")], count=2),
        ],
        "node-1",
        False,
        {P1: ("ok", ["device-2"])},
    ),
    # expect: device-2 from pool-2
    (
        "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-2", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-3", "node-1", P2, [_d("device-2")]),
        ],
        "node-1",
        False,
        {P1: "invalid", P2: ("ok", ["device-2"])},
    ),
    # expect: error "invalid resource pools were encountered" (pool-2's only device already allocated)
    (
        "invalid-pool-is-error-if-no-other-device-can-be-allocated",
        [
            _s("slice-1", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-2", "node-1", P1, [_d("device-1")], count=2),
            _s("slice-3", "node-1", P2, [_d("device-2")]),
        ],
        "node-1",
        False,
        {P1: "invalid", P2: ("ok", ["device-2"])},
    ),
    # expect: nothing
    (
        "no-allocation-from-incomplete-pools",
        [_s("slice-1", "node-1", P1, [_d("device-1")], count=2)],
        "node-1",
        False,
        {P1: "incomplete"},
    ),
]


@pytest.mark.parametrize("name,slices,node,partitionable,want", POOL_ROWS, ids=[r[0] for r in POOL_ROWS])
def test_gather_pools(name: str, slices: list[JSON], node: str, partitionable: bool, want: dict[str, Any]) -> None:
    pools = dra.gather_pools(slices, _node(node), partitionable_devices=partitionable)
    got: dict[str, Any] = {}
    for p in pools:
        if p.is_incomplete:
            got[p.id.pool] = "incomplete"
        elif p.is_invalid:
            got[p.id.pool] = "invalid"
        else:
            got[p.id.pool] = ("ok", sorted(p.devices_targeting_node()))
    assert got == want


def test_gather_pools_without_partitionable_gate_ignores_counter_slices() -> None:
    # DRAPartitionableDevices off (default on 1.34/1.35): the sharedCounters slice is
    # skipped while gathering, but the completeness re-check (checkSlicesInPool) counts
    # every slice of the generation, so the pool is complete and its devices are
    # offered with their counters ignored (upstream behaviour).
    rows = dict((r[0], r) for r in POOL_ROWS)
    slices = rows["all-devices-with-consumed-counters"][1]
    pool = dra.gather_pools(slices, _node("node-1"), partitionable_devices=False)[0]
    assert pool.usable and pool.devices_targeting_node() == ["device-1"] and pool.counter_sets == {}


def test_node_selector_and_all_nodes() -> None:
    s1 = {
        "metadata": {"name": "s"},
        "spec": {
            "driver": A,
            "allNodes": True,
            "pool": {"name": "net", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "d"}],
        },
    }
    s2 = {
        "metadata": {"name": "t"},
        "spec": {
            "driver": A,
            "pool": {"name": "rack", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-2"]}]}
                ]
            },
            "devices": [{"name": "e"}],
        },
    }
    assert [p.id.pool for p in dra.gather_pools([s1, s2], _node("node-1"))] == ["net"]


# ===========================================================================
# Upstream: kubernetes/kubernetes v1.38.0-beta.0
#   pkg/controller/resourcepoolstatusrequest/views_test.go TestComputePartitionSummary
#   (+ TestComputePartitionSummary_MultiCounterSet)
# ===========================================================================


def _pd(name: str, typ: str | None, *cost: tuple[str, dict[str, str]]) -> JSON:
    d: JSON = {
        "name": name,
        "consumesCounters": [{"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}} for s, c in cost],
    }
    if typ is not None:
        d["attributes"] = {"profile": {"string": typ}}
    return d


SC80 = [_cs("gpu-0", {"memory": "80Gi"})]
SC800 = [_cs("gpu-1", {"memory": "800Gi"})]
PS_ROWS: list[tuple[str, list[JSON], list[JSON], list[str], dict[str, tuple[int, int]] | str]] = [
    # name, devices, sharedCounters, inUse, {type: (total, allocatable)} | error prefix
    (
        "all-fresh-independent-per-type",
        [
            _pd("full-0", "Full", ("gpu-0", {"memory": "80Gi"})),
            _pd("half-0", "Half", ("gpu-0", {"memory": "40Gi"})),
            _pd("half-1", "Half", ("gpu-0", {"memory": "40Gi"})),
        ],
        SC80,
        [],
        {"Full": (1, 1), "Half": (2, 2)},
    ),
    (
        "in-use-full-consumes-counter",
        [
            _pd("full-0", "Full", ("gpu-0", {"memory": "80Gi"})),
            _pd("half-0", "Half", ("gpu-0", {"memory": "40Gi"})),
            _pd("half-1", "Half", ("gpu-0", {"memory": "40Gi"})),
        ],
        SC80,
        ["full-0"],
        {"Full": (1, 0), "Half": (2, 0)},
    ),
    (
        "fresh-device-clamp-binds-before-counter",
        [_pd(f"full-{i}", "Full", ("gpu-1", {"memory": "80Gi"})) for i in range(3)],
        SC800,
        [],
        {"Full": (3, 3)},
    ),
    (
        "missing-attribute",
        [_pd("full-0", "Full", ("gpu-0", {"memory": "80Gi"})), _pd("mystery", None, ("gpu-0", {"memory": "40Gi"}))],
        SC80,
        [],
        "PartitionTypeMissing",
    ),
    (
        "cost-mismatch-within-type",
        [_pd("half-0", "Half", ("gpu-0", {"memory": "40Gi"})), _pd("half-1", "Half", ("gpu-0", {"memory": "50Gi"}))],
        SC80,
        [],
        "PartitionCostMismatch",
    ),
    # MultiCounterSet: memory allows 2, sm allows 1 -> 1
    (
        "multi-counter-set",
        [_pd(f"full-{i}", "Full", ("mem", {"memory": "80Gi"}), ("cores", {"sm": "8"})) for i in range(2)],
        [_cs("mem", {"memory": "160Gi"}), _cs("cores", {"sm": "8"})],
        [],
        {"Full": (2, 1)},
    ),
]


def _typ(d: JSON) -> str | None:
    v = dra.attribute_value(d, "profile")
    return v if isinstance(v, str) else None


@pytest.mark.parametrize("name,devices,sc,in_use,want", PS_ROWS, ids=[r[0] for r in PS_ROWS])
def test_compute_partition_summary(
    name: str, devices: list[JSON], sc: list[JSON], in_use: list[str], want: dict[str, tuple[int, int]] | str
) -> None:
    if isinstance(want, str):
        with pytest.raises(dra.PartitionSummaryError, match=want):
            dra.partition_summary(devices, sc, in_use, type_of=_typ)
        return
    got = {p.type: (p.total, p.allocatable) for p in dra.partition_summary(devices, sc, in_use, type_of=_typ)}
    assert got == want


# ===========================================================================
# Upstream: kubernetes-sigs/dra-driver-nvidia-gpu @95932046
#   cmd/gpu-kubelet-plugin/consumable_shares_test.go TestApplyConsumableShares
# ===========================================================================

CS_ROWS: list[tuple[str, bool, str, str, str | None, str | None, str | None, int | None, bool]] = [
    # name, gate, flag, inputMemory, expectedMax, expectedDefault, expectedMin, expectedShares, modified
    ("feature gate disabled", False, "unlimited", "16Gi", None, None, None, None, False),
    ("flag disabled", True, "disabled", "16Gi", None, None, None, None, False),
    ("unlimited option", True, "unlimited", "16Gi", "16Gi", "0", "0", None, True),
    (
        "unlimited option with unaligned memory rounds down max",
        True,
        "unlimited",
        str(1048576 * 10 + 500),
        "10Mi",
        "0",
        "0",
        None,
        True,
    ),
    ("memory option", True, "memory", "16Gi", "16Gi", "16Gi", "1Mi", None, True),
    ("integer shares option (e.g. 4)", True, "4", "16Gi", "16Gi", "0", "0", 4, True),
]


@pytest.mark.parametrize("name,gate,flag,mem,mx,dflt,mn,shares,modified", CS_ROWS, ids=[r[0] for r in CS_ROWS])
def test_apply_consumable_shares(
    name: str,
    gate: bool,
    flag: str,
    mem: str,
    mx: str | None,
    dflt: str | None,
    mn: str | None,
    shares: int | None,
    modified: bool,
) -> None:
    dev = dra.apply_consumable_shares({"name": "gpu-0", "capacity": {"memory": {"value": mem}}}, flag, gate)
    if not modified:
        assert "allowMultipleAllocations" not in dev and "requestPolicy" not in dev["capacity"]["memory"]
        assert "shares" not in dev["capacity"]
        return
    m = dev["capacity"]["memory"]
    assert dev["allowMultipleAllocations"] is True
    q = dra.parse_quantity
    assert q(m["value"]) == q(mx) and q(m["requestPolicy"]["validRange"]["max"]) == q(mx)
    assert q(m["requestPolicy"]["validRange"]["step"]) == q("1Mi")
    assert q(m["requestPolicy"]["default"]) == q(dflt) and q(m["requestPolicy"]["validRange"]["min"]) == q(mn)
    if shares is None:
        assert "shares" not in dev["capacity"]
    else:
        sc = dev["capacity"]["shares"]
        assert q(sc["value"]) == shares and q(sc["requestPolicy"]["default"]) == 1
        assert (
            q(sc["requestPolicy"]["validRange"]["min"]) == 1 and q(sc["requestPolicy"]["validRange"]["max"]) == shares
        )
    assert dra.shares_units(dev) == (shares if shares else (1 if flag == "memory" else None))


# ===========================================================================
# Upstream: dra-driver-nvidia-gpu pkg/featuregates/featuregates.go ValidateFeatureGates
# ===========================================================================

GATE_ROWS: list[tuple[dict[str, bool], str | None]] = [
    ({}, None),
    ({"DynamicMIG": True}, None),
    (
        {"DynamicMIG": True, "PassthroughSupport": True},
        "DynamicMIG is currently mutually exclusive with PassthroughSupport",
    ),
    ({"DynamicMIG": True, "NVMLDeviceHealthCheck": True}, "mutually exclusive with NVMLDeviceHealthCheck"),
    ({"DynamicMIG": True, "MPSSupport": True}, "DynamicMIG is currently mutually exclusive with MPSSupport"),
    ({"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}, "PassthroughSupport is currently mutually exclusive"),
    ({"MPSSupport": True, "NVMLDeviceHealthCheck": True}, None),  # listed in docs, not enforced in code
    ({"DeviceMetadata": True}, "requires PassthroughSupport"),
    ({"IMEXDaemonsWithDNSNames": False}, "ComputeDomainCliques requires IMEXDaemonsWithDNSNames"),
    ({"ConsumableShares": True, "DynamicMIG": True, "TimeSlicingSettings": True}, None),
]


@pytest.mark.parametrize("gates,err", GATE_ROWS)
def test_validate_driver_feature_gates(gates: dict[str, bool], err: str | None) -> None:
    got = dra.validate_driver_feature_gates(gates)
    if err is None:
        assert got is None
    else:
        assert got is not None and err in got


# ===========================================================================
# Counting rules on the example objects (examples/*.yaml)
# ===========================================================================


def _all_slices() -> list[JSON]:
    return ex.whole_gpu_node() + ex.static_mig_node() + ex.dynamic_mig_node() + ex.shares_node()


def test_names() -> None:
    assert dra.mig_device_name(0, "1g.10gb", 19, 3) == "gpu-0-mig-1g10gb-19-3"
    assert dra.MIG_DEVICE_NAME_RE.match("gpu-1-mig-2g47gb-14-0")
    assert dra.camel_to_dns_name("copyEngines") == "copy-engines" and dra.camel_to_dns_name("memory") == "memory"
    for s in _all_slices():
        for d in s["spec"].get("devices", []):
            assert "." not in d["name"]


def test_physical_gpus_by_node() -> None:
    assert dra.physical_gpus_by_node(_all_slices()) == {
        "node-a100": 2,
        "node-a100-mig": 2,
        "node-a100-shares": 2,
        "node-h100-dynmig": 1,
    }


def test_a_whole_gpu_advertised_beside_its_mig_devices_is_counted_once() -> None:
    sl = ex.static_mig_node()
    sl[0]["spec"]["devices"].append(ex.whole_gpu(0, ex.GPU_M0))  # old driver: gpu-0 advertised too
    assert dra.physical_gpus_by_node(sl) == {"node-a100-mig": 2}
    caps = {c.gpu: c for c in dra.logical_capacity(sl)}
    assert caps[ex.GPU_M0].mode == "static-mig" and caps[ex.GPU_M0].units == 7


def test_vfio_beside_gpu_counted_once() -> None:
    sl = ex.whole_gpu_node()
    vf = {
        "name": "gpu-vfio-0",
        "attributes": {"type": {"string": "vfio"}, "uuid": {"string": ex.GPU_A}},
        "capacity": {"addressableMemory": {"value": "80Gi"}},
    }
    sl[0]["spec"]["devices"].append(vf)
    assert dra.physical_gpus_by_node(sl) == {"node-a100": 2}


def test_a_gpu_and_its_vfio_device_as_nvidias_driver_publishes_them_are_one_gpu() -> None:
    """PassthroughSupport: gpu-vfio-N beside gpu-N, the same PCI bus ID, a uuid of its own."""
    from gpus.numbers import dra_lines

    sl = ex.whole_gpu_node()
    sl[0]["spec"]["devices"] += [ex.vfio_gpu(0), ex.vfio_gpu(1)]
    assert dra.physical_gpus_by_node(sl) == {"node-a100": 2}
    caps = {c.gpu: c for c in dra.logical_capacity(sl)}
    assert {g: (c.mode, c.units, sorted(c.devices)) for g, c in caps.items()} == {
        ex.GPU_A: ("whole", 1, ["gpu-0", "gpu-vfio-0"]),
        ex.GPU_B: ("whole", 1, ["gpu-1", "gpu-vfio-1"]),
    }
    # a VM holds gpu-vfio-0: the driver withdraws gpu-0 (allocatable.go RemoveSiblingDevices)
    sl[0]["spec"]["devices"] = [d for d in sl[0]["spec"]["devices"] if d["name"] != "gpu-0"]
    vm = ex.vm_claim("c0ffee00-0000-4000-8000-000000000001")
    node = dra_lines.dra_node(dra_lines.inputs_by_node(sl, [vm])["node-a100"])
    assert node.physical == 2
    assert sorted((g.mode, g.units, g.used) for g in node.gpus) == [("vfio", 1, 1), ("whole", 1, 0)]
    assert sum(line.logical for line in dra_lines.dra_lines(node)) == 2


def test_incomplete_pool_not_counted() -> None:
    sl = ex.dynamic_mig_node()[1:]  # device slice without its counter slice (resourceSliceCount 2)
    assert dra.physical_gpus_by_node(sl) == {}
    assert dra.physical_gpus_by_node(sl, include_incomplete=True) == {"node-h100-dynmig": 1}


def test_logical_capacity() -> None:
    caps = dra.logical_capacity(_all_slices(), ex.claims())
    by = {(c.node, c.gpu): c for c in caps}
    assert by[("node-a100", ex.GPU_A)].units == 1 and by[("node-a100", ex.GPU_A)].mode == "whole"
    assert by[("node-a100-mig", ex.GPU_M0)].units == 7
    assert by[("node-a100-mig", ex.GPU_M1)].units == 4  # 2g.20gb + 2x1g.10gb + 3g.40gb
    assert by[("node-a100-shares", ex.GPU_S0)].units == 4 and by[("node-a100-shares", ex.GPU_S0)].mode == "shared"
    dyn = by[("node-h100-dynmig", "counterset:gpu-0-counter-set")]
    assert dyn.mode == "dynamic-mig"
    # 3g.40gb at placement 0 is allocated (memory slices 0-3): what fits now
    # (2g.20gb has placements 0,2,4 only -> just placement 4 still fits)
    assert dyn.by_profile == {
        "1g.10gb": 3,
        "1g.20gb": 2,
        "2g.20gb": 1,
        "3g.40gb": 1,
        "4g.40gb": 0,
        "7g.80gb": 0,
        "gpu": 0,
    }
    # units: the 3g.40gb a claim holds, and the three 1g.10gb that still fit beside it
    assert dyn.totals_by_profile["1g.10gb"] == 7 and dyn.units == 1 + 3


def _dynamic_mig_gpu_with(*held: str):
    """The H100 of the dynamic-MIG node, ``held`` devices allocated (one claim each)."""
    from gpus.numbers import dra_lines

    claims = [
        ex.claim(
            f"c-{i}",
            "team-a",
            [ex.exact("mig", dra.DEVICE_CLASS_MIG)],
            [ex.res("mig", "node-h100-dynmig", device)],
            [f"pod-{i}"],
            "node-h100-dynmig",
            f"c0ffee00-0000-4000-8000-{i:012d}",
        )
        for i, device in enumerate(held)
    ]
    node = dra_lines.dra_node(dra_lines.inputs_by_node(ex.dynamic_mig_node(), claims)["node-h100-dynmig"])
    (gpu,) = node.gpus
    return gpu


def test_a_claimed_dynamic_mig_partition_is_taken_from_what_is_free_once() -> None:
    """What fits now is net of what claims hold: the units add the held partitions back, so that
    free (units - used) drops by one per claim, and a claim on the whole GPU leaves 1 of 1 used."""
    free = _dynamic_mig_gpu_with()
    assert (free.units, free.used) == (7, 0)
    one = _dynamic_mig_gpu_with("gpu-0-mig-1g10gb-19-0")
    assert (one.units, one.used, one.by_profile["1g.10gb"]) == (7, 1, 6)
    assert one.units - one.used == free.units - free.used - 1
    whole = _dynamic_mig_gpu_with("gpu-0")
    assert (whole.units, whole.used) == (1, 1) and not any(whole.by_profile.values())


def test_logical_capacity_dynamic_mig_unused() -> None:
    dyn = dra.logical_capacity(ex.dynamic_mig_node())[0]
    assert dyn.by_profile["gpu"] == 1 and dyn.by_profile["1g.10gb"] == 7 and dyn.by_profile["3g.40gb"] == 2


def test_unlimited_shares_is_none() -> None:
    sl = ex.shares_node()
    for d in sl[0]["spec"]["devices"]:
        d["capacity"] = {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "80Gi", "step": "1Mi"}},
            }
        }
    assert {c.units for c in dra.logical_capacity(sl)} == {None}


def test_used_devices() -> None:
    used = dra.used_devices(ex.claims())
    g1 = used[dra.DeviceID(ex.DRIVER, "node-a100", "gpu-1")]
    assert g1.claims == ["team-a/shared-gpu"] and g1.pods == ["team-a/infer-0", "team-a/infer-1"]
    assert g1.admin_claims == ["gpu-monitoring/dcgm-admin"]
    s0 = used[dra.DeviceID(ex.DRIVER, "node-a100-shares", "gpu-0")]
    assert len(s0.claims) == 2 and s0.consumed_capacity["shares"] == Decimal(3)
    # admin-only use is no use
    admin_only = dra.used_devices([c for c in ex.claims() if c["metadata"]["name"] == "dcgm-admin"])
    assert admin_only == {}
    assert len(used) == 6


def test_pool_status_fix_vs_v136() -> None:
    sl, cl = _all_slices(), ex.claims()
    fixed = {p.id.pool: p for p in dra.pool_status(sl, cl, ex.DRIVER)}
    old = {p.id.pool: p for p in dra.pool_status(sl, cl, ex.DRIVER, legacy_v136=True)}
    # admin access on gpu-1 was counted in 1.36
    assert old["node-a100"].allocated_devices == 3 and fixed["node-a100"].allocated_devices == 2
    # two claims sharing gpu-0 counted twice in 1.36
    assert old["node-a100-shares"].allocated_devices == 2 and fixed["node-a100-shares"].allocated_devices == 1
    # dynamic MIG: 19 published devices on 1 GPU (full + 18 placements); the basic
    # counts are per device entry, so 1 allocated 3g.40gb leaves "18 available"
    assert fixed["node-h100-dynmig"].total_devices == 19 and fixed["node-h100-dynmig"].available_devices == 18


def test_upstream_partition_summary_rejects_nvidia_dynamic_mig_grouped_by_profile() -> None:
    pool = dra.pools_from_slices(ex.dynamic_mig_node())[dra.PoolID(ex.DRIVER, "node-h100-dynmig")]
    with pytest.raises(dra.PartitionSummaryError, match="PartitionCostMismatch"):
        dra.partition_summary(pool.devices, pool.shared_counters, [])


def test_pool_status_taints() -> None:
    sl = ex.whole_gpu_node()
    sl[0]["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}]
    sl[0]["spec"]["devices"][1]["taints"] = [{"key": "info", "effect": "None"}]
    st = dra.pool_status(sl, [], ex.DRIVER)[0]
    assert (st.unavailable_devices, st.available_devices) == (1, 1)
    rule = {
        "spec": {
            "deviceSelector": {"driver": ex.DRIVER, "device": "gpu-1"},
            "taint": {"key": "maint", "effect": "NoExecute"},
        }
    }
    st = dra.pool_status(sl, [], ex.DRIVER, taint_rules=[rule])[0]
    assert (st.unavailable_devices, st.available_devices) == (2, 0)


def test_pool_status_incomplete() -> None:
    st = dra.pool_status(ex.dynamic_mig_node()[:1], [], ex.DRIVER)[0]
    assert st.validation_error is not None and st.validation_error.startswith("PoolIncomplete:")
    assert st.total_devices is None


def test_parse_quantity() -> None:
    q = dra.parse_quantity
    assert q("80Gi") == 80 * 2**30 and q("9728Mi") == 9728 * 2**20 and q("1e3") == 1000
    assert q("500m") == Decimal("0.5") and q(7) == 7 and q("1k") == 1000
    with pytest.raises(ValueError):
        q("lots")
