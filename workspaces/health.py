"""Health checks of the Workspaces: the product's records against the cluster's namespaces
and quotas, and allocations left idle.

Registered in the one registry of checks (gpus/health.py) when this module is imported,
from ``WorkspacesConfig.ready()``, after the checks of gpus. Read from the product's
records at page time (``reads="records"``): an approval, an adoption or the passing of time
changes them without the cluster changing. Their input, ``HealthInputs.workspaces``, is
gathered once by ``workspace_problems`` (two queries: the records and the view's Workspace
lines), which ``register()`` hands to ``gpus.view.reading`` (RECORD_READERS); the checks
themselves are pure.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings as dj_settings
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import kueue
from gpus.numbers import health as health_mod
from gpus.numbers.health import HealthInputs, Problem, check
from gpus.numbers.occupancy import idle_lines
from gpus.view import reading

from . import elastic
from .models import WorkspaceRequest

WORKSPACE = "workspace"  # a finding's subject_type: a Workspace (its namespace)


@dataclass(frozen=True)
class Record:
    """An approved (or being approved) Workspace request, as the checks need it."""

    name: str
    owner: str
    gpu: int
    resource: str
    url: str = ""  # its admin detail page


@dataclass
class WorkspaceInputs:
    records: list[Record]
    # The view's lines (gpus.view.reading.workspace_lines or gpus.numbers.occupancy.Occupancy): namespace,
    # owner, quota, gpu_quotas, quotas, requested, waiting, utilisation, idle_since (may be absent).
    lines: list = field(default_factory=list)
    idle_hours: float = 24.0
    idle_percent: float = 5.0
    adopt_url: dict = field(default_factory=dict)  # namespace -> the adoption form
    detail_url: dict = field(default_factory=dict)  # namespace -> its admin detail page
    quota_url: dict = field(default_factory=dict)  # namespace -> its quota edit page
    approving: set = field(default_factory=set)  # names being approved now (not out of step yet)
    # Kueue as last read (workspaces/elastic.py facts): served (None: not known) and its cohorts
    kueue_served: bool | None = None
    kueue_cohorts: list = field(default_factory=list)  # brickadmin.cluster.kueue.Cohort


def _inputs(inputs: HealthInputs) -> WorkspaceInputs | None:
    return getattr(inputs, "workspaces", None)


def _recorded(inputs: HealthInputs) -> list[tuple[Record, object]]:
    """Each approved record with its namespace's line (None: the namespace is not there)."""
    ws = _inputs(inputs)
    if ws is None:
        return []
    lines = {line.namespace: line for line in ws.lines}
    return [(r, lines.get(r.name)) for r in ws.records if r.name not in ws.approving]


def _amounts(gpu_quotas: dict) -> str:
    return ", ".join(f"{r} {n}" for r, n in sorted(gpu_quotas.items()) if n) or "0"


@check(
    "workspace-namespace-missing",
    gettext_lazy("Workspace namespace missing"),
    reads="records",
    explain=gettext_lazy(
        "An approved Workspace has no namespace in the cluster (deleted by hand). Fix "
        "re-creates it, with its quotas, from the approval record; its pods and data are gone."
    ),
)
def workspace_namespace_missing(inputs: HealthInputs) -> Iterable[Problem]:
    for r, line in _recorded(inputs):
        if line is None:
            yield Problem(
                "bad",
                "workspace-namespace-missing",
                r.name,
                _("Workspace %(ws)s (owner %(owner)s) is approved but its namespace is not in the cluster.")
                % {"ws": r.name, "owner": r.owner or "?"},
                _(
                    "Re-create the namespace and its quotas from the approval record (Fix); the owner "
                    "starts their workloads again."
                ),
                subject_type=WORKSPACE,
            )


