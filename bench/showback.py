"""Showback benchmark: the admin's showback page over 1,000 Workspaces and 12 months of hourly
rollups, and one hour's rollup of a cluster of 5,000 GPU nodes.

1. The rollup: a stored cluster view of 5,000 GPU nodes (3,000 exclusive with 8 GPUs, 1,000
   time-sliced with 8 GPUs x 4 replicas, 1,000 with 8 A100s split into seven 1g.10gb each) and
   1,000 Workspaces (a quota of each type in turn, two Running pods each, DCGM measured), written
   the way the watcher writes it. Prints the time of ``showback_rollups.roll_up`` (read the view,
   convert, store the hour and the month's sums): the first of a worker process (every node
   line read), a new hour (node lines unchanged: not read again) and the same hour again (the
   replacement), medians of 5.
2. The page: 12 months of hourly figures for 1,000 Workspaces (8,760 hours, summed per month
   as the rollups sum them), then the server time of the page (first page, sorted by requested,
   searched) and of the whole month's CSV, median and p95 of 20 (5 for CSV), with SQL queries
   per page and the part of the time spent in SQL (at the cursor: the query sent, its rows
   fetched as far as the driver fetches them there).
3. The Workspace pages (the owner's and the admin's detail) with 5 and with 50 GPU pods, half
   Pending (unschedulable) and half Running: SQL queries counted at the cursor (a request's
   start empties Django's query log) and server time, median of 20. The count must not grow.

Run: .venv/bin/python bench/showback.py [--postgres] [--parts rollup,page,pods]
(its own SQLite file under /tmp unless DATABASE_URL is set; --postgres: a throwaway PostgreSQL
cluster of its own, as bin/test starts it, where the database's time is another process's).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import throwaway  # noqa: E402  (bench/, the script's own directory)

PARTS = ("rollup", "page", "pods")
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
parser.add_argument("--parts", default=",".join(PARTS), help=f"which parts to run, of {','.join(PARTS)}")
ARGS = parser.parse_args()
VAR = Path(tempfile.mkdtemp(prefix="brick-bench-"))
PG = None
if ARGS.postgres:
    PG = throwaway.Postgres(VAR)
    PG.start()
    os.environ["DATABASE_URL"] = PG.url
os.environ.setdefault("BRICK_VAR_DIR", str(VAR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from brickadmin.cluster import scenarios as s  # noqa: E402
from brickadmin.cluster import vocabulary as vocab  # noqa: E402
from gpus.models import ViewNode, ViewState, ViewWorkspace  # noqa: E402
from gpus.numbers import ledger  # noqa: E402
from gpus.view.publish import SCHEMA_VERSION  # noqa: E402
from workspaces import showback, showback_rollups  # noqa: E402
from workspaces.models import ShowbackHour, ShowbackMonth  # noqa: E402

MODEL = "NVIDIA A100 80GB PCIe"
MIG_1G = "nvidia.com/mig-1g.10gb"
N_EXCLUSIVE, N_SLICED, N_MIG, GPUS = 3000, 1000, 1000, 8
WORKSPACES = 1000


def backend_cpu() -> float:
    """Seconds of CPU the PostgreSQL backend of this connection has used (0 on SQLite, which
    runs in this process): its ticks in /proc, 10 ms each."""
    if connection.vendor != "postgresql":
        return 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn, n):
    """(wall, CPU, wall's p95) milliseconds, medians of n: the CPU time spent (this process's, with SQLite
    running in it, and on PostgreSQL its backend's too) tells the cost apart from waiting for
    a busy core. On PostgreSQL the CPU figure's median counts the backend in 10 ms ticks."""
    wall, cpu = [], []
    for _ in range(n):
        b = backend_cpu()
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c + backend_cpu() - b) * 1000)
    p95 = statistics.quantiles(wall, n=20, method="inclusive")[-1] if n > 1 else wall[0]
    return statistics.median(wall), statistics.median(cpu), p95


# --- 1. the rollup of 5,000 nodes -------------------------------------------------------


