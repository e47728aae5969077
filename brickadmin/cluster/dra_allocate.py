"""Allocating a pod's ResourceClaims on a node, as kube-scheduler's DRA plugin does.

A port of the structured allocator (k8s.io/dynamic-resource-allocation
structured/internal/stable/allocator_stable.go) for the twin: pools from the slices that
name the node, only complete ones (every one of ``resourceSliceCount`` slices seen at the
pool's newest generation); devices in pool, slice and device order. The search is the
scheduler's: each required device of each request of each claim of the pod tries the
eligible devices in turn, and a choice that leaves a later request or claim without a device
is undone and the next one tried (``firstAvailable`` subrequests likewise); the first full
solution wins. A device is eligible when its DeviceClass's and the request's CEL selectors
select it (dra_cel.py, evaluated as Kubernetes does), the claim's ``matchAttribute``
constraints hold, and it is free: a device already allocated is taken again only by an
admin-access request or when it allows multiple allocations and its capacity is not yet
consumed; a device consuming counters only while the counter set has them left (dynamic
MIG). A selector that does not compile or fails at run time (a missing attribute), or a
missing DeviceClass, is an error for the pod, as the scheduler's (AllocationError).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from . import dra_cel
from .dra import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DEVICE_CLASS_BY_TYPE,
    DRIVER_NAME,
    DeviceID,
    consumed_capacity,
    parse_quantity,
)

JSON = dict[str, Any]
TYPE_BY_CLASS = {cls: t for t, cls in DEVICE_CLASS_BY_TYPE.items()}
UNSCHEDULABLE_MESSAGE = "cannot allocate all claims"


@dataclass
class _Device:
    id: DeviceID
    body: Mapping[str, Any]


@dataclass
class NodeDevices:
    """What one node offers: the devices of its complete pools and their counter sets, less
    what the claims already allocated hold."""

    devices: list[_Device] = field(default_factory=list)
    taken: set[DeviceID] = field(default_factory=set)
    consumed: dict[DeviceID, dict[str, Decimal]] = field(default_factory=dict)
    counters: dict[tuple[str, str, str], dict[str, Decimal]] = field(default_factory=dict)


def _spec(s: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = s.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def complete_pools(slices: Sequence[Mapping[str, Any]], node: str) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """(driver, pool) -> its slices for a node: those naming the node, at the pool's newest
    generation, when all ``resourceSliceCount`` of them are there."""
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for s in slices:
        spec = _spec(s)
        if spec.get("nodeName") != node:
            continue
        pools.setdefault((str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))), []).append(s)
    out = {}
    for pid, group in sorted(pools.items()):
        gen = max(int((_spec(s).get("pool") or {}).get("generation") or 0) for s in group)
        kept = [s for s in group if int((_spec(s).get("pool") or {}).get("generation") or 0) == gen]
        if len(kept) == int((_spec(kept[0]).get("pool") or {}).get("resourceSliceCount") or 0):
            out[pid] = sorted(kept, key=lambda s: str((s.get("metadata") or {}).get("name") or ""))
    return out


def node_devices(slices: Sequence[Mapping[str, Any]], node: str, claims: Sequence[Mapping[str, Any]]) -> NodeDevices:
    nd = NodeDevices()
    for (driver, pool), group in complete_pools(slices, node).items():
        for s in group:
            for cs in _spec(s).get("sharedCounters") or []:
                nd.counters[(driver, pool, str(cs.get("name")))] = {
                    k: parse_quantity((v or {}).get("value")) for k, v in (cs.get("counters") or {}).items()
                }
            for d in _spec(s).get("devices") or []:
                nd.devices.append(_Device(DeviceID(driver, pool, str(d.get("name"))), d))
    by_id = {d.id: d for d in nd.devices}
    for claim in claims:
        for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            did = DeviceID(str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
            dev = by_id.get(did)
            if dev is None:
                continue
            _take(nd, dev, {k: parse_quantity(v) for k, v in (r.get("consumedCapacity") or {}).items()})
    return nd


def _take(nd: NodeDevices, dev: _Device, consumed: Mapping[str, Decimal]) -> Callable[[], None]:
    """Mark ``dev`` used (a share of it, for one that allows multiple allocations, and its
    counters); returns what puts it back, for the search to undo a choice."""
    added: dict[str, Decimal] = {}
    if dev.body.get("allowMultipleAllocations"):
        have = nd.consumed.setdefault(dev.id, {})
        for k, v in consumed.items():
            have[k] = have.get(k, Decimal(0)) + v
            added[k] = added.get(k, Decimal(0)) + v

        def unshare() -> None:
            for k, v in added.items():
                have[k] -= v

        if dev.id in nd.taken:
            return unshare
    else:
        unshare = _nothing
    nd.taken.add(dev.id)
    spent: list[tuple[dict[str, Decimal], str, Decimal]] = []
    for cc in dev.body.get("consumesCounters") or []:
        left = nd.counters.setdefault((dev.id.driver, dev.id.pool, str(cc.get("counterSet"))), {})
        for k, v in (cc.get("counters") or {}).items():
            amount = parse_quantity((v or {}).get("value"))
            left[k] = left.get(k, Decimal(0)) - amount
            spent.append((left, k, amount))

    def give_back() -> None:
        unshare()
        nd.taken.discard(dev.id)
        for left, k, amount in spent:
            left[k] += amount

    return give_back


class AllocationError(Exception):
    """What makes the scheduler abort a pod's scheduling instead of calling it unschedulable
    (a selector that does not compile or fails to evaluate, a missing DeviceClass, ...):
    allocator_stable.go returns these as errors, and the pod waits with the message."""


def _builtin_class(name: str) -> Mapping[str, Any] | None:
    """NVIDIA's DeviceClasses as its chart installs them, for callers that pass no classes."""
    t = TYPE_BY_CLASS.get(name)
    if t is None:
        return None
    expr = f"device.driver == '{DRIVER_NAME}' && device.attributes['{DRIVER_NAME}'].type == '{t}'"
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def nvidia_device_classes() -> dict[str, Mapping[str, Any]]:
    """NVIDIA's DeviceClasses by name, as the driver's chart installs them."""
    return {name: body for name in TYPE_BY_CLASS if (body := _builtin_class(name)) is not None}


