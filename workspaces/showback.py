"""Showback in physical GPU-hours: what each Workspace holds of the cluster's physical GPUs,
hour by hour. Pure: plain numbers from the cluster view's node lines and Workspace lines.

Every figure is in physical GPUs (gpus.numbers.ledger.physical_share): an exclusive GPU is 1, a
time-sliced replica 1/replicas of its GPU, a MIG instance its compute slices over its GPU's.
An hour's figure in GPUs is that hour's GPU-hours.

- allocated: the Workspace's quota (gpus.numbers.ledger.physical_shares: a quota names a resource,
  so each unit is worth the cluster's average of that resource);
- requested: what its Running pods request, each on the node it runs on, and the GPUs its
  ResourceClaims hold (DRA): each device a claim was allocated, on its node, times
  physical_share of the device's DeviceClass there (a shared device's units split among the
  claims that hold it). A quota of a DeviceClass's devices is allocated like any other;
- used: the GPUs its Running pods hold times their utilisation, as DCGM measured it. On a
  time-sliced GPU that pods of other Workspaces share (gpus.numbers.occupancy) no tenant's own use
  is measurable: ``used`` is then None with ``measurable`` False, never the device's figure.

The cluster's physical GPUs are the ledger's; what no Workspace's quota holds is unallocated,
so the Workspaces and the unallocated rest add up to the cluster (negative: quotas exceed it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Protocol

from brickadmin.cluster import dra
from brickadmin.cluster.vocabulary import quantity
from gpus.numbers import occupancy
from gpus.numbers.dra_lines import is_dra_resource, quota_resource
from gpus.numbers.ledger import NodeLedger, physical_share, physical_shares


class WorkspaceLine(Protocol):
    """A Workspace line of the cluster view (gpus.view.reading.workspace_lines) or alike."""

    namespace: str
    gpu_quotas: dict[str, int]
    pods: list[dict[str, Any]]
    utilisation: float | None


@dataclass(frozen=True, slots=True)
class HourFigures:
    """One Workspace's physical GPUs in one hour (so its GPU-hours)."""

    allocated: float
    requested: float
    used: float | None  # None: not measured, or not measurable (see ``measurable``)
    measurable: bool = True  # False: on time-sliced GPUs shared with other Workspaces
    borrowed: float = 0.0  # elastic quota on Kueue: held above its guarantee, lent by the cohort
    lent: float = 0.0  # of its guarantee, held by others of the cohort

    def as_list(self) -> list[Any]:
        head = [self.allocated, self.requested, self.used, self.measurable]
        return head + [self.borrowed, self.lent] if self.borrowed or self.lent else head

    @classmethod
    def from_list(cls, data: list[Any]) -> HourFigures:
        return cls(
            float(data[0]),
            float(data[1]),
            None if data[2] is None else float(data[2]),
            bool(data[3]),
            float(data[4]) if len(data) > 4 else 0.0,
            float(data[5]) if len(data) > 5 else 0.0,
        )


