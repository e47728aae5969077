"""The GPU map of a node: which pod holds which slot of which physical GPU. Pure.

One tile per physical GPU, split into its slots: one per time-slicing (or MPS) replica, one
per MIG instance (one per replica of it where the plugin replicates MIG devices), or one for a
whole GPU. Under MIG strategy single every plain ``nvidia.com/gpu`` is an instance of the node's
one profile, so pods asking for it are drawn on its instances. A node whose layout the plugin
refuses (MIG-INVALID) offers nothing: its tiles have no slot. Each slot has a state:

- ``in_use``: a Running pod holds it;
- ``requested``: a pod scheduled to the node holds it but is not Running yet;
- ``stale``: a pod holds it through a resource the node no longer serves (the previous
  mode's, left by kubelet: docs/operator-guide.md#troubleshooting);
- ``cordoned``: free, on a cordoned node (nothing new lands there);
- ``free``.

Where DCGM names the pods of a device (``physical_source == "dcgm"``), those pods are put
on that device; the others are placed the way the device plugin allocates (in creation
order, first free slot), like the ledger's ``_devices_in_use`` and lab/gpusim.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brickadmin.cluster.deviceplugin import pod_gpu_requests
from brickadmin.cluster.vocabulary import GPU, GPU_SHARED, MIG_PREFIX, is_terminal
from gpus.numbers.words import gettext_lazy as _

if TYPE_CHECKING:
    from gpus.numbers.ledger import NodeLedger

STATE_TEXT = {
    "free": _("free"),
    "requested": _("requested, not running yet"),
    "in_use": _("in use"),
    "stale": _("held through a stale resource"),
    "cordoned": _("free, node cordoned"),
}


@dataclass
class Slot:
    label: str
    state: str = "free"
    pod: str = ""  # namespace/name
    profile: str = ""  # the MIG profile of an instance

    @property
    def state_text(self) -> str:
        return str(STATE_TEXT[self.state])

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "state": self.state, "pod": self.pod, "state_text": self.state_text}


@dataclass
class Tile:
    index: int
    uuid: str
    model: str
    kind: str  # whole | timeslicing | mig
    slots: list[Slot] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"GPU {self.index}"

    @property
    def caption(self) -> str:
        return self.uuid[:12] + ("…" if len(self.uuid) > 12 else "")


@dataclass
class NodeMap:
    tiles: list[Tile]
    unplaced: list[tuple[str, str]]  # (pod, resource) that found no slot
    refused: bool = False  # the device plugin refuses the node's layout: no slot is offered

    @property
    def slots(self) -> int:
        return sum(len(t.slots) for t in self.tiles)

    def count(self, state: str) -> int:
        return sum(1 for t in self.tiles for s in t.slots if s.state == state)


def mig_profile_of(node: NodeLedger, resource: str) -> str:
    """The MIG profile a unit of ``resource`` is on ``node`` ("" for a whole GPU or a replica of
    one): nvidia.com/mig-<profile>, renamed or not, and plain nvidia.com/gpu (or its renamed
    nvidia.com/gpu.shared) under MIG strategy single."""
    if resource.startswith(MIG_PREFIX):
        return resource[len(MIG_PREFIX) :].removesuffix(".shared")
    if node.mig_profile and resource in (GPU, GPU_SHARED):
        return node.mig_profile
    return ""


def _mig_replicas(node: NodeLedger) -> dict[str, int]:
    """MIG profile -> the replicas the plugin makes of each of its instances (1: not replicated)."""
    out: dict[str, int] = {}
    for r in node.served:
        profile = mig_profile_of(node, r.resource)
        if profile and (r.capacity or r.allocatable):
            out[profile] = max(out.get(profile, 1), r.replicas if r.replicas > 1 else 1)
    return out


def _mig_slots(profiles: list[str], replicas: dict[str, int]) -> list[Slot]:
    slots: list[Slot] = []
    for p in profiles:
        n = replicas.get(p, 1)
        # the replica first: a tile shortens a long label from its end
        slots.extend(Slot(f"{k + 1}/{n} {p}" if n > 1 else p, profile=p) for k in range(n))
    return slots


def node_map(node: NodeLedger) -> NodeMap:
    """The map of a ``gpus.numbers.ledger.NodeLedger``."""
    devices = list(node.raw_devices) or [{"uuid": "", "model": node.model} for _i in range(node.physical)]
    refused = bool(node.mig_error)
    # MPS replicas are drawn as time-sliced ones are: a slot per replica of the GPU
    replicas = max(1, node.replicas) if node.mode in ("timeslicing", "mps") else 1
    mig_replicas = _mig_replicas(node)
    tiles = []
    for i, d in enumerate(devices):
        if refused:
            tile = Tile(i, d.get("uuid", ""), d.get("model", ""), "mig" if d.get("mig") else "whole", [])
        elif d.get("mig"):
            tile = Tile(i, d.get("uuid", ""), d.get("model", ""), "mig", _mig_slots(d["mig"], mig_replicas))
        elif replicas > 1:
            tile = Tile(
                i,
                d.get("uuid", ""),
                d.get("model", ""),
                "timeslicing",
                [Slot(f"{k + 1}/{replicas}") for k in range(replicas)],
            )
        else:
            tile = Tile(i, d.get("uuid", ""), d.get("model", ""), "whole", [Slot(str(_("whole")))])
        tiles.append(tile)

    stale = {r.resource for r in node.resources.values() if r.stale}
    pods = sorted(
        (p for p in node.raw_pods if not is_terminal(p)),
        key=lambda p: (
            (p.get("metadata") or {}).get("creationTimestamp") or "",
            (p.get("metadata") or {}).get("name", ""),
        ),
    )
    measured: dict[str, list[int]] = {}  # pod -> device indexes DCGM names it on
    if node.physical_source == "dcgm":
        for i, d in enumerate(devices):
            for who in d.get("pods") or []:
                measured.setdefault(who, []).append(i)

    def free_slot(resource: str, on: list[int] | None) -> Slot | None:
        candidates = on if on is not None else range(len(tiles))
        profile = mig_profile_of(node, resource)
        for i in candidates:
            t = tiles[i]
            for s in t.slots:
                if s.pod:
                    continue
                if profile:
                    if t.kind == "mig" and s.profile == profile:
                        return s
                elif t.kind != "mig":
                    return s
        return None

    unplaced = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        who = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        running = (pod.get("status") or {}).get("phase") == "Running"
        for resource, amount in pod_gpu_requests(pod).items():
            state = "stale" if resource in stale else ("in_use" if running else "requested")
            for _n in range(amount):
                slot = None
                if who in measured:
                    slot = free_slot(resource, measured[who]) or free_slot(resource, None)
                else:
                    slot = free_slot(resource, None)
                if slot is None:
                    unplaced.append((who, resource))
                    continue
                slot.pod, slot.state = who, state
    if node.cordoned:
        for t in tiles:
            for s in t.slots:
                if not s.pod:
                    s.state = "cordoned"
    return NodeMap(tiles=tiles, unplaced=unplaced, refused=refused)
