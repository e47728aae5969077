"""What NVIDIA's GPU DRA driver publishes and what Kubernetes makes of it: a pure port of
the rules for counting NVIDIA GPUs published through
Kubernetes Dynamic Resource Allocation (resource.k8s.io/v1).

No Django; objects are plain dicts as decoded from the API JSON
(camelCase keys), e.g. ``json.loads(kubectl get resourceslice -o json)["items"]``.

Upstream sources (see NOTES.md for commits / versions):

* kubernetes-sigs/dra-driver-nvidia-gpu  cmd/gpu-kubelet-plugin/{deviceinfo,mig,
  partitions,consumable_shares,driver,nvlib}.go, pkg/featuregates/featuregates.go
* kubernetes/kubernetes v1.38.0-beta.0  pkg/quota/v1/evaluator/core/resource_claims.go
  (+ the extended-resource part of pods.go)
* k8s.io/dynamic-resource-allocation v0.38.0-beta.0
  structured/internal/stable/pools_stable.go (GatherPools)
* kubernetes/kubernetes v1.36.3 vs v1.38.0-beta.0
  pkg/controller/resourcepoolstatusrequest/{controller,views}.go (KEP-5677, PR #140170)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

from .vocabulary import parse_quantity as vocab_parse_quantity

JSON = dict[str, Any]

# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------

DRIVER_NAME = "gpu.nvidia.com"  # cmd/gpu-kubelet-plugin/main.go
COMPUTE_DOMAIN_DRIVER_NAME = "compute-domain.nvidia.com"
DEVICE_CLASS_GPU = "gpu.nvidia.com"  # type == 'gpu'; extendedResourceName nvidia.com/gpu
DEVICE_CLASS_MIG = "mig.nvidia.com"  # type == 'mig' (static AND dynamic MIG)
DEVICE_CLASS_VFIO = "vfio.gpu.nvidia.com"  # type == 'vfio'
DEVICE_CLASS_BY_TYPE = {"gpu": DEVICE_CLASS_GPU, "mig": DEVICE_CLASS_MIG, "vfio": DEVICE_CLASS_VFIO}
GPU_EXTENDED_RESOURCE_NAME = "nvidia.com/gpu"

# k8s.io/api/resource/v1 + core/v1 constants
ALLOCATION_RESULTS_MAX_SIZE = 32
RESOURCE_CLAIMS_PER_CLASS = ".deviceclass.resource.k8s.io/devices"
RESOURCE_DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
DEFAULT_RESOURCE_REQUESTS_PREFIX = "requests."
RESOURCE_IMPLICIT_EXTENDED_CLAIMS_PER_CLASS = DEFAULT_RESOURCE_REQUESTS_PREFIX + RESOURCE_DEVICE_CLASS_PREFIX
CLAIM_OBJECT_COUNT_NAME = "count/resourceclaims.resource.k8s.io"
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

MIG_DEVICE_NAME_RE = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)-(\d+)$")  # mig.go canonicalMigNameRegex


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def parse_quantity(value: object) -> Decimal:
    """A resource.Quantity ("80Gi", "4", "1e3", 7) exactly, through the product's port of
    apimachinery's parser (brickadmin/cluster/vocabulary)."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")  # noqa: TRY004  (bad input, as junk)
    if isinstance(value, int):
        return Decimal(value)
    return vocab_parse_quantity(str(value).strip())


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        # decoded JSON is dicts: the exact type check is what keeps 150,000 claims cheap
        if type(cur) is not dict and not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _list(obj: Any) -> list[Any]:
    return list(obj) if isinstance(obj, list) else []


def _truthy(value: Any) -> bool:
    return value is True


def attribute_value(device: Mapping[str, Any], name: str, driver: str = DRIVER_NAME) -> Any:
    """Value of a device attribute ({"string": ...}/{"int": ...}/...).

    Attribute keys in the driver's own domain are stored bare (``uuid``) but may
    also be written fully qualified (``gpu.nvidia.com/uuid``); both are accepted,
    the explicit form wins (same rule as views.go resolvePartitionType)."""
    attrs = device.get("attributes") or {}
    attr = attrs.get(name)
    if attr is None and "/" not in name:
        attr = attrs.get(f"{driver}/{name}")
    if attr is None and name.startswith(driver + "/"):
        attr = attrs.get(name[len(driver) + 1 :])
    if not isinstance(attr, Mapping):
        return None
    for key in ("string", "int", "bool", "version", "strings", "ints", "bools", "versions"):
        if key in attr:
            return attr[key]
    return None


def device_type(device: Mapping[str, Any]) -> str | None:
    v = attribute_value(device, "type")
    return v if isinstance(v, str) else None


def mig_device_name(parent_minor: int, profile: str, profile_id: int, placement_start: int) -> str:
    """mig.go MigSpecTuple.ToCanonicalName: gpu-<minor>-mig-<profile w/o dots>-<giProfileID>-<start>."""
    pname = profile.replace(".", "").lower()
    pname = re.sub(r"[^a-z0-9-.]", "-", pname).strip("-")
    return f"gpu-{parent_minor}-mig-{pname}-{profile_id}-{placement_start}"


def _upper(c: str) -> bool:
    return "A" <= c <= "Z" if c else False


def _lower_or_digit(c: str) -> bool:
    return ("a" <= c <= "z" or "0" <= c <= "9") if c else False


def camel_to_dns_name(s: str) -> str:
    """partitions.go/mig.go camelToDNSName: capacity name -> counter name (copyEngines -> copy-engines)."""
    # its two regular expressions, ([a-z0-9])([A-Z]) and ([A-Z]+)([A-Z][a-z]), as one pass:
    # a dash before a capital that follows a small letter or digit, or that ends a run of
    # capitals before a small letter (no backtracking on a long run of capitals)
    out = []
    for i, c in enumerate(s):
        prev, nxt = s[i - 1 : i], s[i + 1 : i + 2]
        if _upper(c) and (_lower_or_digit(prev) or (_upper(prev) and nxt.isascii() and nxt.islower())):
            out.append("-")
        out.append(c)
    s = re.sub(r"[^a-z0-9-.]", "-", "".join(out).lower()).strip("-")
    return s[:-1] if s.endswith(".") else s


# --------------------------------------------------------------------------
# Driver feature gates (pkg/featuregates/featuregates.go)
# --------------------------------------------------------------------------

