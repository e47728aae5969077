"""The GPUs a node publishes through Dynamic Resource Allocation, counted as NVIDIA's driver
and Kubernetes count them (brickadmin/cluster/dra.py): physical GPUs, logical units per GPU,
what claims hold, pools seen whole or not, and the device taints.

A pool is trusted only when all of its ``resourceSliceCount`` slices are seen at its newest
generation (the scheduler's rule): an incomplete pool is listed with what was seen and counts
nothing, never a silent partial count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from brickadmin.cluster import dra
from brickadmin.cluster.vocabulary import KubeObject

# How a GPU published through DRA is offered (dra.GpuCapacity.mode)
WHOLE, STATIC_MIG, DYNAMIC_MIG, SHARES, VFIO = "whole", "static-mig", "dynamic-mig", "shared", "vfio"
# The sharing strategy of a line of consumable shares (the DRA analogue of time-slicing replicas)
CONSUMABLE_SHARES = "consumable-shares"


@dataclass(slots=True)
class DraDevice:
    """One device of a slice, as the node page lists it."""

    name: str
    pool: str
    kind: str  # gpu | mig | vfio
    gpu: str  # the physical GPU behind it: a uuid, or counterset:<name> under dynamic MIG
    model: str = ""
    profile: str = ""
    shared: bool = False  # allowMultipleAllocations (consumable shares)
    claims: list[str] = field(default_factory=list)  # ns/name of the claims allocated it (not admin access)
    # Units the claims hold of a shared device: the shares they consumed, else one each
    units_held: int = 0
    admin_claims: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    taints: list[dict[str, Any]] = field(default_factory=list)  # the slice's and matching DeviceTaintRules'


@dataclass(slots=True)
class DraGpu:
    """One physical GPU: its logical units (None: unlimited shares) and those claims hold."""

    gpu: str
    mode: str
    units: int | None
    used: int
    model: str = ""
    by_profile: dict[str, int] = field(default_factory=dict)  # dynamic MIG: allocatable now
    profiles: list[str] = field(default_factory=list)  # static MIG: its devices' profiles


@dataclass(slots=True)
class DraPool:
    driver: str
    name: str
    generation: int
    seen: int
    expected: int

    @property
    def complete(self) -> bool:
        return self.seen == self.expected


@dataclass(slots=True)
class DraNode:
    """A node's GPUs published through DRA."""

    physical: int = 0
    gpus: list[DraGpu] = field(default_factory=list)
    devices: list[DraDevice] = field(default_factory=list)
    pools: list[DraPool] = field(default_factory=list)

    @property
    def incomplete_pools(self) -> list[DraPool]:
        return [p for p in self.pools if not p.complete]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DraNode:
        return cls(
            physical=d["physical"],
            gpus=[DraGpu(**g) for g in d["gpus"]],
            devices=[DraDevice(**x) for x in d["devices"]],
            pools=[DraPool(**p) for p in d["pools"]],
        )


def _device_class_of(mode: str) -> str:
    return (
        dra.DEVICE_CLASS_MIG
        if mode in (STATIC_MIG, DYNAMIC_MIG)
        else (dra.DEVICE_CLASS_VFIO if mode == VFIO else dra.DEVICE_CLASS_GPU)
    )


def is_dra_resource(name: str) -> bool:
    """Whether a resource line or quota key names a DeviceClass's devices (DRA), not a device plugin's resource."""
    return name.endswith(dra.RESOURCE_CLAIMS_PER_CLASS)


def quota_resource(device_class: str) -> str:
    """What a ResourceQuota names for a DeviceClass's devices: <class>.deviceclass.resource.k8s.io/devices."""
    return dra.v1_resource_by_device_class(device_class)


def _taints(driver: str, pool: str, device: KubeObject, rules: Sequence[KubeObject]) -> list[dict[str, Any]]:
    """The device's own taints and those of the DeviceTaintRules that select it (any effect,
    None included: that one is a dry run, shown with what it would evict)."""
    out = [dict(t) for t in device.get("taints") or []]
    for rule in rules:
        spec = rule.get("spec") or {}
        sel = spec.get("deviceSelector")
        if not isinstance(sel, dict) or not sel:
            continue
        if any(sel.get(k) is not None and sel[k] != v for k, v in (("driver", driver), ("pool", pool))):
            continue
        if sel.get("device") is not None and sel["device"] != device.get("name"):
            continue
        taint = dict(spec.get("taint") or {})
        taint["rule"] = (rule.get("metadata") or {}).get("name", "")
        out.append(taint)
    return out


@dataclass(slots=True, eq=False)
class DraInputs:
    """What one node's DRA GPUs are made of: its slices of NVIDIA's driver, the claims allocated
    devices of its pools, the DeviceTaintRules. Objects are compared by identity (the watcher
    replaces an object when it changes), so a node whose inputs are the same objects as at the
    last publication keeps its DraNode: one claim changing costs one node."""

    slices: list[KubeObject] = field(default_factory=list)
    claims: list[KubeObject] = field(default_factory=list)
    taint_rules: Sequence[KubeObject] = ()

    def __eq__(self, other: object) -> bool:
        # a list's == compares its items by identity first, in C: the same objects cost no walk
        # of them, and an object replaced by an equal one (never, from the watcher) is as good
        return (
            isinstance(other, DraInputs)
            and self.slices == other.slices
            and self.claims == other.claims
            and list(self.taint_rules) == list(other.taint_rules)
        )

    __hash__ = None  # type: ignore[assignment]  # compared, never a key


