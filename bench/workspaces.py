"""Workspaces benchmark: the admin's list of every Workspace of the cluster, the approval
queue and a user's request form with 10, 1,000 and 10,000 Workspaces, utilisation measured.

A generated twin (exclusive nodes of 8 GPUs, at least 250, enough for one GPU per Workspace;
each Workspace a namespace with a GPU quota of 2 and one Running GPU pod; every other one
with the product's approved record, the others adoptable; as many pending requests in the
approval queue as a tenth of the Workspaces) and a real Prometheus (Debian's) scraping a
DCGM-format exporter that serves every GPU of the twin, with utilisation and memory that
differ per pod. Prints, at each size: the time to publish the view (the watcher's cost),
the server time of the Workspaces page (first page, last page, sorted by utilisation and by
owner, searched by owner), a Workspace's detail, the whole CSV export (streamed), the approval
queue (first and last page) and a user's request form (median of 20, 5 for CSV), SQL queries
per page and PromQL queries per page, both with the DCGM feed fresh (the steady state) and
when it is due (the page that refreshes it).

    .venv/bin/python bench/workspaces.py [--sizes 10,1000,10000]

(its own SQLite file under /tmp unless DATABASE_URL is set; needs /usr/bin/prometheus).
"""

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from brickadmin import metrics  # noqa: E402
from brickadmin.cluster import scenarios as s  # noqa: E402
from brickadmin.cluster import vocabulary as vocab  # noqa: E402
from brickadmin.cluster.models import TwinHardware, TwinObject, TwinState  # noqa: E402
from gpus.view import reading  # noqa: E402
from tests import prometheus_scrape  # noqa: E402
from workspaces.models import WorkspaceRequest  # noqa: E402

NODES, GPUS_PER_NODE, MODEL = 250, 8, "NVIDIA A100 80GB PCIe"
EXPORTER = {"body": b""}


def records(n_ws: int, owner) -> None:
    """The product's records: every other Workspace approved (the others adoptable), and a
    tenth as many pending requests waiting in the approval queue."""
    WorkspaceRequest.objects.all().delete()
    approved = WorkspaceRequest.Status.APPROVED
    WorkspaceRequest.objects.bulk_create(
        [
            WorkspaceRequest(
                name=f"ws-{w:05d}",
                requester=owner,
                requester_name=f"user{w}",
                gpu=2,
                cpu=8,
                memory_gib=32,
                storage_gib=100,
                status=approved,
                gpu_type="exclusive",
                gpu_resource=vocab.GPU,
            )
            for w in range(0, n_ws, 2)
        ]
        + [
            WorkspaceRequest(
                name=f"new-{w:05d}",
                requester=owner,
                requester_name=owner.username,
                gpu=1,
                cpu=2,
                memory_gib=8,
                storage_gib=20,
            )
            for w in range(max(1, n_ws // 10))
        ],
        batch_size=2000,
    )


def generate(n_ws: int) -> None:
    """The twin as its controllers leave it, and the DCGM exporter's page for it."""
    global NODES
    NODES = max(250, math.ceil(n_ws / GPUS_PER_NODE))  # a GPU for every Workspace's pod
    TwinObject.objects.all().delete()
    TwinHardware.objects.all().delete()
    objs, hw, lines = [], [], ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge", "# TYPE DCGM_FI_DEV_FB_USED gauge"]
    for doc in s.device_plugin_manifest(replicas=4):
        objs.append(
            TwinObject(
                kind=doc["kind"], namespace=doc["metadata"].get("namespace", ""), name=doc["metadata"]["name"], body=doc
            )
        )
    users: dict[tuple[str, int], str] = {}  # (node, GPU index) -> "ns/pod"
    for w in range(n_ws):
        users[(f"gpu-{w % NODES:04d}", w // NODES)] = f"ws-{w:05d}/train-{w:05d}"
    for i in range(NODES):
        name = f"gpu-{i:04d}"
        extra = {"capacity": {vocab.GPU: str(GPUS_PER_NODE)}, "allocatable": {vocab.GPU: str(GPUS_PER_NODE)}}
        objs.append(
            TwinObject(
                kind="Node",
                name=name,
                body=s.node(name, model=MODEL, sharing="none", gpu_count=GPUS_PER_NODE, extra_status=extra),
            )
        )
        devices = s.gpus(name, MODEL, GPUS_PER_NODE, 81920)
        hw.append(TwinHardware(node=name, gpus=devices))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"nvidia-device-plugin-default-{i:04d}",
                "namespace": vocab.PLUGIN_NAMESPACE,
                "uid": str(uuid.uuid4()),
                "labels": {vocab.COMPONENT_LABEL: "default"},
                "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-device-plugin-default"}],
            },
            "spec": {"nodeName": name, "containers": [{"name": "p", "image": "plugin"}]},
            "status": {"phase": "Running"},
        }
        objs.append(
            TwinObject(
                kind="Pod", namespace=vocab.PLUGIN_NAMESPACE, name=pod["metadata"]["name"], body=pod, node_name=name
            )
        )
        for g, dev in enumerate(devices):
            who = users.get((name, g))
            labels = f'gpu="{g}",UUID="{dev["uuid"]}",modelName="{MODEL}",Hostname="{name}"'
            util, used = 0, 0
            if who:
                ns, pod_name = who.split("/")
                labels += f',pod="{pod_name}",namespace="{ns}",container="main"'
                n = int(ns[3:])
                util, used = (n * 37) % 100, 1024 + (n * 211) % 60000  # differs per pod; some idle ones
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}")
            lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}")
    for w in range(n_ws):
        ns = f"ws-{w:05d}"
        objs.append(TwinObject(kind="Namespace", name=ns, body=s.namespace(ns, owner=f"user{w}")))
        objs.append(
            TwinObject(
                kind="ResourceQuota",
                namespace=ns,
                name="workspace-compute",
                body=s.quota(ns, {vocab.quota_key(vocab.GPU): 2, "requests.cpu": 8}),
            )
        )
        node = f"gpu-{w % NODES:04d}"
        pod = s.gpu_pod(ns, f"train-{w:05d}", node, vocab.GPU, 1)
        objs.append(
            TwinObject(kind="Pod", namespace=ns, name=pod["metadata"]["name"], body=pod, node_name=node, holds_gpu=True)
        )
    TwinObject.objects.bulk_create(objs, batch_size=2000)
    TwinHardware.objects.bulk_create(hw, batch_size=2000)
    TwinState.objects.update_or_create(pk=1, defaults={"version": uuid.uuid4().hex})
    EXPORTER["body"] = ("\n".join(lines) + "\n").encode()
    EXPORTER["series"] = NODES * GPUS_PER_NODE