@dataclass
class _Request:
    """One request or subrequest of a claim, checked before the search."""

    claim: int
    key: tuple[int, int, int]  # claim, request, subrequest
    name: str  # the request's name, or ``<request>/<subrequest>``
    base: str
    sub: str
    exactly: Mapping[str, Any]
    class_name: str
    class_selectors: list[str]
    selectors: list[str]
    admin: bool
    all_mode: bool
    count: int
    all_devices: list[_Device] = field(default_factory=list)


@dataclass
class _MatchAttribute:
    """A claim's ``matchAttribute`` constraint: every device of the named requests (all of the
    claim's when none are named) has the attribute, with one value."""

    requests: set[str]
    attribute: str
    value: Any = None
    devices: int = 0

    def applies(self, base: str, sub: str) -> bool:
        return not self.requests or base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, dev: _Device) -> bool:
        if not self.applies(base, sub):
            return True
        value = _lookup_attribute(dev, self.attribute)
        if value is None:
            return False
        if self.devices == 0:
            self.value = value
        elif value != self.value:
            return False
        self.devices += 1
        return True

    def remove(self, base: str, sub: str) -> None:
        if self.applies(base, sub):
            self.devices -= 1


def _lookup_attribute(dev: _Device, name: str) -> Any:
    """allocator_stable.go lookupAttribute: the fully qualified name, or the bare one in the
    driver's own domain; the value with its kind, so that "1" and 1 differ."""
    attrs = dev.body.get("attributes") or {}
    attr = attrs.get(name)
    domain, _, ident = name.partition("/")
    if attr is None and domain == dev.id.driver:
        attr = attrs.get(ident)
    if not isinstance(attr, Mapping):
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return (kind, attr[kind])
    return None


