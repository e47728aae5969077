"""Capacity per GPU type before and after a change (a procedure's plan, a quota edit): pure.

A GPU type here is a resource name, as quotas count it (ledger ResourceRow): its Total is
what the nodes advertise (logical), Allocated the Workspaces' quota ceilings, Available
the difference. A change moves Totals (a node converted, replicas changed, a MIG layout)
or Allocated (a quota edited); a plan shows each type it touches, now and after.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpus.numbers import ledger as ledger_mod


@dataclass(frozen=True, slots=True)
class CapacityLine:
    resource: str
    gpu_type: str
    total: int
    allocated: int
    total_after: int
    allocated_after: int

    @property
    def available(self) -> int:
        return self.total - self.allocated

    @property
    def available_after(self) -> int:
        return self.total_after - self.allocated_after

    @property
    def changes(self) -> bool:
        return (self.total, self.allocated) != (self.total_after, self.allocated_after)

    @property
    def over_now(self) -> int:
        """How much more quota is allocated than the type has now (0 when it fits)."""
        return max(0, -self.available)

    @property
    def over_after(self) -> int:
        return max(0, -self.available_after)

    @property
    def leaves_over(self) -> bool:
        """The change takes this type over its Total, or further over: less capacity than its
        allocated quota by more than before. A change that only lessens an excess (a quota
        lowered, a Total grown) is not asked about."""
        return self.changes and self.over_after > self.over_now


def capacity_after(
    ledger: ledger_mod.Ledger | None,
    total_change: dict[str, int] | None = None,
    allocated_change: dict[str, int] | None = None,
) -> list[CapacityLine]:
    """Every GPU type the cluster serves or has allocated, plus any the change names, with
    its Total and Allocated now (from the ledger) and after adding the changes (a Total never
    below 0). In the ledger's order; new types last."""
    total_change, allocated_change = total_change or {}, allocated_change or {}
    rows = {r.resource: r for r in ledger.by_resource} if ledger is not None else {}
    names = [r for r in rows if rows[r].logical or rows[r].allocated]
    names += sorted(n for n in set(total_change) | set(allocated_change) if n not in names)
    out = []
    for name in names:
        row = rows.get(name) or ledger_mod.ResourceRow(name)
        gpu_type = row.gpu_type if name in rows else ledger_mod.gpu_type_of(name)
        out.append(
            CapacityLine(
                resource=name,
                gpu_type=gpu_type,
                total=row.logical,
                allocated=row.allocated,
                total_after=max(0, row.logical + total_change.get(name, 0)),
                allocated_after=max(0, row.allocated + allocated_change.get(name, 0)),
            )
        )
    return out


def left_over(lines: list[CapacityLine]) -> list[CapacityLine]:
    """The types a change leaves with less capacity than their allocated quota."""
    return [line for line in lines if line.leaves_over]


def node_served(node: ledger_mod.NodeLedger) -> dict[str, int]:
    """What a node adds to each type's Total now (its served resources' allocatable)."""
    out: dict[str, int] = {}
    for r in node.served:
        if r.allocatable:
            out[r.resource] = out.get(r.resource, 0) + r.allocatable
    return out


def whole_gpus(node: ledger_mod.NodeLedger) -> int:
    """The node's GPUs that are not MIG-partitioned (what time-slicing multiplies)."""
    devices = node.devices
    return sum(1 for d in devices if not d.mig) if devices else node.physical


def mig_partitioned(node: ledger_mod.NodeLedger) -> dict[str, int]:
    """The node's GPUs in MIG mode: {MIG profile: instances}, empty when none is partitioned.
    A GPU stays in MIG mode until mig-manager applies a layout that disables it."""
    out: dict[str, int] = {}
    for d in node.devices:
        for profile in d.mig:
            out[profile] = out.get(profile, 0) + 1
    return out


def conversion_change(node: ledger_mod.NodeLedger, target_resource: str, per_gpu: int) -> dict[str, int]:
    """A node converted to serve ``target_resource``, ``per_gpu`` of it per whole GPU:
    what it serves now goes from the Totals, its whole GPUs × per_gpu come in."""
    change = {res: -n for res, n in node_served(node).items()}
    change[target_resource] = change.get(target_resource, 0) + whole_gpus(node) * max(1, per_gpu)
    return {res: n for res, n in change.items() if n}


def shown_available(available: int) -> tuple[int, int]:
    """(what a page shows as Available, how far the type is over-allocated): never below 0."""
    return max(0, available), max(0, -available)


def unrequested_on_node(logical: int, requested: int, cordoned: bool) -> int:
    """A node's logical GPUs no pod requests and a new pod could get: 0 on a cordoned node,
    which takes no new pod whatever it holds."""
    return 0 if cordoned else free_units(logical, requested)


def free_units(total: int, *held: int) -> int:
    """What of ``total`` nothing holds: the Total less the largest of what holds it (quota
    allocated to Workspaces, requests of pods), never below 0. The Dashboard's Free is the free
    part of its allocation bar; a node's Free is its logical GPUs no pod requests (quotas are
    cluster-wide, not per node)."""
    return max(0, total - max(held, default=0))
