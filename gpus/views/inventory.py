"""The inventory pages: Dashboard, per-model detail, Availability, Nodes, node detail, help, evidence."""

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.numbers import capacity
from gpus.numbers import health as health_mod
from gpus.numbers import ledger as ledger_mod
from gpus.view import stored as clusterview
from gpus.view.reading import live_view, read_attention, read_cluster

from ..choices import GpuMode


@require_GET
def dashboard(request):
    view = read_cluster()
    idle = clusterview.idle_by_resource()
    headline = [
        {
            "resource": r.resource,
            "gpu_type": r.gpu_type,
            "sharing_strategy": r.sharing_strategy,
            "logical": r.logical,
            "requested": r.requested,
            "allocated": r.allocated,
            "idle": idle.get(r.resource, 0),
            "free": capacity.free_units(r.logical, r.allocated, r.requested),
        }
        for r in view.ledger.by_resource
    ]
    ctx = {
        "ledger": view.ledger,
        "snapshot": view.snapshot,
        "headline": headline,
        "idle_hours": settings.BRICK_IDLE_HOURS,
    }
    if request.user.is_staff:  # the "Needs attention" card: the Health page's problems, grouped
        ctx["attention"] = read_attention(view)
    return render(request, "gpus/dashboard.html", ctx)


@require_GET
def dashboard_models(request):
    """The magnifier: per-model detail, Exclusive / (Shared) / MIG as separate rows."""
    view = read_cluster()
    template = "gpus/dashboard_models.html"
    if request.htmx:
        template += "#models-table"
    return render(request, template, {"ledger": view.ledger, "snapshot": view.snapshot})


@require_GET
def availability(request):
    view = read_cluster()
    return render(request, "gpus/availability.html", {"ledger": view.ledger, "snapshot": view.snapshot})


def _node_total(name):
    """A CSV cell the stored row does not hold as a column: from its ledger line (exports only)."""
    return lambda row: getattr(ledger_mod.node_from_dict(row.ledger), name)


def _node_free(row):
    """A node's logical GPUs no pod requests (exports only; the page reads its ledger line)."""
    n = ledger_mod.node_from_dict(row.ledger)
    return capacity.unrequested_on_node(n.logical, n.requested, n.cordoned)


# Sorted in SQL: the name, model, mode and number of findings are columns of the view's rows,
# physical counts keys of their ledger JSON; logical and requested are sums over resources.
NODE_TABLE = Table(
    Column("name", _("Node")),
    Column("model", _("Model")),
    Column("mode", _("Mode")),
    Column("physical", _("Physical"), "ledger__physical", numeric=True, term="physical"),
    Column("in_use", _("In use"), "ledger__physical_used", numeric=True, term="physical_used"),
    Column("logical", _("Logical"), None, value=_node_total("logical"), numeric=True, term="logical"),
    Column("requested", _("Requested"), None, value=_node_total("requested"), numeric=True, term="requested"),
    # page-only: the export keeps its columns (Free is logical less requested there)
    Column("free", _("Unrequested on the node"), None, value=_node_free, numeric=True, term="node_free", export=False),
    Column("findings", _("State"), "problems", numeric=True),
    search=("name", "model", "mode"),
    default="name",
)


@require_GET
@admin_required
def node_list(request):
    view = read_cluster()
    mode = request.GET.get("mode", "")
    model = request.GET.get("model", "")
    table = NODE_TABLE.bind(request, clusterview.gpu_nodes(mode=mode if mode in GpuMode.values else "", model=model))
    if table.wants_csv:
        return table.csv_response("nodes")
    page = table.page
    ctx = {
        "ledger": view.ledger,
        "snapshot": view.snapshot,
        "page": page,
        "table": table,
        "rows": clusterview.node_lines(view, page),
        "models": view.ledger.models,
        "modes": GpuMode.choices,
        "mode": mode,
        "model": model,
    }
    template = "gpus/node_list.html"
    if request.htmx:
        template += "#node-table"
    return render(request, template, ctx)


@require_GET
@admin_required
def node_detail(request, name):
    view = read_cluster()
    node = view.ledger.node(name)
    if node is None and not view.snapshot.has_node(name):
        raise Http404(f"No node named {name}")
    return render(
        request,
        "gpus/node_detail.html",
        {
            "ledger": view.ledger,
            "snapshot": view.snapshot,
            "node": node,
            "name": name,
            "problems": view.problems_of([name]).get(name, []),
        },
    )


@require_GET
def help_page(request):
    from ..templatetags.brick import GLOSSARY

    return render(request, "gpus/help.html", {"glossary": GLOSSARY, "findings": health_mod.REGISTRY.values()})


@require_GET
@admin_required
def evidence(request):
    """Evidence for the CNCF Kubernetes AI Conformance `gpu_sharing` requirement (the
    cluster shares GPUs by time-slicing or MIG), captured from the live cluster."""
    from django.http import HttpResponse

    from gpus.numbers import evidence as ev_mod

    view = live_view()  # evidence is a capture of the cluster as it is now
    snapshot = view.snapshot
    configmaps = snapshot.plugin_configmaps + snapshot.operator_configmaps
    if request.GET.get("format") == "md":
        from django.conf import settings
        from django.utils import translation

        with translation.override(settings.LANGUAGE_CODE):  # the auditor's file: one language, as its headings
            ev = ev_mod.build(snapshot, view.ledger, configmaps)
            markdown = ev_mod.as_markdown(ev)
        resp = HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
        stamp = ev.captured_at.strftime("%Y%m%dT%H%M%SZ")
        resp["Content-Disposition"] = f'attachment; filename="gpu_sharing-evidence-{stamp}.md"'
        return resp
    ev = ev_mod.build(snapshot, view.ledger, configmaps)  # in the reader's language
    return render(request, "gpus/evidence.html", {"ev": ev, "snapshot": snapshot})
