"""Thin views: read the form, call approvals and jobs, render. Users see only their own rows."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from brickadmin.cluster import ClusterError
from brickadmin.forms import ascii_number
from brickadmin.middleware import show_cluster_error
from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from brickadmin.wording import said
from gpus.choices import GpuType
from gpus.view.reading import nodes_serving, read_cluster, read_jobs

from . import approvals, directory, elastic, jobs, notice_cards, reclaim, showback_rollups, usage, waits
from .forms import (
    AMOUNT_FIELDS,
    ApproveForm,
    JobForm,
    JobSettingsForm,
    RejectForm,
    ResourceLimitForm,
    WorkspaceRequestForm,
)
from .models import USER_PRIORITY_CLASS, Decision, JobSettings, ResourceLimit, WorkspaceJob, WorkspaceRequest


def _ledger_or_banner(request):
    """(ledger, snapshot) for the pages that still work without the cluster (forms and
    queues): (None, None) and the banner when it cannot be read."""
    try:
        view = read_cluster()
    except ClusterError as exc:
        show_cluster_error(request, exc)
        return None, None
    return view.ledger, view.snapshot


AUDIT_TABLE = Table(
    Column("at", gettext_lazy("When")),
    Column("actor", gettext_lazy("Who"), "actor_name"),
    Column("action", gettext_lazy("What"), value=lambda d: d.get_action_display()),
    Column("subject", gettext_lazy("Subject")),
    Column("resource", gettext_lazy("GPU resource"), "gpu_resource"),
    Column("amount", gettext_lazy("GPU"), numeric=True),
    Column("overcommit", gettext_lazy("Overcommit")),
    Column("detail", gettext_lazy("Detail"), None, value="detail"),
    search=("actor_name", "subject", "gpu_resource", "detail", "action"),
    default="-at",
)

_JOB = Column("job", gettext_lazy("Job"), "pk", value=lambda j: j.k8s_name)
_OWNER = Column("owner", gettext_lazy("Owner"), "owner_name")
_JOB_DETAILS = (
    Column("workspace", gettext_lazy("Workspace"), "workspace__name"),
    Column("node", gettext_lazy("Node")),
    Column("gpu", gettext_lazy("GPU"), numeric=True),
    Column("image", gettext_lazy("Image")),
)
_JOB_SEARCH = ("workspace__name", "owner_name", "node", "image", "status")
_JOB_STATE = (
    Column("state", gettext_lazy("State"), "status"),
    Column("created", gettext_lazy("Created"), "created_at"),
)
USER_JOB_TABLE = Table(_JOB, *_JOB_DETAILS, *_JOB_STATE, search=_JOB_SEARCH, default="-created")
ADMIN_JOB_TABLE = Table(_JOB, _OWNER, *_JOB_DETAILS, *_JOB_STATE, search=_JOB_SEARCH, default="-created")
JOB_QUEUE_TABLE = Table(
    _JOB,
    Column("requester", gettext_lazy("Requester"), "owner_name"),
    *_JOB_DETAILS,
    Column("command", gettext_lazy("Command"), None),
    Column("waiting", gettext_lazy("Waiting"), "created_at"),
    Column("decide", "", None, export=False),
    search=_JOB_SEARCH + ("command",),
    default="waiting",
)
REQUEST_TABLE = Table(
    Column("name", gettext_lazy("Name")),
    Column("requester", gettext_lazy("Requester"), "requester_name"),
    Column("gpu", gettext_lazy("GPU"), numeric=True),
    Column("cpu", gettext_lazy("CPU"), numeric=True),
    Column("memory", gettext_lazy("Memory (GiB)"), "memory_gib", numeric=True),
    Column("storage", gettext_lazy("Storage (GiB)"), "storage_gib", numeric=True),
    Column("waiting", gettext_lazy("Waiting"), "created_at"),
    search=("name", "requester_name"),
    default="waiting",
)
_WS_NAME = Column("name", gettext_lazy("Name"))
_WS_STATUS = Column("status", gettext_lazy("Status"), value=lambda w: w.get_status_display())
_WS_ASSIGNED = (
    Column("type", gettext_lazy("GPU type"), "gpu_type"),
    Column("resource", gettext_lazy("GPU resource"), "gpu_resource"),
    Column("rejection", gettext_lazy("Why rejected"), None, value="rejection_reason"),
)
_WS_REQUESTED = Column("requested", gettext_lazy("Requested"), "created_at")
USER_WORKSPACE_TABLE = Table(
    _WS_NAME,
    _WS_STATUS,
    Column("gpu", gettext_lazy("GPU"), numeric=True),
    Column("cpu", gettext_lazy("CPU"), numeric=True),
    Column("memory", gettext_lazy("Memory (GiB)"), "memory_gib", numeric=True),
    Column("storage", gettext_lazy("Storage (GiB)"), "storage_gib", numeric=True),
    *_WS_ASSIGNED,
    _WS_REQUESTED,
    search=("name", "status", "gpu_resource"),
    default="-requested",
)
ALL_WORKSPACE_TABLE = Table(
    _WS_NAME,
    Column("owner", gettext_lazy("Owner"), "requester_name"),
    _WS_STATUS,
    Column("overcommit", gettext_lazy("Overcommit")),
    Column("gpu", gettext_lazy("GPU"), numeric=True),
    *_WS_ASSIGNED,
    Column("decided_by", gettext_lazy("Decided by"), "decided_by_name"),
    _WS_REQUESTED,
    search=("name", "requester_name", "status", "gpu_resource", "decided_by_name"),
    default="-requested",
)


# --- users: Workspaces -------------------------------------------------------------


@require_GET
def workspace_list(request):
    table = USER_WORKSPACE_TABLE.bind(request, WorkspaceRequest.objects.filter(requester=request.user))
    if table.wants_csv:
        return table.csv_response("my-workspaces")
    return render(
        request,
        "workspaces/workspace_list.html",
        {"table": table, "page": table.page, "held": _held_or_none(request)},
    )


def _held_or_none(request):
    """The namespaces labelled as the user's without a record, from the cluster view; none
    when the view cannot be read or, on the simulated cluster, brought up to date (the list
    of records works without the cluster, and with a database that refuses writes)."""
    try:
        read_cluster()
    except (ClusterError, DatabaseError):
        return []
    return directory.held_without_record(request.user)


@require_http_methods(["GET", "POST"])
def workspace_request(request):
    initial = {}
    if request.method == "GET" and request.GET.get("again"):
        # a rejected (or withdrawn) request of one's own, asked for again: its figures to start from
        before = WorkspaceRequest.objects.filter(
            pk=ascii_number(request.GET["again"].strip()) or 0,
            requester=request.user,
            status__in=[WorkspaceRequest.Status.REJECTED, WorkspaceRequest.Status.WITHDRAWN],
        ).first()
        if before is not None:
            initial = {
                "name": before.name,
                "gpu": before.gpu,
                "cpu": before.cpu,
                "memory_gib": before.memory_gib,
                "storage_gib": before.storage_gib,
                "purpose": before.purpose,
            }
    filled_from = None
    if request.method == "GET" and request.GET.get("from") and not initial:
        filled_from, initial = _filled_from_workspace(request)
    form = WorkspaceRequestForm(request.POST if request.method == "POST" else None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            ws = approvals.create_request(request.user, **form.cleaned_data)
        except approvals.WorkspaceError as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(
                request, _("Workspace %(name)s requested; an admin will assign its GPU type.") % {"name": ws.name}
            )
            return redirect("workspace_detail", pk=ws.pk)
    ledger, snapshot = _ledger_or_banner(request)
    return render(
        request,
        "workspaces/request_form.html",
        {
            "form": form,
            "ledger": ledger,
            "snapshot": snapshot,
            "amount_fields": AMOUNT_FIELDS,
            "filled_from": filled_from,
        },
        status=400 if form.is_bound and form.errors else 200,
    )


def _filled_from_workspace(request):
    """A remedy's link ("Request more GPUs", "Change the GPU type" beside a waiting pod): the form
    filled from the person's own approved Workspace, and why, for the admins who decide.
    (None, {}) when it is not theirs."""
    ws = WorkspaceRequest.objects.filter(
        name=request.GET["from"].strip()[:63], requester=request.user, status=WorkspaceRequest.Status.APPROVED
    ).first()
    if ws is None:
        return None, {}
    wanted = ascii_number(request.GET.get("gpu", "").strip()) or 0
    more = request.GET.get("why") == "more"
    facts = {"ws": ws.name, "n": ws.gpu, "type": ws.gpu_type or ws.gpu_resource or "?", "want": wanted or ws.gpu}
    purpose = (
        _("More GPUs beside %(ws)s: its quota of %(n)d is used up and a pod waits for %(want)d more.")
        if more
        else _(
            "Like %(ws)s on another GPU type: its pods wait for %(want)d of %(type)s, which the cluster cannot give."
        )
    ) % facts
    initial = {
        "name": f"{ws.name}-2"[:63],
        "gpu": wanted or ws.gpu,
        "cpu": ws.cpu,
        "memory_gib": ws.memory_gib,
        "storage_gib": ws.storage_gib,
        "purpose": purpose,
    }
    return ws, initial


@require_POST
def workspace_withdraw(request, pk):
    ws = get_object_or_404(WorkspaceRequest, pk=pk, requester=request.user)
    try:
        approvals.withdraw(ws.pk, request.user)
    except approvals.WorkspaceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Request %(name)s withdrawn.") % {"name": ws.name})
    return redirect("workspace_detail", pk=ws.pk)


@require_GET
def workspace_detail(request, pk):
    ws = get_object_or_404(WorkspaceRequest, pk=pk, requester=request.user)
    jobs = ws.jobs.order_by("-created_at", "-id")[:50]
    line, cluster_ok = None, True
    if ws.status == WorkspaceRequest.Status.APPROVED:
        # Quota, pods and utilisation as the cluster view shows them (no API call).
        try:
            read_cluster()
        except ClusterError as exc:
            show_cluster_error(request, exc)
            cluster_ok = False
        else:
            line = directory.line(ws.namespace)
    waiting = waits.causes(line, admin=False)
    notices = (
        notice_cards.for_workspace(ws.namespace, request.user) if ws.status == WorkspaceRequest.Status.APPROVED else []
    )
    ask = reclaim.open_ask(ws.namespace) if ws.status == WorkspaceRequest.Status.APPROVED else None
    how_to = _how_to_use(ws, line) if ws.status == WorkspaceRequest.Status.APPROVED and cluster_ok else None
    own_months = showback_rollups.of_workspace(ws.namespace) if ws.status == WorkspaceRequest.Status.APPROVED else []
    return render(
        request,
        "workspaces/workspace_detail.html",
        {
            "how_to": how_to,
            "ws": ws,
            "jobs": jobs,
            "elastic": elastic.of_workspace(ws.namespace) if ws.status == WorkspaceRequest.Status.APPROVED else None,
            "line": line,
            "cluster_ok": cluster_ok,
            "notice_cards": notices,
            "ask": ask,
            "measured": directory.measured(),
            "waiting": waiting,
            # its own physical GPU-hours (workspaces/showback_rollups.py), the last 12 months
            "showback_months": own_months,
            "showback_lending": any(r.borrowed or r.lent for r in own_months),
        },
    )


def access_text() -> str:
    """How users get access to the cluster: the admins' text, else the product's default."""
    return JobSettings.load().access_text.strip() or _(
        "Use the kubeconfig the platform gave you, or sign in with the platform's single sign-on (SSO), "
        "then work in the namespace below. Ask your platform team if you have neither."
    )


def _how_to_use(ws, line) -> dict:
    """What the Workspace page tells its owner about using it: the namespace, access, an
    example pod with the GPU resource and count of its quota, and the nodes that serve that
    resource (from the cluster view: no API call)."""
    resource = ws.gpu_resource
    quota = ws.gpu
    if line is not None and resource and resource in (line.gpu_quotas or {}):
        quota = int(line.gpu_quotas[resource])  # an admin may have changed it since the approval
    nodes = nodes_serving(resource) if resource and quota else []
    plan = usage.pod_plan(resource if quota else "", quota, max((n.allocatable for n in nodes), default=0))
    return {
        "namespace": ws.namespace,
        "access": access_text(),
        "plan": plan,
        "pod": usage.example_pod(ws.namespace, plan, USER_PRIORITY_CLASS),
        "nodes": nodes[:NODES_SHOWN],
        "nodes_more": max(0, len(nodes) - NODES_SHOWN),
        "schedulable": sum(1 for n in nodes if n.schedulable),
    }


NODES_SHOWN = 20  # a Workspace page names this many serving nodes, then counts the rest


# --- users: Jobs ------------------------------------------------------------------


def _jobs_for(user):
    """An admin sees every Job; a user only their own."""
    rows = WorkspaceJob.objects.select_related("workspace")
    return rows if user.is_staff else rows.filter(owner=user)


@require_GET
def job_list(request):
    all_users = request.user.is_staff
    table = (ADMIN_JOB_TABLE if all_users else USER_JOB_TABLE).bind(request, _jobs_for(request.user))
    if table.wants_csv:
        return table.csv_response("jobs")
    page = table.page
    cluster = _cluster_jobs_or_banner(request, page)
    for job in page:
        job.cluster_state = (
            jobs.job_state((cluster or {}).get((job.workspace.namespace, job.k8s_name)))
            if cluster is not None
            else None
        )
    return render(
        request,
        "workspaces/job_list.html",
        {"page": page, "table": table, "cluster_ok": cluster is not None, "all_users": all_users},
    )


@require_http_methods(["GET", "POST"])
def job_create(request):
    ledger, snapshot = _ledger_or_banner(request)
    options = jobs.job_node_options(ledger)
    initial = {}
    if request.GET.get("workspace", "").isdigit():
        initial["workspace"] = request.GET["workspace"]
    form = JobForm(
        request.POST if request.method == "POST" else None, user=request.user, node_options=options, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            job = jobs.create_job(
                request.user, d["workspace"], node=d["node"], image=d["image"], command=d["command"], gpu=d["gpu"]
            )
        except approvals.WorkspaceError as exc:
            messages.error(request, str(exc))
            return redirect("job_list")
        if job.status == WorkspaceJob.Status.PENDING:
            messages.success(request, _("Job %(name)s is waiting for an admin's approval.") % {"name": job.k8s_name})
        else:
            messages.success(request, _("Job %(name)s was sent to the cluster.") % {"name": job.k8s_name})
        return redirect("job_list")
    has_workspace = form.fields["workspace"].queryset.exists()
    dra_workspaces = [w.name for w in form.fields["workspace"].queryset if w.gpu_resource == jobs.DRA_JOB_RESOURCE]
    return render(
        request,
        "workspaces/job_form.html",
        {
            "form": form,
            "dra_workspaces": dra_workspaces,
            "options": options,
            "ledger": ledger,
            "snapshot": snapshot,
            "has_workspace": has_workspace,
            "settings_obj": JobSettings.load(),
        },
        status=400 if form.is_bound and form.errors else 200,
    )


@require_GET
def job_detail(request, pk):
    job = get_object_or_404(_jobs_for(request.user), pk=pk)
    cluster = _cluster_jobs_or_banner(request, [job])
    job.cluster_state = jobs.job_state((cluster or {}).get((job.workspace.namespace, job.k8s_name)))
    return render(request, "workspaces/job_detail.html", {"job": job, "cluster_ok": cluster is not None})


@require_POST
def job_cancel(request, pk):
    """The owner or an admin cancels a Job (deleted from the cluster once sent; recorded)."""
    job = get_object_or_404(_jobs_for(request.user), pk=pk)
    try:
        jobs.cancel_job(job.pk, request.user)
    except approvals.WorkspaceError as exc:
        messages.error(request, str(exc))
    except ClusterError as exc:
        messages.error(
            request,
            _("%(name)s was not cancelled: the cluster refused (%(why)s).") % {"name": job.k8s_name, "why": exc},
        )
    else:
        messages.success(request, _("Job %(name)s cancelled.") % {"name": job.k8s_name})
    return redirect("job_detail", pk=job.pk)


def _cluster_jobs_or_banner(request, jobs):
    """These Jobs as the cluster view last showed them, by (namespace, name); None and the
    banner when there is no view to read. No API call: the watcher keeps the product's Jobs."""
    try:
        return read_jobs([(job.workspace.namespace, job.k8s_name) for job in jobs])
    except ClusterError as exc:
        show_cluster_error(request, exc)
        return None


