"""The cluster watcher (brickadmin/cluster/watch.py) against the twin (real database):
list then watch, 410 Gone relists, backoff, debounce; the twin's event log; the Lease."""

import gc
import threading
import time

import pytest
from django.core.management import call_command
from django.db import transaction

from brickadmin.cluster import Conflict, Gone, TransientClusterError, scenarios, twin_store
from brickadmin.cluster import twin as twin_mod
from brickadmin.cluster.lease import EXPIRY_MARGIN, OBSERVATIONS_PER_RETRY, LeaderElector, next_attempt_in
from brickadmin.cluster.models import TwinEvent, TwinState
from brickadmin.cluster.snapshot import Snapshot
from brickadmin.cluster.twin import TwinGateway
from brickadmin.cluster.vocabulary import PLUGIN_NAMESPACE
from brickadmin.cluster.watch import ClusterWatcher
from tests.waiting import wait_until


def stores(w):
    return {k: dict(s.items) for k, s in w._streams.items()}


def fresh(gw):
    w = ClusterWatcher(gw)
    w.prime()
    return stores(w)


def gpu_pod(name, ns="ws-a", node="", phase="Running", gpus=1):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
        "status": {"phase": phase},
    }


@pytest.fixture
def demo(load_scenario):
    return load_scenario("demo")


def test_every_twin_write_appends_an_event_with_a_global_resource_version(demo):
    gw = demo
    node = gw.list_nodes()[0]["metadata"]["name"]
    rv0 = TwinGateway.resource_version()
    body = gw.label_node(node, {"brick.test/x": "1"})
    ev = TwinEvent.objects.filter(kind="Node", name=node).latest("id")
    assert ev.type == "MODIFIED" and ev.id > rv0 and body["metadata"]["resourceVersion"] == str(ev.id)
    assert ev.body["metadata"]["labels"]["brick.test/x"] == "1"
    ns = next(p["metadata"]["namespace"] for p in gw.list_gpu_pods())
    in_ns = {(o.kind, o.name) for o in twin_mod.TwinObject.objects.filter(namespace=ns)}
    gw.delete("v1", "Namespace", ns)
    deleted = {(e.kind, e.name) for e in TwinEvent.objects.filter(type="DELETED", namespace=ns)}
    assert in_ns and in_ns <= deleted


def test_sync_follows_writes_and_ends_equal_to_a_fresh_list(demo):
    gw = demo
    w = ClusterWatcher(gw)
    w.prime()
    assert w.sync() is False
    nodes = [n["metadata"]["name"] for n in gw.list_nodes()]
    gw.label_node(nodes[0], {"brick.test/x": "1"})
    gw.cordon(nodes[1])
    ds = gw.list_daemonsets(namespace=PLUGIN_NAMESPACE)[0]["metadata"]["name"]
    gw.rollout_restart_daemonset(PLUGIN_NAMESPACE, ds)  # plugin pods replaced, node status follows
    ns = next(p["metadata"]["namespace"] for p in gw.list_gpu_pods())
    gw.delete("v1", "Namespace", ns)
    with transaction.atomic():
        gw._save(gpu_pod("failed-one", ns="ws-x", node=nodes[2], phase="Failed"))
        gw._save(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "cpu", "namespace": "ws-x"},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )
    assert w.sync() is True
    assert stores(w) == fresh(gw)
    assert w.counters["relists"] == 0 and w.counters["events"] > 0
    snap = w.snapshot()
    assert isinstance(snap, Snapshot) and snap.source == "twin" and snap.device_source == "twin" and snap.devices
    assert [p["metadata"]["name"] for p in snap.failed_gpu_pods] == ["failed-one"]
    assert "failed-one" not in {p["metadata"]["name"] for p in snap.gpu_pods}
    assert "cpu" not in {p["metadata"]["name"] for p in snap.gpu_pods + snap.plugin_pods}
    assert all(n["metadata"]["name"] != ns for n in snap.quotas)


def test_a_compacted_version_is_gone_and_the_watcher_lists_again(demo):
    gw = demo
    w = ClusterWatcher(gw)
    w.prime()
    old = w._streams[("Node", None)].rv
    node = gw.list_nodes()[0]["metadata"]["name"]
    gw.label_node(node, {"brick.test/y": "2"})
    TwinGateway._compact(TwinGateway.resource_version())
    with pytest.raises(Gone):
        list(gw.watch("Node", resource_version=old, timeout_seconds=0))
    assert w.sync() is True
    # every kind it watches; the demo serves no Kueue, whose kinds are kept empty, not watched
    assert w.counters["relists"] == len([s for s in w._streams.values() if not s.unserved]) == len(w._streams) - 2
    assert stores(w) == fresh(gw)
    assert w._streams[("Node", None)].items[("", node)]["metadata"]["labels"]["brick.test/y"] == "2"


