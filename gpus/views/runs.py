"""Run pages: live progress, cancel, resume, the checklist confirmation, history and audit downloads."""

from __future__ import annotations

import csv
import json

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.core.handlers.asgi import ASGIRequest
from django.db.models import DurationField, ExpressionWrapper, F
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.context_processors import csrf
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from brickadmin.cluster import ClusterError
from brickadmin.cluster.gateway import get_gateway
from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.view.reading import read_cluster

from .. import run_stream as stream
from ..forms import RunFilterForm
from ..models import ProcedureRun, StepRun
from ..procedures import engine, registry, service
from ..procedures.catalogue.common import NODE_BEFORE
from ..procedures.recording import params_text, remembered
from ..procedures.service import refusal_message
from ..procedures.steps import SHARING_LABEL

RUN_TABLE = Table(
    Column("id", "#", "pk", numeric=True),
    Column("procedure", gettext_lazy("Procedure"), value=lambda r: r.get_procedure_display()),
    Column("target", gettext_lazy("Target"), "node", value=lambda r: r.target),
    Column("status", gettext_lazy("Status")),
    Column("actor", gettext_lazy("By"), "actor_name"),
    Column("created", gettext_lazy("Created"), "created_at"),
    Column("finished", gettext_lazy("Finished"), "finished_at"),
    Column("took", gettext_lazy("Took"), numeric=True, value=lambda r: r.duration and r.duration.total_seconds()),
    search=("node", "actor_name", "message", "status"),
    default="-id",
)


def with_duration(runs):
    """Runs with ``took`` (finish minus start) computed in SQL, so the list sorts by it."""
    return runs.annotate(took=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))


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
        took = e.finished_at - start if start and e.finished_at else None
        rows.append(
            {
                "key": key,
                "event": e,
                "title": e.numbered_title,
                "kubectl": first[key].kubectl or e.kubectl,
                "index": e.step_index,
                "started_at": start,
                "took": took,
            }
        )
    rows.sort(key=lambda r: r["index"])
    return rows


FINISHED_STEP_STATES = ("succeeded", "skipped")


def run_position(rows, status: str) -> dict:
    """Where the run is, from its step rows (plan order; index 0 is the pre-check): the step
    running or stopped at, "step n of N" with N the numbered steps, and how many are done."""
    total = len(rows)
    done = sum(1 for r in rows if r["event"].state in FINISHED_STEP_STATES)
    current = next((r for r in rows if r["event"].state == "running"), None)
    if current is None and status not in ("pending", "succeeded"):
        current = next((r for r in rows if r["event"].state not in FINISHED_STEP_STATES), None)
    return {
        "total": total,
        "numbered": max(total - 1, 0),
        "done": done,
        "done_numbered": sum(1 for r in rows if r["index"] and r["event"].state in FINISHED_STEP_STATES),
        "current": current,
        "index": current["index"] if current else None,
        "title": current["event"].shown_title if current else "",
    }


def announcement(event, numbered: int, run) -> str:
    """What the page's live region says for one recorded event ("" for none): each step's
    start and end, a cancel or a confirmation asked for, and the run's end (its last event,
    once it has ended). Write-ahead records of a request say nothing."""
    if event.intent is not None or event.state == "pending":
        return ""
    if event.step_key == engine.RUN_EVENT:
        if not run.is_active and event.seq == run.last_seq:
            said = {
                "succeeded": _("Run succeeded. %(message)s"),
                "failed": _("Run failed. %(message)s"),
                "cancelled": _("Run cancelled. %(message)s"),
                "interrupted": _("Run interrupted. %(message)s"),
            }.get(run.status, "%(message)s")
            return (said % {"message": run.shown_message}).strip()
        if event.state == "cancelled" or (event.sent or {}).get("checklist_confirmed"):
            return event.shown_title  # "Cancel requested by …", "Checklist confirmed by …"
        return ""
    if event.step_index == 0:
        where = _("Pre-check")
    else:
        where = _("Step %(n)d of %(total)d") % {"n": event.step_index, "total": numbered}
    title = models_title(event)
    said = {
        "running": _("%(where)s started: %(title)s.")
        if event.attempt <= 1
        else _("%(where)s started again (attempt %(attempt)d): %(title)s."),
        "succeeded": _("%(where)s done: %(title)s."),
        "skipped": _("%(where)s skipped: %(title)s."),
        "failed": _("%(where)s failed: %(title)s. What to fix: %(error)s"),
        "cancelled": _("%(where)s cancelled: %(title)s."),
    }.get(event.state)
    if said is None:
        return ""
    return said % {"where": where, "title": title, "attempt": event.attempt, "error": event.shown_error}