def hour_of(moment: datetime) -> datetime:
    """The UTC hour a moment falls in (its rollup's key)."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def month_of(moment: datetime) -> date:
    """The first day of the UTC month a moment falls in."""
    return moment.astimezone(UTC).date().replace(day=1)


def _pod_key(namespace: str, pod: Mapping[str, Any]) -> str:
    return f"{namespace}/{pod.get('name', '')}"


def claim_gpus(nodes: Iterable[NodeLedger]) -> dict[str, float]:
    """namespace -> the physical GPUs its ResourceClaims hold now: per device a claim was
    allocated (admin access is not use), its units (1; on a shared device the units its claims
    hold, split among them) times physical_share of the device's DeviceClass on its node, a
    device never more than one GPU."""
    out: dict[str, float] = {}
    for n in nodes:
        if n.dra is None:
            continue
        for device in n.dra.devices:
            if not device.claims:
                continue
            device_class = dra.DEVICE_CLASS_BY_TYPE.get(device.kind, "")
            unit = physical_share(n, quota_resource(device_class)) if device_class else 0.0
            units = (device.units_held or len(device.claims)) if device.shared else 1
            # a device is at most its GPU (unlimited shares count the claims held as the units)
            each = min(1.0, units * unit) / len(device.claims)
            for claim in device.claims:
                namespace = claim.split("/", 1)[0]
                out[namespace] = out.get(namespace, 0.0) + each
    return out


def dra_quotas(ws: WorkspaceLine) -> dict[str, int]:
    """A Workspace's quotas of DeviceClasses' devices (<class>.deviceclass.resource.k8s.io/devices),
    from its quota lines' hard amounts (``gpu_quotas`` holds the device plugins' resources)."""
    out: dict[str, int] = {}
    for q in getattr(ws, "quotas", None) or []:
        for key, value in (q.get("hard") or {}).items():
            if is_dra_resource(key):
                out[key] = out.get(key, 0) + quantity(value)
    return out


@dataclass(frozen=True, slots=True)
class ElasticLine:
    """A Workspace's elastic quota of one GPU resource on Kueue this hour, in its resource's
    units (brickadmin.cluster.kueue.QueueLine): its guarantee, what it borrows from its cohort
    and what of its guarantee the others hold."""

    resource: str
    guarantee: int
    borrowed: int
    lent: int


def hour_figures(
    nodes: list[NodeLedger],
    workspaces: Iterable[WorkspaceLine],
    *,
    measured: bool,
    elastic: Mapping[str, Iterable[ElasticLine]] | None = None,
) -> dict[str, HourFigures]:
    """namespace -> its figures, for the Workspaces holding a GPU quota, running GPU pods or
    holding GPUs through ResourceClaims. ``measured``: whether the view's utilisation comes
    from DCGM (else used is None).

    ``elastic`` (namespace -> its lines; Kueue served): the Workspace is allocated, of such a
    resource, its guarantee less what it lends plus what it borrows, not its ResourceQuota (the
    ceiling, guarantee + burst); what one borrows another lends, so the Workspaces still add
    up to the cluster."""
    by_name = {n.name: n for n in nodes}
    pool = physical_shares(nodes)
    sliced = occupancy.time_sliced_pods(nodes)
    shared_with_others = occupancy.pods_sharing_with_other_workspaces(nodes, sliced)
    claimed = claim_gpus(nodes)
    elastic = elastic or {}
    out: dict[str, HourFigures] = {}
    for ws in workspaces:
        quotas = {**(ws.gpu_quotas or {}), **dra_quotas(ws)}
        borrowed = lent = 0.0
        for e in elastic.get(ws.namespace, ()):
            quotas[e.resource] = max(0, e.guarantee - e.lent + e.borrowed)
            borrowed += e.borrowed * pool.get(e.resource, 0.0)
            lent += e.lent * pool.get(e.resource, 0.0)
        allocated = sum(amount * pool.get(res, 0.0) for res, amount in quotas.items() if amount > 0)
        requested = held = claimed.get(ws.namespace, 0.0)
        devices: set[str] = set()  # whole devices of time-sliced pods the Workspace has to itself
        measurable = True
        running = [p for p in ws.pods or [] if p.get("phase") == "Running" and p.get("requests")]
        for pod in running:
            node = by_name.get(pod.get("node") or "")
            share = 0.0
            for res, amount in (pod.get("requests") or {}).items():
                unit = physical_share(node, res) if node is not None else pool.get(res, 0.0)
                share += amount * unit
            requested += share
            key = _pod_key(ws.namespace, pod)
            if key in shared_with_others:
                measurable = False
            elif key in sliced:
                devices.update(pod.get("gpus") or [f"{pod.get('node', '')}:{pod.get('name', '')}"])
            else:
                held += share
        if not allocated and not requested and not lent:
            continue
        used: float | None = None
        if measured and measurable:
            if not running and not held:
                used = 0.0
            elif ws.utilisation is not None:
                # the Workspace's own devices on a time-sliced node count whole: DCGM's
                # figure there is its alone
                used = (held + len(devices)) * ws.utilisation / 100.0
        out[ws.namespace] = HourFigures(allocated, requested, used, measurable, borrowed, lent)
    return out


def unallocated(cluster_physical: float, figures: Iterable[HourFigures | float]) -> float:
    """What no Workspace's quota holds of the cluster's physical GPUs (or GPU-hours);
    negative when the quotas hold more than the cluster has (overcommitted)."""
    return cluster_physical - sum(f.allocated if isinstance(f, HourFigures) else f for f in figures)