def test_loading_another_scenario_makes_every_watch_list_again(load_scenario):
    gw = load_scenario("seed-example")
    w = ClusterWatcher(gw)
    w.prime()
    objects, hardware, configs = scenarios.read("demo")
    gw.load(objects, hardware, configs)
    assert w.sync() is True
    # every kind it watches; the demo serves no Kueue, whose kinds are kept empty, not watched
    assert w.counters["relists"] == len([s for s in w._streams.values() if not s.unserved]) == len(w._streams) - 2
    assert stores(w) == fresh(gw)


def test_the_event_log_is_bounded(demo, monkeypatch):
    monkeypatch.setattr(twin_store, "EVENT_LOG_KEEP", 50)
    monkeypatch.setattr(twin_store, "PRUNE_EVERY", 10)
    gw = demo
    node = gw.list_nodes()[0]["metadata"]["name"]
    for i in range(60):
        gw.label_node(node, {"brick.test/i": str(i)})
    state = TwinState.objects.get(pk=1)
    assert state.compacted_rv > 0
    assert TwinEvent.objects.count() <= 50 + 10
    assert not TwinEvent.objects.filter(id__lte=state.compacted_rv).exists()


@pytest.mark.slow  # 1000 twin writes followed live by a watcher thread: the longest test of the quick set
def test_a_burst_of_1000_events_costs_a_handful_of_publications(transactional_db, demo):
    gw = demo
    calls = []
    stop = threading.Event()
    w = ClusterWatcher(gw)
    t = threading.Thread(target=w.run, args=(calls.append,), kwargs={"stop": stop, "debounce": 0.3})
    t.start()
    try:
        wait_until(lambda: calls, what="the first publication")
        before = len(calls)
        node = gw.list_nodes()[0]["metadata"]["name"]
        with transaction.atomic():
            for i in range(1000):
                gw._save(gpu_pod(f"burst-{i}", ns="ws-burst", node=node))
        wait_until(
            lambda: calls and sum(p["metadata"]["namespace"] == "ws-burst" for p in calls[-1].gpu_pods) == 1000,
            what="the burst in a publication",
        )
        time.sleep(1.0)
    finally:
        stop.set()
        t.join(timeout=20)
    assert not t.is_alive()
    assert w.counters["events"] >= 1000
    assert 1 <= len(calls) - before <= 3, len(calls) - before
    status = w.status()
    assert status["published"] == len(calls)
    # how long each publication took, numbered as published: what the benchmarks read
    assert [n for n, _s in status["publish_seconds"]] == list(range(1, len(calls) + 1))
    assert all(seconds >= 0 for _n, seconds in status["publish_seconds"])


def test_no_garbage_collection_runs_between_a_change_and_its_publication(db, demo):
    """With millions of kept objects one full collection takes a second: none may fall between
    a change and the page that shows it. The collector runs again once the view is written."""
    w = ClusterWatcher(demo)
    w.prime()
    seen = []
    assert w._publish(lambda snap: seen.append((gc.isenabled(), len(snap.nodes))))
    assert seen == [(False, len(demo.list_nodes()))]
    assert gc.isenabled()
    # the process's time in the collector, per generation, as the heartbeat carries it
    clock = w.status()["gc"]
    assert len(clock["seconds"]) == len(clock["collections"]) == 3


def test_running_watcher_relists_after_compaction_and_ends_equal(transactional_db, demo):
    gw = demo
    calls = []
    stop = threading.Event()
    w = ClusterWatcher(gw)
    t = threading.Thread(target=w.run, args=(calls.append,), kwargs={"stop": stop, "debounce": 0.1})
    t.start()
    try:
        wait_until(lambda: calls and all(s.connected or s.unserved for s in w._streams.values()), what="streams open")
        nodes = [n["metadata"]["name"] for n in gw.list_nodes()]
        # a change and a compaction past it in one transaction: no watch can have seen it
        with transaction.atomic():
            gw.label_node(nodes[0], {"brick.test/z": "1"})
            TwinGateway._compact(TwinGateway.resource_version())
        gw.label_node(nodes[1], {"brick.test/z": "2"})
        wait_until(lambda: stores(w) == fresh(gw), what="the watcher equal to a fresh list")
    finally:
        stop.set()
        t.join(timeout=20)
    assert stores(w) == fresh(gw)
    assert w.counters["relists"] >= 1


