"""Conversion wizards: the procedure index, the pick page, the plan page and the start."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from brickadmin.cluster import ClusterError, get_gateway
from brickadmin.permissions import admin_required

from ..forms import WizardForm
from ..models import Procedure, ProcedureRun
from ..procedures import engine, service
from ..procedures.definitions import PROCEDURES
from ..services import current_ledger

DESCRIPTIONS = {
    "A": gettext_lazy("Cordon and drain a node, switch its sharing label to timeslicing, verify the time-slicing plugin and "
                       "physical × replicas, remove the stale nvidia.com/gpu, uncordon, check Prometheus."),
    "B": gettext_lazy("The same skeleton back to exclusive, after a pre-check that the shared quota still fits without the node."),
    "C": gettext_lazy("Change replicas in the managed manifest, apply, rollout restart, verify every time-slicing node."),
    "D": gettext_lazy("Confirm the node build checklist, label gpu.type and gpu.sharing together, verify the plugin and resources."),
}


def _proc_or_404(code):
    if code not in PROCEDURES:
        raise Http404(_("No such procedure"))
    return PROCEDURES[code]


@dataclass
class NodeOption:
    name: str
    reason: str = ""
    active: ProcedureRun | None = None
    summary: str = ""

    @property
    def disabled(self):
        return bool(self.reason or self.active)


def node_options(code, request=None) -> list[NodeOption]:
    proc = PROCEDURES[code]
    active = {r.lock_key: r for r in ProcedureRun.objects.active()}
    cluster_run = active.get(service.CLUSTER_LOCK)
    out = []
    if code == "D":
        for raw in get_gateway().list_nodes():
            name = raw["metadata"]["name"]
            labels = raw["metadata"].get("labels") or {}
            roles = ", ".join(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
            out.append(NodeOption(name, proc.eligibility_raw(raw), active.get(name) or cluster_run, roles))
    else:
        ledger, _snap = current_ledger(request)
        for n in (ledger.nodes if ledger else []):
            summary = f"{n.model} · {n.physical} GPU · {n.mode}" + (f" ×{n.replicas}" if n.mode == "timeslicing" else "")
            out.append(NodeOption(n.name, proc.eligibility(n), active.get(n.name) or cluster_run, summary))
    out.sort(key=lambda o: (o.disabled, o.name))
    return out


@require_GET
@admin_required
def procedure_index(request):
    procs = [(code, label, DESCRIPTIONS[code]) for code, label in Procedure.choices]
    recent = ProcedureRun.objects.all()[:10]
    return render(request, "gpus/wizards/index.html", {"procs": procs, "recent": recent})


@require_GET
@admin_required
def wizard_pick(request, code):
    proc = _proc_or_404(code)
    options = node_options(code, request) if proc.needs_node else []
    form = WizardForm(code, initial={"node": request.GET.get("node", ""), "sharing": "none"})
    current = None
    if code == "C":
        from .ledger import brick_replicas
        from brickadmin.cluster.deviceplugin import PLUGIN_NAMESPACE

        try:
            current = brick_replicas(get_gateway().list_configmaps(namespace=PLUGIN_NAMESPACE))
        except ClusterError as exc:
            request.cluster_error = str(exc)
    return render(request, "gpus/wizards/pick.html", {
        "code": code, "proc_label": Procedure(code).label, "description": DESCRIPTIONS[code], "options": options,
        "form": form, "selected": request.GET.get("node", ""), "current_replicas": current})


def _plan_context(request, code, form):
    proc = PROCEDURES[code]
    params = form.params()
    node = form.cleaned_data.get("node") or ""
    try:
        checks = proc.prechecks(get_gateway(), node, params)
    except ClusterError as exc:
        request.cluster_error = str(exc)
        checks = []
    steps = engine.plan(code, node if proc.needs_node else "", params)
    blocked = any(c.level == "block" for c in checks)
    needs_ack = any(c.level == "ack" for c in checks)
    active = service.active_run_for(proc.lock_key(node)) or service.active_run_for(service.CLUSTER_LOCK)
    return {"code": code, "proc_label": Procedure(code).label, "node": node, "params": params, "form": form,
            "checks": checks, "steps": steps, "blocked": blocked, "needs_ack": needs_ack, "active": active}


def _eligible(code, request):
    if not PROCEDURES[code].needs_node:
        return None
    return {o.name for o in node_options(code, request) if not o.reason}


@require_GET
@admin_required
def wizard_plan(request, code):
    _proc_or_404(code)
    form = WizardForm(code, request.GET, eligible=_eligible(code, request))
    if not form.is_valid():
        options = node_options(code, request) if PROCEDURES[code].needs_node else []
        return render(request, "gpus/wizards/pick.html", {
            "code": code, "proc_label": Procedure(code).label, "description": DESCRIPTIONS[code],
            "options": options, "form": form, "selected": request.GET.get("node", "")}, status=400)
    return render(request, "gpus/wizards/plan.html", _plan_context(request, code, form))


@require_POST
@admin_required
def wizard_start(request, code):
    _proc_or_404(code)
    form = WizardForm(code, request.POST, eligible=_eligible(code, request))
    if not form.is_valid():
        return redirect(reverse("wizard_pick", args=[code]))
    ctx = _plan_context(request, code, form)
    errors = []
    if ctx["blocked"]:
        errors.append(_("The pre-check blocks this run; fix what it says first."))
    if ctx["needs_ack"] and not form.cleaned_data.get("acknowledged"):
        errors.append(_("Tick the acknowledgement to go on."))
    if code == "D" and not form.cleaned_data.get("checklist_confirmed"):
        errors.append(_("Confirm the checklist: the driver and container runtime must be installed first."))
    if errors:
        ctx["errors"] = errors
        return render(request, "gpus/wizards/plan.html", ctx, status=400)
    params = form.params()
    if code == "D":
        params["checklist_confirmed_by"] = request.user.get_username()
    try:
        run = service.start_run(code, ctx["node"], params, actor=request.user, source="web")
    except service.RunRefused as exc:
        if exc.active:
            messages.error(request, format_html('{} <a href="{}">{}</a>', exc.message, exc.active.get_absolute_url(),
                                                _("Open run #%(id)d") % {"id": exc.active.pk}))
        else:
            messages.error(request, exc.message)
        ctx["active"] = exc.active
        return render(request, "gpus/wizards/plan.html", ctx, status=409)
    return redirect(run)


