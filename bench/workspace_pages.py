"""Server time of the Workspace pages at 10,000 Workspaces, without Prometheus: the approval
queue (first and last page), the Workspaces of the cluster (list, search, the whole CSV) and a
user's request form. The twin is bench/workspaces.py's (exclusive nodes of 8 GPUs, a
namespace with a GPU quota of 2 and a Running GPU pod per Workspace, every other one with an
approved record, a tenth as many pending requests). Prints median and p95 of --repeat
requests per page and the SQL statements each sends, counted at the cursor (every statement
the connection executes, whatever opened it); --profile prints the hottest functions of one
request of each page. CPU is this process's (the web code and, on SQLite, the database's),
median: on a shared machine the wall time is mostly waiting for a core.

    .venv/bin/python bench/workspace_pages.py [--workspaces 10000] [--repeat 15] [--profile] [--postgres]

(its own SQLite file under /tmp unless DATABASE_URL is set; --postgres: a throwaway PostgreSQL).
"""

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)

PG = None
if "--postgres" in sys.argv:  # a throwaway PostgreSQL of its own, as bin/test starts one
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import throwaway  # noqa: E402  (bench/, the script's own directory)

    PG = throwaway.Postgres(Path(tempfile.mkdtemp(prefix="brick-bench-pg-")))
    PG.start()
    os.environ["DATABASE_URL"] = PG.url

import importlib.util  # noqa: E402

# bench/workspaces.py (the generated twin; it sets Django up), loaded by path: its module name
# is the Django app's.
_spec = importlib.util.spec_from_file_location("bench_workspaces", Path(__file__).with_name("workspaces.py"))
bench_ws = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_ws)

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from gpus.view import reading  # noqa: E402

PAGES = {
    "approval queue": "/workspaces/approvals/",
    "approval queue, last page": "/workspaces/approvals/?page=999999",
    "Workspaces of the cluster": "/workspaces/cluster/",
    "  searched (owner)": "/workspaces/cluster/?q=user7",
    "  CSV (every row)": "/workspaces/cluster/?format=csv",
    "request form (a user)": "/workspaces/new/",
}
AS_USER = {"request form (a user)"}


class CursorCount:
    """Every statement the default connection executes while inside."""

    def __init__(self):
        self.n = 0
        self.timed: list[tuple[float, str]] = []

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.timed.append(((time.perf_counter() - t) * 1000, sql))

    def __enter__(self):
        self._cm = connection.execute_wrapper(self)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)


def fetch(client, url) -> int:
    resp = client.get(url)
    body = b"".join(resp.streaming_content) if hasattr(resp, "streaming_content") else resp.content
    assert resp.status_code == 200, (url, resp.status_code)
    return len(body)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspaces", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    user, _ = User.objects.get_or_create(username="bench-user")
    admin_client, user_client = Client(HTTP_HOST="localhost"), Client(HTTP_HOST="localhost")
    admin_client.force_login(admin)
    user_client.force_login(user)
    t = time.perf_counter()
    bench_ws.generate(args.workspaces)
    bench_ws.records(args.workspaces, user)
    reading._twin.pop("watcher", None)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"generated {args.workspaces} Workspaces in {time.perf_counter() - t:.1f} s; database {connection.vendor}")
    t = time.perf_counter()
    fetch(admin_client, PAGES["Workspaces of the cluster"])  # the twin's view published
    print(f"view published (first page view) in {(time.perf_counter() - t) * 1000:.0f} ms")
    for name, url in PAGES.items():
        client = user_client if name in AS_USER else admin_client
        fetch(client, url)  # warm
        with CursorCount() as sql:
            size = fetch(client, url)
        repeat = max(3, args.repeat // 3) if "CSV" in name else args.repeat
        times, cpu = [], []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            fetch(client, url)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) >= 2 else times[0]
        print(
            f"  {name:<28} median {statistics.median(times):8.1f} ms  p95 {p95:8.1f} ms  "
            f"CPU {statistics.median(cpu):7.1f} ms  {sql.n:3d} SQL  {size / 1e3:8.1f} kB  (n={repeat})"
        )
        if args.profile:
            for ms, statement in sorted(sql.timed, reverse=True)[:4]:
                print(f"      {ms:7.1f} ms  {statement[:150]}")
            prof = cProfile.Profile()
            prof.enable()
            fetch(client, url)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip()[:1].isdigit()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        if PG is not None:
            connection.close()
            PG.stop()
