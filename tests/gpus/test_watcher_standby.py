"""Two watch_cluster replicas (the command's serve loop, each in a thread with its own
gateway and Lease elector, a short Lease) on the twin and the real database. A warm
standby lists the cluster once at start, writes nothing while the other leads, and on
taking the Lease publishes the cluster as it is now without listing it again; a leader cut
off from the Lease stands by, writes nothing, and leads again later, still without a list.
A cold standby lists the cluster only once it leads."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.db import connection

from brickadmin import metrics
from brickadmin.cluster import TransientClusterError
from brickadmin.cluster.lease import LeaderElector
from brickadmin.cluster.twin import TwinGateway
from brickadmin.cluster.watch import WATCHES, ClusterWatcher
from gpus.management.commands.watch_cluster import LEASE_NAME, publisher, serve
from gpus.models import ViewState
from gpus.numbers import ledger
from gpus.view import stored as clusterview
from tests import waiting

pytestmark = pytest.mark.slow


class CountingTwin(TwinGateway):
    """The twin as one replica reaches it: the lists it makes are counted (a list is the
    expensive call on a large cluster), and ``cut`` makes its Lease calls fail, as for a
    replica that can no longer renew its Lease."""

    def __init__(self):
        super().__init__()
        self.lists = 0
        self.cut = False

    def list_with_version(self, *args, **kwargs):
        self.lists += 1
        return super().list_with_version(*args, **kwargs)

    def _lease_call(self, call, *args):
        if self.cut:
            raise TransientClusterError("connection refused")
        return call(*args)

    def get_lease(self, *args):
        return self._lease_call(super().get_lease, *args)

    def create_lease(self, *args):
        return self._lease_call(super().create_lease, *args)

    def update_lease(self, *args):
        return self._lease_call(super().update_lease, *args)


class Replica:
    """One `manage.py watch_cluster` replica, its lines and its publications kept."""

    def __init__(self, identity: str, *, warm: bool = True):
        self.identity, self.gw, self.stop = identity, CountingTwin(), threading.Event()
        self.said: list[str] = []
        self.published: list[int] = []  # generations this replica wrote
        self.elector = LeaderElector(
            self.gw,
            settings.BRICK_LEASE_NAMESPACE,
            LEASE_NAME,
            identity,
            lease_duration=4,  # short, yet a busy machine's pauses do not end a leadership
            renew_deadline=3,
            retry_period=0.5,
        )
        publish = publisher(metrics.DeviceFeed(settings.BRICK_METRICS_INTERVAL), identity)

        def on_change(snap, fence):
            generation = publish(snap, fence)
            self.published.append(generation)
            return generation

        self.thread = threading.Thread(target=self._serve, args=(on_change, warm), name=identity)
        self.thread.start()

    def _serve(self, on_change, warm):
        try:
            serve(
                self.gw,
                self.elector,
                metrics.DeviceFeed(60),
                on_change,
                self.stop,
                debounce=0.1,
                warm=warm,
                say=self.said.append,
            )
        finally:
            connection.close()

    def says(self, words: str) -> bool:
        return any(words in line for line in self.said)

    def end(self):
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()


def wait_until(check, what="condition"):
    """Longer than the default: a takeover waits out a Lease, on a busy machine."""
    waiting.wait_until(check, timeout=60.0, what=what)


def state() -> tuple[str, str, int, int]:
    """(holder, heartbeat writer, fencing token, generation) of the view."""
    s = ViewState.objects.filter(pk=1).first()
    return (s.holder, s.watcher, s.fencing_token, s.generation) if s else ("", "", -1, 0)


def equals_fresh_list() -> bool:
    """The stored view's ledger against one of a fresh list of the twin."""
    w = ClusterWatcher(TwinGateway())
    w.prime()
    snap = w.snapshot()
    fresh = ledger.compute(snap)
    try:
        stored = clusterview.stored_view()
    except clusterview.ViewUnavailable:
        return False
    lines = sorted((ledger.node_to_dict(n) for n in stored.ledger.nodes), key=lambda d: d["name"])
    return (stored.ledger.logical, stored.ledger.requested, stored.ledger.physical, len(stored.snapshot.nodes)) == (
        fresh.logical,
        fresh.requested,
        fresh.physical,
        len(snap.nodes),
    ) and lines == sorted((ledger.node_to_dict(n) for n in fresh.nodes), key=lambda d: d["name"])


def writers_while(seconds: float, changes) -> set[tuple[str, str]]:
    """(holder, heartbeat writer) of the view seen while ``changes`` are made and for
    ``seconds`` after, read every 50 ms."""
    seen, deadline = set(), time.monotonic() + seconds
    for change in changes:
        change()
        seen.add(state()[:2])
    while time.monotonic() < deadline:
        seen.add(state()[:2])
        time.sleep(0.05)
    return seen


