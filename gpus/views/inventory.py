"""The inventory pages: Dashboard, per-model detail, Availability, Nodes, node detail, help, evidence."""

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from brickadmin.cluster import dra
from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.numbers import capacity
from gpus.numbers import health as health_mod
from gpus.numbers import ledger as ledger_mod
from gpus.numbers.dra_lines import CONSUMABLE_SHARES, is_dra_resource
from gpus.view import stored as clusterview
from gpus.view.reading import live_view, read_attention, read_cluster

from ..choices import GpuMode
from ..templatetags.brick import STACKS


def dra_class(resource: str) -> str:
    """The DeviceClass a DRA line counts (``<class>.deviceclass.resource.k8s.io/devices``), or ''."""
    return resource.removesuffix(dra.RESOURCE_CLAIMS_PER_CLASS) if is_dra_resource(resource) else ""


@require_GET
def dashboard(request):
    view = read_cluster()
    idle = clusterview.idle_by_resource()
    unlimited = {t.resource for t in view.ledger.by_type if t.unlimited}
    headline = [
        {
            "resource": r.resource,
            "gpu_type": r.gpu_type,
            "sharing_strategy": r.sharing_strategy,
            # a DRA line: the DeviceClass whose devices a claim asks for
            "device_class": dra_class(r.resource),
            # unlimited consumable shares among its GPUs: no ceiling, Total counts the claims held
            "unlimited": r.resource in unlimited,
            "logical": r.logical,
            "requested": r.requested,
            "allocated": r.allocated,
            "idle": idle.get(r.resource, 0),
            "free": capacity.free_units(r.logical, r.allocated, r.requested),
            # plain nvidia.com/gpu that is whole GPUs, replicas and MIG instances at once, by kind
            "parts": r.parts,
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
    dra_rows = any(r.dra_logical or r.dra_physical for r in view.ledger.by_type)
    return render(request, template, {"ledger": view.ledger, "snapshot": view.snapshot, "dra_rows": dra_rows})


@require_GET
def availability(request):
    view = read_cluster()
    return render(
        request,
        "gpus/availability.html",
        {
            "ledger": view.ledger,
            "snapshot": view.snapshot,
            "dra_classes": dra_classes(view.ledger),
            # unlimited consumable shares among its GPUs: no ceiling (Total counts the claims held)
            "unlimited": {t.resource for t in view.ledger.by_type if t.unlimited},
        },
    )


# What a claim's request for one device of a class says (resource.k8s.io/v1, ExactCount 1),
# then what it adds: a MIG profile to choose its size, or the shares it consumes of a GPU.
_CLAIM_TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: {device_class}
          allocationMode: ExactCount
          count: 1{extra}
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu-check
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    command: ["nvidia-smi", "-L"]
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: {name}
"""
_MIG_SELECTOR = (
    "\n          selectors:"
    "\n          - cel:"
    '\n              expression: \'device.attributes["gpu.nvidia.com"].profile == "{profile}"\''
)
_SHARES = '\n          capacity:\n            requests:\n              shares: "1"'


def dra_classes(ledger) -> list[dict]:
    """For each DeviceClass the cluster's GPUs are published under (a DRA line of the
    availability rows): what it offers, whether without limit, and a ResourceClaimTemplate
    with a pod that uses it."""
    out = []
    for r in ledger.by_resource:
        device_class = dra_class(r.resource)
        if not device_class:
            continue
        rows = [t for t in ledger.by_type if t.resource == r.resource]
        profiles = sorted(
            {t.gpu_type[4:] for t in rows if t.gpu_type.startswith("mig-") and t.gpu_type != "mig-dynamic"}
        )
        shares = any(t.sharing_strategy == CONSUMABLE_SHARES for t in rows)
        extra = _MIG_SELECTOR.format(profile=profiles[0]) if profiles else (_SHARES if shares else "")
        name = device_class.split(".", 1)[0] + ("-" + profiles[0].replace(".", "-") if profiles else "")
        out.append(
            {
                "device_class": device_class,
                "resource": r.resource,
                "types": sorted({t.gpu_type for t in rows}),
                "profiles": profiles,
                "dynamic": any(t.gpu_type == "mig-dynamic" for t in rows),
                "shares": shares,
                "unlimited": any(t.unlimited for t in rows),
                "logical": r.logical,
                "example": _CLAIM_TEMPLATE.format(name=name, device_class=device_class, extra=extra),
            }
        )
    return out


def _node_total(name):
    """A CSV cell the stored row does not hold as a column: from its ledger line (exports only)."""
    return lambda row: getattr(ledger_mod.node_from_dict(row.ledger), name)


def _node_free(row):
    """A node's logical GPUs no pod requests (exports only; the page reads its ledger line)."""
    n = ledger_mod.node_from_dict(row.ledger)
    return capacity.unrequested_on_node(n.logical, n.requested, n.cordoned)


# Sorted in SQL: the name, model, mode, stack and number of findings are columns of the view's rows,
# physical counts keys of their ledger JSON; logical and requested are sums over resources.
NODE_TABLE = Table(
    Column("name", _("Node")),
    Column("model", _("Model")),
    Column("mode", _("Mode")),
    Column("stack", _("Stack")),  # device-plugin | dra | both (a finding)
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
    stack = request.GET.get("stack", "")
    stack = stack if stack in STACKS else ""
    rows = clusterview.gpu_nodes(mode=mode if mode in GpuMode.values else "", model=model, stack=stack)
    table = NODE_TABLE.bind(request, rows)
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
        "stacks": list(STACKS.items()),
        "stack": stack,
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
    devices = node.dra.devices if node is not None and node.dra is not None else []
    return render(
        request,
        "gpus/node_detail.html",
        {
            "ledger": view.ledger,
            "snapshot": view.snapshot,
            "node": node,
            "name": name,
            "problems": view.problems_of([name]).get(name, []),
            # a DRA node's devices, a page at a time (hundreds under dynamic MIG)
            "devices_page": Paginator(devices, settings.PAGE_SIZE).get_page(request.GET.get("page")),
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
