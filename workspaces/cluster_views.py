"""The Workspaces of the cluster (admins): every namespace holding a GPU quota, its detail,
and adoption of those the product has no record of. Thin views: the lines are the cluster
view's (workspaces/directory.py; no Kubernetes API call, a constant number of queries per
page); adoption reads the namespace's quotas live, since it writes a record from them."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from brickadmin.cluster import ClusterError
from brickadmin.cluster.vocabulary import OWNER_LABEL
from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.view.reading import read_cluster

from . import directory, elastic, notice_cards, waits
from .forms import AdoptForm, ElasticQuotaForm, QuotaForm
from .models import Decision

NOT_MEASURED = gettext_lazy("not measured")
NOT_MEASURABLE = gettext_lazy("not measurable per tenant (time-sliced GPU)")


def _usage(attr: str, measured: bool):
    """The CSV's value of a DCGM figure (``attr`` of the line): the number, "not measured"
    (never 0), or on time-sliced GPUs "not measurable per tenant" (never the device's
    figure). The phrases are translated once for every row, in the request's language."""
    not_measured, not_measurable = str(NOT_MEASURED), str(NOT_MEASURABLE)
    if not measured:
        return lambda w: not_measured

    def value(w):
        figure = getattr(w, attr)
        if figure is None:
            return not_measurable if w.shared_only and not w.no_pod else ""
        return round(figure, 1)

    return value


def workspace_table(measured: bool) -> Table:
    return Table(
        Column("workspace", gettext_lazy("Workspace"), "namespace"),
        Column("owner", gettext_lazy("Owner"), "owner_name"),
        Column(
            "record",
            gettext_lazy("Record"),
            "adoptable",
            value=lambda w: "none (adoptable)" if w.adoptable else "approved",
        ),
        Column("resource", gettext_lazy("GPU resource and type"), value=lambda w: f"{w.resource} ({w.gpu_type})"),
        Column("allocated", gettext_lazy("Allocated to the Workspace"), "quota", numeric=True),
        Column("requested", gettext_lazy("Requested by pods"), numeric=True),
        Column("physical", gettext_lazy("In use physically"), numeric=True),
        Column(
            "utilisation",
            gettext_lazy("GPU utilisation (%)"),
            numeric=True,
            value=_usage("utilisation", measured),
        ),
        Column(
            "memory",
            gettext_lazy("GPU memory used (MiB)"),
            "memory_mib",
            numeric=True,
            value=_usage("memory_mib", measured),
        ),
        Column("created", gettext_lazy("Age"), "created_at"),
        Column("idle_since", gettext_lazy("Idle since")),
        search=("namespace", "owner_name", "resource", "gpu_type"),
        default="workspace",
    )


@require_GET
@admin_required
def cluster_workspaces(request):
    view = read_cluster()  # the twin's view brought up to date; the banner when it is old
    measured = directory.measured()
    table = workspace_table(measured).bind(request, directory.lines())
    if table.wants_csv:
        return table.csv_response("workspaces")
    return render(
        request,
        "workspaces/cluster_workspaces.html",
        {
            "table": table,
            "page": table.page,
            "measured": measured,
            "snapshot": view.snapshot,
            "idle_hours": directory.idle_window_hours(),
        },
    )


@require_GET
@admin_required
def cluster_workspace(request, namespace):
    read_cluster()
    line = directory.line(namespace)
    record = directory.record_of(namespace)
    if line is None and record is None:
        raise Http404("no such Workspace")
    decisions = Decision.objects.filter(subject=namespace).order_by("-at", "-id")[:50]
    return render(
        request,
        "workspaces/cluster_workspace.html",
        {
            "ns": namespace,
            "line": line,
            "record": record,
            "decisions": decisions,
            "notice_cards": notice_cards.for_workspace(namespace, request.user),
            "measured": directory.measured(),
            "idle_hours": directory.idle_window_hours(),
            "waiting": waits.causes(line, admin=True),
        },
    )


@require_http_methods(["GET", "POST"])
@admin_required
def workspace_adopt(request, namespace):
    """A namespace holding a GPU quota without a record becomes an approved Workspace of
    the owner chosen here (a form, confirmed once, audited as a decision)."""
    read_cluster()  # the twin's view brought up to date: a link straight here finds the namespace
    line = directory.line(namespace)
    if line is None or not line.quota:
        raise Http404("no namespace with a GPU quota of that name")
    if directory.record_of(namespace) is not None:
        messages.info(request, _("Workspace %(ns)s already has a record.") % {"ns": namespace})
        return redirect("cluster_workspace", namespace=namespace)
    proposed = directory.owner_from_label(line.owner)
    form = AdoptForm(request.POST if request.method == "POST" else None, initial={"owner": proposed})
    if request.method == "POST" and form.is_valid():
        try:
            directory.adopt(namespace, form.cleaned_data["owner"], request.user, form.cleaned_data["note"].strip())
        except directory.AdoptionError as exc:
            form.add_error(None, str(exc))
        except ClusterError as exc:
            form.add_error(None, _("The cluster could not be read, nothing was recorded: %(why)s") % {"why": exc})
        else:
            messages.success(
                request,
                _("Namespace %(ns)s is now a Workspace of %(owner)s.")
                % {"ns": namespace, "owner": form.cleaned_data["owner"].get_username()},
            )
            return redirect("cluster_workspace", namespace=namespace)
    return render(
        request,
        "workspaces/adopt.html",
        {"ns": namespace, "line": line, "form": form, "proposed": proposed, "owner_label": OWNER_LABEL},
        status=400 if form.is_bound and form.errors else 200,
    )


