"""Reading the materialised cluster view: what the pages read instead of the API server.

``stored_view()`` reads the current generation (written by ``gpus.view.publish``) for a
page with a constant number of queries, whatever the cluster's size, and no API call. A
generation of an older form than this code publishes (``view_publish.SCHEMA_VERSION``) is
never served: ``stored_view()`` raises ``ViewOutdated`` until it is published again (the
watcher at its start; on the twin, ``gpus.view.reading`` at once).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone, translation

from gpus.models import ViewJob, ViewNode, ViewProblem, ViewResourceRow, ViewState, ViewTypeRow, ViewWorkspace
from gpus.numbers import health as health_mod
from gpus.numbers import ledger as ledger_mod
from gpus.numbers import occupancy as occupancy_mod
from gpus.view.publish import BEHIND_SECONDS, SCHEMA_VERSION, TYPE_ROW_FIELDS

# --- one generation per page --------------------------------------------------------------
# The watcher rewrites the view's rows in one transaction, but a page reads the state row and
# the rows in separate statements, lazily, while it renders: a publication committed between
# two of them would show a mix of generations (totals of one, nodes of the next). So a page
# (gpus.middleware.OneGenerationMiddleware) reads the view in one snapshot: its first read
# of the view opens a REPEATABLE READ transaction on PostgreSQL, which every later statement
# of the page reads in, until the response is rendered. It is not READ ONLY: a page may still
# record its own things (a settings row created on first use). On SQLite, and inside a
# transaction already open, the statements are read as they come.
_page = threading.local()  # the connection is per thread too


class PageGeneration:
    """The scope of one page: the snapshot it reads the view in, opened at its first read."""

    def __init__(self):
        self.stack = contextlib.ExitStack()
        self.holding = False

    def __enter__(self):
        _page.current = self
        return self

    def __exit__(self, *exc) -> None:
        self.end(*exc)

    def end(self, *exc) -> None:
        """Close the snapshot (an exception rolls it back); the rest of the request reads as it comes."""
        if getattr(_page, "current", None) is self:
            _page.current = None
        self.stack.__exit__(*(exc or (None, None, None)))


def hold_generation() -> None:
    """Within a page: from now on every read of the view sees the generation it sees now."""
    page = getattr(_page, "current", None)
    if page is None or page.holding:
        return
    page.holding = True
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    page.stack.enter_context(transaction.atomic())
    with connection.cursor() as cursor:  # must be the transaction's first statement
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def holding_generation() -> bool:
    """This page already reads one generation (the twin is then not published again for it)."""
    page = getattr(_page, "current", None)
    return page is not None and page.holding


def end_page_generation(exception: BaseException) -> None:
    """A page's view raised: its snapshot is rolled back before the error page renders."""
    page = getattr(_page, "current", None)
    if page is not None:
        page.end(type(exception), exception, exception.__traceback__)


def stored_gpu_capacity() -> dict[str, dict]:
    """The stored ``gpu_capacity`` (one query); {} before a view that keeps it."""
    hold_generation()
    state = ViewState.objects.filter(pk=1).only("extra").first()
    return ((state.extra or {}).get("gpu_capacity") or {}) if state else {}


class ViewUnavailable(Exception):
    """No view has been published yet (the watcher has not run)."""


class ViewOutdated(ViewUnavailable):
    """The stored generation is of an older form than this code reads (an upgrade): it is
    published again before a page reads it."""

    def __init__(self, schema: int):
        super().__init__(schema)
        self.schema = schema