def node_of(kind: str, i: int, pods: list[dict]) -> ledger.NodeLedger:
    name = f"{kind}-{i:04d}"
    if kind == "ex":
        res, sharing, labels, devices, replicas = vocab.GPU, "none", {}, None, 1
        amount = GPUS
    elif kind == "ts":
        res, sharing, labels, devices, replicas = vocab.GPU_SHARED, "timeslicing", {}, None, 4
        amount = GPUS * 4
    else:
        res, sharing, labels, replicas = MIG_1G, None, {vocab.MIG_STRATEGY_LABEL: "mixed"}, 1
        labels[vocab.GPU_PRESENT_LABEL] = "true"
        devices = s.gpus(name, MODEL, GPUS, 81920, mig=[["1g.10gb"] * 7] * GPUS)
        amount = GPUS * 7
    node = s.node(
        name,
        model=MODEL,
        sharing=sharing,
        gpu_count=GPUS,
        labels=labels,
        extra_status={"capacity": {res: str(amount)}, "allocatable": {res: str(amount)}},
    )
    requests = {}
    for p in pods:
        for r, n in p["spec"]["containers"][0]["resources"]["requests"].items():
            requests[r] = requests.get(r, 0) + int(n)
    return ledger.node_ledger(node, requests, devices, "twin" if devices else "labels", "running", replicas, pods=pods)


def write_view() -> None:
    """The view the watcher would publish: nodes, Workspace lines, the state row."""
    ViewNode.objects.all().delete()
    ViewWorkspace.objects.all().delete()
    kinds = [("ex", N_EXCLUSIVE, vocab.GPU), ("ts", N_SLICED, vocab.GPU_SHARED), ("mg", N_MIG, MIG_1G)]
    pods_on: dict[str, list[dict]] = {}
    lines = []
    for w in range(WORKSPACES):
        ns = f"ws-{w:04d}"
        kind, count, res = kinds[w % 3]
        quota = 4
        pod_lines = []
        for p in range(2):
            node = f"{kind}-{(w * 2 + p) % count:04d}"
            pod = s.gpu_pod(ns, f"train-{p}", node, res, 1)
            pods_on.setdefault(node, []).append(pod)
            pod_lines.append(
                {
                    "name": f"train-{p}",
                    "node": node,
                    "phase": "Running",
                    "requests": {res: 1},
                    "gpus": [f"{node} · GPU 0"],
                    **({"time_sliced": True} if kind == "ts" else {}),
                }
            )
        lines.append(
            ViewWorkspace(
                generation=1,
                namespace=ns,
                owner=f"user{w}",
                labelled=True,
                resource=res,
                gpu_type=ledger.gpu_type_of(res),
                quota=quota,
                gpu_quotas={res: quota},
                requested=2,
                physical=1,
                utilisation=40.0 + w % 50,
                pods=pod_lines,
            )
        )
    rows, physical = [], 0
    for kind, count, _res in kinds:
        for i in range(count):
            n = node_of(kind, i, pods_on.get(f"{kind}-{i:04d}", []))
            physical += n.physical
            rows.append(
                ViewNode(
                    name=n.name,
                    generation=1,
                    is_gpu=True,
                    model=n.model,
                    mode=n.mode,
                    convention=n.convention,
                    ledger=ledger.node_to_dict(n),
                    digest=f"{n.name}-1",  # as the watcher writes it: changes with the line
                    raw={"metadata": {"name": n.name}},
                )
            )
    ViewNode.objects.bulk_create(rows, batch_size=500)
    ViewWorkspace.objects.bulk_create(lines, batch_size=500)
    ViewState.objects.update_or_create(
        pk=1,
        defaults={
            "generation": 1,
            "schema": SCHEMA_VERSION,
            "as_of": datetime.now(UTC),
            "source": "kube",
            "totals": {"physical": physical, "gpu_nodes": len(rows)},
            "extra": {"usage_measured": True},
        },
    )


def bench_rollup() -> dict:
    write_view()
    ShowbackHour.objects.all().delete()
    ShowbackMonth.objects.all().delete()
    base = datetime(2026, 11, 1, tzinfo=UTC)
    showback_rollups._NODE_MEMO.clear()
    cold = timed(lambda: showback_rollups.roll_up(base), 1)  # the worker's first rollup: every node line read
    new_hours = iter(range(1, 10_000))
    first = timed(lambda: showback_rollups.roll_up(base + timedelta(hours=next(new_hours))), 5)
    again = timed(lambda: showback_rollups.roll_up(base), 5)  # the same hour, replaced each time
    hour = ShowbackHour.objects.get(hour=base)
    month = ShowbackMonth.objects.get(month=date(2026, 11, 1), namespace="")
    # where a new hour's time goes (after the month above was read: it adds hours)
    sql, rest = split(lambda: showback_rollups.roll_up(base + timedelta(hours=next(new_hours))), 5)
    return {
        "split": (sql, rest),
        "cold": cold,
        "new": first,
        "again": again,
        "lines": len(hour.lines),
        "physical": hour.physical,
        "month": month,
    }


