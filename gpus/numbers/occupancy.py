"""Who holds the GPUs, and are they used: one line per Workspace namespace. Pure.

From a snapshot and its ledger, for every namespace that is labelled a Workspace or holds a
GPU quota: its owner label, its GPU quota (Allocated to the Workspace), what its pods hold
now as the scheduler counts it (Requested by pods: every pod bound to a node and not
finished, a pod still pulling its image too), how many of its GPU pods wait for the scheduler
to place them (waiting: a Workspace waiting for GPUs is not idle), the distinct physical
GPUs its Running pods hold (In use physically, placed as the node's GPU map places them:
gpus/gpumap.py) and, when DCGM measured them, their utilisation and memory used (None
otherwise: not measured, never 0).
The cluster view (gpus/view_publish.py) stores these lines; the Workspaces pages read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from brickadmin.cluster import quotascope
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import pod_gpu_requests
from brickadmin.cluster.vocabulary import KubeObject, quantity
from gpus.numbers import gpumap, pod_waits
from gpus.numbers.ledger import SHARED, Ledger, NodeLedger, gpu_type_of
from gpus.numbers.usage import usage_of

if TYPE_CHECKING:
    from brickadmin.cluster.snapshot import Snapshot

# Where a pod's GPUs are: [(node, GPU index, uuid)], as the node's GPU map places them.
Placement = list[tuple[str, int, str]]


@dataclass
class Occupancy:
    namespace: str
    owner: str = ""
    labelled: bool = False
    gpu_quotas: dict[str, int] = field(default_factory=dict)
    quotas: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "hard", "used", "scopes"}]
    requested: int = 0  # GPUs its pods bound to a node hold (vocabulary.holds_node_resources)
    waiting: int = 0  # its GPU pods the scheduler has not placed (vocabulary.waits_for_a_node)
    physical: int = 0
    utilisation: float | None = None
    memory_mib: float | None = None
    created_at: str = ""
    pods: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "node", "phase", "requests", ...}]

    @property
    def resource(self) -> str:
        return ", ".join(sorted(r for r, n in self.gpu_quotas.items() if n))

    @property
    def quota(self) -> int:
        return sum(self.gpu_quotas.values())

    # resource -> what it is on this Workspace's nodes (ledger types: 'exclusive', 'shared',
    # 'mig-<profile>', 'mixed'); a resource not here is named by its name (gpu_type_of)
    resource_types: dict[str, list[str]] = field(default_factory=dict)

    @property
    def gpu_type(self) -> str:
        types = sorted(
            {t for r, n in self.gpu_quotas.items() if n for t in (self.resource_types.get(r) or [gpu_type_of(r)])}
        )
        return ", ".join(types)

    def idle(self, threshold_percent: float) -> bool:
        """Holding GPU quota and not using it now: no pod holds a GPU, or DCGM measures its
        GPUs under the threshold. A Workspace with a GPU pod the scheduler cannot place is
        waiting for GPUs, never idle: taking its quota back would only make it wait longer."""
        if not self.quota or self.waiting:
            return False
        if not self.requested:
            return True
        return self.utilisation is not None and self.utilisation < threshold_percent


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _in_use_slots(n: NodeLedger) -> list[tuple[str, int, str]]:
    """[(pod, GPU index, uuid)] of the slots Running pods hold on this node's GPU map."""
    return [
        (slot.pod, tile.index, tile.uuid)
        for tile in gpumap.node_map(n).tiles
        for slot in tile.slots
        if slot.pod and slot.state == "in_use"
    ]