def _selectors(holder: Mapping[str, Any]) -> list[str]:
    return [str(((s or {}).get("cel") or {}).get("expression", "")) for s in holder.get("selectors") or []]


def _claim_name(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if meta.get("namespace") else str(meta.get("name", ""))


class _Search:
    """allocator_stable.go's allocateOne: every required device is tried on every eligible
    device in turn, recursively; a choice that leaves a later device without one is undone
    and the next candidate tried. The first full solution wins."""

    def __init__(
        self,
        claims: Sequence[Mapping[str, Any]],
        nd: NodeDevices,
        classes: Mapping[str, Mapping[str, Any]] | None,
        new_id: Any,
    ) -> None:
        self.claims = claims
        self.nd = nd
        self.new_id = new_id
        self.classes = classes
        self.requests: list[list[list[_Request]]] = []  # claim -> request -> alternatives
        self.constraints: list[list[_MatchAttribute]] = []
        self.results: list[list[JSON]] = [[] for _ in claims]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.matched: dict[tuple[DeviceID, tuple[int, int, int]], bool] = {}
        self.variables: dict[DeviceID, dict[str, Any]] = {}  # each device's CEL ``device``, built once
        for ci, claim in enumerate(claims):
            devices = (claim.get("spec") or {}).get("devices") or {}
            per_claim: list[list[_Request]] = []
            for ri, req in enumerate(devices.get("requests") or []):
                name = str(req.get("name", ""))
                if req.get("exactly") is not None:
                    per_claim.append([self._request(ci, (ci, ri, 0), name, "", req["exactly"])])
                else:
                    subs = req.get("firstAvailable") or []
                    per_claim.append(
                        [
                            self._request(ci, (ci, ri, si), name, str(sub.get("name", "")), sub)
                            for si, sub in enumerate(subs)
                        ]
                    )
            self.requests.append(per_claim)
            constraints = []
            for i, c in enumerate(devices.get("constraints") or []):
                if not c.get("matchAttribute"):
                    raise AllocationError(
                        f"claim {_claim_name(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
                constraints.append(_MatchAttribute(set(c.get("requests") or []), str(c["matchAttribute"])))
            self.constraints.append(constraints)

    def _request(self, ci: int, key: tuple[int, int, int], base: str, sub: str, exactly: Mapping[str, Any]) -> _Request:
        claim = self.claims[ci]
        name = f"{base}/{sub}" if sub else base
        class_name = str(exactly.get("deviceClassName") or "")
        if not class_name:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: missing device class name (unsupported request type?)"
            )
        cls = self.classes.get(class_name) if self.classes is not None else _builtin_class(class_name)
        if cls is None:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: could not retrieve device class {class_name}: "
                f'deviceclass.resource.k8s.io "{class_name}" not found'
            )
        for i, sel in enumerate(exactly.get("selectors") or []):
            if not ((sel or {}).get("cel") or {}).get("expression"):
                raise AllocationError(
                    f"claim {_claim_name(claim)}, request {name}, selector #{i}: "
                    "CEL expression empty (unsupported selector type?)"
                )
        mode = exactly.get("allocationMode") or "ExactCount"
        if mode not in ("ExactCount", "All"):
            raise AllocationError(f"claim {_claim_name(claim)}, request {name}: unsupported count mode {mode}")
        r = _Request(
            claim=ci,
            key=key,
            name=name,
            base=base,
            sub=sub,
            exactly=exactly,
            class_name=class_name,
            class_selectors=_selectors(cls.get("spec") or {}),
            selectors=_selectors(exactly),
            admin=bool(exactly.get("adminAccess")),
            all_mode=mode == "All",
            count=int(exactly.get("count") or 1),
        )
        if r.all_mode:
            r.all_devices = [d for d in self.nd.devices if self._selectable(r, d)]
            r.count = len(r.all_devices)
        return r

    def _selectable(self, r: _Request, dev: _Device) -> bool:
        key = (dev.id, r.key)
        if key not in self.matched:
            self.matched[key] = self._match(r, r.class_selectors, dev, f"class {r.class_name}") and self._match(
                r, r.selectors, dev, f"claim {_claim_name(self.claims[r.claim])}"
            )
        return self.matched[key]

    def _match(self, r: _Request, exprs: list[str], dev: _Device, who: str) -> bool:
        for i, expr in enumerate(exprs):
            try:
                program = dra_cel.compile_selector(expr)
            except dra_cel.CELError as e:
                raise AllocationError(f"{who}: selector #{i}: CEL compile error: {e}") from None
            try:
                if dev.id not in self.variables:
                    self.variables[dev.id] = dra_cel.device_variable(dev.body, dev.id.driver)
                if not program.selects(self.variables[dev.id]):
                    return False
            except dra_cel.CELError as e:
                raise AllocationError(f"{who}: selector #{i}: CEL runtime error: {e}") from None
        return True

    def _in_use(self, r: _Request, dev: _Device) -> bool:
        if r.admin:
            return r.claim in self.allocating.get(dev.id, set())
        if dev.body.get("allowMultipleAllocations"):
            return False  # shares are counted by capacity in _fits
        return dev.id in self.nd.taken or bool(self.allocating.get(dev.id))

    def _allocate_device(self, r: _Request, dev: _Device, must: bool) -> Callable[[], None] | None:
        if self._in_use(r, dev):
            return None
        multi = bool(dev.body.get("allowMultipleAllocations"))
        requests = (r.exactly.get("capacity") or {}).get("requests") or {}
        consume = consumed_capacity(dev.body, requests) if multi and not r.admin else {}
        if consume is None or not _fits(self.nd, dev, r.admin, consume):
            return None
        added: list[_MatchAttribute] = []
        for c in self.constraints[r.claim]:
            if not c.add(r.base, r.sub, dev):
                for done in added:
                    done.remove(r.base, r.sub)
                if must:
                    raise AllocationError(
                        f"claim {_claim_name(self.claims[r.claim])}, request {r.name}: cannot add device "
                        f"{dev.id.driver}/{dev.id.pool}/{dev.id.device} because a claim constraint "
                        "would not be satisfied"
                    )
                return None
            added.append(c)
        result: JSON = {"request": r.name, "driver": dev.id.driver, "pool": dev.id.pool, "device": dev.id.device}
        undo_take: Callable[[], None] = _nothing
        if r.admin:
            result["adminAccess"] = True
        else:
            if multi:
                result["shareID"] = str(self.new_id())
                result["consumedCapacity"] = {k: _quantity(v) for k, v in consume.items()}
            undo_take = _take(self.nd, dev, consume)
        holders = self.allocating.setdefault(dev.id, set())
        new_holder = r.claim not in holders
        holders.add(r.claim)
        self.results[r.claim].append(result)

        def undo() -> None:
            self.results[r.claim].pop()
            if new_holder:
                holders.discard(r.claim)
            undo_take()
            for c in added:
                c.remove(r.base, r.sub)

        return undo

    def one(self, ci: int, ri: int, di: int, alt: _Request | None) -> bool:
        """Allocate device ``di`` of request ``ri`` of claim ``ci`` and everything after it."""
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            return self.one(ci + 1, 0, 0, None)
        if alt is None:
            # a prioritized list: the first subrequest with which everything after fits
            return any(self.one(ci, ri, 0, sub) for sub in self.requests[ci][ri])
        r = alt
        if r.all_mode and not r.all_devices:
            return False
        if di >= r.count:
            return self.one(ci, ri + 1, 0, None)
        if len(self.results[ci]) + r.count - di > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        if r.all_mode:
            undo = self._allocate_device(r, r.all_devices[di], must=True)
            if undo is None:
                return False
            if self.one(ci, ri, di + 1, r):
                return True
            undo()
            return False
        for dev in self.nd.devices:
            if self._in_use(r, dev) or not self._selectable(r, dev):
                continue
            undo = self._allocate_device(r, dev, must=False)
            if undo is None:
                continue
            if self.one(ci, ri, di + 1, r):
                return True
            undo()
        return False