# --- admins: approval queue ----------------------------------------------------------


def approve_question(req, choice) -> str:
    """The one sentence an admin confirms before approving: the Workspace, who asked, and
    the GPU type and count it gets (or that it gets none)."""
    if not req.gpu or choice is None:
        return _("Approve Workspace %(name)s for %(who)s with no GPU? This creates its namespace and quotas.") % {
            "name": req.name,
            "who": req.requester_name,
        }
    return _(
        "Approve Workspace %(name)s for %(who)s with %(n)s × %(res)s (%(type)s)? This creates its namespace and "
        "a quota of %(n)s %(res)s on the cluster."
    ) % {
        "name": req.name,
        "who": req.requester_name,
        "n": req.gpu,
        "res": choice.resource,
        "type": choice.label if choice.is_dra else GpuType.label_of(choice.gpu_type),
    }


def _attach_choices(req, choices, form=None, kueue_served=None):
    """One request's approve form and its rows of GPU types (what approving leaves, the
    sentence to confirm); with Kueue served, its guarantee, burst and lend ceilings."""
    req.approve_form = form or ApproveForm(request_obj=req, choices=choices, prefix=f"r{req.pk}")
    req.kueue_served = bool(kueue_served)
    req.choice_rows = [
        {
            "c": c,
            "leaves": c.leaves(req.gpu),
            "physical": c.physical_text(req.gpu),
            "fits": req.gpu <= c.available,
            "confirm": approve_question(req, c),
        }
        for c in choices
    ]
    req.confirm_no_gpu = approve_question(req, None)


