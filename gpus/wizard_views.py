"""Conversion wizards A-D, run pages, run history, audit downloads, the managed manifest
and the health page. Thin views: the logic is in procedures/, manifest.py and health.py."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from brickadmin.cluster import ClusterError, get_gateway

from . import manifest as manifest_mod
from .forms import ManifestForm, RunFilterForm, WizardForm
from .models import ManifestVersion, Procedure, ProcedureRun, StepRun
from .permissions import admin_required
from .procedures import engine, service
from .procedures.definitions import PROCEDURES
from .services import current_ledger

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


# --- runs -------------------------------------------------------------------------

def step_rows(run, events):
    """Current state per step (latest event of each), in plan order, from the rows."""
    latest, first = {}, {}
    for e in events:
        if e.step_key == engine.RUN_EVENT:
            continue
        first.setdefault(e.step_key, e)
        latest[e.step_key] = e
    rows = []
    for key, e in latest.items():
        start = next((x.started_at for x in reversed(events) if x.step_key == key and x.started_at), None)
        rows.append({"key": key, "event": e, "title": e.title, "kubectl": first[key].kubectl or e.kubectl,
                     "index": e.step_index, "started_at": start})
    rows.sort(key=lambda r: r["index"])
    return rows


def _progress_context(run):
    events = list(run.steps.order_by("seq"))
    rows = step_rows(run, events)
    waits_checklist = run.procedure == "D" and run.is_resumable and any(
        r["key"] == "checklist" and r["event"].state == "failed" for r in rows)
    return {"run": run, "events": events, "rows": rows, "waits_checklist": waits_checklist,
            "poll_ms": int(getattr(settings, "BRICK_RUN_POLL_MS", 300))}


@require_GET
@admin_required
def run_detail(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    return render(request, "gpus/runs/detail.html", _progress_context(run))


@require_GET
@admin_required
def run_progress(request, pk):
    """The progress partial; 204 when nothing happened after seq N (htmx keeps the page)."""
    run = get_object_or_404(ProcedureRun, pk=pk)
    try:
        after = int(request.GET.get("after", "-1"))
    except ValueError:
        after = -1
    if after == run.last_seq and request.GET.get("status") == run.status:
        return HttpResponse(status=204)
    return render(request, "gpus/runs/detail.html#run-progress", _progress_context(run))


@require_POST
@admin_required
def run_cancel(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    if run.is_active:
        service.cancel_run(run, actor=request.user)
        messages.warning(request, _("Cancel requested: the run stops before its next step."))
    else:
        messages.error(request, _("This run is not running."))
    return redirect(run)


@require_POST
@admin_required
def run_resume(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    try:
        service.resume_run(run, actor=request.user)
        messages.success(request, _("Resumed: the run continues from the step that did not finish."))
    except service.RunRefused as exc:
        if exc.active:
            messages.error(request, format_html('{} <a href="{}">{}</a>', exc.message, exc.active.get_absolute_url(),
                                                _("Open run #%(id)d") % {"id": exc.active.pk}))
        else:
            messages.error(request, exc.message)
    return redirect(run)


@require_POST
@admin_required
def run_confirm_checklist(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    if not request.POST.get("checklist_confirmed"):
        messages.error(request, _("Tick the checklist box to confirm."))
        return redirect(run)
    try:
        service.confirm_checklist(run, actor=request.user)
        messages.success(request, _("Checklist confirmed; the run continues."))
    except service.RunRefused as exc:
        messages.error(request, exc.message)
    return redirect(run)


@require_GET
@admin_required
def run_list(request):
    form = RunFilterForm(request.GET or None)
    qs = ProcedureRun.objects.all()
    if form.is_valid():
        d = form.cleaned_data
        if d["procedure"]:
            qs = qs.filter(procedure=d["procedure"])
        if d["status"]:
            qs = qs.filter(status=d["status"])
        if d["node"]:
            qs = qs.filter(node=d["node"])
        if d["actor"]:
            qs = qs.filter(actor_name__icontains=d["actor"])
    page = Paginator(qs, settings.PAGE_SIZE).get_page(request.GET.get("page"))
    template = "gpus/runs/list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#run-table"
    return render(request, template, {"page": page, "form": form, "node": request.GET.get("node", "")})


AUDIT_FIELDS = ["seq", "recorded_at", "step_key", "title", "state", "attempt", "started_at", "finished_at",
                "kubectl", "sent", "output", "error"]


def _run_meta(run):
    return {"id": run.pk, "procedure": run.procedure, "procedure_name": str(Procedure(run.procedure).label),
            "node": run.node, "params": run.params, "actor": run.actor_name, "status": run.status,
            "created_at": run.created_at.isoformat(), "started_at": run.started_at and run.started_at.isoformat(),
            "finished_at": run.finished_at and run.finished_at.isoformat(), "message": run.message,
            "source": run.source, "resumed": run.resumed_count}


def _event_dict(e: StepRun):
    return {f: (getattr(e, f).isoformat() if hasattr(getattr(e, f), "isoformat") else getattr(e, f))
            for f in AUDIT_FIELDS}


@require_GET
@admin_required
def run_audit_json(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    data = {"run": _run_meta(run), "events": [_event_dict(e) for e in run.steps.order_by("seq")]}
    response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-audit.json"'
    return response


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value):
    """A text cell a spreadsheet would read as a formula gets a leading quote (CSV injection)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