def cordoned(name: str) -> bool:
    return clusterview.stored_view().ledger.node(name).cordoned


def leading_and_standing_by(start) -> tuple[Replica, Replica]:
    """watcher-a leading with the view published, then watcher-b started and listed."""
    a = start("watcher-a")
    wait_until(lambda: state()[0] == "watcher-a" and equals_fresh_list(), what="a leading and published")
    b = start("watcher-b")
    wait_until(lambda: b.says("the cluster is listed"), what="b listed the cluster")
    return a, b


@pytest.fixture
def replicas(transactional_db, load_scenario):
    started: list[Replica] = []

    def start(identity, **kw):
        started.append(Replica(identity, **kw))
        return started[-1]

    yield load_scenario("demo"), start
    for r in started:
        r.stop.set()
    for r in started:
        r.end()


def test_a_warm_standby_writes_nothing_then_takes_over_with_the_cluster_as_it_is_without_listing_it(replicas):
    gw, start = replicas
    a, b = leading_and_standing_by(start)
    assert b.gw.lists == len(WATCHES)  # each kind once

    # b stands by while a leads: the cluster changes, a publishes, b writes nothing
    seen = writers_while(2 * a.elector.lease_duration, [lambda: gw.cordon("gpu-a30-01")])
    wait_until(lambda: cordoned("gpu-a30-01"), what="a published the change")
    assert seen <= {("watcher-a", "watcher-a")}, seen
    assert b.published == [] and not b.says("leading")
    token_a = state()[2]

    # a can no longer renew its Lease: past its renew deadline it stops, b takes the Lease
    # over, and the cluster changes meanwhile
    a.gw.cut = True
    gw.uncordon("gpu-a30-01")
    gw.label_node("gpu-a100-01", {"brick.test/after": "takeover"})
    wait_until(lambda: state()[0] == "watcher-b", what="b taking over")
    wait_until(lambda: b.published and not cordoned("gpu-a30-01") and equals_fresh_list(), what="b's first view")
    assert b.gw.lists == len(WATCHES), "the new leader listed the cluster again"
    holder, _beat, token, _gen = state()
    assert holder == "watcher-b" and token > token_a
    labels = (clusterview.stored_view().snapshot.node("gpu-a100-01") or {})["metadata"]["labels"]
    assert labels["brick.test/after"] == "takeover"


def test_a_leader_that_lost_its_lease_stands_by_writes_nothing_and_takes_over_again_without_listing(replicas):
    gw, start = replicas
    a, b = leading_and_standing_by(start)
    a.gw.cut = True  # a's renewals fail
    wait_until(lambda: a.says("lost the lease") and state()[0] == "watcher-b", what="a standing by, b leading")
    a.gw.cut = False  # a reaches its Lease again: it stands by, b's Lease being renewed
    published_by_a = len(a.published)
    seen = writers_while(
        2 * b.elector.lease_duration, [lambda: gw.cordon("gpu-a30-01"), lambda: gw.cordon("gpu-a100-01")]
    )
    wait_until(lambda: cordoned("gpu-a30-01") and cordoned("gpu-a100-01"), what="b published the changes")
    assert seen <= {("watcher-b", "watcher-b")}, seen
    assert len(a.published) == published_by_a
    token_b = state()[2]

    # b stops (its Lease released): a, standing by with its projection followed all along,
    # takes over and publishes the cluster as it is, still without a list
    b.end()
    gw.uncordon("gpu-a30-01")
    wait_until(lambda: state()[0] == "watcher-a" and not cordoned("gpu-a30-01"), what="a leading again")
    wait_until(equals_fresh_list, what="a's view equal to a fresh list")
    assert state()[2] > token_b
    assert a.gw.lists == len(WATCHES), "the former leader listed the cluster again"


def test_a_cold_standby_lists_the_cluster_only_once_it_leads(replicas):
    gw, start = replicas
    a = start("watcher-a")
    wait_until(lambda: state()[0] == "watcher-a" and equals_fresh_list(), what="a leading and published")
    b = start("watcher-b", warm=False)
    wait_until(lambda: len(b.said) or b.elector.expires_in() is not None, what="b looking at the Lease")
    writers_while(b.elector.lease_duration, [])
    assert b.gw.lists == 0 and b.published == []
    a.end()
    gw.cordon("gpu-a30-01")
    wait_until(lambda: state()[0] == "watcher-b" and cordoned("gpu-a30-01"), what="b taking over")
    wait_until(equals_fresh_list, what="b's view equal to a fresh list")
    assert b.gw.lists == len(WATCHES)