def _attach_holdings(reqs):
    """What each requester already holds beside the request: the namespaces labelled as theirs
    with a GPU quota (the cluster view) and their other pending requests. Two queries a page."""
    names = [r.requester_name for r in reqs]
    held = directory.held_by_owner(names)
    pending = dict(
        WorkspaceRequest.objects.filter(requester_name__in=names, status=WorkspaceRequest.Status.PENDING)
        .values_list("requester_name")
        .annotate(n=Count("id"))
        .values_list("requester_name", "n")
    )
    for req in reqs:
        req.holds = held.get(req.requester_name, [])
        req.holds_gpu = sum(h.quota for h in req.holds)
        req.other_pending = max(0, pending.get(req.requester_name, 0) - 1)


COLLAPSE_ABOVE = 3  # a page of more requests shows each card folded, its forms one click away


def _queue_context(request, forms_by_pk=None, errors_by_pk=None, open_pks=()):
    """The queue page's context; the cards of ``open_pks`` (a decision just refused) and of
    any request with an error come unfolded."""
    ledger, snapshot = _ledger_or_banner(request)
    choices = approvals.gpu_choices(ledger)
    table = REQUEST_TABLE.bind(request, WorkspaceRequest.objects.filter(status=WorkspaceRequest.Status.PENDING))
    page = table.page
    forms_by_pk = forms_by_pk or {}
    errors_by_pk = errors_by_pk or {}
    reqs = list(page)
    _attach_holdings(reqs)
    kueue_served = elastic.facts().served if reqs else None
    collapse = len(reqs) > COLLAPSE_ABOVE
    for req in reqs:
        # Nothing pre-selected: the admin chooses the GPU type (the form says so when none is).
        _attach_choices(req, choices, forms_by_pk.get(("approve", req.pk)), kueue_served)
        req.reject_form = forms_by_pk.get(("reject", req.pk)) or RejectForm(prefix=f"r{req.pk}")
        req.error = errors_by_pk.get(req.pk, "")
        failed = req.error or req.approve_form.errors or req.reject_form.errors
        req.open = not collapse or bool(failed) or req.pk in open_pks
    return {
        "page": page,
        "reqs": reqs,
        "table": table,
        "ledger": ledger,
        "snapshot": snapshot,
        "choices": choices,
        "job_settings": JobSettings.load(),
        "pending_jobs": WorkspaceJob.objects.filter(status=WorkspaceJob.Status.PENDING).count(),
    }


