"""Dashboard scale benchmark: a generated twin of 5,000 GPU nodes and 150,000 pods
(Kubernetes' published limits; one pod in ten holds GPUs; `--nodes N` for another size).

Prints snapshot and ledger time, the time to publish the materialised view (first, and
again unchanged, and after one node's label changed), the server time of the Dashboard,
Nodes, Availability and Health pages reading the view (median of 20), the Dashboard after a twin change, SQL queries per
Dashboard request at 50 and 5,000 nodes, peak memory, and the watcher's
(`manage.py watch_cluster --once` over the twin) time and peak memory. Run: .venv/bin/python bench/dashboard.py
(uses its own SQLite file under /tmp unless DATABASE_URL is set).
"""

import argparse
import dataclasses
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from brickadmin.cluster import scenarios as s  # noqa: E402
from brickadmin.cluster import snapshot as snapshot_mod  # noqa: E402
from brickadmin.cluster import vocabulary as vocab  # noqa: E402
from brickadmin.cluster.models import TwinHardware, TwinObject, TwinState  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus.numbers import ledger  # noqa: E402

_args = argparse.ArgumentParser(description="Dashboard scale benchmark on a generated twin")
_args.add_argument("--nodes", type=int, default=5000, help="GPU nodes (30 pods each; default 5,000)")
N_NODES = _args.parse_args().nodes
MODELS = [("NVIDIA A30", 24576), ("NVIDIA A100 80GB PCIe", 81920), ("NVIDIA H100 80GB HBM3", 81559)]


def generate(n_nodes: int, n_pods: int):
    """Bulk-write the twin as it looks after its controllers ran (plugin pods placed,
    node status set), so the benchmark measures reading, not loading."""
    TwinObject.objects.all().delete()
    TwinHardware.objects.all().delete()
    objs, hw = [], []
    manifest = s.device_plugin_manifest(replicas=4)
    for doc in manifest:
        objs.append(
            TwinObject(
                kind=doc["kind"], namespace=doc["metadata"].get("namespace", ""), name=doc["metadata"]["name"], body=doc
            )
        )
    nodes = []
    for i in range(n_nodes):
        model, mem = MODELS[i % 3]
        sharing = "timeslicing" if i % 4 == 0 else "none"
        res = vocab.GPU_SHARED if sharing == "timeslicing" else vocab.GPU
        count = 8 * (4 if sharing == "timeslicing" else 1)
        extra = {"capacity": {res: str(count)}, "allocatable": {res: str(count)}}
        if i % 97 == 0:
            extra["capacity"][vocab.GPU] = "8"
            extra["allocatable"][vocab.GPU] = "0"
        name = f"gpu-{i:05d}"
        node = s.node(name, model=model, sharing=sharing, gpu_count=8, extra_status=extra, unschedulable=(i % 50 == 0))
        nodes.append((name, sharing, res))
        objs.append(TwinObject(kind="Node", name=name, body=node))
        hw.append(TwinHardware(node=name, gpus=s.gpus(name, model, 8, mem)))
        comp = "timeslicing" if sharing == "timeslicing" else "default"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"nvidia-device-plugin-{comp}-{i:05d}",
                "namespace": vocab.PLUGIN_NAMESPACE,
                "uid": str(uuid.uuid4()),
                "labels": {vocab.COMPONENT_LABEL: comp},
                "ownerReferences": [{"kind": "DaemonSet", "name": f"nvidia-device-plugin-{comp}"}],
            },
            "spec": {"nodeName": name, "containers": [{"name": "p", "image": "plugin"}]},
            "status": {"phase": "Running"},
        }
        objs.append(
            TwinObject(
                kind="Pod", namespace=vocab.PLUGIN_NAMESPACE, name=pod["metadata"]["name"], body=pod, node_name=name
            )
        )
    n_ws = max(1, n_nodes // 10)
    for w in range(n_ws):
        ns = f"ws-{w:04d}"
        objs.append(TwinObject(kind="Namespace", name=ns, body=s.namespace(ns, owner=f"user{w}")))
        q = s.quota(ns, {vocab.quota_key(vocab.GPU): 4, vocab.quota_key(vocab.GPU_SHARED): 4})
        objs.append(TwinObject(kind="ResourceQuota", namespace=ns, name="workspace-quota", body=q))
    for p in range(n_pods - n_nodes):
        name, sharing, res = nodes[p % n_nodes]
        ns = f"ws-{p % n_ws:04d}"
        if p % 10 == 0:
            pod = s.gpu_pod(ns, f"gpu-pod-{p}", name, res, 1)
        else:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"cpu-pod-{p}", "namespace": ns},
                "spec": {
                    "nodeName": name,
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
                },
                "status": {"phase": "Running"},
            }
        objs.append(
            TwinObject(
                kind="Pod", namespace=ns, name=pod["metadata"]["name"], body=pod, node_name=name, holds_gpu=p % 10 == 0
            )
        )
    TwinObject.objects.bulk_create(objs, batch_size=2000)
    TwinHardware.objects.bulk_create(hw, batch_size=2000)
    TwinState.objects.update_or_create(pk=1, defaults={"version": uuid.uuid4().hex})


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def dashboard_queries(client):
    snapshot_mod._cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    return len(ctx.captured_queries)


