"""Two `manage.py watch_cluster` replicas against the lab's real API server, coordinating
through a real Lease, publishing into the test database. The leader's way to the API
server goes through a TCP forwarder of this test's own: closing it cuts the leader off
from the API server while it still reaches the database. The leader stops writing before
its Lease runs out, the standby takes over and publishes what changed meanwhile; then the
new leader is killed (SIGKILL) and the first, its way back, takes over again. Each time the
view ends equal to a fresh list of the cluster."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from brickadmin.cluster.kube import KubeGateway
from brickadmin.cluster.watch import ClusterWatcher

from .conftest import REPO, make_node, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

LEASE_NS = "brick-failover-test"
NODE = "brick-failover-node"
SERVER_RE = re.compile(r"server: https://([0-9.]+):(\d+)")
LEASE = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")


class Forwarder:
    """A TCP forwarder to the API server (TLS passes through untouched); close() shuts its
    port and every connection through it, as a network partition would."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            self.conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket):
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while not self.closed.is_set():
                for key, _ in sel.select(timeout=0.5):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            a.close()
            b.close()

    def close(self):
        self.closed.set()
        self.listener.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


def kubeconfig_via(lab_kubeconfig: str, port: int, tmp_path: Path) -> str:
    text = SERVER_RE.sub(lambda m: f"server: https://{m.group(1)}:{port}", Path(lab_kubeconfig).read_text())
    path = tmp_path / f"kubeconfig-{port}"
    path.write_text(text)
    return str(path)


class Replica:
    def __init__(self, identity: str, kubeconfig: str, tmp_path: Path):
        from tests.gpus.conftest import database_url

        self.identity = identity
        self.log = tmp_path / f"{identity}.log"
        env = {
            **os.environ,
            "BRICK_CLUSTER": "kube",
            "BRICK_KUBECONFIG": kubeconfig,
            "BRICK_LEASE_NAMESPACE": LEASE_NS,
            "DATABASE_URL": database_url(),
            "BRICK_VAR_DIR": str(tmp_path / identity),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env.pop("PROMETHEUS_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster", "--identity", identity, "--debounce", "0.2", *LEASE],
            cwd=REPO,
            env=env,
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)


def view():
    from gpus.models import ViewNode, ViewState

    state = ViewState.objects.filter(pk=1).first()
    labels = ViewNode.objects.filter(name=NODE).values_list("raw", flat=True).first() or {}
    return (state.holder if state else ""), (labels.get("metadata", {}).get("labels") or {})


def equals_fresh_list(gw: KubeGateway) -> bool:
    """The stored view's totals and node lines against a fresh list of the cluster."""
    from gpus.numbers import ledger
    from gpus.view import stored as clusterview

    w = ClusterWatcher(gw)
    w.prime()
    snap = w.snapshot()
    led = ledger.compute(snap)
    stored = clusterview.stored_view()
    return (
        stored.ledger.logical,
        stored.ledger.requested,
        stored.ledger.physical,
        sorted(n["metadata"]["name"] for n in stored.snapshot.nodes),
        sorted((ledger.node_to_dict(n) for n in stored.ledger.nodes), key=lambda d: d["name"]),
    ) == (
        led.logical,
        led.requested,
        led.physical,
        sorted(n["metadata"]["name"] for n in snap.nodes),
        sorted((ledger.node_to_dict(n) for n in led.nodes), key=lambda d: d["name"]),
    )


def test_a_leader_cut_off_or_killed_hands_the_view_to_the_standby(lab, tmp_path):
    from gpus.models import ViewState

    if not _has_ns(lab):
        lab.admin._request("POST", "/api/v1/namespaces", body={"metadata": {"name": LEASE_NS}})
    make_node(lab, NODE, labels={"brick.test/round": "0"})
    host, port = SERVER_RE.search(Path(lab.kubeconfig).read_text()).groups()
    forwarder = Forwarder(host, int(port))
    a = Replica("failover-a", kubeconfig_via(lab.kubeconfig, forwarder.port, tmp_path), tmp_path)
    replicas = [a]
    try:
        wait_until(lambda: view() == ("failover-a", {**view()[1], "brick.test/round": "0"}), 90, "a leading")
        b = Replica("failover-b", lab.kubeconfig, tmp_path)
        replicas.append(b)
        wait_until(lambda: "waiting for the lease" in b.output(), 60, "b standing by")
        time.sleep(2)  # b has read the Lease once (a retry period)

        # a is cut off from the API server (its port closed) but still reaches the database
        forwarder.close()
        cut = ViewState.objects.get(pk=1)
        lab.admin.label_node(NODE, {"brick.test/round": "1"})
        wait_until(lambda: view() == ("failover-b", {**view()[1], "brick.test/round": "1"}), 90, "b taking over")
        wait_until(lambda: "lost the lease" in a.output(), 30, "a standing by")
        state = ViewState.objects.get(pk=1)
        assert state.fencing_token > cut.fencing_token and state.holder == "failover-b"
        assert a.proc.poll() is None, "the cut-off leader stands by, it does not exit"
        assert equals_fresh_list(lab.admin)

        # b is killed; a, its way to the API server back, takes over
        forwarder2 = Forwarder(host, int(port))
        a.stop()
        a2 = Replica("failover-a2", kubeconfig_via(lab.kubeconfig, forwarder2.port, tmp_path), tmp_path)
        replicas.append(a2)
        wait_until(lambda: "waiting for the lease" in a2.output(), 60, "a2 standing by")
        time.sleep(2)
        b.stop(signal.SIGKILL)
        lab.admin.label_node(NODE, {"brick.test/round": "2"})
        wait_until(lambda: view() == ("failover-a2", {**view()[1], "brick.test/round": "2"}), 90, "a2 taking over")
        assert equals_fresh_list(lab.admin)
        forwarder2.close()
    finally:
        for r in replicas:
            r.stop()
        forwarder.close()
        lab.admin.delete("v1", "Node", NODE)


def _has_ns(lab) -> bool:
    from brickadmin.cluster.base import NotFound

    try:
        lab.admin._request("GET", f"/api/v1/namespaces/{LEASE_NS}")
        return True
    except NotFound:
        return False
