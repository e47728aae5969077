"""Prometheus at 5,000 nodes × 8 GPUs (40,000 GPUs): what brickadmin's queries cost it.

A real Prometheus (the installed `prometheus` binary) scrapes, every --scrape seconds, a
simulated dcgm-exporter page for --nodes nodes × --gpus-per-node GPUs
(brickadmin/cluster/dcgm_exporter.py, the lab's GPU simulator's page: six DCGM_FI_DEV_*
families, one series per GPU, repeated per pod holding it with the pod's labels) and
kube-state-metrics' kube_node_labels for those nodes, with brickadmin's recording rules
(deploy/chart/files/brickadmin-rules.yaml) loaded. What is simulated: the exporter (one
HTTP page for the whole cluster instead of one per node: the same series) and the pods
(--busy of the exclusive nodes' GPUs held by one pod each; --shared of the nodes
time-sliced at 4 replicas with 4 pods on each of half their GPUs). Prints:

* series: Prometheus' head series and the DCGM_FI_DEV_GPU_UTIL series;
* the watcher's DCGM fetch per interval (metrics.DeviceFeed.fetch: its 2 instant queries,
  decoded, of the recorded series when the rules have been evaluated): median of --repeat,
  taken apart (Prometheus' answers, JSON decoding, rows made into devices and pod usage),
  twice: while Prometheus scrapes, and (--idle, the default) after scraping has stopped (the
  job removed and the config reloaded; the queries asked about the last moment the series
  were fresh, with Prometheus' ``time`` parameter), which separates the queries' own cost
  from the scrape's CPU on the same cores; then each query's time and rows, recorded and
  computed;
* each utilisation chart's range query (cluster, a GPU type, a node, a Workspace) over the
  last hour, 120 points, cache bypassed: median of --repeat (only the minutes this run
  scraped hold data: a day's range evaluates as many steps, over emptier windows);
* Prometheus query requests per page view (its own prometheus_http_requests_total, before
  and after --views views of each page, divided), the pages read on the demo's simulated
  cluster with PROMETHEUS_URL set, the watcher's DCGM fetch done before (as the watcher
  does on its interval, not per page): target 0 outside the chart endpoints, at most one
  per chart;
* Prometheus' RSS (VmRSS) after the run.

    .venv/bin/python bench/prometheus_scale.py [--nodes 5000] [--gpus-per-node 8] [--minutes 4]

Bounded: it scrapes for --minutes, then measures, then stops Prometheus and its exporter and
removes their data (a temporary directory).
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TMP = Path(tempfile.mkdtemp(prefix="brick-prom-scale-"))
os.environ["BRICK_VAR_DIR"] = str(TMP)
os.environ["DATABASE_URL"] = f"sqlite:///{TMP / 'bench.sqlite3'}"
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ.pop("REDIS_URL", None)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from brickadmin import metrics  # noqa: E402
from brickadmin.cluster import dcgm_exporter  # noqa: E402
from brickadmin.cluster import deviceplugin as dp  # noqa: E402
from brickadmin.cluster.vocabulary import GPU_TYPE_LABEL, SHARING_LABEL, ksm_label  # noqa: E402

MODEL, MEMORY = "NVIDIA A100-SXM4-80GB", 81920


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster(n_nodes: int, per_node: int, busy: float, shared: float):
    """(hardware, pods, advertised, node labels) of the simulated cluster."""
    hardware, pods, advertised, labels = {}, [], {}, {}
    n_shared = int(n_nodes * shared)
    k = 0
    for i in range(n_nodes):
        node = f"gpu-{i:05d}"
        is_shared = i < n_shared
        hardware[node] = [{"uuid": f"GPU-{i:05d}-{g}", "model": MODEL, "memoryMiB": MEMORY} for g in range(per_node)]
        advertised[node] = {dp.GPU_SHARED: per_node * 4} if is_shared else {dp.GPU: per_node}
        labels[node] = {GPU_TYPE_LABEL: "nvidia", SHARING_LABEL: "timeslicing" if is_shared else "none"}
        holders = per_node * 2 if is_shared else int(per_node * busy)  # shared: 4 pods on each of half the GPUs
        resource = dp.GPU_SHARED if is_shared else dp.GPU
        for j in range(holders):
            k += 1
            pods.append(
                {
                    "metadata": {
                        "name": f"train-{k:06d}",
                        "namespace": f"ws-{k % 10000:05d}",
                        "creationTimestamp": f"2026-12-01T00:00:{j:02d}Z",
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "main", "resources": {"limits": {resource: "1"}}}],
                    },
                    "status": {"phase": "Running"},
                }
            )
    return hardware, pods, advertised, labels


def ksm_page(labels: dict[str, dict[str, str]]) -> str:
    out = ["# HELP kube_node_labels Kubernetes labels converted to Prometheus labels.", "# TYPE kube_node_labels gauge"]
    for node, lab in labels.items():
        extra = ",".join(f'{ksm_label(k)}="{v}"' for k, v in sorted(lab.items()))
        out.append(f'kube_node_labels{{node="{node}",{extra}}} 1')
    return "\n".join(out) + "\n"


class Exporter:
    """The page, made again every --regenerate seconds (the figures move per minute), served as is."""

    def __init__(self, hardware, held, ksm: str, regenerate: float):
        self.hardware, self.held, self.ksm, self.regenerate = hardware, held, ksm, regenerate
        self.body = b""
        self.made_s = 0.0
        self.stop = threading.Event()
        self.make()
        threading.Thread(target=self.loop, daemon=True).start()
        me = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = me.body
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def make(self):
        t0 = time.perf_counter()
        self.body = (dcgm_exporter.page(self.hardware, self.held, time.time()) + self.ksm).encode()
        self.made_s = time.perf_counter() - t0

    def loop(self):
        while not self.stop.wait(self.regenerate):
            self.make()


def write_config(port_target: int | None, scrape: float) -> None:
    """Prometheus' config: the rules, and the exporter's scrape (none when ``port_target`` is None)."""
    (TMP / "prometheus.yml").write_text(
        f"global: {{scrape_interval: {scrape:g}s, scrape_timeout: {min(scrape - 1, 10):g}s, "
        f"evaluation_interval: {scrape:g}s}}\n"
        f"rule_files: ['{TMP / 'rules.yaml'}']\n"
        + (
            "scrape_configs:\n- job_name: dcgm\n  honor_labels: true\n"
            f"  static_configs: [{{targets: ['127.0.0.1:{port_target}']}}]\n"
            if port_target is not None
            else "scrape_configs: []\n"
        )
    )


def start_prometheus(port_target: int, scrape: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    shutil.copy(REPO / "deploy/chart/files/brickadmin-rules.yaml", TMP / "rules.yaml")
    write_config(port_target, scrape)
    proc = subprocess.Popen(
        [
            shutil.which("prometheus") or "prometheus",
            f"--config.file={TMP / 'prometheus.yml'}",
            f"--storage.tsdb.path={TMP / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(TMP / "prometheus.log", "wb"),  # noqa: SIM115 (closed with the process)
    )
    return proc, f"http://127.0.0.1:{port}"


def api(url: str, path: str, **params) -> dict:
    q = f"{url}{path}?{urllib.parse.urlencode(params)}" if params else f"{url}{path}"
    with urllib.request.urlopen(q, timeout=60) as r:
        return json.load(r)


def query_requests(url: str) -> float:
    """Prometheus' count of the query API requests it served (instant and range)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("prometheus_http_requests_total{") and (
            'handler="/api/v1/query"' in line or 'handler="/api/v1/query_range"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def raw_query(url: str, promql: str, at: float | None = None) -> bytes:
    params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=300) as r:
        return r.read()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class AtTime:
    """Every instant query of brickadmin.metrics asked at one past moment (Prometheus' ``time``
    parameter): the series as they were then, after scraping has stopped."""

    def __init__(self, at: float):
        self.at = at

    def __enter__(self):
        from prometheus_api_client import PrometheusConnect

        self._orig = orig = PrometheusConnect.custom_query
        at = self.at

        def custom_query(client, query, params=None, timeout=None):
            return orig(client, query, params={**(params or {}), "time": f"{at:.3f}"}, timeout=timeout)

        PrometheusConnect.custom_query = custom_query
        return self

    def __exit__(self, *exc):
        from prometheus_api_client import PrometheusConnect

        PrometheusConnect.custom_query = self._orig