def inputs_by_node(
    slices: Iterable[KubeObject],
    claims: Iterable[KubeObject],
    taint_rules: Sequence[KubeObject] = (),
    claims_by_pool: Mapping[tuple[str, str], Sequence[KubeObject]] | None = None,
) -> dict[str, DraInputs]:
    """node name -> its DRA inputs: the driver's slices by their nodeName (a pool is one node's
    under NVIDIA's driver), and each claim under every node whose pool its results name.
    ``claims_by_pool``: the claims already grouped by (driver, pool) in ``claims``' order (the
    watcher's Snapshot.claims_by_pool), read instead of walking every claim."""
    out: dict[str, DraInputs] = {}
    pool_node: dict[str, str] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != dra.DRIVER_NAME:
            continue
        node = str(spec.get("nodeName") or "")
        out.setdefault(node, DraInputs(taint_rules=taint_rules)).slices.append(s)
        pool_node[str((spec.get("pool") or {}).get("name", ""))] = node
    if claims_by_pool is not None:
        pools_of: dict[str, list[str]] = {}
        for pool, node in pool_node.items():
            pools_of.setdefault(node, []).append(pool)
        for node, pools in pools_of.items():
            if len(pools) == 1:
                out[node].claims = list(claims_by_pool.get((dra.DRIVER_NAME, pools[0]), ()))
                continue
            held = {id(c): c for p in pools for c in claims_by_pool.get((dra.DRIVER_NAME, p), ())}
            out[node].claims = sorted(held.values(), key=_claim_order)
        return out
    # claims given shares of one device hold one allocation object (the watcher shares equal
    # sub-structures): where it is held is worked out once per allocation, not per claim
    nodes_of: dict[int, list[str]] = {}
    for c in claims:
        allocation = (c.get("status") or {}).get("allocation")
        if not allocation:
            continue
        held_on = nodes_of.get(id(allocation))
        if held_on is None:
            results = (allocation.get("devices") or {}).get("results") or []
            named = {str(r.get("pool", "")) for r in results if r.get("driver") == dra.DRIVER_NAME}
            held_on = nodes_of[id(allocation)] = sorted({pool_node[p] for p in named if p in pool_node})
        for name in held_on:
            out[name].claims.append(c)
    return out


def _claim_order(claim: KubeObject) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def dra_nodes(
    slices: Iterable[KubeObject], claims: Sequence[KubeObject], taint_rules: Sequence[KubeObject] = ()
) -> dict[str, DraNode]:
    """node name -> its DRA GPUs (NVIDIA's driver, gpu.nvidia.com), from the cluster's slices and claims."""
    return {name: dra_node(i) for name, i in inputs_by_node(slices, claims, taint_rules).items()}


def dra_node(inputs: DraInputs) -> DraNode:
    """One node's DRA GPUs from its inputs."""
    claims, taint_rules = inputs.claims, inputs.taint_rules
    pools = dra.pools_from_slices(inputs.slices, dra.DRIVER_NAME)
    uses = dra.used_devices(claims)
    admin = _admin_uses(claims)
    node = DraNode()
    trusted: list[KubeObject] = []
    for pid, pool in pools.items():
        seen = len(pool.slices)
        node.pools.append(DraPool(pid.driver, pid.pool, pool.generation, seen, pool.expected_slice_count))
        if seen != pool.expected_slice_count:
            continue
        trusted.extend(pool.slices)
        at_bus = dra.gpus_by_pci_bus(pool.devices)
        for d in pool.devices:
            did = dra.DeviceID(pid.driver, pid.pool, str(d.get("name", "")))
            use = uses.get(did)
            node.devices.append(
                DraDevice(
                    name=did.device,
                    pool=pid.pool,
                    kind=dra.device_type(d) or "",
                    gpu=dra.physical_key(d, at_bus) or "",
                    model=str(dra.attribute_value(d, "productName") or ""),
                    profile=str(dra.attribute_value(d, "profile") or ""),
                    shared=dra.device_is_shared(d),
                    claims=use.claims if use else [],  # uses are this call's own: no copy
                    units_held=_units_held(use),
                    admin_claims=admin.get(did, []),
                    pods=use.pods if use else [],
                    taints=_taints(pid.driver, pid.pool, d, taint_rules),
                )
            )
    node.physical = sum(dra.physical_gpus_by_node(trusted).values())
    by_name = {(x.pool, x.name): x for x in node.devices}
    for cap in dra.logical_capacity(trusted, claims, uses=uses):
        devices = [by_name[(cap.pool.pool, name)] for name in cap.devices if (cap.pool.pool, name) in by_name]
        if cap.mode == SHARES:  # a shared device's claims hold the shares they consumed
            used = sum(x.units_held for x in devices)
        elif cap.mode in (WHOLE, VFIO):  # a GPU and its VFIO device: one GPU, given one way at a time
            used = 1 if any(x.claims for x in devices) else 0
        else:
            used = sum(1 for x in devices if x.claims)
        node.gpus.append(
            DraGpu(
                gpu=cap.gpu,
                mode=cap.mode,
                units=cap.units,
                used=used,
                model=next((x.model for x in devices if x.model), ""),
                by_profile=dict(cap.by_profile),
                profiles=sorted(x.profile for x in devices if x.kind == "mig") if cap.mode == STATIC_MIG else [],
            )
        )
    return node


