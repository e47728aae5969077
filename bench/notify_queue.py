"""Notifications held by slow receivers against a wizard run (not a test).

As deployed: a Celery worker for the procedures (the default queue) and one for notifications
(`-Q notify`, two processes, as the chart's notify worker and bin/demo's), on a Redis of the
bench's own. Each round queues N webhook deliveries to receivers that never finish answering
(after the status line, one header line every 2 s: no read ever times out), then starts
procedure A on the twin and measures, from the moment the run is committed, how long until
its first step is recorded (the run has started) and until it has succeeded; a round without
receivers first, for comparison. Also: how many deliveries the notify worker held meanwhile,
and where the deliveries stand at the end (each send has a total deadline,
BRICK_NOTIFY_DEADLINE_SECONDS, then is retried later).

Run: .venv/bin/python bench/notify_queue.py [--rounds N] [--hooks N] [--deadline S] [--postgres]
(own SQLite file under a temp dir unless --postgres: a throwaway PostgreSQL of its own.)
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import throwaway  # noqa: E402  (bench/, the script's own directory)

VAR = Path(tempfile.mkdtemp(prefix="brick-bench-notify-"))
PG = None
if "--postgres" in sys.argv:
    PG = throwaway.Postgres(Path(tempfile.mkdtemp(prefix="brick-bench-pg-")))
    PG.start()
    os.environ["DATABASE_URL"] = PG.url
os.environ.setdefault("DATABASE_URL", f"sqlite:///{VAR / 'bench.sqlite3'}")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)
os.environ["BRICK_PROCEDURE_VERIFY_TIMEOUT"] = "0"
os.environ["BRICK_WEBHOOK_ALLOWED_HOSTS"] = "127.0.0.1"
PROCS: list = []
REDIS = throwaway.Redis(VAR, PROCS)
REDIS.start()
os.environ["REDIS_URL"] = REDIS.url

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from brickadmin.accounts.models import Delivery, Notification  # noqa: E402
from brickadmin.accounts.tasks import deliver  # noqa: E402
from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus.models import ProcedureRun  # noqa: E402
from gpus.procedures import service  # noqa: E402
from tests.trickle import TricklingServer  # noqa: E402  (the receiver the notify-queue test uses)


def worker(name: str, *args: str) -> None:
    throwaway.spawn(
        VAR / f"{name}.log",
        [sys.executable, "-m", "celery", "-A", "brickadmin", "worker", "-n", f"{name}@%h", "-l", "WARNING", *args],
        os.environ.copy(),
        REPO,
        PROCS,
        [],
    )


def wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    sys.exit(f"timed out waiting for {what}")


def one_round(hooks: int, user, node: str) -> tuple[float, float, int]:
    """(seconds to the run's first step, seconds to its success, deliveries the notify worker held)."""
    servers = [TricklingServer(every=2.0) for _ in range(hooks)]
    try:
        for i, server in enumerate(servers):
            note = Notification.objects.create(recipient=user, kind="bench", subject=f"s{i}", body="b")
            d = Delivery.objects.create(notification=note, channel=Delivery.Channel.WEBHOOK, address=server.url)
            deliver.delay(d.pk)
        if hooks:
            wait(lambda: sum(s.accepted for s in servers) >= min(hooks, 2), 30, "the notify worker to take deliveries")
        objects, hardware, plugin_configs = scenarios.read("seed-example")
        TwinGateway().load(objects, hardware, plugin_configs)
        t0 = time.monotonic()
        run = service.start_run("A", node, {}, actor_name="bench")
        wait(lambda: run.steps.exists(), 120, "the run's first step")
        started = time.monotonic() - t0
        wait(lambda: ProcedureRun.objects.get(pk=run.pk).status in ("succeeded", "failed"), 300, "the run to end")
        done = time.monotonic() - t0
        return started, done, sum(s.accepted for s in servers)
    finally:
        for server in servers:
            server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hooks", type=int, default=10)
    parser.add_argument("--deadline", type=float, default=30.0, help="BRICK_NOTIFY_DEADLINE_SECONDS for the sends")
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
    args = parser.parse_args()
    os.environ["BRICK_NOTIFY_DEADLINE_SECONDS"] = str(args.deadline)
    try:
        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create_user("bench-hooked", password="bench-pw-123")
        worker("procedures", "--pool=solo", "--without-gossip", "--without-mingle")
        worker("notify", "-Q", "notify", "--concurrency=2", "--without-gossip", "--without-mingle")
        baseline = one_round(0, user, "dev-a1-ws04")
        rounds = [one_round(args.hooks, user, "dev-a1-ws04") for _ in range(args.rounds)]
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        db = "PostgreSQL" if PG else "SQLite"
        print(f"wizard A on the twin beside {args.hooks} trickling webhooks ({db}, Redis, load average {load}):")
        print(f"  no webhooks:        first step after {baseline[0]:.2f} s, succeeded after {baseline[1]:.1f} s")
        firsts = [r[0] for r in rounds]
        print(
            f"  {args.hooks} trickling ({args.rounds} rounds): first step median {statistics.median(firsts):.2f} s, "
            f"max {max(firsts):.2f} s; succeeded median {statistics.median(r[1] for r in rounds):.1f} s; "
            f"deliveries held by the notify worker meanwhile: {', '.join(str(r[2]) for r in rounds)}"
        )
        # the sends still held end at their deadline, a retry later: what each has come to by now
        counts = {}
        for status in Delivery.objects.values_list("status", flat=True):
            counts[status] = counts.get(status, 0) + 1
        print(f"  deliveries at the end: {', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}")
    finally:
        for proc in list(PROCS):
            throwaway.stop(proc, PROCS)
        if PG is not None:
            django.db.connections.close_all()
            PG.stop()
        subprocess.run(["rm", "-rf", str(VAR)], check=False)


if __name__ == "__main__":
    main()