DRIVER_FEATURE_GATE_DEFAULTS: dict[str, bool] = {
    "TimeSlicingSettings": False,  # alpha 0.2
    "MPSSupport": False,  # alpha 0.2
    "IMEXDaemonsWithDNSNames": True,  # beta 0.2
    "PassthroughSupport": False,  # alpha 0.3
    "DynamicMIG": False,  # alpha 0.3
    "NVMLDeviceHealthCheck": False,  # alpha 0.3
    "ComputeDomainCliques": True,  # beta 0.3
    "CrashOnNVLinkFabricErrors": True,  # beta 0.3
    "DeviceMetadata": False,  # alpha 0.4
    "DRAListTypeAttributes": False,  # alpha 0.4
    "FabricManagerPartitioning": False,  # alpha 0.5
    "HostManagedIMEXDaemon": False,  # alpha 0.5
    "ConsumableShares": False,  # alpha 0.5
}

MUTUALLY_EXCLUSIVE_GATES: tuple[tuple[str, str], ...] = (
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)
GATE_REQUIRES: tuple[tuple[str, str], ...] = (
    ("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"),
    ("DeviceMetadata", "PassthroughSupport"),
)


def validate_driver_feature_gates(overrides: Mapping[str, bool]) -> str | None:
    """Port of ValidateFeatureGates(): returns the first error message or None.

    Note: the docs table also lists MPSSupport + NVMLDeviceHealthCheck as exclusive,
    but the code does not check that pair (nor ConsumableShares + MPS, which is
    rejected later, per claim, in device_state.go)."""
    gates = dict(DRIVER_FEATURE_GATE_DEFAULTS)
    gates.update(overrides)
    # Order exactly as in featuregates.go.
    if gates["ComputeDomainCliques"] and not gates["IMEXDaemonsWithDNSNames"]:
        return "feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also be enabled"
    for a, b in MUTUALLY_EXCLUSIVE_GATES:
        if gates[a] and gates[b]:
            return f"feature gate {a} is currently mutually exclusive with {b}"
    if gates["DeviceMetadata"] and not gates["PassthroughSupport"]:
        return "feature gate DeviceMetadata requires PassthroughSupport to also be enabled"
    return None


# --------------------------------------------------------------------------
# Node selection (pools_stable.go NodeMatches; nodeaffinity semantics)
# --------------------------------------------------------------------------


def _match_requirement(req: Mapping[str, Any], values_by_key: Mapping[str, str]) -> bool:
    key = req.get("key", "")
    op = req.get("operator", "")
    vals = [str(v) for v in _list(req.get("values"))]
    present = key in values_by_key
    val = values_by_key.get(key)
    if op == "In":
        return present and val in vals
    if op == "NotIn":
        return not present or val not in vals
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(vals) != 1:
            return False
        try:
            lhs, rhs = int(str(val)), int(vals[0])
        except ValueError:
            return False
        return lhs > rhs if op == "Gt" else lhs < rhs
    return False


def node_selector_matches(selector: Mapping[str, Any], node: Mapping[str, Any] | None) -> bool:
    """NodeSelector: terms are ORed, requirements within a term ANDed; an empty term matches nothing."""
    if node is None:
        return False
    labels = {str(k): str(v) for k, v in (_get(node, "metadata", "labels") or {}).items()}
    fields = {"metadata.name": str(_get(node, "metadata", "name") or "")}
    for term in _list(selector.get("nodeSelectorTerms")):
        exprs = _list(term.get("matchExpressions"))
        flds = _list(term.get("matchFields"))
        if not exprs and not flds:
            continue
        if all(_match_requirement(r, labels) for r in exprs) and all(_match_requirement(r, fields) for r in flds):
            return True
    return False


def node_matches(
    node: Mapping[str, Any] | None, node_name: str, all_nodes: bool, node_selector: Mapping[str, Any] | None
) -> bool:
    if node_name:
        return node is not None and _get(node, "metadata", "name") == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        return node_selector_matches(node_selector, node)
    return False


# --------------------------------------------------------------------------
# Pools (scheduler view: GatherPools) and cluster view (KEP-5677 controller)
# --------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PoolID:
    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


@dataclass
class Pool:
    """One resource pool as the scheduler's allocator sees it for one node."""

    id: PoolID
    generation: int = 0
    resource_slice_count: int = 0
    is_incomplete: bool = False
    is_invalid: bool = False
    invalid_reason: str = ""
    device_slices_targeting_node: list[JSON] = field(default_factory=list)
    device_slices_not_targeting_node: list[JSON] = field(default_factory=list)
    counter_sets: dict[str, JSON] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        return not self.is_incomplete and not self.is_invalid

    def devices_targeting_node(self) -> list[str]:
        return [d["name"] for s in self.device_slices_targeting_node for d in _list(_get(s, "spec", "devices"))]


