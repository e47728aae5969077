"""The Health page: every detected problem with its remedy."""
from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from brickadmin.permissions import admin_required

from ..reading import read_cluster, read_problems


@require_GET
@admin_required
def health(request):
    view = read_cluster()
    return render(request, "gpus/wizards/health.html", {"problems": read_problems(view), "ledger": view.ledger})