@check(
    "workspace-quota-missing",
    gettext_lazy("Workspace quota missing"),
    reads="records",
    explain=gettext_lazy(
        "An approved Workspace's namespace exists but holds no quota (or no GPU quota where one "
        "was approved), so its pods are not limited. Fix re-creates the missing quotas from the "
        "record."
    ),
)
def workspace_quota_missing(inputs: HealthInputs) -> Iterable[Problem]:
    for r, line in _recorded(inputs):
        if line is None:
            continue  # the namespace check says so
        if not line.quotas or (r.gpu and not any((line.gpu_quotas or {}).values())):
            what = _("no ResourceQuota") if not line.quotas else _("no GPU quota")
            yield Problem(
                "bad",
                "workspace-quota-missing",
                r.name,
                _(
                    "Workspace %(ws)s (owner %(owner)s) has %(what)s in the cluster; its approval record "
                    "says %(expected)s."
                )
                % {"ws": r.name, "owner": r.owner or "?", "what": what, "expected": _amounts({r.resource: r.gpu})},
                _("Re-create the missing quotas from the approval record (Fix)."),
                subject_type=WORKSPACE,
            )


@check(
    "workspace-quota-edited",
    gettext_lazy("Workspace quota edited outside brickadmin"),
    reads="records",
    explain=gettext_lazy(
        "A Workspace's GPU quota in the cluster differs from what its approval record says: "
        "someone edited it with kubectl. Put it back as approved, or record the change with a "
        "new request."
    ),
)
def workspace_quota_edited(inputs: HealthInputs) -> Iterable[Problem]:
    urls = getattr(_inputs(inputs), "detail_url", {})
    for r, line in _recorded(inputs):
        if line is None or not any((line.gpu_quotas or {}).values()):
            continue  # missing namespace or quota: the checks above say so
        expected = {r.resource: r.gpu} if r.gpu and r.resource else {}
        actual = {k: v for k, v in (line.gpu_quotas or {}).items() if v}
        if actual != expected:
            yield Problem(
                "warn",
                "workspace-quota-edited",
                r.name,
                _(
                    "Workspace %(ws)s (owner %(owner)s): the cluster's GPU quota is %(actual)s, the approval "
                    "record says %(expected)s."
                )
                % {"ws": r.name, "owner": r.owner or "?", "actual": _amounts(actual), "expected": _amounts(expected)},
                _(
                    "Someone changed the quota outside brickadmin. Set it back as approved (kubectl -n "
                    "%(ws)s edit resourcequota), or ask the owner for a new request."
                )
                % {"ws": r.name},
                subject_type=WORKSPACE,
                link=urls.get(r.name, ""),
                link_text=_("Open Workspace %(ws)s") % {"ws": r.name},
            )


@check(
    "workspace-unrecorded",
    gettext_lazy("GPU quota without a Workspace record"),
    reads="records",
    explain=gettext_lazy(
        "A namespace holds a GPU quota that brickadmin has no record of (made with kubectl, or "
        "before brickadmin). Adopt it: an admin names its owner, and it becomes a Workspace "
        "record with its decision in the audit log."
    ),
)
def workspace_unrecorded(inputs: HealthInputs) -> Iterable[Problem]:
    ws = _inputs(inputs)
    if ws is None:
        return
    known = {r.name for r in ws.records} | ws.approving
    for line in ws.lines:
        if line.quota and line.namespace not in known:
            yield Problem(
                "info",
                "workspace-unrecorded",
                line.namespace,
                _(
                    "Namespace %(ns)s holds GPU quota %(q)s (owner label: %(owner)s) but brickadmin has no "
                    "Workspace record of it."
                )
                % {"ns": line.namespace, "q": _amounts(line.gpu_quotas), "owner": line.owner or _("none")},
                _(
                    "Adopt it into a Workspace record with an owner, so that it is counted, named and "
                    "audited like the others."
                ),
                subject_type=WORKSPACE,
                link=ws.adopt_url.get(line.namespace, ""),
                link_text=_("Adopt %(ns)s") % {"ns": line.namespace},
            )


