"""The twin's DRA allocator against kube-scheduler's own test table.

Rows ported from k8s.io/dynamic-resource-allocation v0.34.4,
structured/internal/allocatortesting/allocator_testing.go (``TestAllocator``), with its
names, objects and expected results; then rows of our own for NVIDIA's classes and for a
selector that fails at run time.

Rows not ported, because the twin does not model what they test:
- ``duplicate-slice``, ``all-devices-of-the-incomplete-pool``: the twin drops incomplete and
  invalid pools instead of reporting them;
- ``network-attached-device``, ``many-network-attached-devices``,
  ``local-and-network-attached-devices``, ``unsuccessful-allocation-network-attached-device``,
  ``partitionable-devices-per-device-node-selection-*``, ``node-restriction``: only node-local
  pools (slices with ``nodeName``);
- ``admin-access-disabled``, ``prioritized-list-disabled``, ``tainted-*-disabled``,
  ``partitionable-devices-disabled-*``, ``binding-conditions-without-*``: feature gates (the
  twin is a v1.34 cluster with the DRA gates the lab turns on);
- ``with-class-device-config*``, ``claim-with-device-config``, ``prioritized-list-device-config``,
  ``prioritized-list-class-config``: configuration is passed through, not allocated;
- ``tainted-*``: device taints at allocation (the twin applies DeviceTaintRules by eviction);
- ``device-binding-conditions``, ``binding-conditions-*``, ``partitionable-devices-with-binding-*``;
- ``too-many-devices-*``, ``max-number-devices``, ``prioritized-list-max-allocation-*``: the
  32-result limit is kept, but these rows build hundreds of devices to show it;
- ``consumable-capacity-*`` request policies (ranges, steps, valid values) and
  ``distinct-constraint-*``: the twin takes a share's request or default as given.
"""

from __future__ import annotations

from typing import Any

import pytest

from brickadmin.cluster import dra_allocate

NODE1, NODE2 = "node-1", "node-2"
CLASS_A, CLASS_B = "class-a", "class-b"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL1, POOL2 = "pool-1", "pool-2"
REQ0, REQ1 = "req-0", "req-1"
DEVICE1, DEVICE2, DEVICE3 = "device-1", "device-2", "device-3"


def klass(name: str, driver: str) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def device(name: str, capacity: dict | None = None, attributes: dict | None = None) -> dict:
    d: dict[str, Any] = {"name": name}
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if attributes:
        d["attributes"] = attributes
    return d


def slice_(name: str, node: str, pool: str, driver: str, *devices: dict, generation: int = 1) -> dict:
    spec = {
        "driver": driver,
        "nodeName": node,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
    }
    return {"metadata": {"name": name}, "spec": {**spec, "devices": list(devices)}}


def one_device(name: str, node: str, pool: str, driver: str) -> dict:
    return slice_(name, node, pool, driver, device(DEVICE1))


def cel(expression: str) -> dict:
    return {"cel": {"expression": expression}}


def request(
    name: str, cls: str, count: int = 1, *selectors: dict, mode: str = "ExactCount", admin: bool = False
) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = list(selectors)
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def sub(name: str, cls: str, count: int = 1, *selectors: dict) -> dict:
    out = request(name, cls, count, *selectors)["exactly"]
    return {"name": name, **out}


def first_available(name: str, *subs: dict) -> dict:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict, constraints: list | None = None) -> dict:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name}, "spec": {"devices": devices}}


def allocated(*ids: tuple[str, str, str]) -> list[dict]:
    """Claims already holding these devices (the table's ``allocatedDevices``)."""
    results = [{"request": "r", "driver": d, "pool": p, "device": n} for d, p, n in ids]
    return [{"metadata": {"name": "other"}, "status": {"allocation": {"devices": {"results": results}}}}]


def result(req: str, driver: str, pool: str, dev: str, admin: bool = False) -> dict:
    r = {"request": req, "driver": driver, "pool": pool, "device": dev}
    if admin:
        r["adminAccess"] = True
    return r


