"""The cluster watcher: list, then watch, and keep a small projection of the cluster.

One ``ClusterWatcher`` over a gateway (the real cluster or the twin: the same code)
lists each watched kind once (streamed or paginated, remembering its resourceVersion), then
follows a watch stream per kind from there, applying events to an in-memory store of
projected objects (projection.py). ``snapshot()`` hands the store out as the same
``Snapshot`` the ledger and the health checks have always read.

``run(on_change, stop=...)`` is the long-running form (``manage.py watch_cluster``): one
thread per stream, bookmarks on, streams rotated by the server after ``timeout_seconds``;
a 410 Gone (or an ERROR event with code 410) lists that kind again; a broken stream
reconnects from the last resourceVersion after an exponential backoff with jitter (capped,
never a tight loop). A burst of events costs one ``on_change(snapshot)`` per debounce
window, not one per event; a lone change is handed over at once. ``publish_to(fn)`` changes
where snapshots go while it runs: ``None`` keeps the projection current and hands nothing
over (a warm standby), a function is handed the current projection at once, then every
change (the standby took the Lease). ``status()`` says how far behind the projection may be.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import projection
from .base import OPTIONAL_KINDS, ClusterError, Forbidden, Gone, NotFound
from .snapshot import DRA_FIELDS, KUEUE_FIELDS, OPERATOR_NAMESPACE, Snapshot, gc_clock, without_gc_pauses
from .vocabulary import PLUGIN_NAMESPACE

log = logging.getLogger(__name__)

# (kind, namespace or None for all): what the watcher lists and watches.
WATCHES: tuple[tuple[str, str | None], ...] = (
    ("Node", None),
    ("Pod", None),
    ("ResourceQuota", None),
    ("Namespace", None),
    ("Job", None),  # only the Jobs the product made are kept (their state, for the Jobs pages)
    ("DaemonSet", PLUGIN_NAMESPACE),
    ("ConfigMap", PLUGIN_NAMESPACE),
    ("ConfigMap", OPERATOR_NAMESPACE),
    # Dynamic Resource Allocation: a kind the cluster does not serve is kept empty (OPTIONAL_KINDS)
    ("ResourceSlice", None),
    ("ResourceClaim", None),
    ("DeviceClass", None),
    ("ResourceClaimTemplate", None),
    ("DeviceTaintRule", None),
    # Kueue (the quota pages, the eviction records): kept empty where Kueue is not served
    ("ClusterQueue", None),
    ("Workload", None),
)
# How often a kind the cluster did not serve (or let the product read) is listed again: DRA
# may be enabled, or the product's RBAC widened, while the watcher runs.
UNSERVED_RETRY_SECONDS = 300.0


def _now() -> datetime:
    return datetime.now(UTC)


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def _label(watch: tuple[str, str | None]) -> str:
    kind, ns = watch
    return f"{kind}/{ns}" if ns else kind


PUBLISH_TIMES_KEPT = 128  # the heartbeat carries them: about 3 KB
REHEARSE_SECONDS = 5.0  # how often a standby works out the view's parts from what changed


class _Sorted:
    """Objects in their keys' order (namespace, name), patched where one changes (a bisection)
    instead of sorted again: at 150,000 claims a sort per change was most of a change's cost to
    the snapshot. The keys are read from the objects, not kept beside them."""

    __slots__ = ("values",)

    def __init__(self, items: dict | None = None):
        self.values = [items[k] for k in sorted(items)] if items else []

    def put(self, key, value) -> None:
        values = self.values
        i = bisect_left(values, key, key=_key)
        if i < len(values) and _key(values[i]) == key:
            values[i] = value
        else:
            values.insert(i, value)

    def drop(self, key) -> None:
        values = self.values
        i = bisect_left(values, key, key=_key)
        if i < len(values) and _key(values[i]) == key:
            del values[i]


# The Snapshot's lists of pods, and which of them a kept pod belongs in
POD_LISTS = ("gpu_pods", "failed_gpu_pods", "plugin_pods", "claim_pods", "mig_manager_pods", "health_pods")


def _pod_lists(p: dict) -> list[str]:
    out = []
    gpu, terminal = projection.is_gpu_pod(p), projection.is_terminal(p)
    if gpu:
        phase = (p.get("status") or {}).get("phase")
        if phase == "Failed":
            out.append("failed_gpu_pods")
        elif phase != "Succeeded":
            out.append("gpu_pods")
    if projection.is_plugin_pod(p):
        out.append("plugin_pods")
    claims = projection.uses_claims(p)
    if claims and not terminal:
        out.append("claim_pods")
    if projection.is_mig_manager_pod(p):
        out.append("mig_manager_pods")
    if (gpu or claims) and not terminal and projection.reports_device_health(p):
        out.append("health_pods")
    return out


@dataclass
class _Stream:
    """One watched kind: its store and how current it is."""

    kind: str
    namespace: str | None
    items: dict = field(default_factory=dict)  # (namespace, name) -> projected object
    rv: str = ""  # "" until listed; reset to "" when a relist is needed
    connected: bool = False
    behind_since: datetime | None = None  # None: current (listed, and its stream open or just synced)
    current_at: datetime | None = None
    stream: object = None  # the open watch stream, for close()
    events: int = 0  # events applied (not bookmarks, not skipped pods)
    changes: int = 0  # of them (and of lists), those that changed the projection: which kind keeps publishing
    # an optional kind the cluster does not serve (404) or lets us not read (403): kept empty,
    # not watched, listed again every UNSERVED_RETRY_SECONDS; the reason, else ""
    unserved: str = ""
    # the items sorted, and (pods) the Snapshot's lists they belong in, each sorted: made on the
    # first snapshot after a list, then patched per event (a change costs that object, not a
    # sort and a classification of the 150,000 objects of its kind)
    sorted_items: _Sorted | None = None
    sorted_pods: dict[str, _Sorted] | None = None
    # (claims) the claims of each (driver, pool) they hold devices of, sorted
    pools: dict[tuple[str, str], _Sorted] | None = None

    def changed(self) -> None:
        """Listed again: sorted afresh by the next snapshot."""
        self.sorted_items = self.sorted_pods = self.pools = None

    def put(self, key, obj: dict, before: dict | None) -> None:
        """An object added or replaced: the sorted forms patched (when made)."""
        if self.sorted_items is not None:
            self.sorted_items.put(key, obj)
        if self.pools is not None:
            was = projection.claim_pools(before) if before is not None else set()
            for pool in was - projection.claim_pools(obj):
                self._pool(pool).drop(key)
            for pool in projection.claim_pools(obj):
                self._pool(pool).put(key, obj)
        if self.sorted_pods is not None:
            was = _pod_lists(before) if before is not None else []
            now = _pod_lists(obj)
            for name in was:
                if name not in now:
                    self.sorted_pods[name].drop(key)
            for name in now:
                self.sorted_pods[name].put(key, obj)

    def _pool(self, pool: tuple[str, str]) -> _Sorted:
        assert self.pools is not None
        found = self.pools.get(pool)
        if found is None:
            found = self.pools[pool] = _Sorted()
        return found

    def drop(self, key, before: dict) -> None:
        """An object gone: taken out of the sorted forms."""
        if self.sorted_items is not None:
            self.sorted_items.drop(key)
        if self.pools is not None:
            for pool in projection.claim_pools(before):
                self._pool(pool).drop(key)
        if self.sorted_pods is not None:
            for lst in self.sorted_pods.values():
                lst.drop(key)


class ClusterWatcher:
    def __init__(
        self,
        gateway,
        *,
        timeout_seconds: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        watches=WATCHES,
    ):
        self.gateway = gateway
        self.timeout_seconds = timeout_seconds
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._lock = threading.RLock()
        self._streams = {w: _Stream(*w) for w in watches}
        self._dirty = threading.Event()
        self._sink = None  # where snapshots go (run's on_change, or publish_to's); None: nowhere
        # While no sink is set, the projection is handed here instead, at most every
        # REHEARSE_SECONDS (a warm standby works out the view's parts without writing them).
        self.rehearse = None
        self._kick = threading.Event()  # a new sink: cut a failed publication's backoff short
        self.counters = {
            "lists": 0,
            "watches": 0,
            "events": 0,
            "bookmarks": 0,
            "skipped": 0,
            "relists": 0,
            "errors": 0,
            "changes": 0,
            "published": 0,
        }
        self.last_event_at: datetime | None = None
        self.last_error = ""
        self.last_error_at: datetime | None = None
        self.last_published_at: datetime | None = None
        # (publication number, seconds it took): the recent ones, for the status and the benchmarks
        self.publish_seconds: deque[tuple[int, float]] = deque(maxlen=PUBLISH_TIMES_KEPT)
        self.primed_at: datetime | None = None
        self.started_at = _now()

    # ------------------------------------------------------------------ listing
    def prime(self) -> None:
        """List every watched kind; remember the version each list reflects."""
        for w in self._streams:
            self._relist(w)
        self.primed_at = _now()

    def _relist(self, w) -> bool:
        kind, ns = w
        unserved = ""
        try:
            items, rv = self.gateway.list_with_version(
                kind, ns, keep=projection.keeper(kind), worth=projection.worth_decoding(kind)
            )
        except (NotFound, Forbidden) as exc:
            if kind not in OPTIONAL_KINDS:
                raise
            # no DRA (or no DeviceTaintRule) on this cluster, or no right to read it: no objects
            items, rv, unserved = [], "", str(exc) or type(exc).__name__
            if not self._streams[w].unserved:
                log.info("%s is not served or not readable (%s): kept empty", _label(w), unserved)
        store = {_key(o): o for o in items}
        with self._lock:
            s = self._streams[w]
            changed = store != s.items
            s.items, s.rv, s.unserved = store, rv, unserved
            s.changed()
            s.behind_since, s.current_at = None, _now()
            self.counters["lists"] += 1
            if changed:
                self.counters["changes"] += 1
                s.changes += 1
        return changed

    # ------------------------------------------------------------------ events
    def _apply(self, w, event: dict) -> bool:
        """Apply one watch event to the store; True if the projection changed."""
        kind = w[0]
        type_ = event.get("type")
        obj = event.get("object") or {}
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            s = self._streams[w]
            now = _now()
            s.current_at = now
            if type_ in ("BOOKMARK", "SKIPPED"):  # SKIPPED: objects the projection drops, not decoded
                if type_ == "BOOKMARK":
                    self.counters["bookmarks"] += 1
                else:
                    self.counters["skipped"] += event.get("skipped", 1)
                if rv:
                    s.rv = rv
                return False
            self.counters["events"] += 1
            s.events += 1
            self.last_event_at = now
            key = _key(obj)
            slim = None if type_ == "DELETED" else projection.project_unshared(kind, obj)
            if slim is None:  # deleted, or no longer (or never) one the watcher keeps
                gone = s.items.pop(key, None)
                changed = gone is not None
                if changed:
                    s.drop(key, gone)
            else:
                # compacted only when it changed: most events (a heartbeat, a resourceVersion-only
                # write) change nothing kept, and compacting costs about as much as projecting
                before = s.items.get(key)
                changed = before != slim
                if changed:  # an equal object stays the same one (the publish's memos compare identity)
                    kept = projection.kept(kind, slim)
                    if before is None:  # a new key: of the kept (interned) strings, not the event's
                        key = _key(kept)
                    s.items[key] = kept
                    s.put(key, kept, before)
            if rv:
                s.rv = rv
            if changed:
                self.counters["changes"] += 1
                s.changes += 1
            return changed

    def _watch(self, w, s: _Stream, timeout: int):
        return self.gateway.watch(
            w[0], w[1], resource_version=s.rv, timeout_seconds=timeout, worth=projection.worth_decoding(w[0])
        )

    def sync(self) -> bool:
        """Apply the events pending now, without waiting for more (in-process, for the
        twin; on a real cluster each kind's watch is held open for a second). A kind
        whose version was compacted is listed again. True if anything changed."""
        if self.primed_at is None:
            self.prime()
            return True
        changed = False
        timeout = 0 if self.gateway.name == "twin" else 1
        for w, s in self._streams.items():
            try:
                if not s.rv:
                    # the twin is asked again at each sync: serving Kueue there is a setting, not an event
                    if (
                        s.unserved
                        and self.gateway.name != "twin"
                        and s.current_at
                        and (_now() - s.current_at).total_seconds() < UNSERVED_RETRY_SECONDS
                    ):
                        continue  # not served when last asked: asked again later
                    changed |= self._relist(w)
                    continue
                stream = self._watch(w, s, timeout)
                self.counters["watches"] += 1
                for ev in stream:
                    changed |= self._apply(w, ev)
                with self._lock:
                    s.behind_since, s.current_at = None, _now()
            except Gone:
                self.counters["relists"] += 1
                changed |= self._relist(w)
        return changed

    # ------------------------------------------------------------------ the projection
    def snapshot(self) -> Snapshot:
        """The projection as a Snapshot (sorted, like a list). ``taken_at`` is the time the
        projection is known to reflect: now, unless a stream is down, then when it broke."""
        with self._lock:

            def items(kind, ns=None):
                s = self._streams.get((kind, ns))
                if s is None:
                    return []
                if s.sorted_items is None:
                    s.sorted_items = _Sorted(s.items)
                return list(s.sorted_items.values)  # the Snapshot's own list: a reader may sort or extend it

            pods = self._sorted_pods()
            claims_by_pool = self._claims_by_pool()
            snap = Snapshot(
                nodes=sorted(items("Node"), key=lambda n: n["metadata"]["name"]),
                quotas=items("ResourceQuota"),
                namespaces=items("Namespace"),
                jobs=items("Job"),
                plugin_configmaps=items("ConfigMap", PLUGIN_NAMESPACE),
                plugin_daemonsets=items("DaemonSet", PLUGIN_NAMESPACE),
                operator_configmaps=items("ConfigMap", OPERATOR_NAMESPACE),
                source=self.gateway.name,
                taken_at=self.as_of(),
                **{name: list(found.values) for name, found in pods.items()},
                **{name: items(kind) for name, kind in DRA_FIELDS.items()},
                **{name: items(kind) for name, kind in KUEUE_FIELDS.items()},
                kueue_served=self._kueue_served(),
                claims_by_pool=claims_by_pool,
            )
        if self.gateway.name == "twin":
            snap.devices, snap.device_source = self.gateway.gpu_devices() or {}, "twin"
        else:
            snap.devices, snap.device_source = {}, "labels"  # DCGM devices are merged by the caller
        return snap

    def _kueue_served(self) -> bool | None:
        """Whether the cluster serves Kueue's ClusterQueues to the watcher (None: not watched)."""
        s = self._streams.get(("ClusterQueue", None))
        return None if s is None else not s.unserved

    def _claims_by_pool(self) -> dict[tuple[str, str], tuple] | None:
        """The claims grouped by the pools they hold devices of (the Snapshot's claims_by_pool)."""
        s = self._streams.get(("ResourceClaim", None))
        if s is None:
            return None
        if s.pools is None:
            s.pools = {}
            for k in sorted(s.items):
                claim = s.items[k]
                for pool in projection.claim_pools(claim):
                    lst = s.pools.get(pool) or s.pools.setdefault(pool, _Sorted())
                    lst.values.append(claim)
        return {pool: tuple(lst.values) for pool, lst in s.pools.items() if lst.values}

    def _sorted_pods(self) -> dict[str, _Sorted]:
        """The kept pods sorted into the Snapshot's lists (by namespace and name), once per list."""
        s = self._streams.get(("Pod", None))
        if s is not None and s.sorted_pods is not None:
            return s.sorted_pods
        found: dict[str, _Sorted] = {name: _Sorted() for name in POD_LISTS}
        kept = {} if s is None else s.items
        for k in sorted(kept):
            p = kept[k]
            for name in _pod_lists(p):
                found[name].values.append(p)
        if s is not None:
            s.sorted_pods = found
        return found

    def as_of(self) -> datetime:
        with self._lock:
            behind = [s.behind_since for s in self._streams.values() if s.behind_since is not None]
            never = any(not s.rv and not s.unserved for s in self._streams.values())
        if never and not behind:
            return self.primed_at or self.started_at
        return min(behind) if behind else _now()

    def status(self) -> dict:
        """Counters and freshness, for the pages' "how old / watcher behind" line."""
        clock = gc_clock()
        with self._lock:
            streams = {
                _label(w): {
                    "resource_version": s.rv,
                    "connected": s.connected,
                    "objects": len(s.items),
                    "events": s.events,
                    "changes": s.changes,
                    "behind_since": s.behind_since,
                    "current_at": s.current_at,
                    "unserved": s.unserved,
                }
                for w, s in self._streams.items()
            }
            return {
                **self.counters,
                "started_at": self.started_at,
                "primed_at": self.primed_at,
                "last_event_at": self.last_event_at,
                "last_error": self.last_error,
                "last_error_at": self.last_error_at,
                "last_published_at": self.last_published_at,
                "publish_seconds": [list(p) for p in self.publish_seconds],
                "gc": {"seconds": [round(t, 3) for t in clock.seconds], "collections": list(clock.collections)},
                "as_of": self.as_of(),
                "behind": any(s.behind_since for s in self._streams.values()),
                "streams": streams,
            }

    def poke(self) -> None:
        """Ask for an on_change at the next debounce window (e.g. new DCGM figures)."""
        self._dirty.set()

    def publish_to(self, on_change) -> None:
        """Hand snapshots to ``on_change`` from now on: the current projection at once (or
        as soon as the first list is done), then every change. ``None``: hand nothing over
        and keep following the cluster (a standby keeps its projection current)."""
        self._sink = on_change
        if on_change is not None:
            self._kick.set()
            self._dirty.set()

    # ------------------------------------------------------------------ running
    def backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: base·2^attempt, capped, times 0.5–1."""
        delay = min(self.backoff_cap, self.backoff_base * (2 ** min(attempt, 30)))
        return delay * random.uniform(0.5, 1.0)

    def _error(self, w, exc: BaseException) -> None:
        with self._lock:
            self.counters["errors"] += 1
            self.last_error = f"{_label(w) if w else 'watcher'}: {exc}"
            self.last_error_at = _now()
            if w is not None:
                s = self._streams[w]
                s.connected = False
                if s.behind_since is None:
                    s.behind_since = s.current_at or _now()

    def _follow(self, w, stop: threading.Event) -> None:
        """One kind's loop: (re)list when needed, watch from the last version, back off on errors."""
        s = self._streams[w]
        attempt = 0
        try:
            while not stop.is_set():
                opened = time.monotonic()
                delivered = 0
                try:
                    if not s.rv and self._unserved_wait(s) <= 0:  # one just found unserved is not listed again
                        if self._relist(w):
                            self._dirty.set()
                    if s.unserved:  # nothing to watch: look again later
                        stop.wait(max(self._unserved_wait(s), 1.0))
                        s.rv = ""
                        continue
                    stream = self._watch(w, s, self.timeout_seconds)
                    with self._lock:
                        s.stream, s.connected = stream, True
                        s.behind_since, s.current_at = None, _now()
                        self.counters["watches"] += 1
                    if stop.is_set():
                        stream.close()
                    for ev in stream:
                        delivered += 1
                        if self._apply(w, ev):
                            self._dirty.set()
                        if stop.is_set():
                            break
                    with self._lock:
                        s.connected = False
                    # a normal end (the server's timeoutSeconds): reconnect at once, unless the
                    # stream ended at once with nothing in it (then count it as a failure)
                    if delivered or time.monotonic() - opened >= 5:
                        attempt = 0
                        continue
                    raise ClusterError(f"the watch of {_label(w)} ended at once")
                except Gone as exc:
                    # compacted: list again (at once the first time; backoff if it keeps happening)
                    log.info("watch of %s: %s; listing again", _label(w), exc)
                    with self._lock:
                        self.counters["relists"] += 1
                        s.rv, s.connected = "", False
                        if s.behind_since is None:
                            s.behind_since = s.current_at or _now()
                    if attempt:
                        stop.wait(self.backoff(attempt))
                    attempt += 1
                except Exception as exc:  # noqa: BLE001  (ClusterError, or a bug: never a tight loop)
                    if stop.is_set():
                        break
                    if not isinstance(exc, ClusterError):
                        log.exception("watch of %s failed", _label(w))
                    else:
                        log.warning("watch of %s: %s", _label(w), exc)
                    if delivered:
                        attempt = 0
                    self._error(w, exc)
                    self._reconnect_twin()
                    stop.wait(self.backoff(attempt))
                    attempt += 1
        finally:
            with self._lock:
                s.connected, s.stream = False, None
            if self.gateway.name == "twin":
                from django.db import connection

                connection.close()  # this thread's own connection

    @staticmethod
    def _unserved_wait(s: _Stream) -> float:
        """Seconds until a kind the cluster did not serve is asked again (0: not unserved, or due)."""
        if not s.unserved or s.current_at is None:
            return 0.0
        return UNSERVED_RETRY_SECONDS - (_now() - s.current_at).total_seconds()

    def run(self, on_change=None, *, stop: threading.Event, debounce: float = 0.5) -> None:
        """Block until ``stop`` is set: prime (retrying with backoff), publish, then follow
        every kind in its own thread and call ``on_change(snapshot)`` at most once per
        ``debounce`` seconds while anything changes (at once for the first change after a
        quiet spell). ``on_change`` None: nothing is handed over until ``publish_to``."""
        if on_change is not None:
            self._sink = on_change
        attempt = 0
        while self.primed_at is None and not stop.is_set():
            try:
                self.prime()
            except Exception as exc:  # noqa: BLE001  (ClusterError, or the twin's database restarting)
                self._error(None, exc)
                log.warning("listing the cluster failed: %s", exc)
                self._reconnect_twin()
                stop.wait(self.backoff(attempt))
                attempt += 1
        if stop.is_set():
            return
        threads = [
            threading.Thread(target=self._follow, args=(w, stop), name=f"watch-{_label(w)}", daemon=True)
            for w in self._streams
        ]
        for t in threads:
            t.start()
        self._dirty.set()  # publish the primed projection
        failures = 0
        last, last_sink, rehearsed = float("-inf"), None, float("-inf")
        try:
            while not stop.is_set():
                if not self._dirty.wait(timeout=1.0):
                    continue
                if self._sink is None:  # standing by: publish_to() asks for the projection again
                    due = rehearsed + REHEARSE_SECONDS - time.monotonic()
                    if self.rehearse is None:
                        self._dirty.clear()
                    elif due > 0:  # the change waits for the next rehearsal (or a sink)
                        if self._kick.wait(min(due, 1.0)) and self._sink is None:
                            self._kick.clear()  # left from an earlier leadership
                    else:
                        self._dirty.clear()
                        rehearsed = time.monotonic()
                        self._rehearse()
                    continue
                # A change after a quiet spell is published at once; while changes keep coming,
                # at most once per debounce window (the rest of a burst is gathered meanwhile).
                gather = debounce - (time.monotonic() - last)
                if gather > 0:
                    stop.wait(gather)
                self._dirty.clear()
                self._kick.clear()
                sink = self._sink
                if sink is None:
                    continue
                if sink is not last_sink:  # a new leadership: its own backoff
                    failures, last_sink = 0, sink
                last = time.monotonic()
                if self._publish(sink):
                    failures = 0
                else:
                    self._pause(self.backoff(failures), stop)
                    failures += 1
        finally:
            stop.set()
            with self._lock:
                streams = [s.stream for s in self._streams.values() if s.stream is not None]
            for st in streams:
                try:
                    st.close()
                except Exception:  # noqa: BLE001
                    pass
            for t in threads:
                t.join(timeout=10)

    def _rehearse(self) -> None:
        try:
            self.rehearse(self.snapshot())
        except Exception:  # noqa: BLE001  (a standby's rehearsal must not stop it)
            log.exception("preparing the view while standing by failed")
            self._reconnect_twin()

    def _pause(self, seconds: float, stop: threading.Event) -> None:
        """A failed publication's backoff, cut short by ``stop`` or a new sink (publish_to)."""
        deadline = time.monotonic() + seconds
        while not stop.is_set() and not self._kick.is_set() and (left := deadline - time.monotonic()) > 0:
            self._kick.wait(min(left, 0.25))

    def _reconnect_twin(self) -> None:
        """The twin is read from the database: after a failure this thread's connection is
        closed, so a restarted database is reconnected to (Django reopens a closed one)."""
        if self.gateway.name == "twin":
            from django.db import connection

            connection.close()

    def _publish(self, on_change) -> bool:
        began = time.monotonic()
        try:
            # No collection between a change and its page: with millions of kept objects the
            # collector's passes over what a publication makes cost tens of milliseconds, and a
            # full one a second; what the publication left is collected once it is committed.
            with without_gc_pauses():
                on_change(self.snapshot())
        except Exception as exc:  # noqa: BLE001  (the view's failure must not stop the watcher)
            log.exception("publishing the cluster view failed")
            self._error(None, exc)
            self._reconnect_twin()
            self._dirty.set()  # try again (after a backoff)
            return False
        with self._lock:
            self.counters["published"] += 1
            self.last_published_at = _now()
            self.publish_seconds.append((self.counters["published"], round(time.monotonic() - began, 4)))
        return True