class BrokenGateway:
    name = "kube"

    def __init__(self):
        self.watches = 0

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        return [], "1"

    def watch(self, kind, namespace=None, *, resource_version, timeout_seconds=300, worth=None):
        self.watches += 1
        raise TransientClusterError("connection refused")


def test_a_broken_stream_backs_off_exponentially_never_a_tight_loop():
    gw = BrokenGateway()
    w = ClusterWatcher(gw, backoff_base=0.05, backoff_cap=0.4, watches=(("Node", None),))
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(lambda s: None,), kwargs={"stop": stop, "debounce": 0.05})
    t.start()
    time.sleep(1.5)
    st = w.status()
    stop.set()
    t.join(timeout=5)
    assert 3 <= gw.watches <= 12, gw.watches
    assert st["errors"] == gw.watches or st["errors"] == gw.watches - 1
    assert st["behind"] and "connection refused" in st["last_error"]
    assert st["streams"]["Node"]["behind_since"] is not None and st["as_of"] <= st["streams"]["Node"]["behind_since"]


def test_backoff_grows_to_its_cap_with_jitter():
    w = ClusterWatcher(BrokenGateway(), backoff_base=0.5, backoff_cap=30)
    for attempt in range(40):
        d = w.backoff(attempt)
        ideal = min(30, 0.5 * 2**attempt)
        assert ideal * 0.5 <= d <= ideal
    assert len({round(w.backoff(10), 6) for _ in range(20)}) > 1  # jitter


def test_a_missing_lease_namespace_is_said_once_plainly_and_the_lease_is_taken_once_it_exists(db, caplog):
    """On a real cluster a Lease's namespace must exist: the watcher cannot lead (and no view
    is published) until it does. The log says so once, naming the namespace, not every retry."""
    from brickadmin.cluster import NotFound

    class NoNamespace(TwinGateway):
        missing = True

        def create_lease(self, namespace, body):
            if self.missing:
                raise NotFound(f'namespaces "{namespace}" not found')
            return super().create_lease(namespace, body)

    gw = NoNamespace()
    a = LeaderElector(gw, "brickadmin", "watch", "a", lease_duration=15, renew_deadline=10)
    with caplog.at_level("WARNING", logger="brickadmin.cluster.lease"):
        assert [a.try_acquire_or_renew() for _ in range(5)] == [False] * 5
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1, said
    assert "the namespace brickadmin must exist" in said[0] and "no view is published" in said[0]
    gw.missing = False
    assert a.try_acquire_or_renew() is True
    assert gw.get_lease("brickadmin", "watch")["spec"]["holderIdentity"] == "a"


def test_the_lease_elects_one_leader_and_the_standby_takes_over_when_it_expires(db):
    gw = TwinGateway()
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    a = LeaderElector(gw, "brickadmin", "watch", "a", lease_duration=15, renew_deadline=10, clock=clock)
    b = LeaderElector(gw, "brickadmin", "watch", "b", lease_duration=15, renew_deadline=10, clock=clock)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    now[0] += 5
    assert a.try_acquire_or_renew() is True  # renewed
    now[0] += 10
    assert b.try_acquire_or_renew() is False  # the record changed 10 s ago (by b's clock): not expired
    now[0] += 16  # a stopped renewing
    assert b.try_acquire_or_renew() is True
    assert gw.get_lease("brickadmin", "watch")["spec"]["holderIdentity"] == "b"
    assert gw.get_lease("brickadmin", "watch")["spec"]["leaseTransitions"] == 1
    assert a.try_acquire_or_renew() is False
    assert b.release() is True
    assert a.try_acquire_or_renew() is True  # released: taken at once


def test_a_standby_takes_over_as_the_lease_expires_by_its_clock_not_a_poll_later(db):
    """The Lease's duration counts from the last renewal the standby saw: it takes over
    then, not up to a retry period later (a fake clock: each wait moves it on)."""
    gw = TwinGateway()
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    a = LeaderElector(gw, "brickadmin", "watch", "a", lease_duration=15, renew_deadline=10, clock=clock)
    b = LeaderElector(gw, "brickadmin", "watch", "b", lease_duration=15, renew_deadline=10, clock=clock)
    assert a.try_acquire_or_renew() is True  # and a dies at once, never renewing again

    class Waits(threading.Event):
        def wait(self, timeout=None):
            now[0] += timeout
            return False

    assert b.acquire(Waits()) is True
    assert gw.get_lease("brickadmin", "watch")["spec"]["holderIdentity"] == "b"
    assert 1015 <= now[0] <= 1015 + 2 * EXPIRY_MARGIN