@require_GET
@admin_required
def approval_queue(request):
    ctx = _queue_context(request)
    if ctx["table"].wants_csv:
        return ctx["table"].csv_response("workspace-requests")
    template = "workspaces/approval_queue.html"
    if request.htmx:
        template += "#queue"
    return render(request, template, ctx)


def _back_to_queue(request):
    page = request.POST.get("page", "")
    url = reverse("approval_queue")
    return HttpResponseRedirect(f"{url}?page={page}" if page.isdigit() else url)


@require_POST
@admin_required
def approve_request(request, pk):
    req = get_object_or_404(WorkspaceRequest, pk=pk)
    ledger, _snap = _ledger_or_banner(request)
    choices = approvals.gpu_choices(ledger)
    form = ApproveForm(request.POST, request_obj=req, choices=choices, prefix=f"r{req.pk}")
    if form.is_valid():
        try:
            # No ledger passed: the service reads availability afresh, inside its approval lock.
            approvals.approve(
                req.pk,
                request.user,
                form.cleaned_data.get("resource") or "",
                overcommit=form.cleaned_data["overcommit"],
                grant=form.cleaned_data.get("grant"),
            )
        except approvals.WorkspaceError as exc:
            messages.error(request, _("%(name)s not approved: %(why)s") % {"name": req.name, "why": exc})
            req.refresh_from_db()
            if req.last_error != str(exc):  # a cluster's refusal is on the card already, as its last error
                form.add_error(None, str(exc))  # beside the request too: the page opens at its card
        else:
            messages.success(request, _("%(name)s approved.") % {"name": req.name})
            return _back_to_queue(request)
    else:
        messages.error(request, _("%(name)s not approved: see the errors below.") % {"name": req.name})
    ctx = _queue_context(request, {("approve", req.pk): form}, open_pks={req.pk})
    return render(request, "workspaces/approval_queue.html", ctx, status=400)


