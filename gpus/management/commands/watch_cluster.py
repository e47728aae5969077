"""manage.py watch_cluster [--once] [--debounce 0.5] [--identity NAME] [--cold-standby]

The cluster watcher: elect a leader through a Lease (two replicas are safe, one is active),
list and watch the cluster (brickadmin/cluster/watch.py) and, while leading, hand every new
projection to ``gpus.view.publish.publish`` (at most once per debounce window). Its first
publication rewrites a stored view of an older form (an upgrade) in full; until then the
pages say the numbers are being rebuilt. DCGM devices are fetched from Prometheus every
BRICK_METRICS_INTERVAL seconds when PROMETHEUS_URL is set and merged into the snapshot
before publishing. ``--once``: take the Lease, list, publish once through the same fence,
release the Lease and exit (for scripts).
SIGTERM/SIGINT stop cleanly and release the Lease so the standby takes over at once.

Warm standby (the default): every replica lists the cluster once at start and follows it
for its whole life (one ClusterWatcher, and the DCGM feed); the one that does not hold the
Lease publishes nothing and writes nothing. When it takes the Lease it claims the view and
publishes its current projection at once, without listing again; when it loses the Lease it
keeps following the cluster and stands by. ``--cold-standby``: a replica lists and follows
the cluster only while it leads (half the memory of a pair, but a takeover lists the whole
cluster before its first publication).

Fencing: on taking the Lease the watcher first claims the view with its fencing token
(gpus.view.publish.claim); every publication and heartbeat is checked against it under the
view's row lock and against the Lease's renew deadline, so a leader cut off from the API
server stops writing before its Lease can expire and a former leader's write is refused.
A lost database connection (PostgreSQL restarted) is reopened, with backoff, in process."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import reset_queries

from brickadmin import metrics
from brickadmin.cluster import ClusterError
from brickadmin.cluster.gateway import get_gateway
from brickadmin.cluster.lease import LeaderElector
from brickadmin.cluster.watch import ClusterWatcher

log = logging.getLogger(__name__)
LEASE_NAME = "brickadmin-watch-cluster"


class Command(BaseCommand):
    help = "List then watch the cluster and keep the materialised cluster view up to date."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="list, publish once and exit")
        parser.add_argument(
            "--debounce", type=float, default=0.5, help="seconds to gather a burst of events into one publication"
        )
        parser.add_argument("--identity", default="", help="this replica's name in the Lease (default: host-pid)")
        parser.add_argument("--lease-duration", type=float, default=15)
        parser.add_argument("--renew-deadline", type=float, default=10)
        parser.add_argument("--retry-period", type=float, default=2)
        parser.add_argument(
            "--cold-standby",
            action="store_true",
            help="list and watch the cluster only while leading (less memory; a takeover lists the cluster first)",
        )

    def handle(
        self,
        *args,
        once=False,
        debounce=0.5,
        identity="",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        cold_standby=False,
        **opts,
    ):
        identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        try:
            gateway = get_gateway()
        except ClusterError as exc:
            raise CommandError(str(exc)) from exc
        feed = metrics.DeviceFeed(settings.BRICK_METRICS_INTERVAL)

        on_change = publisher(feed, identity)
        elector = LeaderElector(
            gateway,
            settings.BRICK_LEASE_NAMESPACE,
            LEASE_NAME,
            identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
        )
        if once:
            generation = self._once(gateway, elector, feed, on_change)
            self.stdout.write(f"published generation {generation}")
            return

        stop = threading.Event()

        def on_signal(signum, frame):
            log.info("signal %s: stopping", signum)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"{identity}: waiting for the lease {settings.BRICK_LEASE_NAMESPACE}/{LEASE_NAME}")
        serve(gateway, elector, feed, on_change, stop, debounce=debounce, warm=not cold_standby, say=self.stdout.write)
        self.stdout.write(f"{identity}: stopped")

    @staticmethod
    def _once(gateway, elector, feed, on_change) -> int:
        """List and publish once, as the Lease's holder and through the same fence as the
        long-running watcher: a watcher that leads is waited for (its Lease may be a dead
        one's) at most a Lease's duration, and a publication after another took the Lease
        over is refused. The Lease is released at the end."""
        from gpus.view import publish as view_publish

        stop = threading.Event()
        timer = threading.Timer(elector.lease_duration + 2 * elector.retry_period, stop.set)
        timer.start()
        try:
            acquired = elector.acquire(stop)
        finally:
            timer.cancel()
        if not acquired:
            raise CommandError(
                f"another watcher holds the lease {settings.BRICK_LEASE_NAMESPACE}/{LEASE_NAME} and keeps the view "
                "up to date: nothing published"
            )
        try:
            fence, refused = _claim_as_holder(elector, threading.Event())
            if refused is not None:
                raise CommandError(f"the view was not claimed: {refused}")
            watcher = ClusterWatcher(gateway)
            try:
                watcher.prime()
            except ClusterError as exc:
                raise CommandError(f"listing the cluster failed: {exc}") from exc
            if feed.enabled:
                feed.fetch()
            elector.try_acquire_or_renew()  # listing took time: renewed, or refused below
            try:
                return on_change(watcher.snapshot(), fence)
            except view_publish.StalePublisher as exc:
                raise CommandError(f"the publication was refused: {exc}") from exc
        finally:
            elector.release()


def _thread(name: str, target, *args) -> threading.Thread:
    """A daemon thread that closes its own database connections when it ends."""

    def run():
        from django.db import connections

        try:
            target(*args)
        finally:
            connections.close_all()

    return threading.Thread(target=run, name=name, daemon=True)


def publisher(feed, identity: str):
    """on_change(snapshot, fence): the view's next generation, DCGM devices merged in."""
    from gpus.view import publish as view_publish

    def on_change(snap, fence):
        try:
            with view_publish.reconnecting():
                return view_publish.publish(feed.merge(snap), watcher=identity, fence=fence)
        finally:
            # No request ever ends in this process, so nothing else empties Django's query log:
            # with DEBUG on it kept the SQL of the last 9,000 queries, the first publication's
            # node rows at 5,000 DRA nodes among them (tens of MiB).
            reset_queries()

    return on_change


def preparer(feed):
    """rehearse(snapshot): the view's parts worked out as a publication would, nothing written."""
    from gpus.view import publish as view_publish

    def rehearse(snap):
        with view_publish.reconnecting():  # it reads the managed manifest
            view_publish.prepare(feed.merge(snap))

    return rehearse


class Watching:
    """One ClusterWatcher following the cluster until ``stop`` (its first list, then its
    watch streams, in a thread), and the DCGM feed beside it; it publishes nothing until
    ``watcher.publish_to`` names where to."""

    def __init__(self, gateway, feed, stop: threading.Event, debounce: float, say=None, rehearse=False):
        self.watcher, self.stop = ClusterWatcher(gateway), stop
        if rehearse:  # a warm standby: its first publication after a takeover costs only what changed
            self.watcher.rehearse = preparer(feed)
        if feed.enabled:
            try:
                feed.fetch()  # the first publication carries the devices
            except Exception:  # noqa: BLE001
                log.exception("fetching DCGM devices failed")
        self.threads = [_thread("watcher", lambda: self.watcher.run(stop=stop, debounce=debounce))]
        if feed.enabled:
            self.threads.append(_thread("dcgm", feed.loop, self.watcher, stop))
        if say is not None:
            self.threads.append(_thread("listed", self._report, say))
        for t in self.threads:
            t.start()

    def _report(self, say) -> None:
        """Say once when the cluster is listed (a standby is ready to take over at once)."""
        while not self.stop.wait(0.2):
            status = self.watcher.status()
            if status["primed_at"] is not None:
                objects = sum(s["objects"] for s in status["streams"].values())
                say(f"the cluster is listed ({objects} objects, {status['lists']} lists) and followed")
                return

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


def serve(gateway, elector, feed, on_change, stop: threading.Event, *, debounce=0.5, warm=True, say=log.info) -> None:
    """Stand by and lead, in turn, until ``stop``. ``warm``: one Watching for the whole run,
    handed to each leadership (a takeover publishes at once); else each leadership lists
    the cluster anew and stops following it when it ends."""
    identity = elector.identity
    watching = (
        Watching(gateway, feed, stop, debounce, say=lambda m: say(f"{identity}: {m}"), rehearse=True) if warm else None
    )
    try:
        while not stop.is_set():
            if not elector.acquire(stop):
                break
            say(f"{identity}: leading; watching the {gateway.name} cluster")
            lost = _lead(gateway, elector, feed, on_change, stop, debounce, watching)
            if lost and not stop.is_set():
                elector.is_leader = False  # leads again only by taking the Lease again
                say(f"{identity}: lost the lease; standing by")
    finally:
        stop.set()
        elector.release()  # a publication in flight is fenced: the next holder's claim waits for it
        if watching is not None:
            watching.close()


def _lead(gateway, elector, feed, on_change, stop, debounce, watching: Watching | None) -> bool:
    """Publish while leading; returns True when the lease was lost (not stopped)."""
    from gpus.view import publish as view_publish

    fence, refused = _claim_as_holder(elector, stop)
    if refused is not None:
        stop.wait(elector.retry_period)
        return not stop.is_set()
    work, lost = threading.Event(), threading.Event()
    own = watching is None  # a cold standby lists the cluster now, for this leadership only
    if own:
        watching = Watching(gateway, feed, work, debounce)
    assert watching is not None
    watcher = watching.watcher

    def publish(snap):
        try:
            return on_change(snap, fence)
        except view_publish.StalePublisher:
            log.warning("%s: no longer holds the lease; its publication was refused", elector.identity)
            lost.set()
            raise

    published_before = watcher.counters["published"]
    threads = [
        _thread("lease", elector.keep, work, lost),
        _thread("beat", _beat, watcher, fence, work, lost, published_before),
    ]
    for t in threads:
        t.start()
    watcher.publish_to(publish)  # the current projection at once, then every change
    try:
        while not (stop.wait(0.2) or lost.is_set()):
            pass
    finally:
        watcher.publish_to(None)
        work.set()
        for t in threads:
            t.join(timeout=5)
        if own:
            watching.close()
    return lost.is_set()


def _claim_as_holder(elector, stop: threading.Event):
    """(the fence of this leadership, None) once it claimed the view, else (fence, why not)."""
    from gpus.view import publish as view_publish

    fence = view_publish.Fence(elector.identity, elector.token, holds=elector.holds)
    refused = _claim(fence, stop)
    if refused is not None and refused.token is not None and elector.raise_token(refused.token + 1):
        # the view saw a larger token than this Lease's (the Lease was created again)
        fence = view_publish.Fence(elector.identity, elector.token, holds=elector.holds)
        refused = _claim(fence, stop)
    return fence, refused


def _claim(fence, stop: threading.Event):
    """Claim the view for this leadership (retrying while the database is away). None when
    claimed; else why not (a StalePublisher: a newer token claimed it, or the Lease ran out)."""
    from gpus.view import publish as view_publish

    attempt = 0
    while not stop.is_set() and fence.holds():
        try:
            with view_publish.reconnecting():
                view_publish.claim(fence)
            return None
        except view_publish.StalePublisher as exc:
            log.warning("claiming the view refused: %s", exc)
            return exc
        except Exception:  # noqa: BLE001  (the database restarting: try again)
            log.exception("claiming the view failed")
            stop.wait(min(5.0, 0.25 * 2**attempt))
            attempt += 1
    return view_publish.StalePublisher(f"{fence.holder}: stopped or the Lease ran out before the view was claimed")


def _beat(watcher: ClusterWatcher, fence, stop: threading.Event, lost: threading.Event, published_before=0) -> None:
    """Tell the pages the watcher is alive (and how it is doing), changes or not; a beat
    refused by the fence means the Lease is no longer this watcher's. Catching up: nothing
    published in this leadership yet (``published_before``: its publications before)."""
    import json

    from gpus.view import publish as view_publish

    while True:
        try:
            status = json.loads(json.dumps(watcher.status(), default=str))
            status["catching_up"] = (status.get("published") or 0) <= published_before  # taken over, not published
            status["publish_phases"] = list(view_publish.PHASES)
            with view_publish.reconnecting():
                written = view_publish.heartbeat(fence.holder, status, fence=fence)
            reset_queries()  # as after a publication
            if not written:
                log.warning("%s: heartbeat refused: the lease is no longer held", fence.holder)
                lost.set()
                return
        except Exception:  # noqa: BLE001  (a busy database must not stop the watcher)
            log.exception("watcher heartbeat failed")
        if stop.wait(view_publish.HEARTBEAT_SECONDS):
            return
