"""Conversion wizards: the procedure index, the pick page, the plan page and the start.
Everything about a procedure comes from its definition (gpus/procedures/registry.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from brickadmin.cluster import ClusterError
from brickadmin.cluster.gateway import get_gateway
from brickadmin.middleware import show_cluster_error
from brickadmin.permissions import admin_required
from gpus.numbers import capacity
from gpus.view.live import LiveRead
from gpus.view.reading import read_cluster

from ..forms import WizardForm
from ..models import ProcedureRun
from ..procedures import engine, registry, service
from ..procedures.base import CLUSTER_LOCK
from ..procedures.service import refusal_message
from .runs import RUN_TABLE


def _proc_or_404(code):
    proc = registry.find(code)
    if proc is None:
        raise Http404(_("No such procedure"))
    return proc


@dataclass
class NodeOption:
    name: str
    reason: str = ""
    active: ProcedureRun | None = None
    summary: str = ""
    # The node's load (logical GPUs, those pods request, those free) and its Health findings,
    # so the admin picks knowing what a conversion would disturb.
    logical: int = 0
    requested: int = 0
    free: int = 0
    problems: list = field(default_factory=list)

    @property
    def disabled(self):
        return bool(self.reason or self.active)


def node_options(proc, view) -> list[NodeOption]:
    """The nodes the procedure offers, each with why it does not apply or the run in its way."""
    if not proc.needs_node:
        return []
    active = {r.lock_key: r for r in ProcedureRun.objects.active()}
    cluster_run = active.get(CLUSTER_LOCK)
    choices = list(proc.node_choices(view.ledger, view.snapshot))
    problems_of = getattr(view, "problems_of", None)  # the stored view's findings, one query
    findings = problems_of(c.name for c in choices) if problems_of else {}
    out = []
    for c in choices:
        n = view.ledger.node(c.name)
        logical, requested = (n.logical, n.requested) if n else (0, 0)
        out.append(
            NodeOption(
                c.name,
                c.reason,
                active.get(c.name) or cluster_run,
                c.summary,
                logical,
                requested,
                capacity.free_units(logical, requested),
                findings.get(c.name, []),
            )
        )
    out.sort(key=lambda o: (o.disabled, o.name))
    return out


def _pick_context(request, proc, form):
    view = read_cluster()  # raises ClusterError: the middleware shows why
    return {
        "proc": proc,
        "code": proc.code,
        "proc_label": proc.label,
        "description": proc.description,
        "options": node_options(proc, view),
        "form": form,
        "selected": request.GET.get("node", ""),
        "facts": proc.pick_facts(view.ledger, view.snapshot),
    }


@require_GET
@admin_required
def procedure_index(request):
    procs = [(p.code, p.label, p.description) for p in registry.all_procedures() if p.listed]
    recent = ProcedureRun.objects.all()[:10]
    return render(request, "gpus/wizards/index.html", {"procs": procs, "recent": recent, "table": RUN_TABLE.unsorted()})


@require_GET
@admin_required
def wizard_pick(request, code):
    proc = _proc_or_404(code)
    # a finding's link may fill in the fields it knows (the device of an unhealthy GPU)
    filled = {p.name: request.GET[p.name] for p in proc.pick_params if request.GET.get(p.name)}
    form = WizardForm(proc, initial={"node": request.GET.get("node", ""), **filled})
    return render(request, "gpus/wizards/pick.html", _pick_context(request, proc, form))


def _plan_context(proc, form):
    params = form.params()
    node = form.cleaned_data.get("node") or ""
    live = LiveRead(get_gateway())  # the plan decides a write: the cluster now, read once for the page
    if proc.fixes and not proc.listed:  # a Fix: the finding's facts, completed from the records
        params = service.fix_params(proc, node, params, live)
    checks = proc.prechecks(live, node, params)
    steps = engine.plan(proc.code, node if proc.needs_node else "", params)
    blocked = any(c.level == "block" for c in checks)
    needs_ack = any(c.level == "ack" for c in checks)
    active = service.active_run_for(proc.lock_key(node)) or service.active_run_for(CLUSTER_LOCK)
    confirms = form.confirmations(checks)
    hidden = [(p.name, params[p.name]) for p in proc.pick_params]
    capacity = next((c.capacity for c in checks if c.capacity), [])
    return {
        "capacity": capacity,
        "proc": proc,
        "code": proc.code,
        "proc_label": proc.label,
        "node": node,
        "params": params,
        "form": form,
        "checks": checks,
        "steps": steps,
        "blocked": blocked,
        "needs_ack": needs_ack,
        "active": active,
        "confirms": confirms,
        "hidden_params": hidden,
        "fix": not proc.listed,
        "confirm_sentence": proc.confirm_sentence(node, params) if not proc.listed else "",
    }


def _eligible(proc):
    if not proc.needs_node or not proc.listed:  # a Fix: the finding names the node; its pre-check reads it live
        return None
    return {o.name for o in node_options(proc, read_cluster()) if not o.reason}


@require_GET
@admin_required
def wizard_plan(request, code):
    proc = _proc_or_404(code)
    form = WizardForm(proc, request.GET, eligible=_eligible(proc))
    if not form.is_valid():
        return render(request, "gpus/wizards/pick.html", _pick_context(request, proc, form), status=400)
    return render(request, "gpus/wizards/plan.html", _plan_context(proc, form))


@require_POST
@admin_required
def wizard_start(request, code):
    proc = _proc_or_404(code)
    try:
        form = WizardForm(proc, request.POST, eligible=_eligible(proc))
        if not form.is_valid():
            # The pick page again, with why beside the field and what was chosen kept.
            messages.error(request, _("Not started: correct what is marked below."))
            pick = _pick_context(request, proc, form)
            pick["selected"] = request.POST.get("node", "")
            return render(request, "gpus/wizards/pick.html", pick, status=400)
        ctx = _plan_context(proc, form)
    except ClusterError as exc:
        messages.error(
            request,
            _(
                "Not started: the cluster cannot be reached (%(err)s). Nothing was sent to it; "
                "start again when it answers."
            )
            % {"err": exc},
        )
        show_cluster_error(request, exc)
        return render(request, "cluster_unavailable.html", {"retry_can_help": exc.transient}, status=503)
    errors = []
    if ctx["blocked"]:
        errors.append(_("The pre-check blocks this run; fix what it says first."))
    errors += form.missing_confirmations(ctx["checks"])
    if errors:
        ctx["errors"] = errors
        return render(request, "gpus/wizards/plan.html", ctx, status=400)
    params = form.params()
    if proc.checklist:
        params["checklist_confirmed_by"] = request.user.get_username()
    try:
        run = service.start_run(code, ctx["node"], params, actor=request.user, source="web")
    except service.RunRefused as exc:
        messages.error(request, refusal_message(exc))
        ctx["active"] = exc.active
        return render(request, "gpus/wizards/plan.html", ctx, status=409)
    return redirect(run)


# --- Fix: the plan and the run of a procedure a health finding offers ------------------


def _fix_or_404(code):
    proc = _proc_or_404(code)
    if proc.listed or not proc.fixes:
        raise Http404(_("No such fix"))
    return proc


@require_GET
@admin_required
def fix_plan(request, code):
    """The plan of a Fix, from the finding's facts in the query: pre-check (read live; it says
    when there is nothing left to do), steps with their kubectl equivalents, confirm."""
    proc = _fix_or_404(code)
    form = WizardForm(proc, request.GET)
    if not form.is_valid():
        messages.error(
            request,
            _("This fix was given facts it cannot use: %(errors)s Open it again from the Health page.")
            % {"errors": " ".join(str(e) for errs in form.errors.values() for e in errs)},
        )
        return redirect("health")
    return render(request, "gpus/wizards/plan.html", _plan_context(proc, form))


@require_POST
@admin_required
def fix_start(request, code):
    """Start a Fix run: the same checks as a wizard's start, then the run's page."""
    proc = _fix_or_404(code)
    form = WizardForm(proc, request.POST)
    if not form.is_valid():
        messages.error(
            request, _("Not started: this fix was given facts it cannot use. Open it again from the Health page.")
        )
        return redirect("health")
    try:
        ctx = _plan_context(proc, form)
    except ClusterError as exc:
        messages.error(
            request,
            _(
                "Not started: the cluster cannot be reached (%(err)s). Nothing was sent to it; "
                "start again when it answers."
            )
            % {"err": exc},
        )
        show_cluster_error(request, exc)
        return render(request, "cluster_unavailable.html", {"retry_can_help": exc.transient}, status=503)
    errors = []
    if ctx["blocked"]:
        errors.append(_("The pre-check blocks this run; fix what it says first."))
    errors += form.missing_confirmations(ctx["checks"])
    if errors:
        ctx["errors"] = errors
        return render(request, "gpus/wizards/plan.html", ctx, status=400)
    try:
        run = service.start_run(code, ctx["node"], ctx["params"], actor=request.user, source="web")
    except service.RunRefused as exc:
        messages.error(request, refusal_message(exc))
        ctx["active"] = exc.active
        return render(request, "gpus/wizards/plan.html", ctx, status=409)
    return redirect(run)
