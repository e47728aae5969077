"""Showback in physical GPU-hours: what each Workspace holds of the cluster's physical GPUs,
hour by hour. Pure: plain numbers from the cluster view's node lines and Workspace lines.

Every figure is in physical GPUs (gpus.numbers.ledger.physical_share): an exclusive GPU is 1, a
time-sliced replica 1/replicas of its GPU, a MIG instance its compute slices over its GPU's.
An hour's figure in GPUs is that hour's GPU-hours.

- allocated: the Workspace's quota (gpus.numbers.ledger.physical_shares: a quota names a resource,
  so each unit is worth the cluster's average of that resource);
- requested: what its Running pods request, each on the node it runs on;
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

from gpus.numbers import occupancy
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

    def as_list(self) -> list[Any]:
        return [self.allocated, self.requested, self.used, self.measurable]

    @classmethod
    def from_list(cls, data: list[Any]) -> HourFigures:
        return cls(float(data[0]), float(data[1]), None if data[2] is None else float(data[2]), bool(data[3]))


def hour_of(moment: datetime) -> datetime:
    """The UTC hour a moment falls in (its rollup's key)."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def month_of(moment: datetime) -> date:
    """The first day of the UTC month a moment falls in."""
    return moment.astimezone(UTC).date().replace(day=1)


def _pod_key(namespace: str, pod: Mapping[str, Any]) -> str:
    return f"{namespace}/{pod.get('name', '')}"


def hour_figures(
    nodes: list[NodeLedger], workspaces: Iterable[WorkspaceLine], *, measured: bool
) -> dict[str, HourFigures]:
    """namespace -> its figures, for the Workspaces holding a GPU quota or running GPU pods.
    ``measured``: whether the view's utilisation comes from DCGM (else used is None)."""
    by_name = {n.name: n for n in nodes}
    pool = physical_shares(nodes)
    sliced = occupancy.time_sliced_pods(nodes)
    shared_with_others = occupancy.pods_sharing_with_other_workspaces(nodes, sliced)
    out: dict[str, HourFigures] = {}
    for ws in workspaces:
        allocated = sum(amount * pool.get(res, 0.0) for res, amount in (ws.gpu_quotas or {}).items() if amount > 0)
        requested = held = 0.0
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
        if not allocated and not requested:
            continue
        used: float | None = None
        if measured and measurable:
            if not running:
                used = 0.0
            elif ws.utilisation is not None:
                # the Workspace's own devices on a time-sliced node count whole: DCGM's
                # figure there is its alone
                used = (held + len(devices)) * ws.utilisation / 100.0
        out[ws.namespace] = HourFigures(allocated, requested, used, measurable)
    return out


def unallocated(cluster_physical: float, figures: Iterable[HourFigures | float]) -> float:
    """What no Workspace's quota holds of the cluster's physical GPUs (or GPU-hours);
    negative when the quotas hold more than the cluster has (overcommitted)."""
    return cluster_physical - sum(f.allocated if isinstance(f, HourFigures) else f for f in figures)