# --- 2. the page over 12 months ---------------------------------------------------------


def twelve_months() -> int:
    """Sums of 8,760 hourly figures per Workspace and month, as the rollups keep them."""
    ShowbackHour.objects.all().delete()
    ShowbackMonth.objects.all().delete()
    start = datetime(2025, 12, 1, tzinfo=UTC)
    rows: dict[tuple[date, str], ShowbackMonth] = {}
    per_ws = [
        showback.HourFigures(1 + w % 4, (w % 4) * 0.5, None if w % 7 == 0 else 0.3, w % 11 != 0)
        for w in range(WORKSPACES)
    ]
    hours = 0
    moment = start
    while moment < start + timedelta(days=365):
        month = showback.month_of(moment)
        lines = {f"ws-{w:04d}": f.as_list() for w, f in enumerate(per_ws)}
        showback_rollups._add_hour(_Rows(rows, month), month, 4000.0, lines, +1)
        hours += 1
        moment += timedelta(hours=1)
    ShowbackMonth.objects.bulk_create(rows.values(), batch_size=1000)
    return hours


class _Rows(dict):
    """The month's rows of one month, kept in the dict of every month."""

    def __init__(self, every, month):
        super().__init__()
        self.every, self.month = every, month

    def __contains__(self, namespace):
        return (self.month, namespace) in self.every

    def __getitem__(self, namespace):
        return self.every[(self.month, namespace)]

    def __setitem__(self, namespace, row):
        self.every[(self.month, namespace)] = row


PAGES = {
    "month": "/workspaces/showback/?month=2026-11",
    "sorted by requested": "/workspaces/showback/?month=2026-11&sort=-requested",
    "searched": "/workspaces/showback/?month=2026-11&q=ws-07",
    "page 20": "/workspaces/showback/?month=2026-11&page=20",
    "CSV (every row)": "/workspaces/showback/?month=2026-11&format=csv",
}


class Cursor:
    """The SQL a block sends, counted at the cursor, and the time spent in it (the query
    sent, run and its rows fetched, as far as the cursor fetches them on execute)."""

    def __init__(self):
        self.sql: list[str] = []
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        self.sql.append(sql)
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - t

    def __enter__(self):
        self._wrapped = connection.execute_wrapper(self)
        self._wrapped.__enter__()
        return self

    def __exit__(self, *exc):
        self._wrapped.__exit__(*exc)


def fetch(client, url):
    resp = client.get(url)
    assert resp.status_code == 200, (url, resp.status_code)
    if hasattr(resp, "streaming_content"):
        return b"".join(resp.streaming_content)
    return resp.content


def split(fn, n) -> tuple[float, float]:
    """Medians of n: (ms in SQL at the cursor, ms of the rest: Python, templates)."""
    sql, rest = [], []
    for _ in range(n):
        with Cursor() as cur:
            t = time.perf_counter()
            fn()
            total = time.perf_counter() - t
        sql.append(cur.seconds * 1000)
        rest.append((total - cur.seconds) * 1000)
    return statistics.median(sql), statistics.median(rest)


# --- 3. the Workspace pages with 5 and 50 GPU pods ----------------------------------------


def add_pods(gateway, namespace: str, first: int, last: int) -> None:
    """Pods first..last-1: every other one Pending (unschedulable), the others Running."""
    for i in range(first, last):
        if i % 2:
            pod = s.gpu_pod(namespace, f"sweep-{i}", "", vocab.GPU, 1, phase="Pending")
            del pod["spec"]["nodeName"]
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
                }
            ]
        else:
            pod = s.gpu_pod(namespace, f"sweep-{i}", "gpu-h100-01", vocab.GPU, 1)
        gateway._create(pod)


