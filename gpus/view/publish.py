"""Publishing the materialised cluster view: what the cluster watcher writes, pages never.

The cluster watcher (``manage.py watch_cluster``, brickadmin/cluster/watch.py) keeps a
small Kubernetes-shaped projection of the cluster up to date by list-then-watch and hands
each new projection, as a ``Snapshot``, to ``publish()``. ``publish`` computes the ledger
and the health findings (pure functions) and writes them to the database as the next
generation: a row per node (rewritten only when it changed), per model × type, per
resource and per finding, with ``SCHEMA_VERSION``, the form of what it wrote. The pages
read it back through ``gpus.view.stored``, which serves only a generation of this form.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from brickadmin.cluster import kueue as kueue_mod
from brickadmin.cluster.snapshot import Snapshot, gc_clock, without_gc_pauses
from gpus import manifest as manifest_mod
from gpus.models import ViewJob, ViewNode, ViewProblem, ViewResourceRow, ViewState, ViewTypeRow, ViewWorkspace
from gpus.numbers import health as health_mod
from gpus.numbers import ledger as ledger_mod
from gpus.numbers import occupancy as occupancy_mod
from gpus.numbers import pod_waits as pod_waits_mod

log = logging.getLogger(__name__)

# The form of what a generation holds (its rows, their JSON, ViewState.totals and .extra).
# Raise it when that changes: a generation of an older form is never read as is
# (gpus.view.stored refuses it) but published again by the new code, in full.
# 2: extra["gpu_capacity"], what each GPU resource offers (why pods wait); 3: type rows' sharing strategy;
# 4: GPUs published through DRA (type rows' DRA part and unlimited shares, nodes' stack);
# 5: a node whose whole GPUs are shared by MPS has mode "mps" (before: "timeslicing")
# 6: Workspace rows' requested counts every pod bound to a node (as the scheduler does), their waiting pods,
# and their GPU type is what their resource is on their nodes
SCHEMA_VERSION = 6
# What a model × type row of the ledger keeps in the stored view (ViewTypeRow), written here
# and read back by stored.py as the same fields
TYPE_ROW_FIELDS = (
    "model",
    "gpu_type",
    "resource",
    "logical",
    "requested",
    "physical",
    "cordoned_logical",
    "nodes",
    "sharing_strategy",
    "dra_logical",
    "dra_physical",
    "unlimited",
)

# The watcher beats at least this often; a page says the numbers may be behind after
# BEHIND_SECONDS without a beat (a leader lost, the standby not yet leading: shorter than
# the Lease's 15 s), and calls the watcher down after BRICK_WATCHER_STALE_SECONDS.
HEARTBEAT_SECONDS = 4
BEHIND_SECONDS = 10


class StalePublisher(Exception):
    """A watcher that no longer holds the Lease tried to write the view: refused.
    ``token``: the newer token that claimed the view (None: the writer's own timer ran out)."""

    def __init__(self, message: str, token: int | None = None):
        super().__init__(message)
        self.token = token


@dataclass(frozen=True)
class Fence:
    """Who may write the view: the Lease holder's identity and its fencing token (the
    Lease's leaseTransitions when it took it: a later holder has a larger one), and
    ``holds()``, whether it renewed the Lease within its renew deadline (its own timer)."""

    holder: str
    token: int
    holds: Callable[[], bool] = lambda: True


def _check_fence(state: ViewState, fence: Fence | None) -> None:
    """Refuse a writer whose Lease ran out by its own timer, or whose token is older than
    the one that last claimed the view (checked under the state row's lock)."""
    if fence is None:
        return
    if not fence.holds():
        raise StalePublisher(f"{fence.holder}: the Lease was not renewed within its renew deadline")
    newer = state.fencing_token > fence.token or (
        state.fencing_token == fence.token and state.holder not in ("", fence.holder)
    )
    if newer:
        raise StalePublisher(
            f"{fence.holder} (token {fence.token}): the view was claimed by "
            f"{state.holder} (token {state.fencing_token})",
            token=state.fencing_token,
        )


def claim(fence: Fence) -> None:
    """The new Lease holder's first write, before it lists the cluster: from now on a
    publication from the previous holder (token older) is refused."""
    with transaction.atomic():
        bound_idle_in_transaction()
        state, _created = ViewState.objects.select_for_update().get_or_create(pk=1)
        _check_fence(state, fence)
        state.holder, state.fencing_token = fence.holder, fence.token
        state.watcher, state.watcher_seen_at = fence.holder, timezone.now()
        state.watcher_status = {"catching_up": True}  # until its first publication (pages say so)
        state.save(update_fields=["holder", "fencing_token", "watcher", "watcher_seen_at", "watcher_status"])


# A writer paused inside its transaction (SIGSTOP, a frozen VM) would hold the view's row
# lock, and with it every other writer, until its connection died: PostgreSQL ends such a
# session after this long idle in the transaction (the statements of a publication follow
# each other within a fraction of it).
IDLE_IN_TRANSACTION_MS = 10_000


def bound_idle_in_transaction() -> None:
    """In the current transaction: PostgreSQL ends the session if it idles this long in it."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = {int(IDLE_IN_TRANSACTION_MS)}")


@contextlib.contextmanager
def reconnecting():
    """A lost database connection (PostgreSQL restarted) is closed, so the next call opens
    a new one: Django reconnects only a connection it knows is closed."""
    try:
        yield
    except (OperationalError, InterfaceError):
        connection.close()
        raise


def snapshot_drift(snapshot: Snapshot, docs: list[dict] | None = None):
    """The drift of ``docs`` (by default the current managed manifest) against the
    snapshot's device-plugin objects (no API call); None when the current manifest cannot be read."""
    live = {
        (kind, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for kind, objs in (("ConfigMap", snapshot.plugin_configmaps), ("DaemonSet", snapshot.plugin_daemonsets))
        for o in objs
    }
    try:
        if docs is None:
            docs = copy.deepcopy(_parsed_manifest(manifest_mod.current().content))
        return manifest_mod.drift(docs, live=live)
    except manifest_mod.ManifestError:
        return None


@functools.lru_cache(maxsize=4)
def _parsed_manifest(content: str) -> list[dict]:
    """The managed manifest parsed once per text (YAML parsing is most of a drift check)."""
    return manifest_mod.parse(content)


def health_inputs(snapshot: Snapshot, ledger, *, drift: bool = True) -> health_mod.HealthInputs:
    """What the checks that read the cluster are given, gathered once (the effects are here,
    the checks stay pure): the snapshot, its ledger, and the managed manifest's drift against
    the snapshot's device-plugin objects. The watcher's publish and a live view both use it."""
    return health_mod.HealthInputs(ledger=ledger, snapshot=snapshot, drift=snapshot_drift(snapshot) if drift else None)


def _digest(data) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _slim_node(node: dict) -> dict:
    """What the pages need of any node (GPU or not): name, labels, taints, unschedulable."""
    md, spec = node.get("metadata") or {}, node.get("spec") or {}
    return {
        "metadata": {"name": md.get("name", ""), "labels": md.get("labels") or {}},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
    }


class _Reuse:
    """What this process's publications keep from one generation to the next, so that a
    change on one node costs that node's recomputation, not the cluster's: the ledger's and
    the GPU maps' per-node memos and each node row's parts. Only pure results of the
    snapshot are kept (never what the database holds), so another writer cannot make
    them wrong."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ledger: dict = {}
        self.occupancy: dict = {}
        self.rows: dict = {}  # node name -> (raw node, NodeLedger or None, findings, digest, digest without them)
        self.workspaces: dict = {}  # namespace -> (Occupancy, idle since, its row's fields, their digest)


_reuse = _Reuse()


def _node_row(raw: dict, n, problems: int, last) -> tuple:
    """(row parts, digest) of one node; ``last``'s digest when the node and its line are the
    same objects as then. Neither the parts kept for the next call nor the rows hold the row's
    data: at 5,000 DRA nodes all of it at once would be the largest thing the watcher holds.
    A row that has to be written makes it again (``_node_data``), a batch at a time."""
    if last is not None and last[0] is raw and last[1] is n:
        if last[2] == problems:
            return last, last[3]
        base_digest = last[4]
    else:
        base_digest = _digest(_node_base(raw, n))
    digest = hashlib.sha1(f"{base_digest}/{problems}".encode()).hexdigest()
    return (raw, n, problems, digest, base_digest), digest


def _node_base(raw: dict, n) -> dict:
    return {"ledger": ledger_mod.node_to_dict(n) if n else None, "raw": _slim_node(raw)}


def _node_data(raw: dict, n, problems: int) -> dict:
    """A node row's data: its ledger line, what the pages read of the node, its findings."""
    return {**_node_base(raw, n), "problems": problems}


def prepare(snapshot: Snapshot):
    """The pure part of a publication: (ledger, worded findings, node rows, occupancy), each
    node's and namespace's part kept in this process for the next call (``_reuse``).
    A warm standby calls it on its own projection while it waits, so that its first
    publication after taking the Lease costs the changes since, not the whole cluster;
    it writes nothing."""
    with without_gc_pauses(), _reuse.lock:
        led = ledger_mod.compute(snapshot, memo=_reuse.ledger)
        inputs = health_inputs(snapshot, led)
        # findings are words: one text per site language, the site's own first
        languages = [settings.LANGUAGE_CODE] + [
            code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE
        ]
        problems = health_mod.worded(inputs, languages, reads="cluster")
        per_node: dict[str, int] = {}
        for p, _m, _r in problems[settings.LANGUAGE_CODE]:
            if p.node:
                per_node[p.node] = per_node.get(p.node, 0) + 1
        gpu = {n.name: n for n in led.nodes}
        rows, parts = {}, {}
        for raw in snapshot.nodes:
            name = raw["metadata"]["name"]
            n = gpu.get(name)
            problems_here = per_node.get(name, 0)
            parts[name], digest = _node_row(raw, n, problems_here, _reuse.rows.get(name))
            rows[name] = (n, digest, raw, problems_here)
        _reuse.rows = parts
        occupancy = occupancy_mod.compute(snapshot, led, memo=_reuse.occupancy)
    return led, problems, rows, occupancy


def publish(snapshot: Snapshot, *, watcher: str = "", position: int = 0, fence: Fence | None = None) -> int:
    """Materialise ``snapshot`` as the view's next generation; returns the generation.

    One transaction: a publication cut short (the watcher killed, the database restarted)
    leaves the previous generation whole. ``fence``: the watcher's Lease; a writer that no
    longer holds it is refused (StalePublisher) and nothing is written.
    ``position`` orders writers that may race (the twin's event id): a snapshot older than
    the stored one is not written, unless the stored generation is of an older form
    (``SCHEMA_VERSION``): then every row is written again, none kept as unchanged."""
    began, gc_before = time.perf_counter(), gc_clock().total()
    led, problems, rows, occupancy = prepare(snapshot)
    prepared = time.perf_counter()
    jobs = {(j["metadata"].get("namespace", ""), j["metadata"]["name"]): j.get("status") or {} for j in snapshot.jobs}
    jobs_digest = _digest(sorted((f"{ns}/{name}", st) for (ns, name), st in jobs.items()))
    now = timezone.now()
    with transaction.atomic():
        bound_idle_in_transaction()
        state, _created = ViewState.objects.select_for_update().get_or_create(pk=1)
        _check_fence(state, fence)
        upgrading = state.schema < SCHEMA_VERSION
        if position and state.position > position and not upgrading:
            return state.generation
        if upgrading:  # rows of an older form: none is kept as unchanged (idle times are kept)
            state.extra = {}
            ViewNode.objects.update(digest="")
            ViewWorkspace.objects.update(digest="")
        gen = state.generation + 1
        _write_nodes(rows, gen)
        ViewTypeRow.objects.all().delete()
        ViewTypeRow.objects.bulk_create(
            ViewTypeRow(
                generation=gen,
                position=i,
                **{f: getattr(r, f) for f in TYPE_ROW_FIELDS},
            )
            for i, r in enumerate(led.by_type)
        )
        ViewResourceRow.objects.all().delete()
        ViewResourceRow.objects.bulk_create(
            ViewResourceRow(
                generation=gen,
                position=i,
                resource=r.resource,
                logical=r.logical,
                allocated=r.allocated,
                requested=r.requested,
                shared_logical=r.shared_logical,
                shared_on=r.shared_on,
                mig_on=r.mig_on,
                mps_on=r.mps_on,
            )
            for i, r in enumerate(led.by_resource)
        )
        problems_digest = _digest(
            [
                (p.severity, p.kind, p.subject, p.subject_type, p.wizard, p.fix, p.fix_params, m, r)
                for code in sorted(problems)
                for p, m, r in problems[code]
            ]
        )
        if (state.extra or {}).get("problems_digest") != problems_digest:
            ViewProblem.objects.all().delete()
            ViewProblem.objects.bulk_create(_problem_rows(problems, gen))
        _reuse.workspaces = _write_workspaces(occupancy, gen, now, _reuse.workspaces)
        if (state.extra or {}).get("jobs_digest") != jobs_digest:  # Jobs change seldom: rewrite only then
            ViewJob.objects.all().delete()
            ViewJob.objects.bulk_create(
                ViewJob(generation=gen, namespace=ns, name=name, status=st) for (ns, name), st in jobs.items()
            )
        state.generation = gen
        state.schema = SCHEMA_VERSION
        state.as_of = snapshot.taken_at
        state.published_at = now
        state.position = max(position, state.position) if position else state.position
        state.source = snapshot.source
        state.device_source = snapshot.device_source
        state.device_note = snapshot.device_note
        if watcher:
            state.watcher, state.watcher_seen_at = watcher, now
        state.totals = {
            "logical": led.logical,
            "requested": led.requested,
            "physical": led.physical,
            "physical_used": led.physical_used,
            "gpu_nodes": len(led.nodes),
            "nodes": len(rows),
            "models": sorted({n.model for n in led.nodes}),
        }
        state.extra = {
            "plugin_configmaps": snapshot.plugin_configmaps,
            "plugin_daemonsets": snapshot.plugin_daemonsets,
            "operator_configmaps": snapshot.operator_configmaps,
            "allocated_by_namespace": led.allocated_by_namespace,
            "jobs_digest": jobs_digest,
            "problems_digest": problems_digest,
            "attention": health_mod.summary_data([p for p, _m, _r in problems[settings.LANGUAGE_CODE]]),
            "usage_measured": snapshot.usage is not None,
            "gpu_capacity": gpu_capacity(led),
            **kueue_part(snapshot),
        }
        if fence is not None:
            _check_fence(state, fence)  # again: writing took time, the Lease may have run out meanwhile
            state.holder, state.fencing_token = fence.holder, fence.token
        state.save()
        written = time.perf_counter()
    committed = time.perf_counter()
    _after_publication(snapshot)
    PHASES.append(
        {
            "generation": gen,
            "prepare": round(prepared - began, 4),
            "write": round(written - prepared, 4),
            "commit": round(committed - written, 4),
            "after": round(time.perf_counter() - committed, 4),
            "gc": round(gc_clock().total() - gc_before, 4),
        }
    )
    return gen


# The seconds of this process's recent publications, by phase (the watcher's heartbeat carries
# them): working the view out, writing its rows, committing, what runs after; and of all that,
# the garbage collector's.
PHASES: deque[dict] = deque(maxlen=32)


# Called with each published snapshot once its generation is committed; filled from
# AppConfig.ready() (the Workspaces record what Kueue evicted: workspaces/elastic.py). One that
# fails is logged: the view is published all the same.
PUBLISHED: list[Callable[[Snapshot], object]] = []


def _after_publication(snapshot: Snapshot) -> None:
    for fn in PUBLISHED:
        try:
            fn(snapshot)
        except Exception:  # noqa: BLE001
            log.exception("after publishing the cluster view: %s failed", fn.__name__)


def kueue_part(snapshot: Snapshot) -> dict:
    """The view's Kueue part, where the snapshot looked at Kueue (the watcher's do)."""
    if snapshot.kueue_served is None:
        return {}
    return {
        "kueue": kueue_mod.view_part(snapshot.kueue_served, snapshot.kueue_cluster_queues, snapshot.kueue_workloads)
    }


def gpu_capacity(led) -> dict[str, dict]:
    """What each GPU resource offers now (free, only on tainted or cordoned nodes): the
    Workspace pages name why a pod waits from it (gpus/pod_waits.py)."""
    return pod_waits_mod.capacity(led.nodes, ledger_mod.IGNORED_TAINTS)


NODE_BATCH = 500  # node rows made and written at a time


def _write_nodes(rows: dict, gen: int) -> None:
    """Rewrite only the nodes whose data changed; drop the nodes that are gone."""
    stored = dict(ViewNode.objects.values_list("name", "digest"))
    gone = set(stored) - set(rows)
    if gone:
        ViewNode.objects.filter(name__in=gone).delete()
    changed = [name for name, (_n, digest, _raw, _p) in rows.items() if stored.get(name) != digest]
    if not changed:
        return
    ViewNode.objects.filter(name__in=[c for c in changed if c in stored]).delete()
    for start in range(0, len(changed), NODE_BATCH):  # a batch's data at a time, not all of it
        batch = changed[start : start + NODE_BATCH]
        ViewNode.objects.bulk_create(_node_record(name, gen, *rows[name]) for name in batch)


def _node_record(name: str, gen: int, n, digest: str, raw: dict, problems: int) -> ViewNode:
    data = _node_data(raw, n, problems)
    return ViewNode(
        name=name,
        generation=gen,
        is_gpu=n is not None,
        model=n.model if n else "",
        mode=n.mode if n else "",
        stack=n.stack if n else "",
        convention=n.convention if n else "",
        cordoned=bool((data["raw"]["spec"] or {}).get("unschedulable")),
        problems=data["problems"],
        ledger=data["ledger"],
        raw=data["raw"],
        digest=digest,
    )


def _write_workspaces(occupancy: dict, gen: int, now, last: dict) -> dict:
    """One row per Workspace namespace, each keeping since when it has been idle (carried
    over from the previous generation: idleness is a duration, not a state). Only the rows
    that changed are written. ``last``: what the previous call returned; a line that is
    the same Occupancy object, idle since the same time, keeps its fields and digest.
    Returns what the next call is given."""
    from django.conf import settings as dj_settings

    threshold = float(dj_settings.BRICK_IDLE_UTILISATION_PERCENT)
    stored = {
        ns: (since, digest)
        for ns, since, digest in ViewWorkspace.objects.values_list("namespace", "idle_since", "digest")
    }
    gone = set(stored) - set(occupancy)
    if gone:
        ViewWorkspace.objects.filter(namespace__in=gone).delete()
    rows, kept = [], {}
    for name, occ in occupancy.items():
        idle_since = ((stored.get(name) or (None,))[0] or now) if occ.idle(threshold) else None
        was = last.get(name)
        if was is not None and was[0] is occ and was[1] == idle_since:
            fields, digest = was[2], was[3]
        else:
            fields = dict(
                namespace=name,
                owner=occ.owner[:150],
                labelled=occ.labelled,
                resource=occ.resource[:253],
                gpu_type=occ.gpu_type[:64],
                quota=occ.quota,
                gpu_quotas=occ.gpu_quotas,
                quotas=occ.quotas,
                requested=occ.requested,
                waiting=occ.waiting,
                physical=occ.physical,
                utilisation=occ.utilisation,
                memory_mib=occ.memory_mib,
                created_at=occupancy_mod.created(occ),
                pods=occ.pods,
                idle_since=idle_since,
            )
            digest = _digest(fields)
        kept[name] = (occ, idle_since, fields, digest)
        if name in stored and stored[name][1] == digest:
            continue
        rows.append(ViewWorkspace(generation=gen, digest=digest, **fields))
    if rows:
        ViewWorkspace.objects.filter(namespace__in=[r.namespace for r in rows if r.namespace in stored]).delete()
        ViewWorkspace.objects.bulk_create(rows, batch_size=500)
    return kept


def _problem_rows(problems: dict, gen: int):
    base = problems[settings.LANGUAGE_CODE]
    for i, (p, _message, _remedy) in enumerate(base):
        yield ViewProblem(
            generation=gen,
            position=i,
            severity=p.severity,
            kind=p.kind,
            subject=p.subject,
            subject_type=p.subject_type,
            wizard=p.wizard,
            fix=p.fix,
            fix_params=p.fix_params,
            message={code: found[i][1] for code, found in problems.items()},
            remedy={code: found[i][2] for code, found in problems.items()},
        )


def heartbeat(watcher: str, status: dict | None = None, fence: Fence | None = None) -> bool:
    """The watcher is alive (and how it is doing), even when nothing changed. With a
    ``fence``, only while it holds the Lease and no newer holder claimed the view (a
    paused leader that wakes up must not pass for the active one). True when written."""
    ViewState.objects.get_or_create(pk=1)
    rows = ViewState.objects.filter(pk=1)
    if fence is not None:
        if not fence.holds():
            return False
        rows = rows.filter(fencing_token__lte=fence.token)
    return bool(rows.update(watcher=watcher, watcher_seen_at=timezone.now(), watcher_status=status or {}))