def memory_at_least(q: str) -> dict:
    return cel(f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{q}")) >= 0')


def attrs(**values: Any) -> dict:
    out = {}
    for k, v in values.items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"
        out[k] = {kind: v}
    return out


def version(v: str) -> dict:
    return {"version": v}


SMALL_FIRST = [device(DEVICE1, {"memory": "1Gi"}), device(DEVICE2, {"memory": "2Gi"})]
LARGE_FIRST = SMALL_FIRST[::-1]
NUMA_1_2 = [device(DEVICE1, None, attrs(numa=1)), device(DEVICE2, None, attrs(numa=2))]
CLASSES = {CLASS_A: klass(CLASS_A, DRIVER_A), CLASS_B: klass(CLASS_B, DRIVER_B)}
ONLY_A = {CLASS_A: klass(CLASS_A, DRIVER_A)}
SMALL_LARGE = [request(REQ0, CLASS_A, 1, memory_at_least("1Gi")), request(REQ1, CLASS_A, 1, memory_at_least("2Gi"))]
CONSTRAINED = device(
    DEVICE1,
    attributes={
        "driverVersion": version("1.0.0"),
        **attrs(numa=1, stringAttribute="stringAttributeValue", boolAttribute=True),
    },
)

# name: (claims, classes, slices, node, allocated, expected results per claim | None | "error text")
ROWS: dict[str, tuple[list, dict | None, list, str, list, Any]] = {
    "simple": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "other-node": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_B), one_device("slice-2", NODE2, POOL2, DRIVER_A)],
        NODE2,
        [],
        [[result(REQ0, DRIVER_A, POOL2, DEVICE1)]],
    ),
    "small-and-large": (
        [claim("claim-0", *SMALL_LARGE)],
        ONLY_A,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "1Gi"}),
                device(DEVICE2, {"memory": "2Gi"}),
            )
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE2)]],
    ),
    "small-and-large-backtrack-requests": (
        [claim("claim-0", *SMALL_LARGE)],
        ONLY_A,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}),
                device(DEVICE1, {"memory": "1Gi"}),
            )
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE2)]],
    ),
    "small-and-large-backtrack-claims": (
        [claim("claim-0", SMALL_LARGE[0]), claim("claim-1", SMALL_LARGE[1])],
        ONLY_A,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}),
                device(DEVICE1, {"memory": "1Gi"}),
            )
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)], [result(REQ1, DRIVER_A, POOL1, DEVICE2)]],
    ),
    "devices-split-across-different-slices": (
        [claim("claim-0", request(REQ0, CLASS_A, 2))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A), one_device("slice-2", NODE1, POOL2, DRIVER_A)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ0, DRIVER_A, POOL2, DEVICE1)]],
    ),
    "obsolete-slice": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        ONLY_A,
        [
            one_device("slice-1-obsolete", NODE1, POOL1, DRIVER_A),
            slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), generation=2),
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "no-slices": ([claim("claim-0", request(REQ0, CLASS_A))], ONLY_A, [], NODE1, [], None),
    "not-enough-suitable-devices": (
        [claim("claim-0", request(REQ0, CLASS_A)), claim("claim-0", request(REQ1, CLASS_A))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        None,
    ),
    "no-classes": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        {},
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "could not retrieve device class class-a",
    ),
    "unknown-class": (
        [claim("claim-0", request(REQ0, "unknown-class"))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "could not retrieve device class unknown-class",
    ),
    "empty-class": (
        [claim("claim-0", request(REQ0, ""))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "claim claim-0, request req-0: missing device class name (unsupported request type?)",
    ),
    "unknown-selector": (
        [claim("claim-0", request(REQ0, CLASS_A, 1, {}))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "CEL expression empty (unsupported selector type?)",
    ),
    "unknown-allocation-mode": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="future-mode"))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "unsupported count mode future-mode",
    ),
    "unknown-constraint": (
        [claim("claim-0", request(REQ0, CLASS_A), constraints=[{}])],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "claim claim-0, constraint #0: empty constraint (unsupported constraint type?)",
    ),
    "no-claims-to-allocate": ([], ONLY_A, [one_device("slice-1", NODE1, POOL1, DRIVER_A)], NODE1, [], []),
    "all-devices-single": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "all-devices-many": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A), one_device("slice-1", NODE1, POOL2, DRIVER_A)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ0, DRIVER_A, POOL2, DEVICE1)]],
    ),
    "all-devices-no-solution": (
        [claim("claim-1", request(REQ0, CLASS_A)), claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        None,
    ),
    "all-devices-no-solution-reversed": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All")), claim("claim-1", request(REQ0, CLASS_A))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        None,
    ),
    "all-devices-slice-without-devices": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        None,
    ),
    "all-devices-some-allocated": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1)),
        None,
    ),
    "all-devices-some-allocated-admin-access": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All", admin=True))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1)),
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1, True), result(REQ0, DRIVER_A, POOL1, DEVICE2, True)]],
    ),
    "already-allocated-devices": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1), (DRIVER_A, POOL1, DEVICE2)),
        None,
    ),
    "admin-access-enabled": (
        [claim("claim-0", request(REQ0, CLASS_A, admin=True))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1), (DRIVER_A, POOL1, DEVICE2)),
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1, True)]],
    ),
    "separate-claims-share-device-admin-access": (
        [
            claim("claim-0", request(REQ0, CLASS_A, admin=True)),
            claim("claim-1", request(REQ0, CLASS_A, admin=True)),
        ],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1, True)], [result(REQ0, DRIVER_A, POOL1, DEVICE1, True)]],
    ),
    "count-devices-some-allocated-admin-access": (
        [claim("claim-0", request(REQ0, CLASS_A, 2, admin=True))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1)),
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1, True), result(REQ0, DRIVER_A, POOL1, DEVICE2, True)]],
    ),
    "admin-access-claims-device-allocating-for-non-admin-access": (
        [claim("claim-0", request(REQ0, CLASS_A)), claim("claim-1", request(REQ0, CLASS_A, admin=True))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)], [result(REQ0, DRIVER_A, POOL1, DEVICE1, True)]],
    ),
    "all-devices-plus-another": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All")), claim("claim-1", request(REQ0, CLASS_B))],
        CLASSES,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A), one_device("slice-1", NODE1, POOL1, DRIVER_B)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)], [result(REQ0, DRIVER_B, POOL1, DEVICE1)]],
    ),
    "all-devices-plus-another-reversed": (
        [claim("claim-1", request(REQ0, CLASS_B)), claim("claim-0", request(REQ0, CLASS_A, mode="All"))],
        CLASSES,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A), one_device("slice-1", NODE1, POOL1, DRIVER_B)],
        NODE1,
        [],
        [[result(REQ0, DRIVER_B, POOL1, DEVICE1)], [result(REQ0, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "with-constraint": (
        [
            claim(
                "claim-0",
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[
                    {"matchAttribute": f"{DRIVER_A}/{a}"}
                    for a in ("numa", "driverVersion", "stringAttribute", "boolAttribute")
                ],
            )
        ],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, CONSTRAINED, {**CONSTRAINED, "name": DEVICE2})],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE2)]],
    ),
    "with-constraint-non-existent-attribute": (
        [claim("claim-0", request(REQ0, CLASS_A), constraints=[{"matchAttribute": "driver-a/NonExistentAttribute"}])],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        None,
    ),
    "with-constraint-not-matching-int-attribute": (
        [claim("claim-0", request(REQ0, CLASS_A, 2), constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
        CLASSES,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, attrs(numa=1)),
                device(DEVICE2, None, attrs(numa=2)),
            )
        ],
        NODE1,
        [],
        None,
    ),
    "with-constraint-not-matching-int-attribute-all-devices": (
        [claim("claim-0", request(REQ0, CLASS_A, mode="All"), constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}])],
        CLASSES,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, attrs(numa=1)),
                device(DEVICE2, None, attrs(numa=2)),
            )
        ],
        NODE1,
        [],
        "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint "
        "would not be satisfied",
    ),
    "with-constraint-for-request": (
        [
            claim(
                "claim-0",
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[{"requests": [REQ0], "matchAttribute": f"{DRIVER_A}/driverVersion"}],
            )
        ],
        CLASSES,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": version("1.0.0")}),
                device(DEVICE2, None, {"driverVersion": version("2.0.0")}),
            )
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE2)]],
    ),
    "with-constraint-for-request-retry": (
        [
            claim(
                "claim-0",
                request(REQ0, CLASS_A),
                request(REQ1, CLASS_A),
                constraints=[
                    {"requests": [REQ0], "matchAttribute": f"{DRIVER_A}/driverVersion"},
                    {"matchAttribute": f"{DRIVER_A}/stringAttribute"},
                ],
            )
        ],
        CLASSES,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, None, {"driverVersion": version("1.0.0"), **attrs(stringAttribute="a")}),
                device(DEVICE2, None, {"driverVersion": version("2.0.0"), **attrs(stringAttribute="b")}),
                device(DEVICE3, None, {"driverVersion": version("3.0.0"), **attrs(stringAttribute="b")}),
            )
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE2), result(REQ1, DRIVER_A, POOL1, DEVICE3)]],
    ),
    "prioritized-list-first-unavailable": (
        [claim("claim-0", first_available(REQ0, sub("subReq-0", CLASS_B), sub("subReq-1", CLASS_A)))],
        CLASSES,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        [[result("req-0/subReq-1", DRIVER_A, POOL1, DEVICE1)]],
    ),
    "prioritized-list-non-available": (
        [claim("claim-0", first_available(REQ0, sub("subReq-0", CLASS_B, 2), sub("subReq-1", CLASS_A, 2)))],
        CLASSES,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A), one_device("slice-2", NODE1, POOL2, DRIVER_B)],
        NODE1,
        [],
        None,
    ),
    "prioritized-list-with-backtracking": (
        [
            claim(
                "claim-0",
                first_available(
                    REQ0,
                    sub("subReq-0", CLASS_A, 1, memory_at_least("8Gi")),
                    sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi")),
                ),
                request(REQ1, CLASS_A, 1, memory_at_least("8Gi")),
            )
        ],
        ONLY_A,
        [
            slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"})),
            slice_("slice-2", NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"})),
        ],
        NODE1,
        [],
        [[result("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2), result(REQ1, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "prioritized-list-multi-request": (
        [
            claim(
                "claim-0",
                request(REQ1, CLASS_A, 1, memory_at_least("8Gi")),
                first_available(
                    REQ0,
                    sub("subReq-0", CLASS_A, 1, memory_at_least("8Gi")),
                    sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi")),
                ),
            )
        ],
        ONLY_A,
        [
            slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1, {"memory": "8Gi"})),
            slice_("slice-2", NODE1, POOL2, DRIVER_A, device(DEVICE2, {"memory": "4Gi"})),
        ],
        NODE1,
        [],
        [[result(REQ1, DRIVER_A, POOL1, DEVICE1), result("req-0/subReq-1", DRIVER_A, POOL2, DEVICE2)]],
    ),
    "prioritized-list-subrequests-with-constraints-ref-sub-request": (
        [
            claim(
                "claim-0",
                request(REQ0, CLASS_A, 1, memory_at_least("8Gi")),
                first_available(
                    REQ1,
                    sub("subReq-0", CLASS_A, 1, memory_at_least("2Gi")),
                    sub("subReq-1", CLASS_A, 1, memory_at_least("1Gi")),
                ),
                constraints=[{"requests": [REQ0, "req-1/subReq-0"], "matchAttribute": f"{DRIVER_A}/driverVersion"}],
            )
        ],
        ONLY_A,
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEVICE1, {"memory": "8Gi"}, {"driverVersion": version("1.0.0")}),
            ),
            slice_(
                "slice-2",
                NODE1,
                POOL2,
                DRIVER_A,
                device(DEVICE2, {"memory": "2Gi"}, {"driverVersion": version("2.0.0")}),
            ),
        ],
        NODE1,
        [],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result("req-1/subReq-1", DRIVER_A, POOL2, DEVICE2)]],
    ),
    "prioritized-list-subrequests-with-allocation-mode-all": (
        [claim("claim-0", first_available(REQ0, {**sub("subReq-0", CLASS_A), "allocationMode": "All"}))],
        ONLY_A,
        [slice_("slice-1", NODE1, POOL1, DRIVER_A, device(DEVICE1), device(DEVICE2))],
        NODE1,
        [],
        [[result("req-0/subReq-0", DRIVER_A, POOL1, DEVICE1), result("req-0/subReq-0", DRIVER_A, POOL1, DEVICE2)]],
    ),
    # ours: a selector that fails at run time is the scheduler's error, not "does not fit"
    "request-selector-runtime-error": (
        [claim("claim-0", request(REQ0, CLASS_A, 1, cel(f'device.attributes["{DRIVER_A}"].model == "x"')))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "claim claim-0: selector #0: CEL runtime error: no such key: model",
    ),
    "class-selector-compile-error": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        {CLASS_A: {"metadata": {"name": CLASS_A}, "spec": {"selectors": [cel("device.driver ==")]}}},
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        [],
        "class class-a: selector #0: CEL compile error: compilation failed",
    ),
    "runtime-error-on-a-device-in-use-is-not-seen": (
        # the scheduler checks selectors only on devices it could take
        [claim("claim-0", request(REQ0, CLASS_A, 1, cel(f'device.attributes["{DRIVER_A}"].model == "x"')))],
        ONLY_A,
        [one_device("slice-1", NODE1, POOL1, DRIVER_A)],
        NODE1,
        allocated((DRIVER_A, POOL1, DEVICE1)),
        None,
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_allocator_table(name):
    claims, classes, slices, node, already, want = ROWS[name]
    if isinstance(want, str):
        with pytest.raises(dra_allocate.AllocationError) as e:
            dra_allocate.allocate(claims, slices, node, already, classes=classes)
        assert want in str(e.value)
        return
    assert dra_allocate.allocate(claims, slices, node, already, classes=classes) == want


# Rows on counters (partitionable devices) and consumable capacity: the results carry the
# table's fixed share ID.
SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def counted(name: str, memory: str) -> dict:
    return {
        "name": name,
        "consumesCounters": [{"counterSet": "counter-set-1", "counters": {"memory": {"value": memory}}}],
    }


def with_counters(s: dict, memory: str) -> dict:
    s["spec"]["sharedCounters"] = [{"name": "counter-set-1", "counters": {"memory": {"value": memory}}}]
    return s


def shared(name: str, capacity: str, value: str) -> dict:
    policy = {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}}
    return {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": {"stringAttribute": {"string": value}},
        "capacity": {"capacity-0": {"value": capacity, "requestPolicy": policy}},
    }