@check(
    "workspace-idle",
    gettext_lazy("Idle GPU allocation"),
    reads="records",
    explain=gettext_lazy(
        "A Workspace has held GPU quota with no Running GPU pod, or with utilisation under the "
        "threshold, for the whole window (BRICK_IDLE_HOURS, 24 h by default). Ask its owner "
        "whether it is still needed; its quota could be given to someone else. A Workspace with a "
        "GPU pod the scheduler cannot place is waiting for GPUs, never idle."
    ),
)
def workspace_idle(inputs: HealthInputs) -> Iterable[Problem]:
    ws = _inputs(inputs)
    if ws is None:
        return
    now = inputs.now or datetime.now(UTC)
    owners = {r.name: r.owner for r in ws.records}
    for line in idle_lines(ws.lines, now, ws.idle_hours):
        why = (
            _("no Running GPU pod")
            if not line.requested
            else _("utilisation %(u)s%% under %(t)s%%")
            % {"u": round(line.utilisation or 0), "t": f"{ws.idle_percent:g}"}
        )
        yield Problem(
            "warn",
            "workspace-idle",
            line.namespace,
            _(
                "Workspace %(ws)s (owner %(owner)s) holds %(q)s idle since %(since)s (%(why)s): that quota "
                "could be reclaimed."
            )
            % {
                "ws": line.namespace,
                "owner": owners.get(line.namespace) or line.owner or "?",
                "q": _amounts(line.gpu_quotas),
                "since": line.idle_since.strftime("%Y-%m-%d %H:%M UTC"),
                "why": why,
            },
            _("Ask the owner whether the Workspace still needs its GPUs; lower its quota or remove it if not."),
            subject_type=WORKSPACE,
            link=ws.quota_url.get(line.namespace, ""),
            link_text=_("Lower or reclaim the quota of %(ws)s") % {"ws": line.namespace},
        )


@check(
    "workspace-borrowing-while-waiting",
    gettext_lazy("Workspace borrowing while another of its cohort waits"),
    reads="records",
    explain=gettext_lazy(
        "Kueue lets a Workspace borrow idle GPUs of its cohort and takes them back for a Workload that fits "
        "the lender's guarantee. A Workload that needs to borrow itself waits while another Workspace holds "
        "what it borrowed: raise the waiting Workspace's guarantee or lower the borrower's burst ceiling."
    ),
)
def workspace_borrowing_while_waiting(inputs: HealthInputs) -> Iterable[Problem]:
    ws = _inputs(inputs)
    if ws is None or not ws.kueue_served:
        return
    for borrower, waiting in kueue.borrowing_while_waiting(ws.kueue_cohorts):
        name = borrower.workspace or borrower.queue
        yield Problem(
            "warn",
            "workspace-borrowing-while-waiting",
            name,
            _(
                "Workspace %(b)s borrows %(n)s %(res)s of cohort %(c)s while %(w)s has %(p)s Workloads waiting "
                "in its queue."
            )
            % {
                "b": name,
                "n": borrower.borrowed,
                "res": borrower.resource,
                "c": borrower.cohort,
                "w": waiting.workspace or waiting.queue,
                "p": waiting.pending,
            },
            _(
                "Kueue takes borrowed GPUs back only for Workloads within the waiting Workspace's guarantee. "
                "Raise its guarantee, or lower the burst ceiling of %(b)s, on the quota page."
            )
            % {"b": name},
            subject_type=WORKSPACE,
            link=ws.quota_url.get(borrower.workspace, ""),
            link_text=_("Elastic quota of %(ws)s") % {"ws": name},
        )


# The Workspace lines as the Workspace checks read them; their JSON is read as text, so that
# unchanged lines cost no decoding (workspace_problems).
_LINE_SCALARS = ("namespace", "owner", "quota", "requested", "waiting", "utilisation", "idle_since", "labelled")
_workspace_found_lock = threading.Lock()
_workspace_found: dict = {}  # {"key": what the last findings were computed from, "found": them}


