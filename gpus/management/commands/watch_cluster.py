"""manage.py watch_cluster [--once] [--debounce 0.5] [--identity NAME]

The cluster watcher: elect a leader through a Lease (two replicas are safe, one is active),
then list and watch the cluster (brickadmin/cluster/watch.py) and hand every new projection
to ``gpus.view_publish.publish`` (at most once per debounce window). Its first publication,
right after the first list, rewrites a stored view of an older form (an upgrade) in full;
until then the pages say the numbers are being rebuilt. DCGM devices are fetched
from Prometheus every BRICK_METRICS_INTERVAL seconds when PROMETHEUS_URL is set and merged
into the snapshot before publishing. ``--once``: take the Lease, list, publish once through
the same fence, release the Lease and exit (for scripts).
SIGTERM/SIGINT stop cleanly and release the Lease so the standby takes over at once.

Fencing: on taking the Lease the watcher first claims the view with its fencing token
(gpus.view_publish.claim); every publication and heartbeat is checked against it under the
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

    def handle(
        self, *args, once=False, debounce=0.5, identity="", lease_duration=15, renew_deadline=10, retry_period=2, **opts
    ):
        from gpus import view_publish

        identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        try:
            gateway = get_gateway()
        except ClusterError as exc:
            raise CommandError(str(exc)) from exc
        feed = metrics.DeviceFeed(settings.BRICK_METRICS_INTERVAL)

        def on_change(snap, fence):
            with view_publish.reconnecting():
                return view_publish.publish(feed.merge(snap), watcher=identity, fence=fence)

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
        try:
            while not stop.is_set():
                if not elector.acquire(stop):
                    break
                self.stdout.write(f"{identity}: leading; watching the {gateway.name} cluster")
                lost = self._lead(gateway, elector, feed, on_change, stop, debounce)
                if lost and not stop.is_set():
                    elector.is_leader = False  # leads again only by taking the Lease again
                    self.stdout.write(f"{identity}: lost the lease; standing by")
        finally:
            elector.release()
        self.stdout.write(f"{identity}: stopped")

    @staticmethod
    def _once(gateway, elector, feed, on_change) -> int:
        """List and publish once, as the Lease's holder and through the same fence as the
        long-running watcher: a watcher that leads is waited for (its Lease may be a dead
        one's) at most a Lease's duration, and a publication after another took the Lease
        over is refused. The Lease is released at the end."""
        from gpus import view_publish

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

    @staticmethod
    def _lead(gateway, elector, feed, on_change, stop, debounce) -> bool:
        """Watch while leading; returns True when the lease was lost (not stopped)."""
        from gpus import view_publish

        work = threading.Event()
        lost = threading.Event()
        fence, refused = _claim_as_holder(elector, stop)
        if refused is not None:
            stop.wait(elector.retry_period)
            return not stop.is_set()
        watcher = ClusterWatcher(gateway)

        def publish(snap):
            try:
                return on_change(snap, fence)
            except view_publish.StalePublisher:
                log.warning("%s: no longer holds the lease; its publication was refused", elector.identity)
                lost.set()
                raise

        threads = [threading.Thread(target=elector.keep, args=(work, lost), name="lease", daemon=True)]
        if feed.enabled:
            threads.append(threading.Thread(target=feed.loop, args=(watcher, work), name="dcgm", daemon=True))

        def relay():
            while not work.is_set():
                if stop.wait(0.2) or lost.is_set():
                    work.set()

        threads.append(threading.Thread(target=relay, name="relay", daemon=True))
        threads.append(threading.Thread(target=_beat, args=(watcher, fence, work, lost), name="beat", daemon=True))
        if feed.enabled:
            try:
                feed.fetch()
            except Exception:  # noqa: BLE001
                log.exception("fetching DCGM devices failed")
        for t in threads:
            t.start()
        try:
            watcher.run(publish, stop=work, debounce=debounce)
        finally:
            work.set()
            for t in threads:
                t.join(timeout=5)
        return lost.is_set()


def _claim_as_holder(elector, stop: threading.Event):
    """(the fence of this leadership, None) once it claimed the view, else (fence, why not)."""
    from gpus import view_publish

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
    from gpus import view_publish

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


def _beat(watcher: ClusterWatcher, fence, stop: threading.Event, lost: threading.Event) -> None:
    """Tell the pages the watcher is alive (and how it is doing), changes or not; a beat
    refused by the fence means the Lease is no longer this watcher's."""
    import json

    from gpus import view_publish

    while True:
        try:
            status = json.loads(json.dumps(watcher.status(), default=str))
            status["catching_up"] = not status.get("published")  # taken over, nothing published yet
            with view_publish.reconnecting():
                written = view_publish.heartbeat(fence.holder, status, fence=fence)
            if not written:
                log.warning("%s: heartbeat refused: the lease is no longer held", fence.holder)
                lost.set()
                return
        except Exception:  # noqa: BLE001  (a busy database must not stop the watcher)
            log.exception("watcher heartbeat failed")
        if stop.wait(view_publish.HEARTBEAT_SECONDS):
            return