@require_http_methods(["GET", "POST"])
@admin_required
def workspace_quota(request, namespace):
    """An admin changes a Workspace's GPU quota: the form, the preview of what it does (read
    live), then one confirmation that starts the audited run (workspaces/quota.py). An undo is
    the same page with the quota before a change filled in."""
    from brickadmin.cluster.gateway import get_gateway
    from gpus.models import ProcedureRun

    from . import quota as quota_mod
    from . import reclaim
    from .models import ReclaimAsk

    data = request.POST if request.method == "POST" else request.GET
    form = QuotaForm(data if "gpu" in data else None)
    gateway = get_gateway()
    try:
        current = quota_mod.preview(gateway, namespace, 0)
        seen = quota_mod.preview(gateway, namespace, form.cleaned_data["gpu"]) if form.is_valid() else None
    except quota_mod.QuotaError:
        raise Http404("no such namespace") from None
    ask = reclaim.open_ask(namespace)
    undo_grant = quota_mod.grant_undone(namespace, form.cleaned_data.get("undo_of")) if seen is not None else None
    if request.method == "POST" and seen is not None:
        try:
            if form.cleaned_data.get("reclaim_of"):  # after asking the owner: the same change, on the question
                asked = ReclaimAsk.objects.filter(pk=form.cleaned_data["reclaim_of"], namespace=namespace).first()
                if asked is None:
                    raise reclaim.ReclaimError(_("No such question to the owner."))
                asked = reclaim.reclaim(
                    asked,
                    actor=request.user,
                    after=seen.after,
                    gateway=gateway,
                    acknowledged=form.cleaned_data.get("capacity_acknowledged"),
                )
                return redirect(ProcedureRun.objects.get(pk=asked.quota_run_id))
            run = quota_mod.change_quota(
                namespace,
                seen.after,
                actor=request.user,
                reason=form.cleaned_data["reason"],
                resource=seen.resource,
                undo_of=form.cleaned_data.get("undo_of"),
                gateway=gateway,
                grant=undo_grant,  # an undo of a grant change puts the grant back too
                acknowledged=form.cleaned_data.get("capacity_acknowledged"),
            )
        except (quota_mod.QuotaError, reclaim.ReclaimError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(run)
    grant_form, ran = _elastic_change(request, namespace, current, gateway)
    if ran is not None:
        return redirect(ran)
    runs = [(r, quota_mod.undo_target(r)) for r in quota_mod.history(namespace)[:20]]
    return render(
        request,
        "workspaces/quota.html",
        {
            "elastic": elastic.of_workspace(namespace),
            "grant_form": grant_form,
            "admin": True,
            "ns": namespace,
            "form": form,
            "current": current,
            "preview": seen,
            "undo_grant": undo_grant,
            "runs": runs,
            "ask": ask,
            "overdue": ask is not None and ask.overdue(),
            "reclaim_reason": _("Reclaimed after asking the owner"),
        },
        status=400 if request.method == "POST" else 200,
    )


def _elastic_change(request, namespace, current, gateway):
    """The quota page's guarantee, burst and lend form (a Kueue Workspace): posted, it starts
    the audited quota run with the grant (its ResourceQuota at guarantee + burst). Returns the
    form and the run started (None: none)."""
    from . import quota as quota_mod

    posted = request.method == "POST" and "guarantee" in request.POST
    line = next(iter(elastic.of_workspace(namespace).lines), None)
    initial = {}
    if line is not None:
        q = line[0]
        initial = {"guarantee": q.guarantee, "burst": q.burst or 0, "lend": q.lendable}
    form = ElasticQuotaForm(request.POST if posted else None, initial=initial)
    if not posted or not form.is_valid():
        return form, None
    grant = form.cleaned_data["grant"]
    try:
        return form, quota_mod.change_quota(
            namespace,
            grant.ceiling,
            actor=request.user,
            reason=form.cleaned_data["reason"],
            resource=current.resource,
            gateway=gateway,
            grant=grant,
            acknowledged=form.cleaned_data.get("capacity_acknowledged"),
        )
    except quota_mod.QuotaError as exc:
        # a ceiling over the Total: the form asks the plans' acknowledgement, then is posted again
        form.over_total = quota_mod.preview(gateway, namespace, grant.ceiling, current.resource).over_total
        form.add_error(None, str(exc))
        return form, None