@dataclass
class Freshness:
    """How old the numbers are, and whether the watcher keeps them up to date."""

    as_of: datetime | None
    published_at: datetime | None
    watcher: str
    watcher_seen_at: datetime | None
    source: str
    live: bool  # the twin: brought up to date on every read
    watcher_status: dict = field(default_factory=dict)  # what the watcher's last heartbeat said

    @property
    def age_seconds(self) -> float | None:
        return (timezone.now() - self.as_of).total_seconds() if self.as_of else None

    @property
    def watcher_down(self) -> bool:
        if self.live:
            return False
        limit = timedelta(seconds=float(settings.BRICK_WATCHER_STALE_SECONDS))
        return self.watcher_seen_at is None or timezone.now() - self.watcher_seen_at > limit

    @property
    def behind(self) -> bool:
        """The numbers may lag the cluster though a watcher runs: its heartbeat is late (the
        leader lost, the standby not leading yet), a watch stream of it is broken (cut off
        from the API server), or it has just taken over and not published yet."""
        if self.live or self.watcher_down:
            return False
        status = self.watcher_status or {}
        late = self.watcher_seen_at is not None and timezone.now() - self.watcher_seen_at > timedelta(
            seconds=BEHIND_SECONDS
        )
        return late or bool(status.get("behind")) or bool(status.get("catching_up"))


class StoredLedger:
    """The stored ledger, with the attributes of ``gpus.numbers.ledger.Ledger`` the pages read.
    Totals and the per-type and per-resource rows are loaded with the state; nodes only
    when a page asks for them (then all at once, or one by name)."""

    def __init__(self, state: ViewState, by_type, by_resource):
        self.by_type = by_type
        self.by_resource = by_resource
        self.allocated_by_namespace = state.extra.get("allocated_by_namespace", {})
        self.device_source = state.device_source
        self.totals = state.totals
        self.logical = state.totals.get("logical", 0)
        self.requested = state.totals.get("requested", 0)
        self.physical = state.totals.get("physical", 0)
        self.physical_used = state.totals.get("physical_used", 0)
        self.models = state.totals.get("models", [])
        self._nodes = None

    @property
    def nodes(self) -> list[ledger_mod.NodeLedger]:
        if self._nodes is None:
            self._nodes = [
                ledger_mod.node_from_dict(d)
                for d in ViewNode.objects.filter(is_gpu=True).order_by("name").values_list("ledger", flat=True)
            ]
        return self._nodes

    def node(self, name: str) -> ledger_mod.NodeLedger | None:
        if self._nodes is not None:
            return next((n for n in self._nodes if n.name == name), None)
        data = ViewNode.objects.filter(name=name, is_gpu=True).values_list("ledger", flat=True).first()
        return ledger_mod.node_from_dict(data) if data else None

    @property
    def timeslicing_replicas(self) -> list[int]:
        """As ``Ledger.timeslicing_replicas``, in one query reading only that number of each
        time-slicing node's line (a page asking for it, the approval queue, does not decode
        every node's line: at thousands of nodes that took seconds)."""
        if self._nodes is not None:
            return sorted({n.replicas for n in self._nodes if n.mode in ledger_mod.REPLICATED_MODES and n.replicas})
        found = (
            ViewNode.objects.filter(is_gpu=True, mode__in=ledger_mod.REPLICATED_MODES)
            .values_list("ledger__replicas", flat=True)
            .distinct()
        )
        return sorted({int(r) for r in found if r})

    def resource(self, name: str) -> ledger_mod.ResourceRow:
        return next((r for r in self.by_resource if r.resource == name), ledger_mod.ResourceRow(resource=name))

    @property
    def cordoned_nodes(self):
        return [n for n in self.nodes if n.cordoned]

    @property
    def stale_nodes(self):
        return [n for n in self.nodes if n.stale]

    @property
    def plugin_down_nodes(self):
        return [n for n in self.nodes if n.plugin_state in ledger_mod.PLUGIN_DOWN]