def start_prometheus():
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(binary).exists():
        sys.exit("needs Prometheus (Debian package prometheus)")

    exporter = prometheus_scrape.serve_metrics(lambda: EXPORTER["body"])
    return prometheus_scrape.start_prometheus(binary, Path(tempfile.mkdtemp(prefix="brick-bench-prom-")), exporter)


def wait_for_series(url: str, pods: int) -> None:
    """Until Prometheus has scraped the exporter's current page (the pods' series)."""
    from prometheus_api_client import PrometheusConnect

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            rows = PrometheusConnect(url=url).custom_query('count(DCGM_FI_DEV_FB_USED{pod!=""})')
            if rows and int(float(rows[0]["value"][1])) == pods:
                return
        except Exception:  # noqa: BLE001  (not up yet)
            pass
        time.sleep(0.5)
    sys.exit("Prometheus did not scrape the exporter within 120 s")


class PromQLCounter:
    """Counts the PromQL queries brickadmin.metrics sends (instant and range)."""

    def __init__(self):
        self.n = 0
        self._query, self._range = metrics.query, metrics.query_range

    def __enter__(self):
        def query(*a, **kw):
            self.n += 1
            return self._query(*a, **kw)

        def query_range(*a, **kw):
            self.n += 1
            return self._range(*a, **kw)

        metrics.query, metrics.query_range = query, query_range
        return self

    def __exit__(self, *exc):
        metrics.query, metrics.query_range = self._query, self._range


def cost(client, url):
    """(SQL queries, PromQL queries) of one request. SQL is counted at the cursor: a
    request's start empties Django's query log, which CaptureQueriesContext reads."""
    sql: list[str] = []
    with (
        connection.execute_wrapper(lambda execute, query, *a: sql.append(query) or execute(query, *a)),
        PromQLCounter() as prom,
    ):
        resp = client.get(url)
        if hasattr(resp, "streaming_content"):
            b"".join(resp.streaming_content)
        assert resp.status_code == 200, (url, resp.status_code)
    return len(sql), prom.n


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def fetch(client, url):
    resp = client.get(url)
    if hasattr(resp, "streaming_content"):
        b"".join(resp.streaming_content)


