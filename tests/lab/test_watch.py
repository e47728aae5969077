"""The cluster watcher (brickadmin/cluster/watch.py) against the lab's real API server:
after a burst of changes, an API server restart and an etcd compaction, the watcher's
projection ends equal to a fresh list, by itself."""

from __future__ import annotations

import base64
import copy
import json
import threading
import time
import urllib.request

import pytest

from brickadmin.cluster import projection
from brickadmin.cluster.kube import KubeGateway
from brickadmin.cluster.lease import LeaderElector
from brickadmin.cluster.watch import WATCHES, ClusterWatcher

from .conftest import make_namespace, make_pod, wait_until

pytestmark = pytest.mark.lab

NS = "brick-watch-test"


def strip(obj):
    """The projection without its resourceVersion (the only field a fresh list may differ in
    while nothing changes: bookmarks and events move it at different times)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def stores(w):
    return {k: {key: strip(o) for key, o in s.items.items()} for k, s in w._streams.items()}


def paged(gw):
    """The same gateway listing through pages: the watcher streams its lists, so a fresh
    list to compare it with is read the other way."""
    g = copy.copy(gw)
    g.stream_lists = False
    return g


def fresh(gw):
    w = ClusterWatcher(paged(gw))
    w.prime()
    return stores(w)


def equal_to_fresh(w, gw):
    return stores(w) == fresh(gw)


def behind_streams(w):
    """The kinds whose stream is down (what the pages' "behind" line is made of)."""
    return sorted(f"{kind}/{ns or ''}" for (kind, ns), s in w._streams.items() if s.behind_since is not None)


class Running:
    """A watcher running in a thread, publishing into a list."""

    def __init__(self, gw, **kw):
        self.calls = []
        self.stop = threading.Event()
        self.w = ClusterWatcher(gw, **kw)
        self.t = threading.Thread(
            target=self.w.run, args=(self.calls.append,), kwargs={"stop": self.stop, "debounce": 0.3}, daemon=True
        )

    def __enter__(self):
        self.t.start()
        wait_until(
            lambda: self.calls and all(s.connected or s.unserved for s in self.w._streams.values()),
            60,
            "the watcher primed and following",
        )
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(timeout=30)
        assert not self.t.is_alive()


@pytest.fixture(scope="module")
def gw(lab):
    lab.load("qks")
    make_namespace(lab, NS)
    return KubeGateway(lab.kubeconfig)


def retried(fn, timeout=60):
    """A write just after the API server came back (its controllers and caches may still be
    warming up): retry transient refusals until ``timeout``."""
    from brickadmin.cluster.base import ClusterError, Conflict

    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except Conflict:
            return None  # created by an earlier attempt
        except ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def gpu_node(lab):
    return next(
        n["metadata"]["name"]
        for n in lab.admin.list_nodes()
        if any(k.startswith("nvidia.com/") for k in (n.get("status") or {}).get("allocatable") or {})
    )


# --- the lab's control plane -------------------------------------------------------


def _labmod():
    import lab as labmod  # lab/lab.py (tests/lab/conftest.py puts lab/ on sys.path)

    return labmod


def stop_apiserver():
    labmod = _labmod()
    labmod.stop("kube-apiserver")


def start_apiserver():
    labmod = _labmod()
    token = labmod.ADMIN_TOKEN_FILE.read_text().strip()
    name, argv, ready, timeout = next(c for c in labmod.components(labmod.bin_dir(), token) if c[0] == "kube-apiserver")
    labmod.start(name, argv)
    labmod.wait_for(name, ready, timeout, name)


def etcd(path: str, body: dict) -> dict:
    url = f"http://127.0.0.1:{_labmod().PORTS['etcd']}{path}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def compact_etcd() -> int:
    rev = int(etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
    return rev


# --- the tests ---------------------------------------------------------------------------


def test_a_burst_of_changes_ends_equal_to_a_fresh_list(lab, gw):
    node = gpu_node(lab)
    with Running(gw, timeout_seconds=10) as r:  # short streams: they rotate during the test
        before = len(r.calls)
        for i in range(30):
            make_pod(lab, NS, f"burst-{i}", None, gpu={"nvidia.com/gpu": "1"}, wait_running=False)
        make_pod(lab, NS, "cpu-only", None, wait_running=False)
        lab.admin.label_node(node, {"brick.test/watch": "1"})
        for i in range(0, 30, 3):
            lab.admin.delete("v1", "Pod", f"burst-{i}", NS)
        wait_until(lambda: equal_to_fresh(r.w, gw), 60, "the watcher equal to a fresh list")
        snap = r.calls[-1] if r.calls else None
        time.sleep(12)  # past a stream rotation
        assert equal_to_fresh(r.w, gw)
        st = r.w.status()
    assert st["watches"] > len(r.w._streams)  # rotated (timeoutSeconds) and reconnected
    assert st["events"] >= 30 and st["relists"] == 0
    assert snap is not None and "cpu-only" not in {p["metadata"]["name"] for p in snap.gpu_pods}
    assert len(r.calls) - before < 30  # debounced: far fewer publications than events
    lab.admin.label_node(node, {"brick.test/watch": None})


def plain_pod(lab, name):  # no nvidia.com toleration either: nothing in it names a GPU
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
        },
    }
    return lab.admin._request("POST", f"/api/v1/namespaces/{NS}/pods", body=body)