def models_title(event) -> str:
    """The step's title without its number (the announcement says "Step n of N")."""
    return event.shown_title


def _undo_offer(run, proc):
    """After a node conversion succeeded: the conversion back to the sharing mode the node had
    before the run (as the run recorded it), if one is offered."""
    if run.status != "succeeded" or not run.node or not getattr(proc, "target", ""):
        return None
    before = ((remembered(run, NODE_BEFORE) or {}).get("labels") or {}).get(SHARING_LABEL)
    if not before or before == proc.target:
        return None
    return next((p for p in registry.all_procedures() if p.listed and getattr(p, "target", "") == before), None)


def _progress_context(run, *, offers=True, events=None):
    """What the run page shows; ``offers``: also what it offers once the run has stopped
    (Restore reads the cluster view) and the cancel question (reads the write-ahead records)."""
    events = list(run.steps.order_by("seq")) if events is None else events
    if events and events[-1].seq > run.last_seq:  # a row committed after the run was read: read it again
        run.refresh_from_db()
    rows = step_rows(run, events)
    proc = registry.find(run.procedure)
    checklist = ""
    if proc is not None and proc.checklist and run.is_resumable:
        manual = {s.key for s in proc.steps(run.params or {}) if s.manual}
        if any(r["key"] in manual and r["event"].state == "failed" for r in rows):
            checklist = proc.checklist % {"node": run.node}
    restored_by = None
    if run.is_resumable:  # a stopped run someone restored is not resumed any more: Restore undid it
        restored_by = ProcedureRun.objects.filter(params__restore_of=run.pk).order_by("-pk").first()
    position = run_position(rows, run.status)
    return {
        "run": run,
        "events": events,
        "rows": rows,
        "waits_checklist": bool(checklist),
        "checklist": checklist,
        "position": position,
        "params_text": params_text(run.params, run.procedure),
        "headline": registry.headline(run),
        "run_links": proc.run_links(run) if proc is not None and not run.node else [],
        "shown_seq": events[-1].seq if events else 0,  # the page's stream starts after what it shows
        "restored_by": restored_by,
        "resumable": run.is_resumable and restored_by is None,
        "restore": _restore_offer(run) if offers and restored_by is None else None,
        "undo": _undo_offer(run, proc) if proc is not None else None,
        "cordoned": offers and bool(run.node) and run.is_active and engine.left_cordoned(run.pk),
        # a page refused a live stream polls its progress this often (static/js/run-stream.js)
        "poll_seconds": settings.BRICK_RUN_STREAM_RETRY_AFTER_SECONDS,
    }


def _shown_state(run, context) -> tuple:
    """What the outcome and the actions depend on: they are sent again only when it changes."""
    return (run.status, run.cancel_requested, context["waits_checklist"], bool(context["restored_by"]))


def _restore_offer(run):
    """The parameters "Restore the node" would run with, when offered: the node as the view
    shows it (the page only offers; starting the restore reads the node live)."""
    if not run.is_resumable or not run.node:
        return None
    try:
        seen = read_cluster().snapshot.node(run.node)
    except ClusterError:
        return None
    return service.restore_params(run, seen=seen) if seen is not None else None


# Where the run page's progress region goes in the page rendered without it (run_detail).
PROGRESS_MARK = "<!--run-progress-->"