@require_GET
@admin_required
def run_audit_csv(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-audit.csv"'
    writer = csv.writer(response)
    meta = _run_meta(run)
    writer.writerow(["run", "procedure", "node", "actor", "status", "created_at", "message"])
    writer.writerow([csv_safe(meta[f]) for f in ("id", "procedure", "node", "actor", "status", "created_at",
                                                  "message")])
    writer.writerow([])
    writer.writerow(AUDIT_FIELDS)
    for e in run.steps.order_by("seq"):
        d = _event_dict(e)
        d["sent"] = "" if d["sent"] is None else json.dumps(d["sent"])
        writer.writerow([csv_safe(d[f]) for f in AUDIT_FIELDS])
    return response


# --- the managed manifest --------------------------------------------------------

@require_GET
@admin_required
def manifest_view(request):
    cur = manifest_mod.current()
    version = cur
    if request.GET.get("v"):
        v = request.GET["v"]
        if not (v.isascii() and v.isdigit() and len(v) <= 9):
            raise Http404(_("No such manifest version"))
        version = get_object_or_404(ManifestVersion, version=int(v))
    docs, error, validation, drift = [], "", None, []
    try:
        docs = manifest_mod.parse(version.content)
        validation = manifest_mod.validate(docs)
    except manifest_mod.ManifestError as exc:
        error = str(exc)
    if docs:
        try:
            drift = manifest_mod.drift(docs, get_gateway())
        except ClusterError as exc:
            request.cluster_error = str(exc)
    form = ManifestForm(initial={"content": cur.content})
    return render(request, "gpus/wizards/manifest.html", {
        "version": version, "current": cur, "versions": ManifestVersion.objects.all()[:50], "validation": validation,
        "error": error, "drift": drift, "form": form, "in_sync": drift and all(d.state == "in-sync" for d in drift)})


@require_POST
@admin_required
def manifest_save(request):
    form = ManifestForm(request.POST)
    if form.is_valid():
        try:
            v = manifest_mod.save_version(form.cleaned_data["content"].replace("\r\n", "\n"), actor=request.user,
                                          note=form.cleaned_data["note"])
            messages.success(request, _("Saved as version %(v)d. Apply it to change the cluster.") % {"v": v.version})
        except manifest_mod.ManifestError as exc:
            messages.error(request, _("Not saved: %(err)s") % {"err": exc})
    return redirect("manifest")


@require_POST
@admin_required
def manifest_apply(request):
    from django.utils import timezone

    cur = manifest_mod.current()
    try:
        docs = manifest_mod.parse(cur.content)
        result = manifest_mod.validate(docs)
    except manifest_mod.ManifestError as exc:
        messages.error(request, _("Version %(v)d is not valid: %(e)s") % {"v": cur.version, "e": exc})
        return redirect("manifest")
    if not result.ok:
        messages.error(request, _("Version %(v)d is not valid: %(e)s") % {"v": cur.version, "e": "; ".join(result.errors)})
        return redirect("manifest")
    try:
        lines = manifest_mod.apply(docs, get_gateway())
    except ClusterError as exc:
        messages.error(request, _("Apply failed: %(err)s") % {"err": exc})
        return redirect("manifest")
    ManifestVersion.objects.filter(pk=cur.pk).update(applied_at=timezone.now())
    messages.success(request, _("Applied version %(v)d: %(lines)s. A ConfigMap change takes effect only after a "
                                "rollout restart (procedure C does both).") % {"v": cur.version, "lines": "; ".join(lines)})
    return redirect("manifest")


# --- health ------------------------------------------------------------------------

@require_GET
@admin_required
def health(request):
    from . import health as health_mod

    ledger, snapshot = current_ledger(request)
    problems = health_mod.problems(ledger, snapshot) if ledger else []
    if ledger:
        try:
            docs = manifest_mod.parse(manifest_mod.current().content)
            problems += health_mod.drift_problems(manifest_mod.drift(docs, get_gateway()))
        except (ClusterError, manifest_mod.ManifestError):
            pass
    return render(request, "gpus/wizards/health.html", {"problems": problems, "ledger": ledger})
