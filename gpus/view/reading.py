"""The one read path of the pages: the materialised cluster view (read by gpus/view/stored.py,
published by gpus/view/publish.py). Every module outside gpus/view reads the view through
this module: ``read_cluster()`` and the functions below, and what it re-exports from
``gpus.view.stored`` (``__all__``); none queries the view's rows itself.

``read_cluster()`` returns the stored view: its ledger, a projection of the cluster, its
health findings and how fresh they are, with no API call and a constant number of
queries. On the simulated cluster the view is first brought up to date in-process (the
twin's writes are its events), so every page shows the twin as it is now. On a real
cluster only the watcher (``manage.py watch_cluster``) writes the view; pages say when it
is behind or down.

``live_view()`` reads the cluster itself, for the conformance evidence capture; what
decides a write (pre-checks, fixes, approvals) reads it through ``gpus.view.live.LiveRead``.
Both raise ``brickadmin.cluster.ClusterError`` when the cluster cannot be read;
``brickadmin.middleware.ClusterErrorMiddleware`` turns it into the 503 page with the banner."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.utils.translation import gettext as _

from brickadmin.cluster import ClusterUnreachable
from brickadmin.cluster.gateway import cluster_problem, get_gateway
from brickadmin.cluster.snapshot import Snapshot, take_snapshot, without_gc_pauses
from gpus.numbers import health as health_mod
from gpus.numbers import ledger as ledger_mod
from gpus.view import publish as view_publish
from gpus.view import stored as clusterview
from gpus.view.stored import (
    LIVE_INPUT_READERS,
    RECORD_READERS,
    RUN_READERS,
    StoredView,
    ViewUnavailable,
    cordoned_among,
    gpu_node_digests,
    node_rows,
    nodes_serving,
    pod_admission_findings,
    stored_gpu_capacity,
    stored_view,
    usage_measured,
    workspace_line,
    workspace_lines,
    workspace_rows,
)

__all__ = [
    # defined here
    "ClusterView",
    "health_inputs",
    "ledger_of",
    "live_view",
    "read_attention",
    "read_cluster",
    "read_jobs",
    "read_problems",
    # the stored view's, read through this module
    "LIVE_INPUT_READERS",
    "RECORD_READERS",
    "RUN_READERS",
    "StoredView",
    "ViewUnavailable",
    "cordoned_among",
    "gpu_node_digests",
    "node_rows",
    "nodes_serving",
    "pod_admission_findings",
    "stored_gpu_capacity",
    "stored_view",
    "usage_measured",
    "workspace_line",
    "workspace_lines",
    "workspace_rows",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterView:
    snapshot: Snapshot
    ledger: ledger_mod.Ledger


_memo_lock = threading.Lock()
_memo: dict = {}  # {"snapshot": the last snapshot, "ledger": its ledger}


def ledger_of(snapshot: Snapshot) -> ledger_mod.Ledger:
    """The snapshot's ledger, computed once per snapshot: a cached snapshot (the twin
    unchanged) is the same object, so its ledger is reused. The memo holds the snapshot
    itself, so the identity it is keyed on cannot be reused by another object."""
    with _memo_lock:
        if _memo.get("snapshot") is snapshot:
            return _memo["ledger"]
    with without_gc_pauses():
        led = ledger_mod.compute(snapshot)
    with _memo_lock:
        _memo.update(snapshot=snapshot, ledger=led)
    return led


def live_view(gateway=None) -> ClusterView:
    """The cluster read now (API calls): the evidence capture (decisions use gpus.view.live.LiveRead)."""
    snapshot = take_snapshot(gateway)
    return ClusterView(snapshot=snapshot, ledger=ledger_of(snapshot))


_twin_lock = threading.Lock()
_twin: dict = {}  # this process's watcher of the twin, the twin version it reflects, the DCGM feed


def _bring_twin_view_up_to_date(gateway) -> None:
    """The twin's writes are its events: this process watches them with the same watcher
    as production (list once, then apply the events since) and publishes when the twin
    moved on (or, with Prometheus configured, when the DCGM figures fetched on their
    interval changed), and when the stored view is of an older form than this code reads
    (an upgrade: ``clusterview.has_view`` is then false). A second process publishing
    meanwhile is ordered by the twin's resourceVersion. One query when nothing changed."""
    from django.conf import settings

    from brickadmin import metrics
    from brickadmin.cluster.watch import ClusterWatcher

    rv = gateway.resource_version()
    with _twin_lock:
        feed = _twin.get("feed")
        if feed is None or _twin.get("prometheus") != settings.PROMETHEUS_URL:
            feed = _twin["feed"] = metrics.DeviceFeed(settings.BRICK_METRICS_INTERVAL)
            _twin["prometheus"], _twin["fetched"] = settings.PROMETHEUS_URL, None
        dcgm_changed = False
        if feed.enabled and (_twin["fetched"] is None or time.monotonic() - _twin["fetched"] > feed.interval):
            dcgm_changed = feed.fetch() or _twin["fetched"] is None
            _twin["fetched"] = time.monotonic()
        watcher = _twin.get("watcher")
        if watcher is not None and _twin.get("rv") == rv and not dcgm_changed and clusterview.has_view():
            return
        if watcher is None or rv < _twin.get("rv", 0) or not clusterview.has_view():
            watcher = _twin["watcher"] = ClusterWatcher(gateway)  # first use, or a twin replaced under us
            watcher.prime()
            changed = True
        else:
            changed = watcher.sync() or dcgm_changed
        if changed:
            view_publish.publish(feed.merge(watcher.snapshot()), position=rv)
        _twin["rv"] = rv


