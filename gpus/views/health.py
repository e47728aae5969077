"""The Health page: every detected problem with its remedy."""
from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from brickadmin.cluster import ClusterError, get_gateway
from brickadmin.permissions import admin_required

from .. import manifest as manifest_mod
from ..services import current_ledger

@require_GET
@admin_required
def health(request):
    from .. import health as health_mod

    ledger, snapshot = current_ledger(request)
    problems = health_mod.problems(ledger, snapshot) if ledger else []
    if ledger:
        try:
            docs = manifest_mod.parse(manifest_mod.current().content)
            problems += health_mod.drift_problems(manifest_mod.drift(docs, get_gateway()))
        except (ClusterError, manifest_mod.ManifestError):
            pass
    return render(request, "gpus/wizards/health.html", {"problems": problems, "ledger": ledger})