def _units_held(use: dra.DeviceUse | None) -> int:
    if use is None:
        return 0
    shares = use.consumed_capacity.get("shares")
    return int(shares) if shares is not None else len(use.claims)


def _admin_uses(claims: Sequence[KubeObject]) -> dict[dra.DeviceID, list[str]]:
    """The claims that hold a device with admin access (monitoring): observers, not use."""
    out: dict[dra.DeviceID, list[str]] = defaultdict(list)
    for claim in claims:
        meta = claim.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            if r.get("adminAccess") is True:
                out[dra.DeviceID(str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))].append(
                    key
                )
    return dict(out)


@dataclass(slots=True)
class DraLine:
    """What a node offers of one GPU type through DRA: a line of the Dashboard's model × type rows."""

    device_class: str
    gpu_type: str  # exclusive | shared | mig-<profile> | mig-dynamic
    sharing_strategy: str  # none | consumable-shares
    logical: int  # units; with ``unlimited``, the claims held (each GPU takes any number)
    used: int
    gpus: int  # physical GPUs behind the line
    unlimited: bool = False

    @property
    def resource(self) -> str:
        return quota_resource(self.device_class)


def dra_lines(node: DraNode) -> list[DraLine]:
    """A node's DRA GPUs as lines per GPU type: whole GPUs, consumable shares, each static MIG
    profile (1 per MIG device), dynamic MIG (the partitions claims hold and the most of one profile that
    still fits; a GPU handed out whole through its gpu device is a whole GPU of that class)."""
    lines: dict[tuple[str, str, str], DraLine] = {}

    def add(cls: str, gtype: str, sharing: str, logical: int, used: int, gpus: int, unlimited: bool = False) -> None:
        line = lines.setdefault((cls, gtype, sharing), DraLine(cls, gtype, sharing, 0, 0, 0))
        line.logical += logical
        line.used += used
        line.gpus += gpus
        line.unlimited = line.unlimited or unlimited

    # the GPUs a claim holds whole (its gpu device) or passed through to a VM (its vfio device)
    handed_out_whole = {x.gpu for x in node.devices if x.kind == "gpu" and x.claims}
    passed_through = {x.gpu for x in node.devices if x.kind == "vfio" and x.claims}
    for g in node.gpus:
        cls = _device_class_of(g.mode)
        if g.mode == STATIC_MIG:
            by: dict[str, int] = defaultdict(int)
            for p in g.profiles:
                by[p] += 1
            used = {x.profile: 0 for x in node.devices}
            for x in node.devices:
                if x.gpu == g.gpu and x.claims:
                    used[x.profile] += 1
            for i, (profile, n) in enumerate(sorted(by.items())):
                add(cls, f"mig-{profile}", "none", n, used.get(profile, 0), 1 if i == 0 else 0)
        elif g.mode == DYNAMIC_MIG:
            if g.gpu in handed_out_whole:
                # handed out whole (its gpu device, class gpu.nvidia.com): a whole GPU in use on
                # that class's line until it is let go, not a MIG partition of mig.nvidia.com's
                add(dra.DEVICE_CLASS_GPU, "exclusive", "none", g.units or 0, g.used, 1)
            else:
                add(cls, "mig-dynamic", "none", g.units or 0, g.used, 1)
        elif g.mode == SHARES:
            add(
                cls, "shared", CONSUMABLE_SHARES, g.units if g.units is not None else g.used, g.used, 1, g.units is None
            )
        else:  # a whole GPU and its VFIO device: on the line of the class a claim holds it through
            if g.gpu in handed_out_whole or g.gpu in passed_through:
                cls = dra.DEVICE_CLASS_GPU if g.gpu in handed_out_whole else dra.DEVICE_CLASS_VFIO
            add(cls, "exclusive", "none", g.units or 0, g.used, 1)
    return sorted(lines.values(), key=lambda x: (x.device_class, x.gpu_type))


def stack_of(has_plugin_resources: bool, dra_node: DraNode | None) -> str:
    """Which stack publishes a node's GPUs: device-plugin, dra, both (a finding) or ''."""
    has_dra = dra_node is not None and bool(dra_node.devices or dra_node.pools)
    if has_plugin_resources and has_dra:
        return "both"
    return "dra" if has_dra else ("device-plugin" if has_plugin_resources else "")