def main():
    call_command("migrate", verbosity=0)
    admin, _ = get_user_model().objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    print(f"database: {connection.vendor}")

    generate(50, 1500)
    q50 = dashboard_queries(client)

    t = time.perf_counter()
    generate(N_NODES, N_NODES * 30)
    print(f"generated {N_NODES:,} nodes / {N_NODES * 30:,} pods in {time.perf_counter() - t:.1f} s")
    # The watcher's own process over this twin (the same list-then-project code as on a real
    # cluster, which the lab cannot hold at this size here): list, project, publish once.
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "watch_cluster", "--once"],
        cwd=str(REPO),
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "BRICK_CLUSTER": "twin"},
    )
    print(
        f"manage.py watch_cluster --once on the twin: {time.perf_counter() - t:.1f} s (process start, list, "
        f"publish), peak memory (max RSS) {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB"
    )
    gw = TwinGateway()
    snapshot_mod._cache.clear()
    snap_ms = timed(lambda: (snapshot_mod._cache.clear(), snapshot_mod.take_snapshot(gw)), 3)
    snap = snapshot_mod.take_snapshot(gw)
    print(
        f"snapshot read (cold, median of 3): {snap_ms:.0f} ms  "
        f"[{len(snap.nodes)} nodes, {len(snap.gpu_pods)} GPU pods, {len(snap.plugin_pods)} plugin pods]"
    )
    ledger_ms = timed(lambda: ledger.compute(snap), 5)
    print(f"ledger compute (median of 5): {ledger_ms:.0f} ms")

    from gpus.view import publish as view_publish

    t = time.perf_counter()
    view_publish.publish(snap)
    first_publish = (time.perf_counter() - t) * 1000
    unchanged_publish = timed(lambda: view_publish.publish(snap), 3)
    print(
        f"publish to the materialised view: {first_publish:.0f} ms first (every row written), "
        f"{unchanged_publish:.0f} ms again with nothing changed (median of 3)"
    )
    changes = iter(range(10**6))

    def one_node_changed():  # as the watcher hands it over after one node's label changed
        i = next(changes)
        nodes = list(snap.nodes)
        k = (i * 37) % len(nodes)
        nodes[k] = {
            **nodes[k],
            "metadata": {
                **nodes[k]["metadata"],
                "labels": {**nodes[k]["metadata"]["labels"], vocab.GPU_PRODUCT_LABEL: f"Bench-{i}"},
            },
        }
        view_publish.publish(dataclasses.replace(snap, nodes=nodes))

    print(f"publish after one node's label changed (median of 5): {timed(one_node_changed, 5):.0f} ms")

    q5000 = dashboard_queries(client)
    client.get("/")  # the view is up to date with the twin from here on
    pages = {}
    for url in ("/", "/nodes/", "/availability/", "/health/"):
        client.get(url)
        pages[url] = timed(lambda url=url: client.get(url), 20)
    print("server time reading the view, median of 20: " + ", ".join(f"{u} {ms:.0f} ms" for u, ms in pages.items()))
    changed = timed(
        lambda: (TwinState.objects.update(version=uuid.uuid4().hex), snapshot_mod._cache.clear(), client.get("/")), 5
    )
    print(f"Dashboard after a twin change (re-read, publish, read), median of 5: {changed:.0f} ms")
    print(f"SQL queries per Dashboard request: {q50} at 50 nodes, {q5000} at {N_NODES:,} nodes")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS of this process): {peak:.0f} MiB")
    print(f"target Dashboard < 50 ms median: {'met' if pages['/'] < 50 else 'NOT met'} ({pages['/']:.0f} ms)")


if __name__ == "__main__":
    main()