@require_POST
@admin_required
def approve_requests(request):
    """Approve several requests with one confirmation. Posted from the queue with the
    requests ticked (``pick``): the page asks each one's GPU type; once every choice is valid
    it lists each request with its type and count to confirm; confirmed (``confirmed``), each
    goes through the approval service on its own (each audited), and a failure of one
    neither undoes nor stops the others: it is reported beside that request."""
    picked = []
    for value in request.POST.getlist("pick")[:PAGE_PICK_LIMIT]:
        pk = ascii_number(value.strip())
        if pk is not None and pk not in picked:
            picked.append(pk)
    by_pk = WorkspaceRequest.objects.filter(pk__in=picked, status=WorkspaceRequest.Status.PENDING).in_bulk()
    reqs = [by_pk[pk] for pk in picked if pk in by_pk]
    if not reqs:
        messages.error(request, _("Tick the pending requests to approve together first."))
        return _back_to_queue(request)
    ledger, snapshot = _ledger_or_banner(request)
    choices = approvals.gpu_choices(ledger)
    choosing = "choose" not in request.POST  # straight from the queue: nothing chosen yet
    forms = {
        req.pk: ApproveForm(None if choosing else request.POST, request_obj=req, choices=choices, prefix=f"r{req.pk}")
        for req in reqs
    }
    kueue_served = elastic.facts().served
    for req in reqs:
        _attach_choices(req, choices, forms[req.pk], kueue_served)
    _attach_holdings(reqs)
    valid = not choosing and all(f.is_valid() for f in forms.values())
    editing = "edit" in request.POST  # back from the confirmation to the choices
    results = []
    if valid and not editing and request.POST.get("confirmed") == "yes":
        for req in reqs:
            data = forms[req.pk].cleaned_data
            try:
                approvals.approve(
                    req.pk,
                    request.user,
                    data.get("resource") or "",
                    overcommit=data["overcommit"],
                    grant=data.get("grant"),
                )
            except approvals.WorkspaceError as exc:
                results.append((req, False, str(exc)))
            else:
                results.append((req, True, ""))
        done = sum(1 for _r, ok, _e in results if ok)
        if done:
            messages.success(request, _("%(n)s of %(t)s requests approved.") % {"n": done, "t": len(results)})
        if done < len(results):
            messages.error(request, _("Some requests were not approved: the reason is beside each."))
    for req in reqs:
        form = forms[req.pk]
        req.chosen = next((c for c in choices if valid and c.resource == form.cleaned_data.get("resource")), None)
        req.question = approve_question(req, req.chosen)
    return render(
        request,
        "workspaces/approve_several.html",
        {
            "reqs": reqs,
            "ledger": ledger,
            "snapshot": snapshot,
            "stage": "done" if results else ("confirm" if valid and not editing else "choose"),
            "results": results,
            "page_number": request.POST.get("page", ""),
        },
        status=400 if not choosing and not valid else 200,
    )


