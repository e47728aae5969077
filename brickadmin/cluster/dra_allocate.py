"""Allocating a pod's ResourceClaims on a node, as kube-scheduler's DRA plugin does.

A small port of the structured allocator (k8s.io/dynamic-resource-allocation
structured/internal/stable/allocator_stable.go) for the twin: pools from the slices that
name the node, only complete ones (every one of ``resourceSliceCount`` slices seen at the
pool's newest generation); devices in pool, slice and device order, first fit; a device
already allocated is taken again only by an admin-access request or when it allows multiple
allocations and its capacity is not yet consumed; a device consuming counters only while the
counter set has them left (dynamic MIG). A DeviceClass is matched by the device type its name
stands for (NVIDIA's classes select ``device.attributes['gpu.nvidia.com'].type``), a request's
CEL selectors of the form ``device.attributes['<domain>'].<name> == '<value>'`` (joined by
``&&``) by comparing the attribute; anything else in a selector matches nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .dra import (
    DEVICE_CLASS_BY_TYPE,
    DeviceID,
    attribute_value,
    device_type,
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


def _take(nd: NodeDevices, dev: _Device, consumed: Mapping[str, Decimal]) -> None:
    if dev.body.get("allowMultipleAllocations"):
        have = nd.consumed.setdefault(dev.id, {})
        for k, v in consumed.items():
            have[k] = have.get(k, Decimal(0)) + v
        if dev.id in nd.taken:
            return
    nd.taken.add(dev.id)
    for cc in dev.body.get("consumesCounters") or []:
        left = nd.counters.get((dev.id.driver, dev.id.pool, str(cc.get("counterSet"))), {})
        for k, v in (cc.get("counters") or {}).items():
            left[k] = left.get(k, Decimal(0)) - parse_quantity((v or {}).get("value"))


def selector_matches(expression: str, device: Mapping[str, Any], driver: str) -> bool:
    """``device.driver == 'x'`` and ``device.attributes['<domain>'].<name> == '<value>'`` joined by ``&&``."""
    for term in expression.split("&&"):
        left, eq, right = term.partition("==")
        left, right = left.strip(), right.strip().strip("'\"")
        if not eq:
            return False
        if left == "device.driver":
            if driver != right:
                return False
            continue
        prefix = "device.attributes["
        if not left.startswith(prefix) or "]." not in left:
            return False
        domain, _, name = left[len(prefix) :].partition("].")
        value = attribute_value(device, name, domain.strip("'\""))
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        if value is None or shown != right:
            return False
    return True


def _requested_capacity(device: Mapping[str, Any], requests: Mapping[str, Any]) -> dict[str, Decimal]:
    """What a share of the device consumes: the request's amounts, else each capacity's default."""
    out = {}
    for name, cap in (device.get("capacity") or {}).items():
        policy = cap.get("requestPolicy") if isinstance(cap, Mapping) else None
        if name in requests:
            out[name] = parse_quantity(requests[name])
        elif policy is not None:
            out[name] = parse_quantity(policy.get("default", "0"))
    return out


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


def _candidates(nd: NodeDevices, exactly: Mapping[str, Any]) -> list[_Device]:
    wanted_type = TYPE_BY_CLASS.get(str(exactly.get("deviceClassName", "")))
    exprs = [str(((s or {}).get("cel") or {}).get("expression", "")) for s in exactly.get("selectors") or []]
    return [
        d
        for d in nd.devices
        if wanted_type is not None
        and device_type(d.body) == wanted_type
        and all(selector_matches(e, d.body, d.id.driver) for e in exprs)
    ]


def _allocate_request(nd: NodeDevices, name: str, exactly: Mapping[str, Any], new_id: Any) -> list[JSON] | None:
    admin = bool(exactly.get("adminAccess"))
    mode = exactly.get("allocationMode") or "ExactCount"
    requests = (exactly.get("capacity") or {}).get("requests") or {}
    candidates = _candidates(nd, exactly)
    want = len(candidates) if mode == "All" else int(exactly.get("count") or 1)
    picked: list[JSON] = []
    for dev in candidates:
        if len(picked) == want:
            break
        consume = _requested_capacity(dev.body, requests) if dev.body.get("allowMultipleAllocations") else {}
        if not _fits(nd, dev, admin, consume):
            if mode == "All":
                return None
            continue
        result: JSON = {"request": name, "driver": dev.id.driver, "pool": dev.id.pool, "device": dev.id.device}
        if admin:
            result["adminAccess"] = True
        else:
            if dev.body.get("allowMultipleAllocations"):
                result["shareID"] = str(new_id())
                result["consumedCapacity"] = {k: _quantity(v) for k, v in consume.items()}
            _take(nd, dev, consume)
        picked.append(result)
    return picked if picked and len(picked) == want else None


def _quantity(v: Decimal) -> str:
    return str(int(v)) if v == v.to_integral_value() else str(v)


def allocate(
    claims: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    node: str,
    allocated: Sequence[Mapping[str, Any]],
    new_id: Any = uuid.uuid4,
) -> list[list[JSON]] | None:
    """The allocation results for each of ``claims`` on ``node`` (beside the claims already
    ``allocated``), or None when they do not all fit. Requests with ``firstAvailable`` take
    the first subrequest that fits, named ``<request>/<subrequest>``."""
    nd = node_devices(slices, node, allocated)
    out: list[list[JSON]] = []
    for claim in claims:
        results: list[JSON] = []
        for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = str(req.get("name", ""))
            if req.get("exactly") is not None:
                got = _allocate_request(nd, name, req["exactly"], new_id)
            else:
                got = None
                for sub in req.get("firstAvailable") or []:
                    got = _allocate_request(nd, f"{name}/{sub.get('name', '')}", sub, new_id)
                    if got is not None:
                        break
            if got is None:
                return None
            results.extend(got)
        out.append(results)
    return out


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