class StoredSnapshot:
    """The stored projection, with the attributes of ``Snapshot`` the pages read."""

    def __init__(self, state: ViewState):
        self.taken_at = state.as_of
        self.source = state.source
        self.device_source = state.device_source
        self.device_note = state.device_note
        self.plugin_configmaps = state.extra.get("plugin_configmaps", [])
        self.plugin_daemonsets = state.extra.get("plugin_daemonsets", [])
        self.operator_configmaps = state.extra.get("operator_configmaps", [])
        self._nodes = None

    @property
    def nodes(self) -> list[dict]:
        """Every node's projection (name, labels, taints), GPU node or not."""
        if self._nodes is None:
            self._nodes = list(ViewNode.objects.order_by("name").values_list("raw", flat=True))
        return self._nodes

    def has_node(self, name: str) -> bool:
        return ViewNode.objects.filter(name=name).exists()

    def node(self, name: str) -> dict | None:
        """One node's projection (name, labels, taints, unschedulable), or None."""
        return ViewNode.objects.filter(name=name).values_list("raw", flat=True).first()


@dataclass
class StoredView:
    snapshot: StoredSnapshot
    ledger: StoredLedger
    freshness: Freshness
    generation: int = 0
    attention_stored: list | None = None  # health.summary_data of the findings from the cluster
    _problems: list | None = field(default=None, repr=False)

    def problems(self) -> list[health_mod.Problem]:
        """The findings, in the language of the request: those stored with the view (from
        the cluster) and those from the product's records, read now."""
        if self._problems is None:
            lang = translation.get_language() or settings.LANGUAGE_CODE
            stored = [_problem(row, lang) for row in ViewProblem.objects.all()]
            self._problems = health_mod.ordered(health_mod.one_per_cause(stored + record_problems()))
        return self._problems

    def attention(self) -> list[health_mod.Group]:
        """The Dashboard card: the findings grouped by kind, from the summary stored with the
        view and the findings of the product's records, read now (not every stored finding)."""
        records = record_problems()
        # A view published before the summary was stored; or a finding of the records that may
        # explain stored ones (a stopped run and the cordon it left): the card counts each cause once.
        if self.attention_stored is None or health_mod.explains_any(records):
            return health_mod.summary(self.problems())
        return health_mod.summary(records, stored=self.attention_stored)

    def problems_of(self, names) -> dict[str, list[health_mod.Problem]]:
        """Findings per node, for these nodes only (a page of the Nodes list)."""
        names = list(names)
        lang = translation.get_language() or settings.LANGUAGE_CODE
        out: dict[str, list[health_mod.Problem]] = {}
        found = [
            _problem(row, lang) for row in ViewProblem.objects.filter(subject_type=health_mod.NODE, subject__in=names)
        ]
        for p in health_mod.ordered(health_mod.one_per_cause(found + record_problems(names))):
            out.setdefault(p.subject, []).append(p)
        return out


def _problem(row: ViewProblem, lang: str) -> health_mod.Problem:
    """A stored finding in ``lang`` (else the site's language, else any it was stored in)."""

    def text(d):
        return d.get(lang) or d.get(settings.LANGUAGE_CODE) or next(iter(d.values()), "")

    return health_mod.Problem(
        severity=row.severity,
        kind=row.kind,
        subject=row.subject,
        message=text(row.message),
        remedy=text(row.remedy),
        wizard=row.wizard,
        subject_type=row.subject_type,
        fix=row.fix,
        fix_params=row.fix_params or {},
    )


def stored_view(*, live: bool = False) -> StoredView:
    """The current view: three queries (state, type rows, resource rows). Raises
    ViewUnavailable when nothing was published yet, ViewOutdated when what was published
    is of an older form. Within a page, it and every later read of the view see one generation."""
    hold_generation()
    state = ViewState.objects.filter(pk=1).first()
    if state is None or not state.generation:
        raise ViewUnavailable()
    if state.schema < SCHEMA_VERSION:
        raise ViewOutdated(state.schema)
    by_type = [ledger_mod.TypeRow(**{f: getattr(r, f) for f in TYPE_ROW_FIELDS}) for r in ViewTypeRow.objects.all()]
    by_resource = [
        ledger_mod.ResourceRow(
            resource=r.resource,
            logical=r.logical,
            allocated=r.allocated,
            requested=r.requested,
            shared_logical=r.shared_logical,
            shared_on=r.shared_on or [],
            mig_on=r.mig_on or [],
            mps_on=r.mps_on or [],
        )
        for r in ViewResourceRow.objects.all()
    ]
    fresh = Freshness(
        as_of=state.as_of,
        published_at=state.published_at,
        watcher=state.watcher,
        watcher_seen_at=state.watcher_seen_at,
        source=state.source,
        live=live,
        watcher_status=state.watcher_status or {},
    )
    return StoredView(
        snapshot=StoredSnapshot(state),
        ledger=StoredLedger(state, by_type, by_resource),
        freshness=fresh,
        generation=state.generation,
        attention_stored=state.extra.get("attention"),
    )