PAGE_PICK_LIMIT = 100  # requests one confirmation can approve (the queue shows 25 a page)


@require_POST
@admin_required
def reject_request(request, pk):
    req = get_object_or_404(WorkspaceRequest, pk=pk)
    form = RejectForm(request.POST, prefix=f"r{req.pk}")
    if form.is_valid():
        try:
            approvals.reject(req.pk, request.user, form.cleaned_data["reason"])
        except approvals.WorkspaceError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("%(name)s rejected.") % {"name": req.name})
        return _back_to_queue(request)
    ctx = _queue_context(request, {("reject", req.pk): form})
    return render(request, "workspaces/approval_queue.html", ctx, status=400)


# --- admins: Jobs, settings, audit -----------------------------------------------------


@require_GET
@admin_required
def job_queue(request):
    pending = WorkspaceJob.objects.filter(status=WorkspaceJob.Status.PENDING).select_related("workspace")
    table = JOB_QUEUE_TABLE.bind(request, pending)
    if table.wants_csv:
        return table.csv_response("job-requests")
    page = table.page
    ledger, snapshot = _ledger_or_banner(request)
    options = {o.name: o for o in jobs.job_node_options(ledger)}
    for job in page:
        job.option = options.get(job.node)
        job.reject_form = RejectForm(prefix=f"j{job.pk}")
    return render(
        request,
        "workspaces/job_queue.html",
        {"page": page, "table": table, "job_settings": JobSettings.load(), "ledger": ledger},
    )