def read_cluster(gateway=None) -> clusterview.StoredView:
    """The stored view for a page. Raises ClusterError when there is none to show."""
    gateway = gateway or get_gateway()
    live = gateway.name == "twin"
    if live and not clusterview.holding_generation():  # a page reads the generation it began with
        _bring_twin_view_up_to_date(gateway)
    try:
        return clusterview.stored_view(live=live)
    except clusterview.ViewOutdated:
        # Only the watcher writes the view of a real cluster; a page never reads it itself.
        raise ClusterUnreachable(
            _(
                "The cluster's numbers are being rebuilt for this version of brickadmin: the stored view is of an "
                "older form. The cluster watcher publishes them again when it starts (`manage.py watch_cluster`)."
            )
        ) from None
    except clusterview.ViewUnavailable:
        # Say first whether the cluster itself answers (probed at most every 10 s).
        raise ClusterUnreachable(
            cluster_problem()
            or "The cluster watcher has not published the cluster's numbers yet: start "
            "`manage.py watch_cluster` (it lists the cluster, then keeps the view up to "
            "date)."
        ) from None


def read_jobs(keys) -> dict[tuple[str, str], dict]:
    """The product's Jobs among ``keys`` ((namespace, name) pairs) as the view shows them:
    {(namespace, name): {"status": ...}}; a Job the cluster does not have is absent."""
    read_cluster()  # the twin's view brought up to date; raises when there is no view
    return clusterview.jobs(keys)


def health_inputs(view: ClusterView, *, drift: bool = True) -> health_mod.HealthInputs:
    """What the health checks read, gathered as the watcher's publish gathers them
    (view_publish.health_inputs: no API call), with this view's Workspace lines for the
    Workspace checks, which compare the records with the view's namespaces and quotas."""
    from gpus.numbers import occupancy

    inputs = view_publish.health_inputs(view.snapshot, view.ledger, drift=drift)
    lines = list(occupancy.compute(view.snapshot, view.ledger).values())
    for add in clusterview.LIVE_INPUT_READERS:  # the Workspaces' (workspaces/health.py)
        add(inputs, lines)
    return inputs


def read_problems(view) -> list[health_mod.Problem]:
    """Every health finding (the one list the Dashboard card, the Health page and the Nodes
    list read): stored with the view, or computed for a live view."""
    if isinstance(view, clusterview.StoredView):
        return view.problems()
    found = health_mod.problems(health_inputs(view), reads="cluster") + clusterview.record_problems()
    return health_mod.ordered(health_mod.one_per_cause(found))


def read_attention(view) -> list[health_mod.Group]:
    """The Dashboard card's groups: from the summary stored with the view, or from every
    finding of a live view."""
    if isinstance(view, clusterview.StoredView):
        return view.attention()
    return health_mod.summary(read_problems(view))


# What the Workspaces read of the view's Kueue part (workspaces/elastic.py): the part, the time the
# projection reflected, the watcher's last beat and whether it was behind on any kind then.
KUEUE_VIEW_FIELDS = {
    "view_kueue": "extra__kueue",
    "view_as_of": "as_of",
    "view_seen_at": "watcher_seen_at",
    "view_behind": "watcher_status__behind",
}


def kueue_view_columns() -> dict:
    """KUEUE_VIEW_FIELDS as subqueries, for a reader that joins them to its own row in one query."""
    from django.db.models import Subquery

    from gpus.models import ViewState

    one = ViewState.objects.filter(pk=1)
    return {name: Subquery(one.values(path)[:1]) for name, path in KUEUE_VIEW_FIELDS.items()}


def kueue_view() -> dict:
    """KUEUE_VIEW_FIELDS read alone (None each where nothing is published)."""
    from gpus.models import ViewState

    found = ViewState.objects.filter(pk=1).values(*KUEUE_VIEW_FIELDS.values()).first() or {}
    return {name: found.get(path) for name, path in KUEUE_VIEW_FIELDS.items()}