def bench_pods(admin) -> None:
    from django.utils import timezone

    from brickadmin.cluster.twin import TwinGateway
    from workspaces.models import WorkspaceRequest

    gateway = TwinGateway()
    gateway.load(*s.read("waiting"))  # ws-full: a GPU quota of 4 and two Running pods
    owner, _ = get_user_model().objects.get_or_create(username="bench-owner")
    WorkspaceRequest.objects.filter(name="ws-full").delete()
    ws = WorkspaceRequest.objects.create(
        name="ws-full",
        requester=owner,
        requester_name=owner.get_username(),
        gpu=4,
        cpu=8,
        memory_gib=32,
        storage_gib=20,
        status=WorkspaceRequest.Status.APPROVED,
        decided_at=timezone.now(),
        decided_by_name="bench-admin",
        gpu_resource=vocab.GPU,
        gpu_type="exclusive",
    )
    pages = {
        "owner's page": (f"/workspaces/{ws.pk}/", owner),
        "admin's detail": ("/workspaces/cluster/ws-full/", admin),
    }
    clients = {}
    for name, (_url, user) in pages.items():
        clients[name] = Client(HTTP_HOST="localhost")
        clients[name].force_login(user)
    print("\nthe Workspace pages, GPU pods half Pending, half Running:")
    counts: dict[str, list[int]] = {}
    for pods, (first, last) in ((5, (2, 5)), (50, (5, 50))):
        add_pods(gateway, "ws-full", first, last)
        for name, (url, _user) in pages.items():
            fetch(clients[name], url)  # the twin's view brought up to date
            with Cursor() as cur:
                fetch(clients[name], url)
            ms, cpu, p95 = timed(lambda c=clients[name], url=url: fetch(c, url), 20)
            counts.setdefault(name, []).append(len(cur.sql))
            print(
                f"  {name:15s} {pods:3d} pods {ms:7.1f} ms wall (p95 {p95:6.1f}) {cpu:6.1f} ms CPU (medians)"
                f"   {len(cur.sql):3d} SQL"
            )
    for name, (few, many) in counts.items():
        print(f"  {name}: {'the same count' if few == many else f'GROWS: {few} -> {many}'} at 5 and 50 pods")


def main():
    try:
        run(set(ARGS.parts.split(",")))
    finally:
        if PG is not None:
            connection.close()
            PG.stop()


def run(parts):
    call_command("migrate", verbosity=0)
    print(f"database: {connection.vendor}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    admin, _ = get_user_model().objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    if "rollup" in parts:
        rollup()
    if "page" in parts:
        page(admin)
    if "pods" in parts:
        bench_pods(admin)


def rollup():
    r = bench_rollup()
    m = r["month"]
    print(
        f"\nrollup of one hour: {N_EXCLUSIVE + N_SLICED + N_MIG} GPU nodes, {r['lines']} Workspaces, "
        f"{r['physical']:.0f} physical GPUs"
    )
    print(f"  the first of a process   {r['cold'][0]:7.1f} ms wall {r['cold'][1]:7.1f} ms CPU (every node line read)")
    print(f"  a new hour               {r['new'][0]:7.1f} ms wall {r['new'][1]:7.1f} ms CPU (medians; nodes unchanged)")
    print(f"  the same hour again      {r['again'][0]:7.1f} ms wall {r['again'][1]:7.1f} ms CPU (medians; replaces it)")
    print(f"  a new hour: {r['split'][0]:.1f} ms in SQL at the cursor, {r['split'][1]:.1f} ms the rest (medians)")
    print(
        f"  the month after 5 new hours and the first replaced 5 times: {m.hours} hours, "
        f"{m.physical:.0f} physical GPU-hours, {m.allocated:.1f} allocated"
    )


def page(admin):
    hours = twelve_months()
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    print(
        f"\nthe page: {WORKSPACES} Workspaces, {hours} hours over 12 months "
        f"({ShowbackMonth.objects.count()} monthly rows)"
    )
    for name, url in PAGES.items():
        fetch(client, url)
        with Cursor() as cur:  # counted at the cursor: the request's start resets Django's query log
            body = fetch(client, url)
        n = 5 if "CSV" in name else 20
        ms, cpu, p95 = timed(lambda url=url: fetch(client, url), n)
        sql, rest = split(lambda url=url: fetch(client, url), n)
        extra = f"   {len(body.splitlines()) - 1} rows" if "CSV" in name else ""
        print(
            f"  {name:22s} {ms:7.1f} ms wall (p95 {p95:6.1f}) {cpu:6.1f} ms CPU (medians)  {len(cur.sql):3d} SQL "
            f"{sql:6.1f} ms in SQL, {rest:6.1f} ms the rest{extra}"
        )


if __name__ == "__main__":
    main()