def test_the_watcher_streams_its_lists_and_they_equal_pages(lab, gw):
    """v1.34 streams a list (``sendInitialEvents``): one request per kind, whose pods that
    request no GPU are skipped undecoded. Each watched kind's streamed list keeps exactly
    what a paged list keeps, and reflects a version at least as new as the last write."""
    make_pod(lab, NS, "list-gpu", None, gpu={"nvidia.com/gpu": "1"}, wait_running=False)
    last = None
    for i in range(5):
        last = plain_pod(lab, f"list-cpu-{i}")
    last_rv = int(last["metadata"]["resourceVersion"])
    streamed = copy.copy(gw)
    streamed._list_versioned = lambda *a, **kw: pytest.fail("the lab's API server should stream the list")

    def lists(g, kind, ns):
        items, rv = g.list_with_version(kind, ns, keep=projection.keeper(kind), worth=projection.worth_decoding(kind))
        return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): strip(o) for o in items}, int(rv)

    for kind, ns in WATCHES:

        def same(kind=kind, ns=ns):
            (s_items, s_rv), (p_items, _) = lists(streamed, kind, ns), lists(paged(gw), kind, ns)
            assert s_rv >= last_rv
            return s_items == p_items

        wait_until(same, 30, f"the streamed {kind} list equal to the paged one")
    pods, _ = lists(streamed, "Pod", None)
    assert (NS, "list-gpu") in pods and not any(name.startswith("list-cpu") for _, name in pods)
    assert streamed.stream_lists
    for i in range(5):
        lab.admin.delete("v1", "Pod", f"list-cpu-{i}", NS)
    lab.admin.delete("v1", "Pod", "list-gpu", NS)


def test_events_of_pods_without_gpus_are_not_decoded_yet_move_the_watch_on(lab, gw):
    """On a real API server the watcher reads each pod event's bytes first: a pod that
    requests no GPU (most pods of a large cluster) is never decoded, but its version still
    moves the stream on (so a reconnect does not replay it), and the view still equals a
    fresh list."""
    with Running(gw) as r:
        make_pod(lab, NS, "skip-gpu", None, gpu={"nvidia.com/gpu": "1"}, wait_running=False)
        last = None
        for i in range(20):
            last = plain_pod(lab, f"skip-cpu-{i}")
        last_rv = int(last["metadata"]["resourceVersion"])
        pods = r.w._streams[("Pod", None)]
        wait_until(lambda: int(pods.rv or 0) >= last_rv, 30, "the pod stream past the last plain pod's version")
        wait_until(lambda: equal_to_fresh(r.w, gw), 60, "the watcher equal to a fresh list")
        st = r.w.status()
        assert st["skipped"] >= 20
        assert (NS, "skip-gpu") in pods.items
        assert not any(name.startswith("skip-cpu") for _, name in pods.items)
    for i in range(20):
        lab.admin.delete("v1", "Pod", f"skip-cpu-{i}", NS)
    lab.admin.delete("v1", "Pod", "skip-gpu", NS)


