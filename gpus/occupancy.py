"""Who holds the GPUs, and are they used: one line per Workspace namespace. Pure.

From a snapshot and its ledger, for every namespace that is labelled a Workspace or holds a
GPU quota: its owner label, its GPU quota (Allocated to the Workspace), what its Running
pods request now (Requested by pods), the distinct physical GPUs they hold (In use
physically, placed as the node's GPU map places them: gpus/gpumap.py) and, when DCGM
measured them, their utilisation and memory used (None otherwise: not measured, never 0).
The cluster view (gpus/clusterview.py) stores these lines; the Workspaces pages read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from brickadmin import metrics
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import pod_gpu_requests

from . import gpumap
from .ledger import gpu_type_of, quantity


@dataclass
class Occupancy:
    namespace: str
    owner: str = ""
    labelled: bool = False
    gpu_quotas: dict[str, int] = field(default_factory=dict)
    quotas: list[dict] = field(default_factory=list)  # [{"name", "hard", "used"}]
    requested: int = 0
    physical: int = 0
    utilisation: float | None = None
    memory_mib: float | None = None
    created_at: str = ""
    pods: list[dict] = field(default_factory=list)

    @property
    def resource(self) -> str:
        return ", ".join(sorted(r for r, n in self.gpu_quotas.items() if n))

    @property
    def quota(self) -> int:
        return sum(self.gpu_quotas.values())

    @property
    def gpu_type(self) -> str:
        types = sorted({gpu_type_of(r) for r, n in self.gpu_quotas.items() if n})
        return ", ".join(types)

    def idle(self, threshold_percent: float) -> bool:
        """Holding GPU quota and not using it now: no Running pod asks for a GPU, or DCGM
        measures its GPUs under the threshold."""
        if not self.quota:
            return False
        if not self.requested:
            return True
        return self.utilisation is not None and self.utilisation < threshold_percent


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _in_use_slots(n) -> list[tuple[str, int, str]]:
    """[(pod, GPU index, uuid)] of the slots Running pods hold on this node's GPU map."""
    return [(slot.pod, tile.index, tile.uuid) for tile in gpumap.node_map(n).tiles for slot in tile.slots
            if slot.pod and slot.state == "in_use"]


def compute(snapshot, ledger, memo: dict | None = None) -> dict[str, Occupancy]:
    """namespace -> Occupancy, for Workspace namespaces and every namespace with a GPU quota.

    ``memo``: kept by the caller between calls (the cluster view's publish); a node's GPU
    map is drawn again only when its ledger line is a new one (gpus.ledger.compute reuses
    the line of an unchanged node), and a pod's line only when the pod (the same object
    while the watcher saw no change) or the GPUs it holds changed."""
    out: dict[str, Occupancy] = {}
    for ns in getattr(snapshot, "namespaces", None) or []:
        md = ns.get("metadata") or {}
        labels = md.get("labels") or {}
        if labels.get(vocab.WORKSPACE_LABEL) == "true":
            out[md["name"]] = Occupancy(md["name"], owner=labels.get(vocab.OWNER_LABEL, ""), labelled=True,
                                        created_at=md.get("creationTimestamp") or "")
    namespaces = {(ns.get("metadata") or {}).get("name"): ns for ns in getattr(snapshot, "namespaces", None) or []}
    for q in snapshot.quotas:
        md = q.get("metadata") or {}
        name = md.get("namespace", "")
        hard = (q.get("spec") or {}).get("hard") or {}
        gpu = {k[len("requests."):]: quantity(v) for k, v in hard.items() if k.startswith("requests." + vocab.NVIDIA_PREFIX)}
        occ = out.get(name)
        if occ is None:
            if not any(gpu.values()):
                continue
            nmd = (namespaces.get(name) or {}).get("metadata") or {}
            occ = out[name] = Occupancy(name, owner=(nmd.get("labels") or {}).get(vocab.OWNER_LABEL, ""),
                                        created_at=nmd.get("creationTimestamp") or md.get("creationTimestamp") or "")
        for res, n in gpu.items():
            occ.gpu_quotas[res] = occ.gpu_quotas.get(res, 0) + n
        occ.quotas.append({"name": md.get("name", ""), "hard": {k: str(v) for k, v in hard.items()},
                           "used": {k: str(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()}})
    if not out:
        return out

    # Where each Running pod's GPUs are: the node maps of the nodes running pods of these namespaces.
    placed: dict[str, list[tuple[str, int, str]]] = {}  # "ns/pod" -> [(node, GPU index, uuid)]
    last_maps = memo.get("maps", {}) if memo is not None else {}
    maps = {}
    for n in ledger.nodes:
        if not any((p.get("metadata") or {}).get("namespace") in out for p in n.raw_pods):
            continue
        last = last_maps.get(n.name)
        slots = last[1] if last is not None and last[0] is n else _in_use_slots(n)
        maps[n.name] = (n, slots)
        for pod, index, uuid in slots:
            placed.setdefault(pod, []).append((n.name, index, uuid))
    last_lines = memo.get("lines", {}) if memo is not None else {}
    lines = {}
    if memo is not None:
        memo["maps"], memo["lines"] = maps, lines

    usage = getattr(snapshot, "usage", None)
    devices_of: dict[str, dict] = {}  # namespace -> DCGM device readings of its pods
    held: dict[str, set] = {}
    for pod in snapshot.gpu_pods:
        md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        occ = out.get(md.get("namespace", ""))
        if occ is None or vocab.is_terminal(pod):
            continue
        key = f'{occ.namespace}/{md.get("name", "")}'
        phase = (pod.get("status") or {}).get("phase") or ""
        where = placed.get(key, [])
        last = last_lines.get(key)
        if last is not None and last[0] is pod and last[1] == where:
            base = last[2]
        else:
            base = {"name": md.get("name", ""), "node": spec.get("nodeName", ""), "phase": phase,
                    "requests": pod_gpu_requests(pod),
                    "gpus": sorted({f"{node} · GPU {i}" + (f" ({uuid})" if uuid else "") for node, i, uuid in where}),
                    "created": md.get("creationTimestamp") or ""}
        lines[key] = (pod, where, base)
        line = dict(base)  # a line of its own: utilisation is added below
        requests = line["requests"]
        if phase == "Running":
            occ.requested += sum(requests.values())
            held.setdefault(occ.namespace, set()).update((node, i) for node, i, _u in where)
        if usage is not None:
            readings = usage.get(key) or {}
            line["utilisation"], line["memory_mib"] = metrics.usage_of(readings)
            devices_of.setdefault(occ.namespace, {}).update(readings)
        occ.pods.append(line)
    for occ in out.values():
        occ.physical = len(held.get(occ.namespace, ()))
        occ.pods.sort(key=lambda p: p["name"])
        if usage is not None:
            occ.utilisation, occ.memory_mib = metrics.usage_of(devices_of.get(occ.namespace, {}))
    return out


def created(occ: Occupancy) -> datetime | None:
    return _parse_time(occ.created_at)