@require_GET
@admin_required
def run_detail(request, pk):
    run = get_object_or_404(ProcedureRun, pk=pk)
    if not (isinstance(request, ASGIRequest) and run.is_active):
        return render(request, "gpus/runs/detail.html", _progress_context(run))
    # A live run's page is sent in three parts: the page around its progress region first (the
    # browser starts on it while the server goes on), then the region with its rows, read only
    # now, then the rest. A row committed while the page rendered is on the page; only those
    # committed after this late read wait for the stream the page opens right after the region.
    page = render_to_string("gpus/runs/detail.html", {"run": run, "progress_later": True}, request=request)
    head, _mark, tail = page.partition(PROGRESS_MARK)
    region = _late_region(request, run.pk)

    async def content():
        yield head
        yield await sync_to_async(region)()  # the request's own thread and database connection
        yield tail

    response = StreamingHttpResponse(content(), content_type="text/html; charset=utf-8")
    response["X-Accel-Buffering"] = "no"  # a proxy in front passes each part on at once
    return response


def _late_region(request, run_id):
    """The page's progress region, read and rendered when called: in the reader's language and
    zone (the middleware's are gone by then), with the CSRF token of its forms and not the
    page's context processors (their banners are in the part already sent)."""
    csrf_token = csrf(request)["csrf_token"]
    language, zone = translation.get_language(), timezone.get_current_timezone()

    def region() -> str:
        with translation.override(language), timezone.override(zone):
            context = _progress_context(ProcedureRun.objects.get(pk=run_id))
            return render_to_string("gpus/runs/detail.html#run-progress", {**context, "csrf_token": csrf_token})

    return region


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