def test_the_watcher_survives_an_api_server_restart(lab, gw):
    node = gpu_node(lab)
    with Running(gw, backoff_base=0.2, backoff_cap=2) as r:
        stop_apiserver()
        try:
            wait_until(lambda: r.w.status()["behind"], 30, "the watcher to notice")
            time.sleep(3)  # it keeps retrying, with backoff
        finally:
            start_apiserver()
        retried(lambda: lab.admin.label_node(node, {"brick.test/restart": "1"}))
        retried(lambda: make_pod(lab, NS, "after-restart", None, gpu={"nvidia.com/gpu": "1"}, wait_running=False))
        wait_until(lambda: equal_to_fresh(r.w, gw), 120, "the watcher equal to a fresh list after the restart")
        # A kind that did not change may still be between two reconnection attempts (its
        # backoff) when the others already agree: every stream is current again soon after.
        wait_until(lambda: not behind_streams(r.w), 30, "every stream current again")
        assert r.w.status()["errors"] >= 1
        assert equal_to_fresh(r.w, gw)
        assert r.w._streams[("Node", None)].items[("", node)]["metadata"]["labels"]["brick.test/restart"] == "1"
    lab.admin.label_node(node, {"brick.test/restart": None})


def test_an_etcd_compaction_gives_410_and_the_watcher_lists_again(lab, gw):
    """The watcher is cut off (its streams closed, reconnection held), the cluster changes,
    etcd is compacted past the watcher's version, and the API server restarts so its watch
    cache (which would otherwise still serve the old version from memory) starts from the
    compacted store: the watch from the old version gets 410 Gone, the watcher lists again
    and ends equal to a fresh list."""
    node = gpu_node(lab)
    gate = threading.Event()
    gate.set()

    class Gated(KubeGateway):
        def watch(self, *a, **kw):
            gate.wait()
            return super().watch(*a, **kw)

    gated = Gated(lab.kubeconfig)
    with Running(gated, backoff_base=0.2, backoff_cap=2) as r:
        gate.clear()
        for s in list(r.w._streams.values()):
            if s.stream is not None:
                s.stream.close()
        old = r.w._streams[("Pod", None)].rv
        lab.admin.label_node(node, {"brick.test/compact": "1"})
        for i in range(5):
            make_pod(lab, NS, f"compact-{i}", None, gpu={"nvidia.com/gpu": "1"}, wait_running=False)
        rev = compact_etcd()
        assert rev > int(old)
        stop_apiserver()
        start_apiserver()
        gate.set()
        wait_until(lambda: r.w.status()["relists"] >= 1, 120, "a 410 and a relist")
        wait_until(lambda: equal_to_fresh(r.w, gw), 120, "the watcher equal to a fresh list after compaction")
        names = {k[1] for k in r.w._streams[("Pod", None)].items}
        assert {f"compact-{i}" for i in range(5)} <= names
    lab.admin.label_node(node, {"brick.test/compact": None})


def test_lease_election_on_the_real_api_server(lab, gw):
    ns = NS
    a = LeaderElector(gw, ns, "watch-test", "a", lease_duration=3, renew_deadline=2, retry_period=0.5)
    b = LeaderElector(gw, ns, "watch-test", "b", lease_duration=3, renew_deadline=2, retry_period=0.5)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    time.sleep(3.5)  # a stops renewing
    assert b.try_acquire_or_renew() is True
    assert a.try_acquire_or_renew() is False
    assert b.release() is True
    assert a.try_acquire_or_renew() is True
    assert gw.get_lease(ns, "watch-test")["spec"]["holderIdentity"] == "a"


def test_the_service_account_may_watch_and_hold_its_lease_but_only_in_its_namespace(lab, rbac):
    from brickadmin.cluster.base import Forbidden
    from brickadmin.cluster.watch import WATCHES

    sa = KubeGateway(lab.kubeconfig, token=rbac["token"])
    for kind, ns in WATCHES:
        _, rv = sa.list_with_version(kind, ns)
        list(sa.watch(kind, ns, resource_version=rv, timeout_seconds=1))
    e = LeaderElector(sa, rbac["namespace"], "watch-rbac-test", "sa", lease_duration=3, renew_deadline=2)
    assert e.try_acquire_or_renew() is True
    assert e.try_acquire_or_renew() is True  # update
    assert e.release() is True
    with pytest.raises(Forbidden):
        sa.create_lease(NS, {"metadata": {"name": "elsewhere"}, "spec": {"holderIdentity": "sa"}})
