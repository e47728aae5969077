"""The Health page: every detected problem with its remedy."""

from __future__ import annotations

from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.view.reading import read_cluster, read_problems

SEVERITY_RANK = {"bad": 0, "warn": 1, "info": 2}  # ascending: what to act on first

# Rows are {"p": Problem, "rank": ...}: the findings as read_problems orders them (by severity),
# which a stable sort keeps within each severity.
FINDING_TABLE = Table(
    Column("severity", _("Severity"), "rank", value="p.severity"),
    Column("where", _("Where"), "p.subject"),
    Column("problem", _("Problem"), "p.title", value="p.message"),
    Column("remedy", _("What to do"), None, value="p.remedy"),
    search=("p.subject", "p.title", "p.message", "p.kind"),
    default="severity",
    per_page=1000,
)  # one page: the Dashboard links to each kind's first row (#kind)


@require_GET
@admin_required
def health(request):
    view = read_cluster()
    rows = [{"p": p, "rank": SEVERITY_RANK.get(p.severity, 3)} for p in read_problems(view)]
    table = FINDING_TABLE.bind(request, rows)
    if table.wants_csv:
        return table.csv_response("findings")
    return render(request, "gpus/wizards/health.html", {"table": table, "page": table.page, "ledger": view.ledger})