@require_GET
@admin_required
def run_stream(request, pk):
    """The run's rows as Server-Sent Events, each after the last sequence number the browser
    saw (Last-Event-ID when it reconnects, ?after= from the page); see gpus/run_stream.py."""
    run = get_object_or_404(ProcedureRun, pk=pk)
    try:
        ticket = stream.admit(request.user.pk)
    except stream.Refused as refused:
        # 429: this user's bound; 503: the process's. The page polls the run's progress instead.
        response = HttpResponse(refused.reason, status=refused.status, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(refused.retry_after)
        return response
    after = stream.resume_after(request.headers.get("Last-Event-ID"), request.GET.get("after"))
    page_state = (request.GET.get("status", run.status), request.GET.get("cancel") == "1", None, None)
    fetch, progress = _stream_readers(request, run.pk, page_state)
    fetch, progress = stream.released(fetch), stream.released(progress)
    if isinstance(request, ASGIRequest):
        # The rows the page missed (committed while it loaded) are read here, on the connection
        # this request opened anyway, and go out with the stream's first bytes.
        try:
            first = fetch(after)
        except BaseException:
            ticket.release()
            raise
        content = stream.async_stream(run.pk, after, sync_to_async(fetch), ticket, first=first)
    else:
        content = stream.sync_stream(run.pk, after, fetch, progress, ticket)
    response = StreamingHttpResponse(content, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front passes each event on at once
    return response


def _stream_readers(request, run_id, page_state):
    """fetch(after) -> (messages to send: one for all the rows after ``after``, its id the
    last row's seq; the last seq sent; whether the stream is complete);
    progress() -> what changes when the run records anything. Both run in the request's own
    thread (under ASGI too); the view closes that thread's database connection after each
    (``run_stream.released``), so a waiting stream holds none: each read borrows one from the
    web process's pool (BRICK_DB_POOL; without it, a new backend), so open pages never fill
    PostgreSQL's connections."""
    # The rows read so far, in seq order: a run's rows are only ever appended (recording.record),
    # so each later read asks for the new ones alone, not the whole run again.
    shown = {"state": page_state, "events": None}
    # The fragments need only the CSRF token of their forms: not the page's context processors
    # (the banners' and the unread count's queries, on every read of every stream).
    csrf_token = csrf(request)["csrf_token"]

    def fetch(after):
        run = ProcedureRun.objects.get(pk=run_id)
        if run.last_seq <= after:
            return [], after, not run.is_active
        read = shown["events"]
        if read is None:
            events = list(run.steps.order_by("seq"))
        else:
            events = read + list(run.steps.filter(seq__gt=read[-1].seq if read else 0).order_by("seq"))
        shown["events"] = events
        new = [e for e in events if e.seq > after]
        if not new:
            return [], after, not run.is_active and after >= run.last_seq
        context = _progress_context(run, offers=False, events=events)
        state = _shown_state(run, context)
        changed = state[:2] != shown["state"][:2]
        if changed:
            context["cordoned"] = bool(run.node) and run.is_active and engine.left_cordoned(run.pk)
            if not run.is_active and context["restored_by"] is None:
                context["restore"] = _restore_offer(run)
        shown["state"] = state
        touched = {e.step_key for e in new}
        numbered = context["position"]["numbered"]
        said = [{"seq": e.seq, "text": text} for e in new if (text := announcement(e, numbered, run))]
        html = render_to_string(
            "gpus/runs/stream.html",
            {
                **context,
                "new": new,
                "said": said,
                "changed": changed,
                "changed_rows": [r for r in context["rows"] if r["key"] in touched],
                "csrf_token": csrf_token,
            },
        )
        chunks = [stream.sse_message(html, event="step", id=new[-1].seq)]
        return chunks, new[-1].seq, not run.is_active and new[-1].seq >= run.last_seq

    def progress():
        return ProcedureRun.objects.filter(pk=run_id).values_list("last_seq", "status", "cancel_requested").first()

    return fetch, progress


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
    restored_by = ProcedureRun.objects.filter(params__restore_of=run.pk).order_by("-pk").first()
    if restored_by is not None:  # Restore undid what the run did: resuming would do it again unasked
        messages.error(
            request, _("Run #%(id)d restored the node: this run is not resumed any more.") % {"id": restored_by.pk}
        )
        return redirect(run)
    try:
        service.resume_run(run, actor=request.user)
        messages.success(request, _("Resumed: the run continues from the step that did not finish."))
    except service.RunRefused as exc:
        messages.error(request, refusal_message(exc))
    return redirect(run)


@require_POST
@admin_required
def run_restore(request, pk):
    """Undo what a stopped run left on its node, as an audited run of its own."""
    run = get_object_or_404(ProcedureRun, pk=pk)
    try:
        restore = service.start_restore(run, get_gateway(), actor=request.user)
    except service.RunRefused as exc:
        messages.error(request, refusal_message(exc))
        return redirect(run)
    except ClusterError as exc:
        messages.error(request, _("The cluster could not be read: %(err)s") % {"err": exc})
        return redirect(run)
    messages.success(request, _("Restoring %(node)s as it was before run #%(id)d.") % {"node": run.node, "id": run.pk})
    return redirect(restore)


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
    qs = with_duration(ProcedureRun.objects.all())
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
    table = RUN_TABLE.bind(request, qs)
    if table.wants_csv:
        return table.csv_response("runs")
    template = "gpus/runs/list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#run-table"
    return render(
        request, template, {"page": table.page, "table": table, "form": form, "node": request.GET.get("node", "")}
    )


AUDIT_FIELDS = [
    "seq",
    "recorded_at",
    "step_key",
    "title",
    "state",
    "attempt",
    "started_at",
    "finished_at",
    "kubectl",
    "sent",
    "intent",
    "output",
    "error",
]


def _run_meta(run):
    return {
        "id": run.pk,
        "procedure": run.procedure,
        "procedure_name": run.get_procedure_display(),
        "node": run.node,
        "params": run.params,
        "actor": run.actor_name,
        "status": run.status,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at and run.started_at.isoformat(),
        "finished_at": run.finished_at and run.finished_at.isoformat(),
        "message": run.message,
        "source": run.source,
        "resumed": run.resumed_count,
    }


def _event_dict(e: StepRun):
    return {
        f: (getattr(e, f).isoformat() if hasattr(getattr(e, f), "isoformat") else getattr(e, f)) for f in AUDIT_FIELDS
    }


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
    writer.writerow(
        [csv_safe(meta[f]) for f in ("id", "procedure", "node", "actor", "status", "created_at", "message")]
    )
    writer.writerow([])
    writer.writerow(AUDIT_FIELDS)
    for e in run.steps.order_by("seq"):
        d = _event_dict(e)
        d["sent"] = "" if d["sent"] is None else json.dumps(d["sent"])
        d["intent"] = "" if d["intent"] is None else json.dumps(d["intent"])
        writer.writerow([csv_safe(d[f]) for f in AUDIT_FIELDS])
    return response
