"""Showback rollups in the database: one row per hour (workspaces.models.ShowbackHour) and
the month's sums per Workspace (ShowbackMonth), fed from the cluster view by a Celery beat
task (workspaces/tasks.py). Rolling an hour up again replaces what it gave the month (the
old hour is taken out, the new one put in, under a lock on the hour): never doubled.
Hours and months older than BRICK_SHOWBACK_RETENTION_DAYS are pruned."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import showback
from .models import ShowbackHour, ShowbackMonth

SUMMED = ("hours", "physical", "allocated", "requested", "used", "used_hours", "unmeasurable_hours")


def roll_up(moment: datetime | None = None) -> ShowbackHour:
    """The hour of ``moment`` (now) from the cluster view as it is now. Raises
    gpus.clusterview.ViewUnavailable before the watcher published one."""
    from gpus.clusterview import stored_view
    from gpus.models import ViewWorkspace

    from .directory import measured as view_measured

    view = stored_view()
    nodes = view.ledger.nodes
    lines = ViewWorkspace.objects.only("namespace", "gpu_quotas", "pods", "utilisation")
    measured = view_measured()
    figures = showback.hour_figures(nodes, lines.iterator(chunk_size=2000), measured=measured)
    return store_hour(moment or timezone.now(), float(view.ledger.physical), measured, figures)


def _add(row: ShowbackMonth, figures: showback.HourFigures, sign: int) -> None:
    row.hours += sign
    row.allocated += sign * figures.allocated
    row.requested += sign * figures.requested
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
        if figures.measurable and figures.used is not None:
            cluster.used += sign * figures.used


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
            r.pk = None  # written by (month, namespace): one upsert for new rows and old
            for name in ("physical", "allocated", "requested", "used"):
                if abs(getattr(r, name)) < 1e-9:  # floats taken out and put back: a zero is a zero
                    setattr(r, name, 0.0)
        ShowbackMonth.objects.bulk_create(
            keep,
            update_conflicts=True,
            unique_fields=["month", "namespace"],
            update_fields=list(SUMMED),
            batch_size=1000,
        )
        if gone:
            ShowbackMonth.objects.filter(pk__in=gone).delete()
    return row


def retention_days() -> int:
    return int(getattr(settings, "BRICK_SHOWBACK_RETENTION_DAYS", 400))


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