def missing_device_class(claims: Sequence[Mapping[str, Any]], classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What the scheduler's PreFilter says of a claim to allocate whose request names a
    DeviceClass that does not exist (the pod is unschedulable until the class appears), or None."""
    for claim in claims:
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = str(req.get("name", ""))
            if req.get("exactly") is not None:
                wanted = [(name, str(req["exactly"].get("deviceClassName") or ""))]
            else:
                wanted = [
                    (f"{name}/{sub.get('name', '')}", str(sub.get("deviceClassName") or ""))
                    for sub in req.get("firstAvailable") or []
                ]
            for request, cls in wanted:
                if cls and cls not in classes:
                    return f"request {request}: device class {cls} does not exist"
    return None


def _nothing() -> None:
    return None


def _fits(nd: NodeDevices, dev: _Device, admin: bool, consume: Mapping[str, Decimal]) -> bool:
    if admin:
        return True
    if dev.id in nd.taken and not dev.body.get("allowMultipleAllocations"):
        return False
    if dev.body.get("allowMultipleAllocations"):
        have = nd.consumed.get(dev.id, {})
        for name, want in consume.items():
            cap = (dev.body.get("capacity") or {}).get(name) or {}
            if have.get(name, Decimal(0)) + want > parse_quantity(cap.get("value", "0")):
                return False
        if dev.id in nd.taken:
            return True
    for cc in dev.body.get("consumesCounters") or []:
        left = nd.counters.get((dev.id.driver, dev.id.pool, str(cc.get("counterSet"))))
        if left is None:
            return False
        for k, v in (cc.get("counters") or {}).items():
            if left.get(k, Decimal(0)) < parse_quantity((v or {}).get("value")):
                return False
    return True


def _quantity(v: Decimal) -> str:
    return str(int(v)) if v == v.to_integral_value() else str(v)


def allocate(
    claims: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    node: str,
    allocated: Sequence[Mapping[str, Any]],
    new_id: Any = uuid.uuid4,
    classes: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[list[JSON]] | None:
    """The allocation results for each of ``claims`` on ``node`` (beside the claims already
    ``allocated``), or None when they do not all fit. ``classes``: the DeviceClasses by name
    (None: NVIDIA's, as its chart installs them). Requests with ``firstAvailable`` take the
    first subrequest with which all the pod's claims fit, named ``<request>/<subrequest>``.
    Raises AllocationError where the scheduler aborts with an error."""
    search = _Search(claims, node_devices(slices, node, allocated), classes, new_id)
    return search.results if search.one(0, 0, 0, None) else None


def allocation(results: list[JSON], node: str, timestamp: str) -> JSON:
    """``status.allocation`` as the scheduler writes it for a node-local pool."""
    match = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {
        "allocationTimestamp": timestamp,
        "devices": {"results": results},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [match]}]},
    }


def unschedulable_message(nodes: int) -> str:
    """The scheduler's message for a pod whose claims fit on no node."""
    return f"0/{nodes} nodes are available: {nodes} {UNSCHEDULABLE_MESSAGE}."


def unallocated(objects: Sequence[Mapping[str, Any]], hostname_label: str = "kubernetes.io/hostname") -> list[JSON]:
    """A scenario as its users submitted it, before the scheduler: claims without status,
    the claims the resourceclaim controller made from templates left out (it makes them
    again), and each pod using claims not yet bound (no nodeName, no status) but pinned to
    the node it ran on through its nodeSelector, so that allocating again places it there."""
    out: list[JSON] = []
    for obj in objects:
        o = dict(obj)
        if o.get("kind") == "ResourceClaim":
            owners = (o.get("metadata") or {}).get("ownerReferences") or []
            if any(r.get("kind") == "Pod" and r.get("controller") for r in owners):
                continue
            o.pop("status", None)
        elif o.get("kind") == "Pod" and (o.get("spec") or {}).get("resourceClaims"):
            spec = dict(o["spec"])
            node = spec.pop("nodeName", None)
            if node:
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), hostname_label: node}
            o["spec"] = spec
            o.pop("status", None)
        out.append(o)
    return out