@pytest.mark.parametrize(
    "retry_wait,expires_in,expected",
    [
        (2.2, None, 2.2),  # nobody else holds it: the retry period
        (2.2, 9.0, 2.2 / OBSERVATIONS_PER_RETRY),  # held by another: looked at more often, reads only
        (2.2, 0.1, 0.1 + EXPIRY_MARGIN),  # expires before the next look: just after it expires
        (2.2, -3.0, EXPIRY_MARGIN),  # already expired: at once
    ],
)
def test_a_candidate_looks_at_a_lease_held_by_another_often_and_right_as_it_expires(retry_wait, expires_in, expected):
    assert next_attempt_in(retry_wait, expires_in) == pytest.approx(expected)


def test_lease_updates_are_conditional_on_the_resource_version(db):
    gw = TwinGateway()
    gw.create_lease("ns", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    with pytest.raises(Conflict):
        gw.create_lease("ns", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    lease = gw.get_lease("ns", "l")
    gw.update_lease("ns", {**lease, "spec": {"holderIdentity": "b"}})
    with pytest.raises(Conflict):
        gw.update_lease("ns", {**lease, "spec": {"holderIdentity": "c"}})  # stale version
    assert gw.get_lease("ns", "l")["spec"]["holderIdentity"] == "b"


def test_a_lease_renewal_does_not_change_the_twin_version(db):
    gw = TwinGateway()
    v = gw.version()
    gw.create_lease("ns", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    assert gw.version() == v


def test_watch_cluster_once_publishes_one_snapshot(demo, monkeypatch):
    from gpus.view import publish as view_publish

    got = []
    monkeypatch.setattr(
        view_publish, "publish", lambda snap, *, watcher="", fence=None: got.append((snap, watcher)) or 7
    )
    call_command("watch_cluster", "--once", "--identity", "test-1")
    assert len(got) == 1 and got[0][1] == "test-1"
    snap = got[0][0]
    assert snap.nodes and snap.gpu_pods and snap.source == "twin"


def test_a_heartbeat_that_changes_nothing_kept_is_not_a_change(demo):
    """A kubelet's status heartbeat bumps the node's resourceVersion and condition times,
    none of which the view shows: the watcher must not publish again for it (at 2,000
    nodes heartbeats would keep it publishing all the time). A real change still counts."""
    import copy

    w = ClusterWatcher(demo)
    w.prime()
    raw = copy.deepcopy(demo.list_nodes()[0])
    raw["metadata"]["resourceVersion"] = "987654321"
    raw.setdefault("status", {}).setdefault("conditions", [{"type": "Ready", "status": "True"}])
    for c in raw["status"]["conditions"]:
        c["lastHeartbeatTime"] = "2026-12-02T01:02:03Z"
    assert w._apply(("Node", None), {"type": "MODIFIED", "object": raw}) is False
    assert w._streams[("Node", None)].rv == "987654321"  # the stream still moves on from it
    raw["metadata"]["labels"]["brick.test/changed"] = "1"
    assert w._apply(("Node", None), {"type": "MODIFIED", "object": raw}) is True


def test_a_lone_change_is_published_without_waiting_for_the_debounce_window(transactional_db, demo):
    """After a quiet spell the first change is handed over at once, not a debounce later (a
    label change reaches the pages sooner); a burst still costs one publication per window."""
    gw = demo
    calls, at = [], []
    stop = threading.Event()
    w = ClusterWatcher(gw)

    def on_change(snap):
        calls.append(snap)
        at.append(time.monotonic())

    t = threading.Thread(target=w.run, args=(on_change,), kwargs={"stop": stop, "debounce": 5.0})
    t.start()
    try:
        wait_until(lambda: calls and all(s.connected or s.unserved for s in w._streams.values()), what="streams open")
        time.sleep(5.5)  # a quiet spell longer than the window
        node = gw.list_nodes()[0]["metadata"]["name"]
        t0 = time.monotonic()
        gw.label_node(node, {"brick.test/lone": "1"})
        wait_until(
            lambda: any(n["metadata"]["labels"].get("brick.test/lone") == "1" for n in calls[-1].nodes),
            timeout=4.0,
            what="the change, before the 5 s window",
        )
        assert at[-1] - t0 < 4.0
    finally:
        stop.set()
        t.join(timeout=20)
    assert not t.is_alive()


def test_a_standby_rehearses_on_its_projection_and_publishes_it_at_once_when_told(transactional_db, demo, monkeypatch):
    """Standing by (no sink), the watcher hands its projection only to its rehearsal, at most
    every REHEARSE_SECONDS, the latest change included; told where to publish, it publishes
    the projection at once."""
    from brickadmin.cluster import watch

    monkeypatch.setattr(watch, "REHEARSE_SECONDS", 0.5)
    gw = demo
    rehearsed, published = [], []
    stop = threading.Event()
    w = ClusterWatcher(gw)
    w.rehearse = rehearsed.append
    t = threading.Thread(target=w.run, kwargs={"stop": stop, "debounce": 0.1})
    t.start()
    try:
        wait_until(lambda: rehearsed, what="the first rehearsal, of the listed cluster")
        node = gw.list_nodes()[0]["metadata"]["name"]
        gw.label_node(node, {"brick.test/standby": "1"})

        def labelled(snap):
            return any(n["metadata"]["labels"].get("brick.test/standby") == "1" for n in snap.nodes)

        wait_until(lambda: labelled(rehearsed[-1]), what="a rehearsal with the change")
        rehearsals = len(rehearsed)
        w.publish_to(published.append)
        wait_until(lambda: published, timeout=3.0, what="the publication once told where")
        assert labelled(published[0])
        assert len(rehearsed) == rehearsals  # no rehearsal once publishing
    finally:
        stop.set()
        t.join(timeout=20)
    assert not t.is_alive()


def _generation():
    from gpus.models import ViewState

    return ViewState.objects.get(pk=1).generation


def _rewrite_in_twin(gw, kind, namespace, name, change):
    """A write by another client (a kubelet, a controller): the twin stores it at a new
    resourceVersion and its watchers get a MODIFIED event."""
    import copy

    body = copy.deepcopy(gw._get(kind, name, namespace))
    change(body)
    with transaction.atomic():
        gw._save(body)


def test_a_heartbeat_only_node_update_publishes_no_new_generation_and_a_label_change_does(demo):
    from gpus.view import reading

    gw = demo
    reading.read_cluster(gw)
    before = _generation()
    node = gw.list_nodes()[0]["metadata"]["name"]

    def heartbeat(body):
        for c in body.setdefault("status", {}).setdefault("conditions", [{"type": "Ready", "status": "True"}]):
            c["lastHeartbeatTime"] = "2026-12-03T10:00:00Z"
        body["metadata"]["managedFields"] = [{"manager": "kubelet", "time": "2026-12-03T10:00:00Z"}]
        body["metadata"].setdefault("annotations", {})["node.alpha.kubernetes.io/ttl"] = "0"

    rv = TwinState.objects.get(pk=1).last_rv
    _rewrite_in_twin(gw, "Node", "", node, heartbeat)
    assert TwinState.objects.get(pk=1).last_rv > rv  # the cluster did move on
    view = reading.read_cluster(gw)
    assert _generation() == before
    assert view.freshness.as_of is not None

    gw.label_node(node, {"brick.test/team": "vision"})
    reading.read_cluster(gw)
    assert _generation() == before + 1
    from gpus.models import ViewNode

    assert ViewNode.objects.get(name=node).raw["metadata"]["labels"]["brick.test/team"] == "vision"


def test_a_daemonset_status_write_publishes_no_new_generation_and_a_config_change_does(demo):
    from gpus.view import reading

    gw = demo
    reading.read_cluster(gw)
    before = _generation()
    ds = gw.list_daemonsets(PLUGIN_NAMESPACE)[0]["metadata"]["name"]

    def counts(body):  # the DaemonSet controller recounting its pods
        body.setdefault("status", {})["numberReady"] = 12345
        body["status"]["observedGeneration"] = 99
        body["metadata"]["generation"] = 99

    _rewrite_in_twin(gw, "DaemonSet", PLUGIN_NAMESPACE, ds, counts)
    reading.read_cluster(gw)
    assert _generation() == before

    cm = gw.list_configmaps(PLUGIN_NAMESPACE)[0]["metadata"]["name"]
    _rewrite_in_twin(gw, "ConfigMap", PLUGIN_NAMESPACE, cm, lambda b: b.setdefault("data", {}).update(extra="x: 1"))
    reading.read_cluster(gw)
    assert _generation() == before + 1
