"""Pictures benchmark (not a test): what drawing costs, and what the utilisation charts
cost Prometheus.

1. The GPU map of a big node (8 GPUs at time-slicing replicas 16: 128 slots, 128 pods):
   placing the pods and drawing the tiles, median of 200.
2. Utilisation range queries against a real Prometheus (Debian's) holding a day of the lab's
   simulated DCGM series (lab/gpusim.py) for --gpus GPUs on --gpus/4 nodes, half of them
   busy (backfilled with promtool, as if scraped every 30 s): for each scope and range,
   the points returned, the samples Prometheus read and the server time (median of 5,
   cache bypassed), computed from the DCGM series (without the recording rules of
   deploy/chart/files/brickadmin-rules.yaml; with them, the cluster and type charts read one
   recorded series). One range query per chart, whatever the cluster's size.
3. SQL queries and server time of the pages that show pictures (Dashboard, Availability,
   Node detail) and of the chart fragments, on the seed example (2 nodes) and the demo
   (17 nodes): the same count for both (pages read the materialised view).

Run: .venv/bin/python bench/pictures.py [--gpus 400]
"""

import argparse
import importlib.util
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from brickadmin import metrics  # noqa: E402
from gpus.numbers import gpumap, pictures  # noqa: E402
from gpus.numbers.ledger import node_from_dict  # noqa: E402


def big_node():
    pods = [
        {
            "metadata": {
                "name": f"nb-{i:03d}",
                "namespace": f"ws-{i % 40:02d}",
                "creationTimestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
            },
            "spec": {
                "nodeName": "big",
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}],
            },
            "status": {"phase": "Running" if i % 7 else "Pending"},
        }
        for i in range(128)
    ]
    return node_from_dict(
        {
            "name": "big",
            "model": "NVIDIA H100",
            "convention": "brick",
            "mode": "timeslicing",
            "sharing_label": "timeslicing",
            "replicas": 16,
            "configured_replicas": 16,
            "ready": True,
            "cordoned": False,
            "tainted": False,
            "plugin_state": "running",
            "resources": [["nvidia.com/gpu.shared", "shared", 128, 128, 128, False]],
            "raw_devices": [{"uuid": f"GPU-{i}", "model": "NVIDIA H100"} for i in range(8)],
            "in_use": [],
            "physical": 8,
            "physical_used": 8,
            "physical_source": "twin",
            "labels": {},
            "raw_taints": [],
            "raw_pods": pods,
            "raw_plugin_pods": [],
        }
    )


def bench_map():
    node = big_node()
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        m = gpumap.node_map(node)
        svg = "".join(pictures.gpu_tile(t.title, [s.as_dict() for s in t.slots]) for t in m.tiles)
        times.append(time.perf_counter() - t0)
    print(
        f"GPU map, 8 GPUs x 16 slots, 128 pods: {statistics.median(times) * 1000:.2f} ms "
        f"(median of 200), {len(svg) / 1024:.0f} KiB of SVG"
    )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backfill(tmp: Path, gpus: int, now: float) -> None:
    spec = importlib.util.spec_from_file_location("lab_gpusim", REPO / "lab" / "gpusim.py")
    gpusim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpusim)
    sim = gpusim.Simulator(api=None, hardware_path=Path("/nonexistent"), state_path=None, interval=1)
    nodes = max(1, gpus // 4)
    sim.hardware = {
        f"node-{n:04d}": [{"uuid": f"GPU-{n}-{i}", "model": "NVIDIA A100", "memoryMiB": 40960} for i in range(4)]
        for n in range(nodes)
    }
    sim.advertised = {name: {"nvidia.com/gpu": 4} for name in sim.hardware}
    sim.pods = [
        {
            "metadata": {
                "name": f"p-{n}-{i}",
                "namespace": f"ws-{n % 50:02d}",
                "uid": f"{n}-{i}",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "nodeName": f"node-{n:04d}",
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        }
        for n in range(nodes)
        for i in range(2)
    ]
    series: dict[str, list[str]] = {}
    labels: dict[str, list[str]] = {}
    for t in range(int(now - 86400), int(now), 30):
        for line in sim.metrics(now=t).splitlines():
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
                key, value = line.rsplit(" ", 1)
                series.setdefault(key, []).append(f"{key} {value} {t}")
        for n, name in enumerate(sim.hardware):  # kube-state-metrics: a quarter of the nodes time-slicing
            sharing = "timeslicing" if n % 4 == 0 else "none"
            key = f'kube_node_labels{{node="{name}",label_brick_cloud_gpu_sharing="{sharing}"}}'
            labels.setdefault(key, []).append(f"{key} 1 {t}")
    with open(tmp / "data.om", "w") as f:
        for family, rows in (("DCGM_FI_DEV_GPU_UTIL", series), ("kube_node_labels", labels)):
            f.write(f"# TYPE {family} gauge\n")
            for lines in rows.values():
                f.write("\n".join(lines) + "\n")
        f.write("# EOF\n")
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(tmp / "data.om"), str(tmp / "data")],
        check=True,
        capture_output=True,
    )
    print(f"backfilled {len(series)} DCGM series (4 GPUs per node, 2 of them busy), a day at 30 s")