def has_view() -> bool:
    """A generation this code reads is stored (published, and of the current form)."""
    return ViewState.objects.filter(pk=1, generation__gt=0, schema__gte=SCHEMA_VERSION).exists()


def gpu_nodes(*, mode: str = "", model: str = "", stack: str = ""):
    """The GPU nodes as a QuerySet, filtered in SQL (the Nodes table sorts, searches and pages it there)."""
    hold_generation()
    qs = ViewNode.objects.filter(is_gpu=True)
    if mode:
        qs = qs.filter(mode=mode)
    if model:
        qs = qs.filter(model=model)
    if stack:
        qs = qs.filter(stack=stack)
    return qs.only("name", "model", "mode", "stack", "problems", "ledger")


@dataclass(frozen=True)
class ServingNode:
    """A GPU node that advertises a resource: how many (allocatable) and whether a new pod can land there."""

    name: str
    model: str
    allocatable: int
    schedulable: bool  # Ready and not cordoned


def nodes_serving(resource: str) -> list[ServingNode]:
    """The GPU nodes advertising ``resource`` (allocatable, not a stale leftover of the other
    mode), schedulable ones first, from the stored view: one query, no API call."""
    if not resource:
        return []
    hold_generation()
    rows = ViewNode.objects.filter(is_gpu=True).values_list(
        "name", "cordoned", "ledger__model", "ledger__ready", "ledger__resources"
    )
    out = []
    for name, cordoned, model, ready, resources in rows:
        for res, _type, _capacity, allocatable, _requested, stale, *_sharing in resources or []:
            if res == resource and allocatable and not stale:
                out.append(ServingNode(name, model or "", int(allocatable), bool(ready) and not cordoned))
    out.sort(key=lambda n: (not n.schedulable, n.name))
    return out


def node_lines(view: StoredView, rows) -> list[tuple]:
    """[(NodeLedger, problems)] for a page of ``gpu_nodes()`` rows (findings: one query for the page)."""
    nodes = [ledger_mod.node_from_dict(row.ledger) for row in rows]
    problems = view.problems_of(n.name for n in nodes)
    return [(n, problems.get(n.name, [])) for n in nodes]


def jobs(keys) -> dict[tuple[str, str], dict]:
    """{(namespace, name): {"status": ...}} for the stored Jobs among ``keys`` (one query)."""
    wanted = set(keys)
    if not wanted:
        return {}
    hold_generation()
    rows = ViewJob.objects.filter(name__in={name for _ns, name in wanted}).values_list("namespace", "name", "status")
    return {(ns, name): {"status": st} for ns, name, st in rows if (ns, name) in wanted}


def freshness(*, live: bool = False) -> Freshness | None:
    """The view's freshness from its state row alone (no view rows), or None without a view."""
    hold_generation()
    state = (
        ViewState.objects.filter(pk=1)
        .only("as_of", "published_at", "watcher", "watcher_seen_at", "watcher_status", "source", "generation")
        .first()
    )
    if state is None or not state.generation:
        return None
    return Freshness(
        as_of=state.as_of,
        published_at=state.published_at,
        watcher=state.watcher,
        watcher_seen_at=state.watcher_seen_at,
        source=state.source,
        live=live,
        watcher_status=state.watcher_status or {},
    )


