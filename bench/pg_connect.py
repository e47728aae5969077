"""What a web request's first queries cost on PostgreSQL with a new connection (the web
process without a pool: each request and each read of a run page's stream opened a backend)
and with one borrowed from the web process's pool (BRICK_DB_POOL, brickadmin/asgi.py).

Each round closes the connection as the web process does after a request or a stream's read,
then makes a run page stream's first two reads (the run, its rows). Median and p95 of each,
and the load average: on a busy machine a new backend is a process PostgreSQL forks and warms.

Run: .venv/bin/python bench/pg_connect.py [--rounds N]   (a throwaway PostgreSQL of its own)
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import throwaway  # noqa: E402  (bench/, the script's own directory)


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def rounds(n: int) -> list[float]:
    from django.db import connection

    from gpus.models import ProcedureRun

    run = ProcedureRun.objects.order_by("pk").first()
    took = []
    for _ in range(n):
        connection.close()  # as after a request (to the pool, when there is one)
        t0 = time.perf_counter()
        ProcedureRun.objects.get(pk=run.pk)
        list(run.steps.order_by("seq"))
        took.append((time.perf_counter() - t0) * 1000)
    connection.close()
    return took


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    pg = throwaway.Postgres(Path(tempfile.mkdtemp(prefix="brick-bench-pg-")))
    pg.start()
    os.environ.update(DATABASE_URL=pg.url, DJANGO_SETTINGS_MODULE="brickadmin.settings", BRICK_DB_CONN_MAX_AGE="0")
    os.environ.pop("BRICK_DB_POOL", None)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from gpus.models import ProcedureRun

        call_command("migrate", verbosity=0)
        ProcedureRun.objects.create(procedure="A", node="gpu-a30-01", actor_name="bench")
        fresh = rounds(args.rounds)
        connection.settings_dict["OPTIONS"]["pool"] = {"min_size": 2, "max_size": 8, "timeout": 10}
        rounds(5)  # the pool opens its connections
        pooled = rounds(args.rounds)
        connection.close_pool()
        print(f"a run page stream's first two reads, {args.rounds} rounds; load average {os.getloadavg()[0]:.1f}:")
        for label, took in (("new connection", fresh), ("borrowed from the pool", pooled)):
            median, p95 = statistics.median(took), pct(took, 95)
            print(f"  {label}: median {median:.1f} ms, p95 {p95:.1f} ms, max {max(took):.1f} ms")
    finally:
        from django.db import connections

        connections.close_all()
        pg.stop()


if __name__ == "__main__":
    main()