def fetch_parts(url: str, at: float | None, repeat: int) -> dict:
    """The watcher's fetch taken apart (recorded series): Prometheus' answers as bytes, their
    JSON decoding, and the rows made into devices and pod usage (metrics.py's pure functions)."""
    extra = {"time": f"{at:.3f}"} if at is not None else {}
    out = {}

    def answer():
        bodies = []
        for promql in (metrics.DEVICE_UTILISATION_RECORDED, metrics.POD_MEMORY_USED_RECORDED):
            q = urllib.parse.urlencode({"query": promql, **extra})
            with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=300) as r:
                bodies.append(r.read())
        return bodies

    out["answer_s"], bodies = timed(answer, repeat)
    out["bytes"] = sum(len(b) for b in bodies)
    out["decode_s"], (util, memory) = timed(lambda: [json.loads(b)["data"]["result"] for b in bodies], repeat)
    out["rows"] = len(util) + len(memory)
    out["parse_s"], _ = timed(lambda: (metrics.devices_from_rows(util), metrics.usage_from_rows(util, memory)), repeat)
    return out


def print_parts(label: str, parts: dict) -> None:
    print(
        f"  {label}: Prometheus' answers {parts['answer_s'] * 1000:.0f} ms ({parts['bytes'] / 1e6:.1f} MB), "
        f"JSON decoding {parts['decode_s'] * 1000:.0f} ms, rows to devices and pod usage "
        f"{parts['parse_s'] * 1000:.0f} ms ({parts['rows']} rows)"
    )


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_timed(fn, repeat: int, pid: int) -> tuple[float, float, float]:
    """(wall, this process's CPU, Prometheus' CPU) seconds, medians of ``repeat`` calls: on a
    shared machine the wall time is mostly waiting for a core, the CPU times are the cost."""
    walls, mine, theirs = [], [], []
    for _ in range(repeat):
        t0, c0, p0 = time.perf_counter(), time.process_time(), cpu_s(pid)
        fn()
        walls.append(time.perf_counter() - t0)
        mine.append(time.process_time() - c0)
        theirs.append(cpu_s(pid) - p0)
    return statistics.median(walls), statistics.median(mine), statistics.median(theirs)


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def pages_per_view(url: str, views: int, example_node: str, example_ns: str) -> list[tuple[str, float]]:
    """Prometheus query requests per view of each page, on the demo's simulated cluster."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from brickadmin.cluster import scenarios
    from brickadmin.cluster.twin import TwinGateway

    call_command("migrate", verbosity=0)
    objects, hardware, plugin_configs = scenarios.read("demo")
    TwinGateway().load(objects, hardware, plugin_configs)
    admin = get_user_model().objects.create_user("bench-admin", is_staff=True, is_superuser=True)
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    node = TwinGateway().list_nodes()[0]["metadata"]["name"]
    pages = [
        "/",
        "/nodes/",
        f"/nodes/{node}/",
        "/availability/",
        "/workspaces/cluster/",
        "/charts/utilisation/cluster/?range=hour",
        "/charts/utilisation/type/?of=nvidia.com/gpu&range=hour",
        f"/charts/utilisation/node/?of={example_node}&range=hour",
        f"/charts/utilisation/workspace/?of={example_ns}&range=hour",
    ]
    out = []
    for page in pages:
        client.get(page)  # warm: the simulated cluster's view published (its DCGM fetch on its interval)
        from django.core.cache import cache

        before = query_requests(url)
        for _ in range(views):
            if page.startswith("/charts/"):
                cache.clear()  # each view a new question (a chart's answer is cached for its step)
            r = client.get(page)
            assert r.status_code == 200, (page, r.status_code)
        out.append((page, (query_requests(url) - before) / views))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--busy", type=float, default=0.75, help="share of an exclusive node's GPUs held by a pod")
    ap.add_argument("--shared", type=float, default=0.2, help="share of the nodes time-sliced (4 replicas)")
    ap.add_argument("--scrape", type=float, default=15)
    ap.add_argument("--minutes", type=float, default=4, help="scraping before the measurements")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--views", type=int, default=10)
    ap.add_argument(
        "--idle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the measurement under scraping, stop scraping and ask again (the series as they were)",
    )
    ap.add_argument(
        "--charts", action=argparse.BooleanOptionalAction, default=True, help="time the charts' range queries"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop Prometheus and remove its data on the way out
    if not shutil.which("prometheus"):
        print("no prometheus binary on PATH")
        return 2
    hardware, pods, advertised, labels = cluster(args.nodes, args.gpus_per_node, args.busy, args.shared)
    held = dcgm_exporter.held_devices(hardware, pods, advertised)
    exporter = Exporter(hardware, held, ksm_page(labels), regenerate=30)
    gpus = sum(len(g) for g in hardware.values())
    print(
        f"simulated: {args.nodes} nodes, {gpus} GPUs, {len(pods)} pods holding GPUs; exporter page "
        f"{len(exporter.body) / 1e6:.1f} MB, made in {exporter.made_s:.2f} s"
    )
    prom, url = start_prometheus(exporter.server.server_address[1], args.scrape)
    try:
        settings.PROMETHEUS_URL = url
        settings.PROMETHEUS_TIMEOUT = 120
        settings.BRICK_METRICS_INTERVAL = 3600  # pages on the simulated cluster fetch DCGM once, as a watcher would
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if metrics.query("count(DCGM_FI_DEV_GPU_UTIL)"):
                    break
            except Exception:  # noqa: BLE001  (not up yet)
                pass
            time.sleep(2)
        print(f"scraping every {args.scrape:g} s for {args.minutes:g} min ...", flush=True)
        c0, t0 = cpu_s(prom.pid), time.monotonic()
        time.sleep(args.minutes * 60)
        scraping_cores = (cpu_s(prom.pid) - c0) / (time.monotonic() - t0)
        head = api(url, "/api/v1/status/tsdb")["data"]["headStats"]
        util_series = int(float(metrics.query("count(DCGM_FI_DEV_GPU_UTIL)")[0]["value"][1]))
        scrape = metrics.query('scrape_duration_seconds{job="dcgm"}')
        print(
            f"series: {head['numSeries']} in Prometheus' head ({util_series} DCGM_FI_DEV_GPU_UTIL); "
            f"last scrape took {float(scrape[0]['value'][1]):.2f} s; Prometheus used {scraping_cores:.2f} cores "
            f"while scraping (its first series included); RSS {rss_mib(prom.pid):.0f} MiB; "
            f"load average {os.getloadavg()[0]:.1f} (2 cores)"
        )

        feed = metrics.DeviceFeed(settings.BRICK_METRICS_INTERVAL)
        fetch_s, fetch_cpu, fetch_prom = cpu_timed(feed.fetch, args.repeat, prom.pid)
        recorded = bool(metrics.query(f"count({metrics.DEVICE_UTILISATION_RECORDED})"))
        interval = 30  # BRICK_METRICS_INTERVAL's default
        print(
            f"watcher's DCGM fetch per interval, Prometheus scraping meanwhile (2 queries, decoded; "
            f"{'recorded series' if recorded else 'computed'}): median {fetch_s * 1000:.0f} ms of {args.repeat} "
            f"(interval {interval} s by default); CPU: the watcher's {fetch_cpu * 1000:.0f} ms, Prometheus' "
            f"{fetch_prom * 1000:.0f} ms (its scrapes' included); "
            f"{sum(len(d) for d in (feed.devices or {}).values())} GPUs, {len(feed.usage or {})} pods measured"
        )
        print_parts("scraping", fetch_parts(url, None, args.repeat))
        at = None
        if args.idle:
            # Scraping stopped (the job removed, config reloaded), then the same questions asked
            # about the last moment the series were fresh: what the watcher's fetch costs
            # Prometheus and the watcher themselves, without the scrape's CPU on the same cores.
            at = time.time() - 1
            write_config(None, args.scrape)
            os.kill(prom.pid, signal.SIGHUP)
            time.sleep(10)  # the reload, its staleness markers written
            c0, t0 = cpu_s(prom.pid), time.monotonic()
            time.sleep(10)
            idle_cpu = (cpu_s(prom.pid) - c0) / (time.monotonic() - t0)
            with AtTime(at):
                idle_s, idle_cpu_mine, idle_prom = cpu_timed(feed.fetch, args.repeat, prom.pid)
            gpus_idle = sum(len(d) for d in (feed.devices or {}).values())
            print(
                f"watcher's DCGM fetch per interval, scraping stopped (the series as of "
                f"{time.strftime('%H:%M:%S', time.localtime(at))}; "
                f"Prometheus at {idle_cpu * 100:.0f} % of a core with nothing asked): median {idle_s * 1000:.0f} ms "
                f"of {args.repeat}; CPU: the watcher's {idle_cpu_mine * 1000:.0f} ms, "
                f"Prometheus' {idle_prom * 1000:.0f} ms; "
                f"{gpus_idle} GPUs, {len(feed.usage or {})} pods measured; load average "
                f"{os.getloadavg()[0]:.1f}"
            )
            print_parts("scraping stopped", fetch_parts(url, at, args.repeat))
        print(
            "  each query: Prometheus' answer (HTTP, the server's evaluation and the transfer) / decoded by the client"
        )
        for name, promql in (
            ("devices, recorded", metrics.DEVICE_UTILISATION_RECORDED),
            ("devices, computed", metrics.DEVICE_UTILISATION),
            ("memory, recorded", metrics.POD_MEMORY_USED_RECORDED),
            ("memory, computed", metrics.POD_MEMORY_USED),
        ):
            raw_s, body = timed(lambda q=promql: raw_query(url, q, at), args.repeat)
            with AtTime(at) if at is not None else contextlib.nullcontext():
                s, rows = timed(lambda q=promql: metrics.query(q), args.repeat)
            print(
                f"  {name:<18} {raw_s * 1000:>7.0f} ms answer ({len(body) / 1e6:.1f} MB) / "
                f"{s * 1000:>7.0f} ms with decoding  {len(rows or []):>6} rows"
            )

        example_node = next(iter(hardware))
        example_ns = pods[0]["metadata"]["namespace"]
        start, end, step = metrics.window("hour")
        if args.charts:
            print("utilisation charts, last hour (120 points), cache bypassed:")
        for scope, subject in (
            (
                ("cluster", ""),
                ("type", dp.GPU),
                ("type", dp.GPU_SHARED),
                ("node", example_node),
                ("workspace", example_ns),
            )
            if args.charts
            else ()
        ):
            for label, promql in (
                ("from DCGM", metrics.utilisation_query(scope, subject)),
                ("recorded", metrics.recorded_query(scope, subject)),
            ):
                if promql is None:
                    continue
                s, points = timed(lambda q=promql: metrics.query_range(q, start, end, step), args.repeat)
                print(f"  {scope:<9} {subject[:18]:<18} {label:<9} {s * 1000:>7.0f} ms  {len(points or []):>4} points")

        print(f"Prometheus query requests per page view (mean of {args.views} views; demo's simulated cluster):")
        with AtTime(at) if at is not None else contextlib.nullcontext():
            per_page = pages_per_view(url, args.views, example_node, example_ns)
        for page, per_view in per_page:
            print(f"  {page:<58} {per_view:>5.2f}")
        print(f"Prometheus RSS: {rss_mib(prom.pid):.0f} MiB; load average {os.getloadavg()[0]:.1f} (2 cores)")
    finally:
        prom.terminate()
        try:
            prom.wait(30)
        except subprocess.TimeoutExpired:
            prom.kill()
        exporter.stop.set()
        exporter.server.shutdown()
        shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