def _spec(slice_: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = slice_.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _pool_id(slice_: Mapping[str, Any]) -> PoolID:
    spec = _spec(slice_)
    return PoolID(str(spec.get("driver", "")), str(_get(spec, "pool", "name") or ""))


def _generation(slice_: Mapping[str, Any]) -> int:
    return int(_get(_spec(slice_), "pool", "generation") or 0)


def _slice_count(slice_: Mapping[str, Any]) -> int:
    return int(_get(_spec(slice_), "pool", "resourceSliceCount") or 0)


def _has_shared_counters(slice_: Mapping[str, Any]) -> bool:
    return len(_list(_spec(slice_).get("sharedCounters"))) > 0


def gather_pools(
    slices_for_node: Sequence[JSON],
    node: JSON | None,
    *,
    all_slices: Sequence[JSON] | None = None,
    partitionable_devices: bool = True,
) -> list[Pool]:
    """Port of GatherPools (structured/internal/stable/pools_stable.go).

    * Only slices relevant for the node are considered (nodeName / allNodes /
      nodeSelector / perDeviceNodeSelection).
    * Per pool only the highest generation seen *among those* is kept.
    * Complete iff the number of kept slices == pool.resourceSliceCount; if not,
      all slices of the pool are re-checked: a higher generation anywhere makes
      the pool obsolete (dropped), otherwise completeness uses that count.
    * Complete pools are validated: duplicate device names, duplicate counter-set
      names, consumesCounters referencing unknown sets/counters -> invalid.
    * Without DRAPartitionableDevices, slices with sharedCounters or
      perDeviceNodeSelection are ignored.
    """
    if all_slices is None:
        all_slices = slices_for_node
    pools: dict[PoolID, list[JSON]] = {}
    for s in slices_for_node:
        spec = _spec(s)
        if not partitionable_devices and (spec.get("perDeviceNodeSelection") is not None or _has_shared_counters(s)):
            continue
        node_name = str(spec.get("nodeName") or "")
        all_nodes = _truthy(spec.get("allNodes"))
        selector = spec.get("nodeSelector")
        if node_name or all_nodes or selector is not None:
            relevant = node_matches(node, node_name, all_nodes, selector)
        elif _truthy(spec.get("perDeviceNodeSelection")):
            relevant = any(
                node_matches(node, str(d.get("nodeName") or ""), _truthy(d.get("allNodes")), d.get("nodeSelector"))
                for d in _list(spec.get("devices"))
            )
        else:
            continue  # unknown future node selection
        if relevant:
            _add_slice(pools, s)

    result: list[Pool] = []
    for pid, slices in pools.items():
        gen, count = _generation(slices[0]), _slice_count(slices[0])
        if len(slices) == count:
            result.append(_build_pool(pid, slices, partitionable_devices, None))
            continue
        obsolete, all_for_pool = _check_slices_in_pool(all_slices, pid, gen)
        if obsolete:
            continue
        if len(all_for_pool) != count:
            result.append(Pool(id=pid, generation=gen, resource_slice_count=count, is_incomplete=True))
            continue
        result.append(_build_pool(pid, slices, partitionable_devices, all_for_pool))
    result.sort(key=lambda p: (p.id.driver, p.id.pool))
    return result


def _add_slice(pools: dict[PoolID, list[JSON]], s: JSON) -> None:
    pid = _pool_id(s)
    cur = pools.get(pid)
    if cur is None or _generation(s) > _generation(cur[0]):
        pools[pid] = [s]
    elif _generation(s) == _generation(cur[0]):
        cur.append(s)
    # else: out-dated, ignored


def _check_slices_in_pool(slices: Sequence[JSON], pid: PoolID, generation: int) -> tuple[bool, list[JSON]]:
    out: list[JSON] = []
    for s in slices:
        if _pool_id(s) != pid:
            continue
        g = _generation(s)
        if g == generation:
            out.append(s)
        elif g > generation:
            return True, []
    return False, out


def _build_pool(pid: PoolID, slices: list[JSON], partitionable: bool, all_for_pool: list[JSON] | None) -> Pool:
    slices = sorted(slices, key=lambda s: str(_get(s, "metadata", "name") or ""))
    pool = Pool(id=pid, generation=_generation(slices[0]), resource_slice_count=_slice_count(slices[0]))
    device_slices: list[JSON] = []
    counter_slices: list[JSON] = []
    not_targeting: list[JSON] = []
    for s in slices:
        (counter_slices if partitionable and _has_shared_counters(s) else device_slices).append(s)
    if all_for_pool is not None and len(slices) < len(all_for_pool):
        names = {_get(s, "metadata", "name") for s in slices}
        for s in all_for_pool:
            if _get(s, "metadata", "name") in names:
                continue
            (counter_slices if partitionable and _has_shared_counters(s) else not_targeting).append(s)

    def invalid(reason: str) -> Pool:
        pool.is_invalid, pool.invalid_reason = True, reason
        pool.device_slices_targeting_node = []
        return pool

    seen: set[str] = set()
    for s in device_slices:
        for d in _list(_spec(s).get("devices")):
            if d.get("name") in seen:
                return invalid(f"duplicate device name {d.get('name')}")
            seen.add(str(d.get("name")))
    pool.device_slices_targeting_node = device_slices
    if not partitionable:
        return pool
    counter_sets: dict[str, JSON] = {}
    for s in counter_slices:
        for cs in _list(_spec(s).get("sharedCounters")):
            if cs.get("name") in counter_sets:
                return invalid(f"duplicate counter set name {cs.get('name')}")
            counter_sets[str(cs.get("name"))] = cs
    for group in (device_slices, not_targeting):
        for s in group:
            for d in _list(_spec(s).get("devices")):
                for cc in _list(d.get("consumesCounters")):
                    cs = counter_sets.get(str(cc.get("counterSet")))
                    if cs is None:
                        return invalid(f"counter set {cc.get('counterSet')} not found")
                    for cname in cc.get("counters") or {}:
                        if cname not in (cs.get("counters") or {}):
                            return invalid(f"counter {cname} not found in counter set {cs.get('name')}")
    pool.device_slices_not_targeting_node = not_targeting
    pool.counter_sets = counter_sets
    return pool


@dataclass
class ClusterPool:
    """A pool as the KEP-5677 ResourcePoolStatusRequest controller sees it (all nodes)."""

    id: PoolID
    generation: int
    expected_slice_count: int
    slices: list[JSON]
    node_name: str | None

    @property
    def complete(self) -> bool:
        # controller.go: incomplete iff observed < expected (more slices than
        # declared still counts as complete; the scheduler requires ==).
        return len(self.slices) >= self.expected_slice_count

    @property
    def devices(self) -> list[JSON]:
        return [d for s in self.slices for d in _list(_spec(s).get("devices"))]

    @property
    def shared_counters(self) -> list[JSON]:
        return [cs for s in self.slices for cs in _list(_spec(s).get("sharedCounters"))]


def pools_from_slices(slices: Iterable[JSON], driver: str | None = None) -> dict[PoolID, ClusterPool]:
    """Group slices into pools: keep only the max generation per pool; node name
    only when all kept slices agree on it."""
    by_pool: dict[PoolID, list[JSON]] = {}
    for s in slices:
        pid = _pool_id(s)
        if driver is not None and pid.driver != driver:
            continue
        by_pool.setdefault(pid, []).append(s)
    out: dict[PoolID, ClusterPool] = {}
    for pid, group in by_pool.items():
        gen = max(_generation(s) for s in group)
        kept = sorted((s for s in group if _generation(s) == gen), key=lambda s: str(_get(s, "metadata", "name") or ""))
        nodes = {str(_spec(s).get("nodeName") or "") for s in kept}
        node = nodes.pop() if len(nodes) == 1 else ""
        out[pid] = ClusterPool(pid, gen, _slice_count(kept[0]), kept, node or None)
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------
# Claims -> used devices
# --------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class DeviceID:
    driver: str
    pool: str
    device: str


@dataclass
class DeviceUse:
    device: DeviceID
    claims: list[str] = field(default_factory=list)  # "ns/name", each claim once
    pods: list[str] = field(default_factory=list)  # "ns/name" from status.reservedFor
    consumed_capacity: dict[str, Decimal] = field(default_factory=dict)
    admin_claims: list[str] = field(default_factory=list)  # adminAccess: observers, not use


def _claim_key(claim: Mapping[str, Any]) -> str:
    return f"{_get(claim, 'metadata', 'namespace') or ''}/{_get(claim, 'metadata', 'name') or ''}"


def claim_pods(claim: Mapping[str, Any]) -> list[str]:
    ns = _get(claim, "metadata", "namespace") or ""
    return sorted(
        {
            f"{ns}/{r.get('name')}"
            for r in _list(_get(claim, "status", "reservedFor"))
            if r.get("resource") == "pods" and not r.get("apiGroup")
        }
    )


def used_devices(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceID, DeviceUse]:
    """Devices in use from status.allocation.devices.results.

    A result with adminAccess: true is not use. A claim shared by several pods is
    one use of each of its devices (its pods come from status.reservedFor). Several
    claims on one device (allowMultipleAllocations) are listed, the device once."""
    out: dict[DeviceID, DeviceUse] = {}
    for claim in claims:
        results = _list(_get(claim, "status", "allocation", "devices", "results"))
        key = _claim_key(claim)
        pods = claim_pods(claim)
        for r in results:
            did = DeviceID(str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
            use = out.setdefault(did, DeviceUse(did))
            if _truthy(r.get("adminAccess")):
                if key not in use.admin_claims:
                    use.admin_claims.append(key)
                continue
            if key not in use.claims:
                use.claims.append(key)
            for p in pods:
                if p not in use.pods:
                    use.pods.append(p)
            for cname, q in (r.get("consumedCapacity") or {}).items():
                use.consumed_capacity[cname] = use.consumed_capacity.get(cname, Decimal(0)) + parse_quantity(q)
    return {k: v for k, v in out.items() if v.claims}


# --------------------------------------------------------------------------
# Physical GPUs and logical capacity
# --------------------------------------------------------------------------


PCI_BUS_ID = "resource.kubernetes.io/pciBusID"


def gpus_by_pci_bus(devices: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """PCI bus ID -> uuid of the whole-GPU devices among ``devices`` (one pool's)."""
    out: dict[str, str] = {}
    for d in devices:
        if device_type(d) == "gpu":
            bus, u = attribute_value(d, PCI_BUS_ID), attribute_value(d, "uuid")
            if bus and u:
                out[str(bus)] = str(u)
    return out


def physical_key(device: Mapping[str, Any], gpu_at_bus: Mapping[str, str] | None = None) -> str | None:
    """Identity of the physical GPU behind a published device.

    Counter-consuming devices (dynamic MIG, KEP-4815) -> their counter set (one per
    GPU: gpu-<minor>-counter-set); whole GPU -> uuid; MIG -> parentUUID; VFIO -> the uuid of
    the whole-GPU device at its PCI bus ID (``gpu_at_bus``, its pool's ``gpus_by_pci_bus``),
    else its own. NVIDIA's driver (PassthroughSupport) publishes gpu-vfio-N beside gpu-N with a
    uuid of its own, made from the PCI address (nvlib.go getVfioDeviceInfo): one GPU, given one
    way at a time (allocatable.go RemoveSiblingDevices withdraws the other)."""
    ccs = _list(device.get("consumesCounters"))
    if ccs:
        return "counterset:" + str(ccs[0].get("counterSet"))
    t = device_type(device)
    if t == "vfio" and gpu_at_bus:
        sibling = gpu_at_bus.get(str(attribute_value(device, PCI_BUS_ID) or ""))
        if sibling:
            return sibling
    if t in ("gpu", "vfio"):
        u = attribute_value(device, "uuid")
        return str(u) if u else None
    if t == "mig":
        u = attribute_value(device, "parentUUID")
        return str(u) if u else None
    return None


def dynamic_mig_pool(pool: ClusterPool) -> bool:
    return bool(pool.shared_counters)


def physical_gpus_by_node(
    slices: Iterable[JSON], driver: str = DRIVER_NAME, include_incomplete: bool = False
) -> dict[str, int]:
    """Per node: number of physical GPUs.

    distinct uuid of whole GPUs (a VFIO device: its GPU's) plus distinct parentUUID of MIG
    devices -- a GPU advertised beside its own MIG devices (dra-driver-nvidia-gpu#719) is counted
    once. A pool that publishes sharedCounters (DynamicMIG) is counted by counter
    sets, not devices. Incomplete pools are skipped unless include_incomplete."""
    out: dict[str, set[str]] = {}
    for pool in pools_from_slices(slices, driver).values():
        if not pool.complete and not include_incomplete:
            continue
        node = pool.node_name or ""
        keys = out.setdefault(node, set())
        at_bus = gpus_by_pci_bus(pool.devices)
        if dynamic_mig_pool(pool):
            keys.update("counterset:" + str(cs.get("name")) for cs in pool.shared_counters)
            # GPUs of the pool that are not MIG-capable publish no counter set.
            for d in pool.devices:
                if not _list(d.get("consumesCounters")):
                    k = physical_key(d, at_bus)
                    if k:
                        keys.add(k)
            continue
        for d in pool.devices:
            k = physical_key(d, at_bus)
            if k:
                keys.add(k)
    return {n: len(k) for n, k in sorted(out.items())}


@dataclass
class GpuCapacity:
    node: str
    pool: PoolID
    gpu: str  # uuid, or "counterset:<name>" under dynamic MIG
    mode: str  # "whole" | "static-mig" | "dynamic-mig" | "shared" | "vfio"
    units: int | None  # logical allocations; None = unlimited
    devices: list[str] = field(default_factory=list)
    by_profile: dict[str, int] = field(default_factory=dict)  # dynamic MIG: allocatable now
    totals_by_profile: dict[str, int] = field(default_factory=dict)


def consumed_by_request(capacity: Mapping[str, Any], requested: Any = None) -> Decimal:
    """What one allocation consumes of one capacity of a device that allows multiple allocations
    (the scheduler's calculateConsumedCapacity, KEP-5075): the amount requested, rounded up as the
    capacity's requestPolicy says; nothing requested: the policy's default, and with no policy the
    whole value (fillEmptyRequest)."""
    policy = capacity.get("requestPolicy")
    policy = policy if isinstance(policy, Mapping) else None
    if requested is None:
        if policy is not None and policy.get("default") is not None:
            return parse_quantity(policy["default"])
        return parse_quantity(capacity.get("value", 0))
    want = parse_quantity(requested)
    if policy is None:
        return want
    valid_range = policy.get("validRange")
    if isinstance(valid_range, Mapping) and valid_range.get("min") is not None:
        low = parse_quantity(valid_range["min"])
        if want < low:
            return low
        if valid_range.get("step") is None:
            return want
        step = parse_quantity(valid_range["step"])
        return low + step * ((want - low) / step).to_integral_value(rounding=ROUND_CEILING)  # next step up
    if policy.get("validValues") is not None:
        return next((q for q in map(parse_quantity, policy["validValues"]) if want <= q), want)
    return want


def violates_policy(consumed: Decimal, policy: Any) -> bool:
    """Whether an amount is outside a capacity's requestPolicy (the scheduler's violatesPolicy):
    the device then cannot be allocated to that request."""
    if not isinstance(policy, Mapping):
        return False
    if policy.get("default") is not None and consumed == parse_quantity(policy["default"]):
        return False
    valid_range = policy.get("validRange")
    if isinstance(valid_range, Mapping):
        if valid_range.get("max") is not None and consumed > parse_quantity(valid_range["max"]):
            return True
        if valid_range.get("step") is not None:
            low = parse_quantity(valid_range.get("min") or 0)
            return (consumed - low) % parse_quantity(valid_range["step"]) != 0
        return False
    if policy.get("validValues"):
        return consumed not in {parse_quantity(v) for v in policy["validValues"]}
    return False


def consumed_capacity(device: Mapping[str, Any], requests: Mapping[str, Any]) -> dict[str, Decimal] | None:
    """What an allocation of a device that allows multiple allocations consumes of each of its
    capacities, for a request's capacity requests (the scheduler's CmpRequestOverCapacity and
    GetConsumedCapacityFromRequest); None when the request cannot have the device (it asks a
    capacity the device lacks, or an amount outside a policy)."""
    capacities = device.get("capacity") or {}
    if any(name not in capacities for name in requests):
        return None
    out: dict[str, Decimal] = {}
    for name, cap in capacities.items():
        cap = cap if isinstance(cap, Mapping) else {}
        amount = consumed_by_request(cap, requests.get(name))
        if violates_policy(amount, cap.get("requestPolicy")):
            return None
        out[name] = amount
    return out


def shares_units(device: Mapping[str, Any]) -> int | None:
    """Logical allocations of an allowMultipleAllocations device (KEP-5075): claims that ask no
    capacity, each consuming of every capacity what ``consumed_by_request`` says (its policy's
    default, or with no policy the whole value), floor(value / that) each; the tightest wins.
    Nothing consumed of any capacity -> unlimited (None). Driver modes (consumable_shares.go
    gives a policy to memory and shares only):
    --consumable-shares=N  -> shares: value N, default 1 -> N
    --consumable-shares=unlimited -> memory default 0 -> None
    --consumable-shares=memory -> memory default = full memory -> 1
    a static MIG device under any of them -> 1: its multiprocessors, engines and memory slices have
    no policy, so each claim takes them whole."""
    best: int | None = None
    for cap in (device.get("capacity") or {}).values():
        if not isinstance(cap, Mapping):
            continue
        each = consumed_by_request(cap)
        if each <= 0:
            continue
        n = int(parse_quantity(cap.get("value", 0)) // each)
        best = n if best is None else min(best, n)
    return best


def device_is_shared(device: Mapping[str, Any]) -> bool:
    return _truthy(device.get("allowMultipleAllocations"))


def partition_type(device: Mapping[str, Any]) -> str:
    """Grouping for dynamic MIG devices: the MIG profile, or "gpu" for the full GPU."""
    prof = attribute_value(device, "profile")
    if isinstance(prof, str) and prof:
        return prof
    return device_type(device) or "unknown"


Counters = dict[str, dict[str, Decimal]]


def _counters_from_sets(sets: Iterable[Mapping[str, Any]]) -> Counters:
    out: Counters = {}
    for cs in sets:
        m = out.setdefault(str(cs.get("name")), {})
        for name, c in (cs.get("counters") or {}).items():
            m[name] = parse_quantity(_get(c, "value"))
    return out


def _fits(cost: Sequence[Mapping[str, Any]], avail: Counters) -> bool:
    for cc in cost:
        s = avail.get(str(cc.get("counterSet")), {})
        for name, c in (cc.get("counters") or {}).items():
            if name not in s or s[name] < parse_quantity(_get(c, "value")):
                return False
    return True


def _deduct(cost: Sequence[Mapping[str, Any]], avail: Counters) -> None:
    for cc in cost:
        s = avail.get(str(cc.get("counterSet")))
        if s is None:
            continue
        for name, c in (cc.get("counters") or {}).items():
            if name in s:
                s[name] -= parse_quantity(_get(c, "value"))


def _cost_key(cost: Sequence[Mapping[str, Any]]) -> str:
    parts = [
        f"{cc.get('counterSet')}/{n}={parse_quantity(_get(c, 'value'))}"
        for cc in cost
        for n, c in (cc.get("counters") or {}).items()
    ]
    return ",".join(sorted(parts))


class PartitionSummaryError(ValueError):
    pass


@dataclass
class PartitionTypeStatus:
    type: str
    total: int
    allocatable: int


def partition_summary(
    devices: Sequence[Mapping[str, Any]],
    shared_counters: Sequence[Mapping[str, Any]],
    in_use: Iterable[str],
    type_of: Any = None,
    strict_cost: bool = True,
) -> list[PartitionTypeStatus]:
    """Port of views.go computePartitionSummary (KEP-5677 second alpha, PR #140170).

    Counter-consuming devices are grouped by partition type; per type
    allocatable = greedy count of unused devices of that type that fit into
    (shared counters - consumption of in-use devices). Each type is measured
    independently against the same baseline. Devices of one type must have the
    same counter cost (strict_cost; NB the NVIDIA driver's dynamic MIG devices
    of one profile differ in their memory-slice-N counters, so grouping them by
    ``profile`` fails this upstream check -- logical_capacity passes
    strict_cost=False). ``type_of(device) -> str | None`` defaults to
    partition_type(); None = device lacks the attribute (error)."""
    used = set(in_use)
    tf = type_of if type_of is not None else partition_type
    groups: dict[str, tuple[int, list[Mapping[str, Any]], str]] = {}
    for d in devices:
        cost = _list(d.get("consumesCounters"))
        if not cost:
            continue
        t = tf(d)
        if t is None:
            raise PartitionSummaryError(f"PartitionTypeMissing: device {d.get('name')!r} has no partition type")
        key = _cost_key(cost)
        total, fresh, ck = groups.get(t, (0, [], key))
        if strict_cost and total and key != ck:
            raise PartitionSummaryError(
                f"PartitionCostMismatch: devices of partition type {t!r} consume different counters"
            )
        if d.get("name") not in used:
            fresh = fresh + [d]
        groups[t] = (total + 1, fresh, ck)
    baseline = _counters_from_sets(shared_counters)
    for d in devices:
        if d.get("name") in used:
            _deduct(_list(d.get("consumesCounters")), baseline)
    out: list[PartitionTypeStatus] = []
    for t, (total, fresh, _) in sorted(groups.items()):
        avail = {k: dict(v) for k, v in baseline.items()}
        n = 0
        for d in fresh:
            cost = _list(d.get("consumesCounters"))
            if _fits(cost, avail):
                n += 1
                _deduct(cost, avail)
        out.append(PartitionTypeStatus(t, total, n))
    return out


def logical_capacity(
    slices: Iterable[JSON],
    claims: Iterable[Mapping[str, Any]] = (),
    driver: str = DRIVER_NAME,
    uses: Mapping[DeviceID, DeviceUse] | None = None,
) -> list[GpuCapacity]:
    """Logical capacity per physical GPU (complete pools only).

    whole GPU -> 1; static MIG -> 1 per MIG device (a whole GPU published beside
    its MIG devices is ignored, dra-driver-nvidia-gpu#719); dynamic MIG -> profiles allocatable
    *now* from the counters (by_profile), units = the partitions claims hold plus the largest of
    those counts (a claim's partition is not free, and is not taken off twice);
    consumable shares -> shares_units() (None = unlimited); VFIO -> 1."""
    used_in_pool: dict[tuple[str, str], set[str]] = {}
    for i in used_devices(claims) if uses is None else uses:
        used_in_pool.setdefault((i.driver, i.pool), set()).add(i.device)
    out: list[GpuCapacity] = []
    for pool in pools_from_slices(slices, driver).values():
        if not pool.complete:
            continue
        node = pool.node_name or ""
        groups: dict[str, list[JSON]] = {}
        at_bus = gpus_by_pci_bus(pool.devices)
        for d in pool.devices:
            k = physical_key(d, at_bus)
            if k is not None:
                groups.setdefault(k, []).append(d)
        used_names = used_in_pool.get((pool.id.driver, pool.id.pool), set())
        for gpu, devs in sorted(groups.items()):
            names = [str(d.get("name")) for d in devs]
            if gpu.startswith("counterset:"):
                set_name = gpu.split(":", 1)[1]
                sets = [cs for cs in pool.shared_counters if cs.get("name") == set_name]
                summary = partition_summary(devs, sets, used_names, strict_cost=False)
                by = {p.type: p.allocatable for p in summary}
                # what claims hold besides what fits now: what fits now is already net of them,
                # and the pages take the held from the units (free = units - used)
                held = sum(1 for n in names if n in used_names)
                out.append(
                    GpuCapacity(
                        node,
                        pool.id,
                        gpu,
                        "dynamic-mig",
                        held + max(by.values(), default=0),
                        names,
                        by,
                        {p.type: p.total for p in summary},
                    )
                )
                continue
            migs = [d for d in devs if device_type(d) == "mig"]
            if migs:
                if any(device_is_shared(d) for d in migs):
                    units: int | None = 0
                    for d in migs:
                        u = shares_units(d) if device_is_shared(d) else 1
                        units = None if (u is None or units is None) else units + u
                    out.append(GpuCapacity(node, pool.id, gpu, "shared", units, [str(d["name"]) for d in migs]))
                else:
                    out.append(GpuCapacity(node, pool.id, gpu, "static-mig", len(migs), [str(d["name"]) for d in migs]))
                continue
            whole = [d for d in devs if device_type(d) == "gpu"]
            if whole and device_is_shared(whole[0]):
                out.append(GpuCapacity(node, pool.id, gpu, "shared", shares_units(whole[0]), names))
            elif whole:
                out.append(GpuCapacity(node, pool.id, gpu, "whole", 1, names))
            else:
                out.append(GpuCapacity(node, pool.id, gpu, "vfio", 1, names))
    return out


# --------------------------------------------------------------------------
# KEP-5677 pool status counts (controller.go, before/after PR #140170)
# --------------------------------------------------------------------------


@dataclass
class PoolStatusCounts:
    id: PoolID
    generation: int
    node_name: str | None
    validation_error: str | None = None
    resource_slice_count: int | None = None
    total_devices: int | None = None
    allocated_devices: int | None = None
    available_devices: int | None = None
    unavailable_devices: int | None = None


def _taint_blocks(effect: Any) -> bool:
    return effect in ("NoSchedule", "NoExecute")


def device_unavailable(
    driver: str, pool: str, device: Mapping[str, Any], taint_rules: Sequence[Mapping[str, Any]] = ()
) -> bool:
    """controller.go deviceUnavailable: NoSchedule/NoExecute device taint, or a
    DeviceTaintRule with such an effect whose selector (driver/pool/device, all
    optional; nil selector matches nothing) selects the device. Effect None never counts."""
    if any(_taint_blocks(t.get("effect")) for t in _list(device.get("taints"))):
        return True
    for rule in taint_rules:
        if not _taint_blocks(_get(rule, "spec", "taint", "effect")):
            continue
        sel = _get(rule, "spec", "deviceSelector")
        if not isinstance(sel, Mapping):
            continue
        if sel.get("driver") is not None and sel["driver"] != driver:
            continue
        if sel.get("pool") is not None and sel["pool"] != pool:
            continue
        if sel.get("device") is not None and sel["device"] != device.get("name"):
            continue
        return True
    return False


def pool_status(
    slices: Iterable[JSON],
    claims: Iterable[Mapping[str, Any]],
    driver: str,
    taint_rules: Sequence[Mapping[str, Any]] = (),
    legacy_v136: bool = False,
) -> list[PoolStatusCounts]:
    """KEP-5677 calculatePoolStatus basic counts.

    legacy_v136=True reproduces the 1.36 alpha: allocatedDevices += 1 per
    allocation result (shared devices counted once per claim, adminAccess
    counted), unavailableDevices always 0. Default = fixed rule (PR #140170, in
    v1.37+): distinct devices per pool, adminAccess skipped, unavailable from taints."""
    claims = list(claims)
    out: list[PoolStatusCounts] = []
    for pid, pool in pools_from_slices(slices, driver).items():
        st = PoolStatusCounts(pid, pool.generation, pool.node_name)
        if len(pool.slices) < pool.expected_slice_count:
            st.validation_error = (
                f"PoolIncomplete: pool {pid.driver}/{pid.pool} is incomplete: observed "
                f"{len(pool.slices)}/{pool.expected_slice_count} slices at generation {pool.generation}"
            )
            out.append(st)
            continue
        total = len(pool.devices)
        if legacy_v136:
            alloc = sum(
                1
                for c in claims
                for r in _list(_get(c, "status", "allocation", "devices", "results"))
                if r.get("driver") == pid.driver and r.get("pool") == pid.pool
            )
            unavail = 0
        else:
            alloc = len(
                {
                    r.get("device")
                    for c in claims
                    for r in _list(_get(c, "status", "allocation", "devices", "results"))
                    if r.get("driver") == pid.driver and r.get("pool") == pid.pool and not _truthy(r.get("adminAccess"))
                }
            )
            unavail = sum(1 for d in pool.devices if device_unavailable(pid.driver, pid.pool, d, taint_rules))
        st.resource_slice_count = len(pool.slices)
        st.total_devices = total
        st.allocated_devices = alloc
        st.unavailable_devices = unavail
        st.available_devices = max(0, total - alloc - unavail)
        out.append(st)
    return out


# --------------------------------------------------------------------------
# ResourceQuota: pkg/quota/v1/evaluator/core/resource_claims.go
# --------------------------------------------------------------------------


def v1_resource_by_device_class(class_name: str) -> str:
    """gpu.nvidia.com -> gpu.nvidia.com.deviceclass.resource.k8s.io/devices"""
    return class_name + RESOURCE_CLAIMS_PER_CLASS


def _num_devices(req: Mapping[str, Any]) -> int:
    mode = req.get("allocationMode", "ExactCount")  # API default is ExactCount (count defaults to 1)
    if mode == "ExactCount":
        return int(req.get("count", 1))
    if mode == "All":
        return ALLOCATION_RESULTS_MAX_SIZE  # worst case
    return 0  # unknown future mode (downgrade): not charged


def claim_device_usage(claim: Mapping[str, Any]) -> dict[str, int]:
    """Usage() without the DRAExtendedResource part: object count + devices per class.

    * exactly: ExactCount -> count; All -> 32; unknown mode -> 0 (key still present)
    * firstAvailable: per device class the max over its subrequests, then added
    * adminAccess is *not* exempt
    * unknown request kinds (neither exactly nor firstAvailable) are not charged"""
    result: dict[str, int] = {CLAIM_OBJECT_COUNT_NAME: 1}
    for request in _list(_get(claim, "spec", "devices", "requests")):
        subs = _list(request.get("firstAvailable"))
        if subs:
            best: dict[str, int] = {}
            for sub in subs:
                key = v1_resource_by_device_class(str(sub.get("deviceClassName", "")))
                n = _num_devices(sub)
                if key not in best or n > best[key]:
                    best[key] = n
            for key, n in best.items():
                result[key] = result.get(key, 0) + n
            continue
        exactly = request.get("exactly")
        if isinstance(exactly, Mapping):
            key = v1_resource_by_device_class(str(exactly.get("deviceClassName", "")))
            result[key] = result.get(key, 0) + _num_devices(exactly)
    return result


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    if is_native_resource(name) or name.startswith(DEFAULT_RESOURCE_REQUESTS_PREFIX):
        return False
    return True


def is_dra_extended_resource_name(name: str) -> bool:
    return is_extended_resource_name(name) or name.startswith(RESOURCE_DEVICE_CLASS_PREFIX)


def _container_requests(c: Mapping[str, Any]) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in (_get(c, "resources", "requests") or {}).items()}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """resourcehelper.PodRequests (no pod-level resources / overhead / resize
    status): max(sum(containers)+sum(sidecars), max over regular init containers
    of (init + sidecars started before it))."""
    reqs: dict[str, Decimal] = {}
    for c in _list(_get(pod, "spec", "containers")):
        for k, v in _container_requests(c).items():
            reqs[k] = reqs.get(k, Decimal(0)) + v
    sidecars: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for c in _list(_get(pod, "spec", "initContainers")):
        r = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            for k, v in r.items():
                sidecars[k] = sidecars.get(k, Decimal(0)) + v
                reqs[k] = reqs.get(k, Decimal(0)) + v
            continue
        for k in set(r) | set(sidecars):
            eff = r.get(k, Decimal(0)) + sidecars.get(k, Decimal(0))
            init_max[k] = max(init_max.get(k, Decimal(0)), eff)
    for k, v in init_max.items():
        reqs[k] = max(reqs.get(k, Decimal(0)), v)
    return reqs


def pod_extended_resource_usage(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Extended-resource part of PodUsageFunc: requests.<name> for DRA extended
    resource names (example.com/gpu, deviceclass.resource.kubernetes.io/<class>).
    Terminal pods (Succeeded/Failed) are not charged."""
    if _get(pod, "status", "phase") in ("Succeeded", "Failed"):
        return {}
    return {
        DEFAULT_RESOURCE_REQUESTS_PREFIX + k: v
        for k, v in pod_requests(pod).items()
        if is_dra_extended_resource_name(k)
    }


def verified_pod_usage(
    claim: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], other_owned_claims: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Decimal] | None:
    """getVerifiedPodUsage: only for claims annotated as extended-resource claims,
    controlled by a v1 Pod that exists with the same UID, whose
    status.extendedResourceClaimStatus names this claim -- or, if that status is
    unset, this claim is the oldest (then lowest name) claim owned by the pod."""
    if (_get(claim, "metadata", "annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return None
    ctrl = next((r for r in _list(_get(claim, "metadata", "ownerReferences")) if _truthy(r.get("controller"))), None)
    if ctrl is None or ctrl.get("kind") != "Pod" or ctrl.get("apiVersion") != "v1":
        return None
    ns = _get(claim, "metadata", "namespace")
    pod = next(
        (p for p in pods if _get(p, "metadata", "namespace") == ns and _get(p, "metadata", "name") == ctrl.get("name")),
        None,
    )
    if pod is None or _get(pod, "metadata", "uid") != ctrl.get("uid"):
        return None
    status = _get(pod, "status", "extendedResourceClaimStatus")
    name = _get(claim, "metadata", "name") or ""
    if status is not None and status.get("resourceClaimName") != name:
        return None
    if status is None:
        ts = _get(claim, "metadata", "creationTimestamp") or ""
        for other in other_owned_claims:
            ots = _get(other, "metadata", "creationTimestamp") or ""
            if ots < ts or (ots == ts and (_get(other, "metadata", "name") or "") < name):
                return None
    return pod_extended_resource_usage(pod)


def claim_quota_usage(
    claim: Mapping[str, Any],
    *,
    dra_extended_resource: bool = True,
    extended_resource_by_class: Mapping[str, str] | None = None,
    pod_usage: Mapping[str, Decimal] | None = None,
) -> dict[str, int]:
    """Port of claimEvaluator.Usage (v1.36+; unchanged through v1.38.0-beta.0).

    With DRAExtendedResource (beta on by default 1.36, GA 1.37) every
    ``<class>.deviceclass.resource.k8s.io/devices`` amount is mirrored to
    ``requests.deviceclass.resource.kubernetes.io/<class>`` and, if the
    DeviceClass has spec.extendedResourceName, to ``requests.<that name>``
    (gpu.nvidia.com -> requests.nvidia.com/gpu); amounts the owning pod already
    pays for (pod_usage from verified_pod_usage) are subtracted; only > 0 kept."""
    result = claim_device_usage(claim)
    if not dra_extended_resource:
        return result
    mapping = extended_resource_by_class or {}
    extra: dict[str, int] = {}
    for name, qty in result.items():
        if not name.endswith(RESOURCE_CLAIMS_PER_CLASS):
            continue
        cls = name[: -len(RESOURCE_CLAIMS_PER_CLASS)]
        if not cls:
            continue
        extra[RESOURCE_IMPLICIT_EXTENDED_CLAIMS_PER_CLASS + cls] = qty
        ext = mapping.get(cls)
        if ext:
            extra[DEFAULT_RESOURCE_REQUESTS_PREFIX + ext] = qty
    for name, qty in extra.items():
        q = Decimal(qty)
        if pod_usage and name in pod_usage:
            q -= pod_usage[name]
        if q > 0:
            result[name] = int(q)
    return result


def quota_matching_resources(
    items: Sequence[str],
    *,
    dra_extended_resource: bool = True,
    extended_resource_by_class: Mapping[str, str] | None = None,
) -> list[str]:
    """claimEvaluator.MatchingResources."""
    mapping = extended_resource_by_class or {}
    by_ext = set(mapping.values())
    out: list[str] = []
    for item in items:
        if item == CLAIM_OBJECT_COUNT_NAME or item.endswith(RESOURCE_CLAIMS_PER_CLASS):
            out.append(item)
            continue
        if not dra_extended_resource:
            continue
        if item.startswith(RESOURCE_IMPLICIT_EXTENDED_CLAIMS_PER_CLASS):
            if mapping.get(item[len(RESOURCE_IMPLICIT_EXTENDED_CLAIMS_PER_CLASS) :]):
                out.append(item)
                continue
        is_ext_for_quota = (
            not is_native_resource(item) or item.startswith(RESOURCE_IMPLICIT_EXTENDED_CLAIMS_PER_CLASS)
        ) and item.startswith(DEFAULT_RESOURCE_REQUESTS_PREFIX)
        if is_ext_for_quota and item[len(DEFAULT_RESOURCE_REQUESTS_PREFIX) :] in by_ext:
            out.append(item)
    return out


def quota_handles(operation: str, subresource: str = "") -> bool:
    """claimEvaluator.Handles: CREATE and UPDATE of the main resource only."""
    return subresource == "" and operation in ("CREATE", "UPDATE")


# --------------------------------------------------------------------------
# Publishing side: consumable shares (cmd/gpu-kubelet-plugin/consumable_shares.go)
# --------------------------------------------------------------------------


def _fmt_bytes(n: int) -> str:
    for suffix, mult in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def apply_consumable_shares(device: JSON, option: str, gate_enabled: bool) -> JSON:
    """Return a copy of a published device with KEP-5075 fields as the driver sets
    them for --consumable-shares=<unlimited|memory|N|disabled> (gate ConsumableShares).
    VFIO devices never get them (the caller skips them, as the driver does)."""
    opt = option.strip()
    dev: JSON = {**device, "capacity": dict(device.get("capacity") or {})}
    if not gate_enabled or opt in ("", "disabled"):
        return dict(device)
    dev["allowMultipleAllocations"] = True
    mem = dev["capacity"].get("memory")
    if mem is None:
        return dev
    step = 2**20
    max_bytes = int(parse_quantity(mem["value"])) // step * step
    max_q = _fmt_bytes(max_bytes)
    rng = {"min": "0", "max": max_q, "step": "1Mi"}
    if opt == "unlimited":
        dev["capacity"]["memory"] = {"value": max_q, "requestPolicy": {"default": "0", "validRange": rng}}
    elif opt == "memory":
        dev["capacity"]["memory"] = {
            "value": max_q,
            "requestPolicy": {"default": max_q, "validRange": {**rng, "min": "1Mi"}},
        }
    else:
        try:
            n = int(opt)
        except ValueError:
            return dev
        if n <= 0:
            return dev
        dev["capacity"]["memory"] = {"value": max_q, "requestPolicy": {"default": "0", "validRange": rng}}
        dev["capacity"]["shares"] = {
            "value": str(n),
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": str(n), "step": "1"}},
        }
    return dev