def feed_due():
    reading._twin["fetched"] = time.monotonic() - 10 * settings.BRICK_METRICS_INTERVAL


PAGES = {
    "list": "/workspaces/cluster/",
    "list, last page": "/workspaces/cluster/?page=999999",
    "sorted by utilisation": "/workspaces/cluster/?sort=-utilisation",
    "sorted by owner": "/workspaces/cluster/?sort=owner",
    "searched (owner)": "/workspaces/cluster/?q=user7",
    "detail": "/workspaces/cluster/ws-00007/",
    "CSV (every row)": "/workspaces/cluster/?format=csv",
    "approval queue": "/workspaces/approvals/",
    "approval queue, last page": "/workspaces/approvals/?page=999999",
    "request form (a user)": "/workspaces/new/",
}
AS_USER = {"request form (a user)"}


def measure(clients, url, n_ws):
    admin_client, user_client = clients
    client = admin_client
    generate(n_ws)
    records(n_ws, get_user_model().objects.get(username="bench-user"))
    wait_for_series(url, n_ws)
    reading._twin.pop("watcher", None)  # the twin was bulk-written under the watcher: list it again
    feed_due()
    t = time.perf_counter()
    client.get(PAGES["list"])  # the twin's view catches up: snapshot, DCGM feed, publish
    publish_ms = (time.perf_counter() - t) * 1000
    out = {"publish": publish_ms, "pages": {}}
    for name, page in PAGES.items():
        c = user_client if name in AS_USER else admin_client
        fetch(c, page)
        sql, prom = cost(c, page)
        ms = timed(lambda page=page, c=c: fetch(c, page), 5 if "CSV" in name else 20)
        out["pages"][name] = (ms, sql, prom)
    feed_due()
    out["due"] = cost(client, PAGES["list"])
    html = client.get(PAGES["list"]).content.decode()
    out["measured"] = "not measured" not in html and "%" in html
    csv = b"".join(client.get(PAGES["CSV (every row)"]).streaming_content).decode()
    out["rows"] = len(csv.splitlines()) - 1
    assert out["rows"] == n_ws, (out["rows"], n_ws)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,1000,10000", help="numbers of Workspaces, comma-separated")
    sizes = [int(x) for x in ap.parse_args().sizes.split(",")]
    call_command("migrate", verbosity=0)
    admin, _ = get_user_model().objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    user, _ = get_user_model().objects.get_or_create(username="bench-user")
    client, user_client = Client(HTTP_HOST="localhost"), Client(HTTP_HOST="localhost")
    client.force_login(admin)
    user_client.force_login(user)
    proc, url = start_prometheus()
    settings.PROMETHEUS_URL = url
    settings.BRICK_METRICS_INTERVAL = 30.0
    try:
        print(f"database: {connection.vendor}; Prometheus {url}; {NODES} nodes x {GPUS_PER_NODE} GPUs")
        results = {n: measure((client, user_client), url, n) for n in sizes}
    finally:
        proc.terminate()
        proc.wait(10)
    for n, r in results.items():
        print(
            f"\n{n} Workspaces ({r['rows']} CSV rows; utilisation measured: {'yes' if r['measured'] else 'NO'}); "
            f"view caught up (snapshot, DCGM feed, publish) in {r['publish']:.0f} ms"
        )
        for name, (ms, sql, prom) in r["pages"].items():
            print(f"  {name:27s} {ms:7.1f} ms median   {sql:3d} SQL   {prom} PromQL")
        sql, prom = r["due"]
        print(
            f"  list, DCGM feed due                    {sql:3d} SQL   {prom} PromQL (the feed's refresh, once per "
            f"BRICK_METRICS_INTERVAL)"
        )
    small, large = results[sizes[0]], results[sizes[-1]]
    same = (
        all(small["pages"][k][1:] == large["pages"][k][1:] for k in PAGES if "CSV" not in k)
        and small["due"] == large["due"]
    )
    print(
        f"\nSQL and PromQL per page constant from {sizes[0]:,} to {sizes[-1]:,} Workspaces: {'yes' if same else 'NO'}"
    )


if __name__ == "__main__":
    main()
