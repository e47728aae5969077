"""Showback rollups in the database: one row per hour (workspaces.models.ShowbackHour) and
the month's sums per Workspace (ShowbackMonth), fed from the cluster view by a Celery beat
task (workspaces/tasks.py). Rolling an hour up again replaces what it gave the month (the
old hour is taken out, the new one put in, under a lock on the hour): never doubled.
Hours and months older than BRICK_SHOWBACK_RETENTION_DAYS are pruned."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from gpus.numbers.dra_lines import DraNode
from gpus.numbers.ledger import SHARED, NodeLedger, ResourceLine

from . import showback
from .models import ShowbackHour, ShowbackMonth

SUMMED = ("hours", "physical", "allocated", "requested", "used", "used_hours", "unmeasurable_hours", "borrowed", "lent")


def roll_up(moment: datetime | None = None) -> ShowbackHour:
    """The hour of ``moment`` (now) from the cluster view as it is now. Raises
    gpus.view.reading.ViewUnavailable before the watcher published one."""
    from gpus.view import reading

    view = reading.stored_view()
    nodes = share_nodes()
    # plain tuples, not model instances: a rollup reads every Workspace line
    lines = reading.workspace_rows("namespace", "gpu_quotas", "pods", "utilisation", "quotas")
    measured = reading.usage_measured()
    figures = showback.hour_figures(
        nodes, (_Line(*row) for row in lines.iterator(chunk_size=2000)), measured=measured, elastic=elastic_lines()
    )
    return store_hour(moment or timezone.now(), float(view.ledger.physical), measured, figures)


def elastic_lines() -> dict[str, list[showback.ElasticLine]]:
    """namespace -> its elastic quota lines as Kueue last reported them (workspaces/elastic.py:
    one query); {} without Kueue."""
    from . import elastic

    seen = elastic.facts()
    out: dict[str, list[showback.ElasticLine]] = {}
    if not seen.served:
        return out
    for cohort in seen.cohorts:
        for line in cohort.lines:
            if line.workspace:
                out.setdefault(line.workspace, []).append(
                    showback.ElasticLine(line.resource, line.guarantee, line.borrowed, line.lent)
                )
    return out


class _Line(NamedTuple):
    """What the rollup reads of a Workspace line of the cluster view (showback.WorkspaceLine)."""

    namespace: str
    gpu_quotas: dict[str, int]
    pods: list[dict[str, Any]]
    utilisation: float | None
    quotas: list[dict[str, Any]]  # its quota lines: a quota of a DeviceClass's devices is read from them


# The conversion's node lines of the last rollup in this process, by node: (digest, line).
# The watcher rewrites a node's digest whenever its ledger line changes, so an unchanged node
# is not read again from one rollup to the next (the worker's process lives on between them).
_NODE_MEMO: dict[str, tuple[str, NodeLedger]] = {}


def share_nodes(memo: dict[str, tuple[str, NodeLedger]] | None = None) -> list[NodeLedger]:
    """The GPU nodes of the cluster view with what the conversion reads (model, mode,
    replicas, MIG profile, resources; pods only where GPUs are time-sliced), those parts
    taken out of the stored ledger in SQL (the whole line of 5,000 nodes, with devices,
    labels and pods, takes seconds to decode), and only for nodes changed since ``memo``."""
    from gpus.view import reading

    memo = _NODE_MEMO if memo is None else memo
    digests = reading.gpu_node_digests()
    changed = [name for name, digest in digests.items() if not digest or memo.get(name, ("",))[0] != digest]
    for gone in set(memo) - set(digests):
        del memo[gone]
    for start in range(0, len(changed), 1000):
        rows = reading.node_rows(
            changed[start : start + 1000],
            "name",
            "digest",
            "model",
            "mode",
            "ledger__replicas",
            "ledger__mig_profile",
            "ledger__physical",
            "ledger__resources",
            "ledger__dra",
        )
        for name, digest, model, mode, replicas, mig_profile, physical, resources, dra in rows:
            node = NodeLedger(
                name=name,
                model=model or "",
                convention="",
                mode=mode or "",
                sharing_label="",
                replicas=int(replicas or 1),
                configured_replicas=int(replicas or 1),
                ready=True,
                cordoned=False,
                tainted=False,
                plugin_state="",
                resources={r[0]: ResourceLine(*r) for r in resources or []},
                raw_devices=[],
                in_use=frozenset(),
                physical=int(physical or 0),
                physical_used=0,
                physical_source="",
                labels={},
                mig_profile=mig_profile or "",
                dra=DraNode.from_dict(dra) if dra else None,  # a claim's devices and their shares
            )
            memo[name] = (digest, node)
    # whose pods hold time-sliced GPUs (gpus.numbers.occupancy): read for the nodes that time-slice only
    sliced = [
        name
        for name in changed
        if name in memo
        and (memo[name][1].replicas > 1 or any(r.gpu_type == SHARED for r in memo[name][1].resources.values()))
    ]
    for start in range(0, len(sliced), 1000):
        for name, pods in reading.node_rows(sliced[start : start + 1000], "name", "ledger__raw_pods"):
            memo[name][1].raw_pods = pods or []
    return [memo[name][1] for name in sorted(digests) if name in memo]


def _add(row: ShowbackMonth, figures: showback.HourFigures, sign: int) -> None:
    row.hours += sign
    row.allocated += sign * figures.allocated
    row.requested += sign * figures.requested
    row.borrowed += sign * figures.borrowed
    row.lent += sign * figures.lent
    if not figures.measurable:
        row.unmeasurable_hours += sign
    elif figures.used is not None:
        row.used += sign * figures.used
        row.used_hours += sign


def _add_hour(rows, month, physical: float, lines: dict, sign: int) -> None:
    def row(namespace: str) -> ShowbackMonth:
        if namespace not in rows:
            rows[namespace] = ShowbackMonth(month=month, namespace=namespace)
        return rows[namespace]

    cluster = row(ShowbackMonth.CLUSTER)
    cluster.hours += sign
    cluster.physical += sign * physical
    for namespace, data in lines.items():
        figures = showback.HourFigures.from_list(data)
        _add(row(namespace), figures, sign)
        cluster.allocated += sign * figures.allocated
        cluster.requested += sign * figures.requested
        cluster.borrowed += sign * figures.borrowed
        cluster.lent += sign * figures.lent
        if figures.measurable and figures.used is not None:
            cluster.used += sign * figures.used


def _upsert_months(rows: list[ShowbackMonth]) -> None:
    """Write the month's rows by (month, namespace), new and old alike, in one INSERT ... ON
    CONFLICT DO UPDATE sent straight to the cursor (the ORM's bulk_create compiles each of
    the rows' nine values: most of a rollup's time at a thousand Workspaces). PostgreSQL
    reads the rows from one array per column (INSERT ... SELECT FROM UNNEST: one short
    statement to plan); SQLite from VALUES, in batches of its limit of parameters."""
    if not rows:
        return
    quote = connection.ops.quote_name
    names = ["month", "namespace", *SUMMED]
    column = {name: quote(ShowbackMonth._meta.get_field(name).column) for name in names}
    head = f"INSERT INTO {quote(ShowbackMonth._meta.db_table)} ({', '.join(column.values())}) "
    tail = f" ON CONFLICT ({column['month']}, {column['namespace']}) DO UPDATE SET " + ", ".join(
        f"{column[name]} = excluded.{column[name]}" for name in SUMMED
    )
    month = connection.ops.adapt_datefield_value(rows[0].month)  # one month's rows
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            fields = (ShowbackMonth._meta.get_field(name) for name in names)
            arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in fields)
            columns = [[month] * len(rows), [r.namespace for r in rows]]
            columns += [[getattr(r, name) for r in rows] for name in SUMMED]
            cursor.execute(head + f"SELECT * FROM UNNEST({arrays})" + tail, columns)
            return
        one = "(" + ", ".join(["%s"] * len(names)) + ")"
        batch = max(1, connection.ops.bulk_batch_size(names, rows))
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            values = [value for r in chunk for value in (month, r.namespace, *(getattr(r, c) for c in SUMMED))]
            cursor.execute(head + "VALUES " + ", ".join([one] * len(chunk)) + tail, values)


def store_hour(
    moment: datetime, physical: float, measured: bool, figures: dict[str, showback.HourFigures]
) -> ShowbackHour:
    """Keep the figures as the hour of ``moment``, replacing what that hour held before."""
    hour = showback.hour_of(moment)
    month = showback.month_of(hour)
    lines = {ns: f.as_list() for ns, f in figures.items()}
    with transaction.atomic():
        # The hour's row is the lock: a second rollup of the same hour waits here, then
        # takes out what the first one put in.
        ShowbackHour.objects.get_or_create(hour=hour)
        row = ShowbackHour.objects.select_for_update().get(hour=hour)
        rows = {r.namespace: r for r in ShowbackMonth.objects.select_for_update().filter(month=month)}
        if row.rolled_up_at is not None:
            _add_hour(rows, month, row.physical, row.lines or {}, -1)
        _add_hour(rows, month, physical, lines, +1)
        row.physical, row.measured, row.lines, row.rolled_up_at = physical, measured, lines, timezone.now()
        row.save()
        keep = [r for r in rows.values() if r.hours > 0]
        gone = [r.pk for r in rows.values() if r.hours <= 0 and r.pk]
        for r in keep:
            for name in ("physical", "allocated", "requested", "used", "borrowed", "lent"):
                if abs(getattr(r, name)) < 1e-9:  # floats taken out and put back: a zero is a zero
                    setattr(r, name, 0.0)
        _upsert_months(keep)
        if gone:
            ShowbackMonth.objects.filter(pk__in=gone).delete()
    return row


def retention_days() -> int:
    return int(settings.BRICK_SHOWBACK_RETENTION_DAYS)


def prune(now: datetime | None = None) -> tuple[int, int]:
    """Delete the hours older than the retention, and the months that ended before it.
    Returns (hours, months) deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=retention_days())
    hours, _ = ShowbackHour.objects.filter(hour__lt=cutoff).delete()
    months, _ = ShowbackMonth.objects.filter(month__lt=showback.month_of(cutoff)).delete()
    return hours, months


# --- reading ------------------------------------------------------------------------


def months(limit: int = 12) -> list[ShowbackMonth]:
    """The cluster's rows of the last ``limit`` months that have figures, newest first."""
    return list(ShowbackMonth.objects.filter(namespace=ShowbackMonth.CLUSTER).order_by("-month")[:limit])


def workspace_months(month):
    """The Workspaces' rows of one month (a QuerySet: the table sorts and pages it in SQL)."""
    return ShowbackMonth.objects.filter(month=month).exclude(namespace=ShowbackMonth.CLUSTER)


def of_workspace(namespace: str, limit: int = 12) -> list[ShowbackMonth]:
    """One Workspace's last months, newest first."""
    return list(ShowbackMonth.objects.filter(namespace=namespace).order_by("-month")[:limit])
