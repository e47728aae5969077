"""The showback page (admins): each Workspace's physical GPU-hours in a month, allocated,
requested and used, beside the cluster's and the unallocated rest; a bar per month; CSV.
Reads the monthly rollups (workspaces/showback_rollups.py): a constant number of queries,
whatever the number of Workspaces and hours."""

from __future__ import annotations

import re
from datetime import date

from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET

from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table

from . import showback_rollups
from .models import ShowbackMonth

_MONTH = re.compile(r"^([0-9]{4})-([0-9]{2})$")
NOT_MEASURED = gettext_lazy("not measured")
NOT_MEASURABLE = gettext_lazy("not measurable per tenant (time-sliced GPU)")


def parse_month(text: str) -> date | None:
    """``YYYY-MM`` as the month's first day; None for anything else."""
    m = _MONTH.match(text or "")
    if not m or not 1 <= int(m.group(2)) <= 12 or int(m.group(1)) < 1:
        return None
    return date(int(m.group(1)), int(m.group(2)), 1)


def hours(value: float) -> str:
    """GPU-hours as the page and the CSV write them: two decimals."""
    return f"{value:.2f}"


def used_text(row: ShowbackMonth) -> str:
    """What a row's "used" reads: the figure where it was measured, else why there is none
    (on time-sliced GPUs shared with other Workspaces: never the device's figure)."""
    state = row.used_state
    if state == "not-measurable":
        return str(NOT_MEASURABLE)
    if state == "not-measured":
        return str(NOT_MEASURED)
    return hours(row.used)


def used_note(row: ShowbackMonth) -> str:
    if row.used_state == "partial":
        return _("measured in %(m)d of %(n)d hours") % {"m": row.used_hours, "n": row.hours}
    if row.used_state == "not-measurable":
        return _("%(m)d of %(n)d hours on GPUs shared with other Workspaces") % {
            "m": row.unmeasurable_hours,
            "n": row.hours,
        }
    return ""


def share(value: float, cluster: float) -> str:
    return f"{100.0 * value / cluster:.1f}" if cluster > 0 else ""


def showback_table(cluster_physical: float, elastic: bool = False) -> Table:
    """The month's Workspaces; ``elastic`` (a month in which a Kueue cohort lent GPUs): with
    what each borrowed and lent, in physical GPU-hours."""
    lending = (
        (
            Column("borrowed", gettext_lazy("Borrowed"), numeric=True, value=lambda r: hours(r.borrowed)),
            Column("lent", gettext_lazy("Lent"), numeric=True, value=lambda r: hours(r.lent)),
        )
        if elastic
        else ()
    )
    return Table(
        Column("workspace", gettext_lazy("Workspace"), "namespace"),
        Column("month", gettext_lazy("Month"), None, value=lambda r: r.month.strftime("%Y-%m")),
        Column("hours", gettext_lazy("Hours"), numeric=True),
        Column(
            "allocated",
            gettext_lazy("Allocated"),
            numeric=True,
            value=lambda r: hours(r.allocated),
        ),
        Column(
            "share",
            gettext_lazy("Share"),
            "allocated",
            numeric=True,
            value=lambda r: share(r.allocated, cluster_physical),
        ),
        Column(
            "requested",
            gettext_lazy("Requested"),
            numeric=True,
            value=lambda r: hours(r.requested),
        ),
        *lending,
        Column("used", gettext_lazy("Used"), numeric=True, value=used_text),
        Column("used_note", gettext_lazy("Note"), None, value=used_note),
        search=("namespace",),
        default="-allocated",
    )


def _bars(months: list[ShowbackMonth]) -> list[dict]:
    """The capacity bars of the Dashboard, one per month, in physical GPU-hours."""
    from gpus.templatetags.pictures import capacity_bar_data

    return [
        capacity_bar_data(m.month.strftime("%Y-%m"), m.physical, m.allocated, m.requested)
        for m in sorted(months, key=lambda m: m.month)
    ]


@require_GET
@admin_required
def showback(request):
    months = showback_rollups.months(12)
    chosen = parse_month(request.GET.get("month", ""))
    cluster = next((m for m in months if m.month == chosen), None) if chosen else None
    if cluster is None:
        cluster = (
            ShowbackMonth.objects.filter(month=chosen, namespace=ShowbackMonth.CLUSTER).first() if chosen else None
        ) or (months[0] if months else None)
    month = cluster.month if cluster else None
    elastic = cluster is not None and bool(cluster.borrowed or cluster.lent)
    table = showback_table(cluster.physical if cluster else 0.0, elastic).bind(
        request, showback_rollups.workspace_months(month) if month else ShowbackMonth.objects.none()
    )
    if table.wants_csv:
        return table.csv_response(f"showback-{month:%Y-%m}" if month else "showback")
    return render(
        request,
        "workspaces/showback.html",
        {
            "table": table,
            "page": table.page,
            "cluster": cluster,
            "elastic": elastic,
            "month": month,
            "months": months,
            "bars": _bars(months),
            "retention_days": showback_rollups.retention_days(),
        },
    )