def share_request(name: str) -> dict:
    r = request(name, CLASS_A)
    r["exactly"]["capacity"] = {"requests": {"capacity-0": "2"}}
    return r


def share(req: str, dev: str) -> dict:
    return {**result(req, DRIVER_A, POOL1, dev), "shareID": SHARE_ID, "consumedCapacity": {"capacity-0": "2"}}


# name: (claims, slices, expected results per claim | None[, claims already allocated])
SHARED_ROWS: dict[str, tuple] = {
    "partitionable-devices-single-device": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        [with_counters(slice_("slice-1", NODE1, POOL1, DRIVER_A, counted(DEVICE1, "4Gi")), "8Gi")],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1)]],
    ),
    "partitionable-devices-multiple-devices": (
        [claim("claim-0", request(REQ0, CLASS_A), request(REQ1, CLASS_A))],
        [
            with_counters(
                slice_(
                    "slice-1",
                    NODE1,
                    POOL1,
                    DRIVER_A,
                    counted(DEVICE1, "4Gi"),
                    counted(DEVICE2, "6Gi"),
                    counted(DEVICE3, "4Gi"),
                ),
                "8Gi",
            )
        ],
        [[result(REQ0, DRIVER_A, POOL1, DEVICE1), result(REQ1, DRIVER_A, POOL1, DEVICE3)]],
    ),
    "partitionable-devices-no-capacity-available": (
        [claim("claim-0", request(REQ0, CLASS_A))],
        [
            with_counters(
                slice_("slice-1", NODE1, POOL1, DRIVER_A, counted(DEVICE1, "4Gi"), counted(DEVICE2, "16Gi")), "18Gi"
            )
        ],
        None,
        allocated((DRIVER_A, POOL1, DEVICE2)),
    ),
    "consumable-capacity-with-multi-allocatable-device-backtrack": (
        [
            claim(
                "claim-0",
                share_request(REQ0),
                share_request(REQ1),
                constraints=[{"matchAttribute": f"{DRIVER_A}/stringAttribute"}],
            ),
            claim("claim-1", share_request(REQ0)),
        ],
        [
            slice_(
                "slice-1",
                NODE1,
                POOL1,
                DRIVER_A,
                shared(DEVICE2, "2", "stringAttributeValue1"),
                shared(DEVICE1, "4", "stringAttributeValue2"),
            )
        ],
        [[share(REQ0, DEVICE1), share(REQ1, DEVICE1)], [share(REQ0, DEVICE2)]],
    ),
}


@pytest.mark.parametrize("name", list(SHARED_ROWS))
def test_allocator_table_counters_and_shares(name):
    claims, slices, want, *already = SHARED_ROWS[name]
    before = already[0] if already else []
    got = dra_allocate.allocate(claims, slices, NODE1, before, new_id=lambda: SHARE_ID, classes=ONLY_A)
    assert got == want
