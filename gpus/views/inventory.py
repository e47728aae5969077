"""The inventory pages: Dashboard, per-model detail, Availability, Nodes, node detail, help, evidence."""
from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from brickadmin.permissions import admin_required

from ..services import current_ledger

MODE_CHOICES = ("exclusive", "timeslicing", "mig", "unlabelled")


@require_GET
def dashboard(request):
    ledger, snapshot = current_ledger(request)
    return render(request, "gpus/dashboard.html", {"ledger": ledger, "snapshot": snapshot})


@require_GET
def dashboard_models(request):
    """The magnifier: per-model detail, Exclusive / (Shared) / MIG as separate rows."""
    ledger, snapshot = current_ledger(request)
    template = "gpus/dashboard_models.html"
    if request.htmx:
        template += "#models-table"
    return render(request, template, {"ledger": ledger, "snapshot": snapshot})


@require_GET
def availability(request):
    ledger, snapshot = current_ledger(request)
    return render(request, "gpus/availability.html", {"ledger": ledger, "snapshot": snapshot})


@require_GET
@admin_required
def node_list(request):
    ledger, snapshot = current_ledger(request)
    nodes = ledger.nodes if ledger else []
    models = sorted({n.model for n in nodes})
    mode = request.GET.get("mode", "")
    model = request.GET.get("model", "")
    if mode in MODE_CHOICES:
        nodes = [n for n in nodes if n.mode == mode]
    if model:
        nodes = [n for n in nodes if n.model == model]
    page = Paginator(nodes, settings.PAGE_SIZE).get_page(request.GET.get("page"))
    ctx = {"ledger": ledger, "snapshot": snapshot, "page": page, "models": models, "modes": MODE_CHOICES,
           "mode": mode, "model": model}
    template = "gpus/node_list.html"
    if request.htmx:
        template += "#node-table"
    return render(request, template, ctx)


@require_GET
@admin_required
def node_detail(request, name):
    from brickadmin.cluster import NotFound, get_gateway

    ledger, snapshot = current_ledger(request)
    node = ledger.node(name) if ledger else None
    raw = None
    if ledger is not None:
        try:
            raw = get_gateway().get_node(name)
        except NotFound:
            raw = None
        if node is None and raw is None:
            raise Http404(f"No node named {name}")
    plugin_pods = [p for p in (snapshot.plugin_pods if snapshot else [])
                   if (p.get("spec") or {}).get("nodeName") == name]
    gpu_pods = [p for p in (snapshot.gpu_pods if snapshot else []) if (p.get("spec") or {}).get("nodeName") == name]
    return render(request, "gpus/node_detail.html", {
        "ledger": ledger, "snapshot": snapshot, "node": node, "raw": raw, "name": name,
        "plugin_pods": plugin_pods, "gpu_pods": gpu_pods,
    })


@require_GET
def help_page(request):
    from ..templatetags.brick import GLOSSARY

    return render(request, "gpus/help.html", {"glossary": GLOSSARY})


@require_GET
@admin_required
def evidence(request):
    """CNCF AI Conformance gpu_sharing evidence from the live cluster (seed 002)."""
    from django.http import HttpResponse

    from brickadmin.cluster import get_gateway
    from brickadmin.cluster.snapshot import OPERATOR_NAMESPACE

    from .. import evidence as ev_mod

    ledger, snapshot = current_ledger(request)
    ev = None
    if ledger is not None:
        gw = get_gateway()
        configmaps = snapshot.plugin_configmaps + gw.list_configmaps(namespace=OPERATOR_NAMESPACE)
        ev = ev_mod.build(snapshot, ledger, configmaps)
        if request.GET.get("format") == "md":
            resp = HttpResponse(ev_mod.as_markdown(ev), content_type="text/markdown; charset=utf-8")
            stamp = ev.captured_at.strftime("%Y%m%dT%H%M%SZ")
            resp["Content-Disposition"] = f'attachment; filename="gpu_sharing-evidence-{stamp}.md"'
            return resp
    return render(request, "gpus/evidence.html", {"ev": ev, "snapshot": snapshot})