@require_POST
@admin_required
def approve_job(request, pk):
    job = get_object_or_404(WorkspaceJob, pk=pk)
    try:
        jobs.approve_job(job.pk, request.user)
    except approvals.WorkspaceError as exc:
        messages.error(request, _("%(name)s not approved: %(why)s") % {"name": job.k8s_name, "why": exc})
    else:
        messages.success(request, _("%(name)s approved and sent to the cluster.") % {"name": job.k8s_name})
    return redirect("job_queue")


@require_POST
@admin_required
def reject_job(request, pk):
    job = get_object_or_404(WorkspaceJob, pk=pk)
    form = RejectForm(request.POST, prefix=f"j{job.pk}")
    if form.is_valid():
        try:
            jobs.reject_job(job.pk, request.user, form.cleaned_data["reason"])
        except approvals.WorkspaceError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("%(name)s rejected.") % {"name": job.k8s_name})
    else:
        messages.error(request, _("A rejection needs a reason."))
    return redirect("job_queue")


@require_http_methods(["GET", "POST"])
@admin_required
def workspace_settings(request):
    s = JobSettings.load()
    form = JobSettingsForm(
        request.POST if request.method == "POST" else None,
        initial={"approval_required": s.approval_required, "access_text": s.access_text},
    )
    if request.method == "POST" and form.is_valid():
        jobs.set_job_approval(request.user, form.cleaned_data["approval_required"])
        jobs.set_access_text(request.user, form.cleaned_data["access_text"])
        messages.success(request, _("Settings saved."))
        return redirect("workspace_settings")
    limits = ResourceLimit.objects.select_related("user", "group").order_by("group__name", "user__username")
    return render(
        request,
        "workspaces/settings.html",
        {
            "form": form,
            "job_settings": s,
            "limits": limits,
            "limit_form": ResourceLimitForm(),
            "defaults": settings.BRICK_DEFAULT_LIMITS,
            "default_access": access_text() if not s.access_text.strip() else "",
        },
    )