def workspace_problems() -> list[health_mod.Problem]:
    """The Workspace checks (above) on the records and the view's
    Workspace lines: two queries, whatever the number of Workspaces. Both are read every
    time; the findings are built again only when the records, a line, the language, the
    idle settings or the minute (idleness is a duration) differ from this process's last
    call, so a Dashboard view does not rebuild hundreds of findings that did not change."""
    records = _workspace_records()
    rows = tuple(reading.workspace_rows(*_LINE_SCALARS, text=("gpu_quotas", "quotas")))
    kueue_seen = elastic.facts()
    key = (
        kueue_seen.served,
        json.dumps(kueue_seen.queues, sort_keys=True),
        records,
        rows,
        translation.get_language(),
        int(timezone.now().timestamp() // 60),
        dj_settings.BRICK_IDLE_HOURS,
        dj_settings.BRICK_IDLE_UTILISATION_PERCENT,
    )
    with _workspace_found_lock:
        if _workspace_found.get("key") == key:
            return list(_workspace_found["found"])
    lines = [
        _Line(
            **dict(zip(_LINE_SCALARS, row, strict=False)),
            gpu_quotas=json.loads(row[-2] or "{}"),
            quotas=json.loads(row[-1] or "[]"),
        )
        for row in rows
    ]
    found = health_mod.problems(
        health_mod.HealthInputs(ledger=None, workspaces=workspace_inputs(lines, records, kueue_seen)), reads="records"
    )
    with _workspace_found_lock:
        _workspace_found.update(key=key, found=found)
    return list(found)


@dataclass(frozen=True)
class _Line:
    """A Workspace line of the view with the fields the Workspace checks read."""

    namespace: str
    owner: str
    quota: int
    requested: int
    utilisation: float | None
    idle_since: datetime | None
    labelled: bool
    gpu_quotas: dict
    quotas: list
    waiting: int = 0  # GPU pods the scheduler has not placed: waiting for GPUs, never idle


def _workspace_records() -> tuple:
    """(name, owner, gpu, resource, status) of the approved and approving Workspace records (one query)."""
    return tuple(
        WorkspaceRequest.objects.filter(
            status__in=[WorkspaceRequest.Status.APPROVED, WorkspaceRequest.Status.APPROVING]
        )
        .order_by("pk")
        .values_list("name", "requester_name", "gpu", "gpu_resource", "status")
    )


def workspace_inputs(lines=None, records=None, kueue_seen=None):
    """The approved Workspace records (or ``records``, as ``_workspace_records`` reads them)
    and the view's Workspace lines (or ``lines``, e.g. those of a live view), for the
    Workspace checks (above): two queries at most, whatever the number
    of Workspaces."""
    records_read, approving = [], set()
    for name, owner, gpu, resource, status in _workspace_records() if records is None else records:
        if status == WorkspaceRequest.Status.APPROVING:
            approving.add(name)
        else:
            records_read.append(Record(name=name, owner=owner, gpu=gpu, resource=resource))
    # one reverse() each, not one per Workspace ("-ns-" is no namespace: a name starts alphanumeric)
    adopt, detail = reverse("workspace_adopt", args=["-ns-"]), reverse("cluster_workspace", args=["-ns-"])
    quota = reverse("workspace_quota", args=["-ns-"])
    if lines is None:
        lines = list(
            reading.workspace_lines().only(
                "namespace",
                "owner",
                "quota",
                "gpu_quotas",
                "quotas",
                "requested",
                "waiting",
                "utilisation",
                "idle_since",
                "labelled",
            )
        )
    kueue_seen = kueue_seen or elastic.facts()
    return WorkspaceInputs(
        kueue_served=kueue_seen.served,
        kueue_cohorts=kueue_seen.cohorts if kueue_seen.served else [],
        records=records_read,
        lines=lines,
        approving=approving,
        idle_hours=float(dj_settings.BRICK_IDLE_HOURS),
        idle_percent=float(dj_settings.BRICK_IDLE_UTILISATION_PERCENT),
        adopt_url={line.namespace: adopt.replace("-ns-", line.namespace) for line in lines if line.quota},
        detail_url={line.namespace: detail.replace("-ns-", line.namespace) for line in lines},
        quota_url={line.namespace: quota.replace("-ns-", line.namespace) for line in lines if line.quota},
    )


def add_live_inputs(inputs: HealthInputs, lines) -> None:
    """A live view's health inputs get its Workspace lines, beside the records."""
    inputs.workspaces = workspace_inputs(lines)


def register() -> None:
    """Hand the Workspace findings to the cluster view (from ``WorkspacesConfig.ready()``)."""
    if workspace_problems not in reading.RECORD_READERS:
        reading.RECORD_READERS.append(workspace_problems)
    if add_live_inputs not in reading.LIVE_INPUT_READERS:
        reading.LIVE_INPUT_READERS.append(add_live_inputs)