# What the product's records add to the findings at page time: each app registers a reader
# from its AppConfig.ready(), so the view imports none of them. The stopped runs (gpus:
# gpus/procedures/findings.py), per node or cluster-wide: [(nodes or None) -> list[Problem]].
RUN_READERS: list = []
# The Workspaces' (their approval records against the view's Workspace lines), cluster-wide
# only: [() -> list[Problem]]
RECORD_READERS: list = []
# What those apps add to a live view's health inputs from its Workspace lines (gpus.view.reading.
# health_inputs). [(HealthInputs, [Occupancy]) -> None]
LIVE_INPUT_READERS: list = []


def record_problems(nodes=None) -> list[health_mod.Problem]:
    """The findings of the product's records (stopped runs; cluster-wide, also the
    Workspaces'), from the readers registered above."""
    found = [p for read in RUN_READERS for p in read(nodes)]
    return found if nodes is not None else health_mod.ordered(found + [p for read in RECORD_READERS for p in read()])


def cordoned_among(names) -> set[str]:
    """The nodes among ``names`` that the view holds cordoned (one query)."""
    return set(ViewNode.objects.filter(name__in=list(names), cordoned=True).values_list("name", flat=True))


def pod_admission_findings(namespace: str) -> dict[str, health_mod.Problem]:
    """{pod name: the stored kubelet-refusal finding of that pod of ``namespace``} (one query),
    in the language of the request."""
    lang = translation.get_language() or settings.LANGUAGE_CODE
    rows = ViewProblem.objects.filter(kind="pod-admission-failed", fix_params__pod_namespace=namespace)
    return {(row.fix_params or {}).get("pod_name", ""): _problem(row, lang) for row in rows}


def workspace_lines():
    """Every Workspace line of the view (``ViewWorkspace``) as a QuerySet, to filter, annotate,
    sort and page in SQL, as ``gpu_nodes()`` is (no query until it is read)."""
    return ViewWorkspace.objects.all()


def workspace_line(namespace: str) -> ViewWorkspace | None:
    """One Workspace line of the view, or None (one query)."""
    return ViewWorkspace.objects.filter(namespace=namespace).first()


def workspace_rows(*fields: str, text: tuple[str, ...] = ()):
    """The Workspace lines as tuples of ``fields``, then the JSON fields named in ``text`` read
    as text (undecoded): a values_list QuerySet (one query when read)."""
    from django.db.models import TextField
    from django.db.models.functions import Cast

    qs = ViewWorkspace.objects.all()
    if text:
        qs = qs.annotate(**{f"{name}_text": Cast(name, TextField()) for name in text})
    return qs.values_list(*fields, *(f"{name}_text" for name in text))


def usage_measured() -> bool:
    """Whether the view's utilisation figures come from DCGM (Prometheus answered; one query)."""
    state = ViewState.objects.filter(pk=1).only("extra").first()
    return bool(state and (state.extra or {}).get("usage_measured"))


def gpu_node_digests() -> dict[str, str]:
    """{name: digest} of the view's GPU nodes: a node's digest changes whenever its ledger line does (one query)."""
    return dict(ViewNode.objects.filter(is_gpu=True).values_list("name", "digest"))


def node_rows(names, *fields: str):
    """The view's nodes named ``names`` as tuples of ``fields`` (a field may reach into the
    stored ledger line, ``ledger__replicas``): a values_list QuerySet, one query when read."""
    return ViewNode.objects.filter(name__in=list(names)).values_list(*fields)


def idle_by_resource(now=None) -> dict[str, int]:
    """GPU quota idle for the whole idle window, per resource (one query)."""

    from django.conf import settings as dj_settings

    now = now or datetime.now(UTC)
    hold_generation()
    hours = float(dj_settings.BRICK_IDLE_HOURS)
    lines = ViewWorkspace.objects.filter(quota__gt=0, idle_since__lte=now - timedelta(hours=hours)).only(
        "namespace", "quota", "gpu_quotas", "idle_since"
    )
    return occupancy_mod.idle_totals(lines, now, hours)