def _chosen(field: str, value):
    """The user or group a posted key names, read by the form's own field (ASCII digits
    only), so the limit updated is the one the form then saves; None when it names none."""
    try:
        return ResourceLimitForm.base_fields[field].clean(value)
    except ValidationError:
        return None


@require_POST
@admin_required
def limit_save(request):
    existing = None
    who_user, who_group = _chosen("user", request.POST.get("user")), _chosen("group", request.POST.get("group"))
    if who_user is not None:
        existing = ResourceLimit.objects.filter(user=who_user).first()
    elif who_group is not None:
        existing = ResourceLimit.objects.filter(group=who_group).first()
    form = ResourceLimitForm(request.POST, instance=existing)
    if form.is_valid():
        limit = form.save()
        Decision.objects.create(
            actor=request.user,
            actor_name=request.user.get_username(),
            action=Decision.Action.LIMIT,
            subject=str(limit)[:253],
            detail=str(limit),
        )
        messages.success(request, _("Limit saved."))
        return redirect("workspace_settings")
    s = JobSettings.load()
    limits = ResourceLimit.objects.select_related("user", "group").order_by("group__name", "user__username")
    return render(
        request,
        "workspaces/settings.html",
        {
            "form": JobSettingsForm(initial={"approval_required": s.approval_required, "access_text": s.access_text}),
            "job_settings": s,
            "limits": limits,
            "limit_form": form,
            "defaults": settings.BRICK_DEFAULT_LIMITS,
        },
        status=400,
    )


@require_POST
@admin_required
def limit_delete(request, pk):
    limit = get_object_or_404(ResourceLimit, pk=pk)
    text = str(limit)
    limit.delete()
    Decision.objects.create(
        actor=request.user,
        actor_name=request.user.get_username(),
        action=Decision.Action.LIMIT,
        subject=text[:253],
        detail=said("decision.limit_deleted", limit=text),
    )
    messages.success(request, _("Limit removed; the defaults or group limits apply again."))
    return redirect("workspace_settings")


@require_GET
@admin_required
def audit_log(request):
    table = AUDIT_TABLE.bind(request, Decision.objects.all())
    if table.wants_csv:
        return table.csv_response("decisions")
    return render(request, "workspaces/audit.html", {"table": table, "page": table.page})


@require_GET
@admin_required
def all_workspaces(request):
    """Admins' view of every Workspace request (the users' pages only show their own)."""
    rows = WorkspaceRequest.objects.all()
    status = request.GET.get("status", "")
    if status in WorkspaceRequest.Status.values:
        rows = rows.filter(status=status)
    table = ALL_WORKSPACE_TABLE.bind(request, rows)
    if table.wants_csv:
        return table.csv_response("workspaces-all")
    counts = dict(WorkspaceRequest.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return render(
        request,
        "workspaces/all_workspaces.html",
        {
            "table": table,
            "page": table.page,
            "status": status,
            "counts": counts,
            "statuses": WorkspaceRequest.Status.choices,
        },
    )