def compute(snapshot: Snapshot, ledger: Ledger, memo: dict[str, Any] | None = None) -> dict[str, Occupancy]:
    """namespace -> Occupancy, for Workspace namespaces and every namespace with a GPU quota.

    ``memo``: kept by the caller between calls (the cluster view's publish). A node's GPU
    map is drawn again only when its ledger line is a new one (gpus.numbers.ledger.compute reuses
    the line of an unchanged node); a namespace's Occupancy is the last call's object
    when nothing it is made of changed (its quotas, owner, pods and where their GPUs are,
    their DCGM readings), and a pod's line is made again only when the pod (the same
    object while the watcher saw no change) or the GPUs it holds changed. Callers must not
    change what this returns."""
    out: dict[str, Occupancy] = {}
    for ns in getattr(snapshot, "namespaces", None) or []:
        md = ns.get("metadata") or {}
        labels = md.get("labels") or {}
        if labels.get(vocab.WORKSPACE_LABEL) == "true":
            out[md["name"]] = Occupancy(
                md["name"],
                owner=labels.get(vocab.OWNER_LABEL, ""),
                labelled=True,
                created_at=md.get("creationTimestamp") or "",
            )
    namespaces = {(ns.get("metadata") or {}).get("name"): ns for ns in getattr(snapshot, "namespaces", None) or []}
    for q in snapshot.quotas:
        md = q.get("metadata") or {}
        name = md.get("namespace", "")
        hard = (q.get("spec") or {}).get("hard") or {}
        gpu = {
            k[len("requests.") :]: quantity(v)
            for k, v in hard.items()
            if k.startswith("requests." + vocab.NVIDIA_PREFIX)
        }
        occ = out.get(name)
        if occ is None:
            if not any(gpu.values()):
                continue
            nmd = (namespaces.get(name) or {}).get("metadata") or {}
            occ = out[name] = Occupancy(
                name,
                owner=(nmd.get("labels") or {}).get(vocab.OWNER_LABEL, ""),
                created_at=nmd.get("creationTimestamp") or md.get("creationTimestamp") or "",
            )
        for res, amount in gpu.items():
            occ.gpu_quotas[res] = occ.gpu_quotas.get(res, 0) + amount
        occ.quotas.append(
            {
                "name": md.get("name", ""),
                "hard": {k: str(v) for k, v in hard.items()},
                "used": {k: str(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()},
                "scopes": quotascope.scope_selectors(q.get("spec") or {}),
            }
        )
    if not out:
        return out
    memo = {} if memo is None else memo

    # Where each Running pod's GPUs are: the node maps of the nodes running pods of these namespaces.
    placed: dict[str, Placement] = {}  # "ns/pod" -> where its GPUs are
    sliced, multi_tenant = _time_slicing(ledger.nodes, memo)
    last_maps, maps = memo.get("maps", {}), {}
    wanted = set(out)  # frozenset.isdisjoint walks a dict argument whole, a set it probes
    for n in ledger.nodes:
        last = last_maps.get(n.name)
        if last is not None and last[0] is n:
            pod_namespaces, slots = last[1], last[2]
        else:
            pod_namespaces = frozenset((p.get("metadata") or {}).get("namespace") for p in n.raw_pods)
            slots = None
        if slots is None and not pod_namespaces.isdisjoint(wanted):
            slots = _in_use_slots(n)
        maps[n.name] = (n, pod_namespaces, slots)  # slots None: not drawn, no pod of these namespaces
        for pod, index, uuid in slots or ():
            placed.setdefault(pod, []).append((n.name, index, uuid))

    pods_of: dict[str, list[KubeObject]] = {}
    # Failed GPU pods too: a pod the kubelet refused shows its owner why (gpus/pod_waits.py).
    # Pods on DRA claims that wait for a node too: their requests are claims, not nvidia.com/*
    # (one asking for nvidia.com/* as well is among the GPU pods already).
    waiting_on_claims = [
        p
        for p in getattr(snapshot, "claim_pods", None) or []
        if (p.get("status") or {}).get("phase") == "Pending"
        and not (p.get("spec") or {}).get("nodeName")
        and not pod_gpu_requests(p)
    ]
    for pod in [*snapshot.gpu_pods, *(getattr(snapshot, "failed_gpu_pods", None) or []), *waiting_on_claims]:
        name = (pod.get("metadata") or {}).get("namespace", "")
        if name in out:
            pods_of.setdefault(name, []).append(pod)
    usage = getattr(snapshot, "usage", None)
    node_lines = {n.name: n for n in ledger.nodes}
    resource_rows = {r.resource: r.gpu_type for r in ledger.by_resource}
    last_occupancy, kept = memo.get("namespaces", {}), {}  # namespace -> (what it is made of, Occupancy, pod lines)
    for name, occ in list(out.items()):
        pods = pods_of.get(name, [])
        keys = [f"{name}/{(pod.get('metadata') or {}).get('name', '')}" for pod in pods]
        where = [placed.get(key, []) for key in keys]
        readings = None if usage is None else [usage.get(key) for key in keys]
        shared = [key in sliced for key in keys]
        occ.resource_types = _resource_types(occ.gpu_quotas, pods, node_lines, resource_rows)
        key = (
            occ.owner,
            occ.labelled,
            occ.created_at,
            occ.gpu_quotas,
            occ.resource_types,
            occ.quotas,
            pods,
            where,
            readings,
            shared,
            [key in multi_tenant for key in keys],
        )
        last = last_occupancy.get(name)
        if last is not None and last[0] == key:
            out[name] = last[1]
        else:
            lines: dict[str, Any] = {}
            _fill(occ, pods, keys, where, usage, last[2] if last is not None else {}, lines, sliced, multi_tenant)
            last = (key, occ, lines)
        kept[name] = last
    memo.update(maps=maps, namespaces=kept)
    return out


def _resource_types(
    gpu_quotas: dict[str, int],
    pods: list[KubeObject],
    node_lines: dict[str, NodeLedger],
    resource_rows: dict[str, str],
) -> dict[str, list[str]]:
    """What each GPU resource of the quota is on the Workspace's nodes: on the nodes its pods
    are bound to, as those nodes' ledger lines type it (plain nvidia.com/gpu is a MIG
    instance on a MIG-single node, a replica where the GPU Operator time-slices it); without
    such a pod, as the cluster's resource row types it (the Availability page's)."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        line = node_lines.get((pod.get("spec") or {}).get("nodeName") or "")
        if line is None or not vocab.holds_node_resources(pod):
            continue
        for res in pod_gpu_requests(pod):
            served = line.resources.get(res)
            if res in gpu_quotas and served is not None and served.gpu_type:
                out.setdefault(res, set()).add(served.gpu_type)
    for res, amount in gpu_quotas.items():
        if amount and res not in out and resource_rows.get(res):
            out[res] = {resource_rows[res]}
    return {res: sorted(types) for res, types in sorted(out.items())}


def pods_sharing_with_other_workspaces(nodes: list[NodeLedger], sliced: set[str]) -> frozenset[str]:
    """Of the time-sliced pods, those on a node where time-sliced pods of more than one
    namespace run: only there is a tenant's share of the device's figure unknowable. A node
    whose time-sliced pods are all one Workspace's gives it the devices' figures whole."""
    out: set[str] = set()
    for n in nodes:
        out |= _node_time_slicing(n)[1] & sliced
    return frozenset(out)


def time_sliced_pods(nodes: list[NodeLedger]) -> set[str]:
    """ "ns/pod" of the pods holding a time-sliced GPU (a shared resource, or any GPU of a
    node whose plugin advertises replicas): DCGM measures the device, and NVIDIA's
    dcgm-exporter copies the device's figures to every pod on it, so no pod's own use is
    measurable there. A MIG instance that is not time-sliced is measured on its own."""
    out: set[str] = set()
    for n in nodes:
        out |= _node_time_slicing(n)[0]
    return out


def _node_time_slicing(n: NodeLedger) -> tuple[frozenset[str], frozenset[str]]:
    """One node's time-sliced pods ("ns/pod"), and those of them that share the node's
    devices with another namespace's time-sliced pods."""
    shared = {r for r, line in n.resources.items() if line.gpu_type == SHARED or n.replicas > 1}
    if not shared:
        return frozenset(), frozenset()
    keys = set()
    for pod in n.raw_pods:
        if shared.intersection(pod_gpu_requests(pod)):
            md = pod.get("metadata") or {}
            keys.add(f"{md.get('namespace', '')}/{md.get('name', '')}")
    sliced = frozenset(keys)
    namespaces = {key.split("/", 1)[0] for key in sliced}
    return sliced, (sliced if len(namespaces) > 1 else frozenset())


def _time_slicing(nodes: list[NodeLedger], memo: dict[str, Any]) -> tuple[set[str], frozenset[str]]:
    """time_sliced_pods and pods_sharing_with_other_workspaces at once, a node's part
    worked out again only when its ledger line is a new one (an unchanged node keeps its line)."""
    last, kept = memo.get("slicing", {}), {}
    sliced: set[str] = set()
    multi: set[str] = set()
    for n in nodes:
        entry = last.get(n.name)
        if entry is None or entry[0] is not n:
            entry = (n, *_node_time_slicing(n))
        kept[n.name] = entry
        sliced |= entry[1]
        multi |= entry[2]
    memo["slicing"] = kept
    return sliced, frozenset(multi)


def _fill(
    occ: Occupancy,
    pods: list[KubeObject],
    keys: list[str],
    where: list[Placement],
    usage: dict[str, dict[str, list[Any]]] | None,
    last_lines: dict[str, Any],
    lines: dict[str, Any],
    sliced: set[str] | frozenset[str] = frozenset(),
    multi_tenant: frozenset[str] = frozenset(),
) -> None:
    """Add the pods of ``occ``'s namespace to it: their lines, what the ones bound to a node
    request, how many wait for a node, the distinct GPUs the Running ones hold and (when DCGM
    measured them) their utilisation.
    A pod on a time-sliced GPU gets no utilisation of its own (``time_sliced``; the
    device's figure is kept as ``device_utilisation``) and is left out of the Workspace's,
    unless the node's time-sliced pods are all this Workspace's (``multi_tenant`` does not name it)."""
    devices: dict[str, list[Any]] = {}  # DCGM device readings of the namespace's pods
    held: set[tuple[str, int]] = set()
    for pod, key, at in zip(pods, keys, where, strict=True):
        if vocab.is_terminal(pod) and (pod.get("status") or {}).get("phase") != "Failed":
            continue
        md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase") or ""
        last = last_lines.get(key)
        if last is not None and last[0] is pod and last[1] == at:
            base = last[2]
        else:
            base = {
                "name": md.get("name", ""),
                "node": spec.get("nodeName", ""),
                "phase": phase,
                "requests": pod_gpu_requests(pod),
                "gpus": sorted({f"{node} · GPU {i}" + (f" ({uuid})" if uuid else "") for node, i, uuid in at}),
                "created": md.get("creationTimestamp") or "",
                "scope": quotascope.pod_facts(pod),  # what the quotas' scopes read of it
            }
            wait = pod_waits.facts(pod)
            if wait is not None:
                base["wait"] = wait
            claims = [c.get("resourceClaimName") or c.get("name", "") for c in spec.get("resourceClaims") or []]
            if claims:
                base["claims"] = claims
        lines[key] = (pod, at, base)
        line = dict(base)  # a line of its own: utilisation is added below
        if vocab.holds_node_resources(pod):  # as the scheduler counts it: Running or still starting
            occ.requested += sum(line["requests"].values())
        elif vocab.waits_for_a_node(pod):
            occ.waiting += 1
        if phase == "Running":
            held.update((node, i) for node, i, _u in at)
        if key in sliced:
            line["time_sliced"] = True
        if usage is not None:
            readings = usage.get(key) or {}
            if key in sliced:
                line["utilisation"], line["memory_mib"] = None, None
                line["device_utilisation"], line["device_memory_mib"] = usage_of(readings)
                if key not in multi_tenant:  # the Workspace's own device: its figure is the Workspace's
                    devices.update(readings)
            else:
                line["utilisation"], line["memory_mib"] = usage_of(readings)
                devices.update(readings)
        occ.pods.append(line)
    occ.physical = len(held)
    occ.pods.sort(key=lambda p: p["name"])
    if usage is not None:
        occ.utilisation, occ.memory_mib = usage_of(devices)


def created(occ: Occupancy) -> datetime | None:
    return _parse_time(occ.created_at)


class QuotaLine(Protocol):
    """A Workspace line as stored (gpus.models.ViewWorkspace, with ``idle_since``) or computed."""

    @property
    def quota(self) -> int: ...

    @property
    def gpu_quotas(self) -> dict[str, int]: ...


_Line = TypeVar("_Line", bound=QuotaLine)


def idle_lines(lines: Iterable[_Line], now: datetime, hours: float) -> list[_Line]:
    """The lines whose GPU quota has been idle for at least ``hours``; never one whose GPU pods
    wait for the scheduler (``waiting``): that Workspace is waiting for GPUs."""
    window = timedelta(hours=hours)
    return [
        line
        for line in lines
        if line.quota
        and not getattr(line, "waiting", 0)
        and (since := getattr(line, "idle_since", None)) is not None
        and now - since >= window
    ]


def idle_totals(lines: Iterable[QuotaLine], now: datetime, hours: float) -> dict[str, int]:
    """GPU quota idle for the window, per resource (the Dashboard shows it beside Used)."""
    out: dict[str, int] = {}
    for line in idle_lines(lines, now, hours):
        for res, n in (line.gpu_quotas or {}).items():
            if n:
                out[res] = out.get(res, 0) + n
    return out