def bench_queries(gpus: int):
    if not shutil.which("prometheus") or not shutil.which("promtool"):
        print("Prometheus is not installed: no range-query figures")
        return
    tmp = Path(tempfile.mkdtemp(prefix="brick-bench-prom-"))
    now = time.time()
    t0 = time.perf_counter()
    backfill(tmp, gpus, now)
    print(f"  (backfill took {time.perf_counter() - t0:.1f} s)")
    port = free_port()
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    settings.PROMETHEUS_URL = url
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if metrics.query(f"count(DCGM_FI_DEV_GPU_UTIL @ {int(now) - 60})"):
                    break
            except Exception:
                pass
            time.sleep(0.5)
        print(f"{'scope':<10} {'range':<6} {'points':>6} {'samples read':>13} {'server ms':>10}")
        for scope, subject in (
            ("cluster", ""),
            ("node", "node-0001"),
            ("workspace", "ws-07"),
            ("type", "nvidia.com/gpu"),
        ):
            for range_key in ("hour", "day", "week"):
                start, end, step = metrics.window(range_key, now)
                q = urllib.parse.urlencode(
                    {
                        "query": metrics.utilisation_query(scope, subject),
                        "start": start,
                        "end": end,
                        "step": step,
                        "stats": "all",
                    }
                )
                times, samples, points = [], 0, 0
                for _ in range(5):
                    t0 = time.perf_counter()
                    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
                        body = json.load(r)
                    times.append(time.perf_counter() - t0)
                    samples = body["data"].get("stats", {}).get("samples", {}).get("totalQueryableSamples", 0)
                    points = sum(len(s["values"]) for s in body["data"]["result"])
                print(f"{scope:<10} {range_key:<6} {points:>6} {samples:>13} {statistics.median(times) * 1000:>10.1f}")
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def bench_pages():
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from brickadmin.cluster import scenarios
    from brickadmin.cluster.twin import TwinGateway
    from workspaces.models import WorkspaceRequest

    settings.PROMETHEUS_URL = ""  # the fragments then say "not measured": no Prometheus in the count
    call_command("migrate", verbosity=0)
    User = get_user_model()
    User.objects.filter(username__startswith="bench-").delete()
    admin = User.objects.create_user("bench-admin", is_staff=True)
    user = User.objects.create_user("bench-user")
    WorkspaceRequest.objects.filter(name="bench-ws").delete()
    WorkspaceRequest.objects.create(
        name="bench-ws",
        requester=user,
        requester_name="bench-user",
        gpu=1,
        cpu=1,
        memory_gib=1,
        storage_gib=1,
        status=WorkspaceRequest.Status.APPROVED,
    )
    client = Client(HTTP_HOST="localhost")
    print(f"{'scenario':<13} {'page':<28} {'SQL':>4} {'server ms':>10}")
    for scenario, node in (("seed-example", "dev-a1-ws02"), ("demo", "gpu-a100-04")):
        objects, hardware, plugin_configs = scenarios.read(scenario)
        TwinGateway().load(objects, hardware, plugin_configs)
        for who, url in (
            ("admin", "/"),
            ("admin", "/availability/"),
            ("admin", f"/nodes/{node}/"),
            ("admin", "/charts/utilisation/cluster/?range=day"),
            ("user", "/charts/utilisation/workspace/?of=bench-ws&range=day"),
        ):
            client.force_login(admin if who == "admin" else user)
            client.get(url)  # warm: the view brought up to date, templates
            times = []
            for _ in range(5):
                with CaptureQueriesContext(connection) as ctx:
                    t0 = time.perf_counter()
                    r = client.get(url)
                    times.append(time.perf_counter() - t0)
                assert r.status_code == 200, (url, r.status_code)
            print(
                f"{scenario:<13} {url[:28]:<28} {len(ctx.captured_queries):>4} {statistics.median(times) * 1000:>10.1f}"
            )
    User.objects.filter(username__startswith="bench-").delete()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=400)
    args = ap.parse_args()
    bench_map()
    bench_pages()
    bench_queries(args.gpus)
