"""Open run-page streams against PostgreSQL (not a test): what N open streams cost the database.

Started here, on loopback only, each on its own port and temp dir: PostgreSQL with its default
``max_connections`` (100) and Redis (bench/throwaway.py, as bin/test starts them), the web
process as the image runs it (gunicorn with ``--web-workers`` uvicorn workers, DJANGO_DEBUG=0),
one Celery worker (without beat: nothing re-enqueues the run the streams follow) and the
cluster watcher (manage.py watch_cluster), on the twin (scenario "seed-example").

Then ``--streams`` (500) run-page streams are opened, 50 at a time, from as many admin
accounts as the per-user bound asks (sessions made directly, as bench/load.py makes them), all
following a run that waits (pending, never dispatched), and held open ``--hold`` seconds.
Meanwhile a run is started on another node and executed by the worker, followed by a few
more streams, and the Dashboard, the runs list and /readyz are asked for again and again.

Printed: the streams answered 200, 429 and 503 (with their Retry-After); PostgreSQL's client
connections (pg_stat_activity, all processes; this script's own left out) before, the most
while the streams opened and were held, and after; each page's answers and p50/max time with
no stream open and with the streams open; the worker's run (from start to succeeded, and
whether its streams got "done"); the view's generation and the watcher's last sign of life
before and after the hold; the web workers' resident memory. No figure is asserted: the script reports.

Run: nice .venv/bin/python bench/streams.py [--streams 500] [--web-workers 3] [--hold 20]
     [--per-process N] [--per-user N]   (the bounds' defaults: brickadmin/settings.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import throwaway  # noqa: E402  (bench/, the script's own directory)

VAR = Path(tempfile.mkdtemp(prefix="brick-bench-streams-"))
PROCS: list[subprocess.Popen] = []
LOGS = []
HOST = "127.0.0.1"

for _name in ("DJANGO_SETTINGS_MODULE", "CELERY_TASK_ALWAYS_EAGER", "PROMETHEUS_URL", "BRICK_KUBECONFIG"):
    os.environ.pop(_name, None)


def spawn(name, cmd, env):
    return throwaway.spawn(VAR / f"{name}.log", cmd, env, REPO, PROCS, LOGS)


rss_mib, children = throwaway.rss_mib, throwaway.children


# Accounts, sessions and the two runs, made in the product's own Django (manage.py shell).
SETUP = """
import json, os
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from gpus.procedures import service
U = get_user_model()
names = [f"admin{i:03d}" for i in range(int(os.environ["BENCH_ADMINS"]))]
U.objects.bulk_create([U(username=n, password="!", is_staff=True) for n in names])
sessions = []
for u in U.objects.filter(username__in=names).order_by("username"):
    s = SessionStore()
    s[SESSION_KEY] = str(u.pk)
    s[BACKEND_SESSION_KEY] = "brickadmin.sso.backend.LocalBackend"
    s[HASH_SESSION_KEY] = u.get_session_auth_hash()
    s.create()
    sessions.append(s.session_key)
waits = service.start_run("A", "dev-a1-ws02", {}, actor_name="bench", dispatch=False)
waits.refresh_from_db()
out = {"sessions": sessions, "waits": [waits.pk, waits.last_seq]}
open(os.environ["BENCH_OUT"], "w").write(json.dumps(out))
"""

START = """
import json, os
from gpus.procedures import service
run = service.start_run("A", "dev-a1-ws04", {}, actor_name="bench")  # dispatched to the worker on commit
run.refresh_from_db()
open(os.environ["BENCH_OUT"], "w").write(json.dumps([run.pk, run.last_seq]))
"""


class Connections:
    """PostgreSQL's client connections, sampled every 0.2 s from a connection of this script."""

    def __init__(self, url: str):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def now(self) -> int:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        return self.conn.execute(sql).fetchone()[0]

    def loop(self):
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), self.now()))
            time.sleep(0.2)

    def most(self, since: float, until: float) -> int:
        return max((n for t, n in self.samples if since <= t <= until), default=-1)

    def watcher(self) -> tuple[int, object]:
        """The view's generation and when the watcher last said it was alive."""
        row = self.conn.execute("SELECT generation, watcher_seen_at FROM gpus_viewstate WHERE id = 1").fetchone()
        return (int(row[0]), row[1]) if row else (0, None)


def pages(base: str, session: str, rounds: int) -> dict[str, tuple[Counter, list[float]]]:
    import requests

    s = requests.Session()
    s.cookies.set("sessionid", session, domain=HOST)
    s.headers["X-Forwarded-Proto"] = "https"  # as the ingress says; DEBUG off redirects plain HTTP
    out: dict[str, tuple[Counter, list[float]]] = {}
    for _ in range(rounds):
        for name, path in (("Dashboard", "/"), ("Runs", "/runs/"), ("/readyz", "/readyz")):
            t0 = time.perf_counter()
            try:
                status = s.get(base + path, timeout=60, allow_redirects=False).status_code
            except Exception as exc:  # no answer: counted as such
                status = type(exc).__name__
            codes, times = out.setdefault(name, (Counter(), []))
            codes[status] += 1
            times.append(time.perf_counter() - t0)
    return out


def show_pages(label: str, measured) -> None:
    for name, (codes, times) in measured.items():
        answers = ", ".join(f"{code} x{n}" for code, n in sorted(codes.items(), key=str))
        print(
            f"  {label:<18} {name:<10} {answers:<22} p50 {statistics.median(times) * 1000:6.0f} ms"
            f"  max {max(times) * 1000:6.0f} ms"
        )


class Stream:
    """One run-page stream over a socket of its own: its status, Retry-After, what it read."""

    def __init__(self, path: str, session: str):
        self.path, self.session = path, session
        self.status: int | str = "-"
        self.retry_after = ""
        self.body = b""
        self.task: asyncio.Task | None = None
        self.writer = None

    async def open(self, port: int):
        try:
            reader, self.writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 60)
            self.writer.write(
                (
                    f"GET {self.path} HTTP/1.1\r\nHost: {HOST}\r\nAccept: text/event-stream\r\n"
                    f"X-Forwarded-Proto: https\r\nCookie: sessionid={self.session}\r\n\r\n"
                ).encode()
            )
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 120)
        except Exception as exc:
            self.status = type(exc).__name__
            return
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            if line.lower().startswith("retry-after:"):
                self.retry_after = line.split(":", 1)[1].strip()
        self.task = asyncio.get_running_loop().create_task(self.drain(reader))

    async def drain(self, reader):
        try:
            while chunk := await reader.read(65536):
                self.body += chunk
        except Exception:
            pass

    def close(self):
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()


async def open_all(streams: list[Stream], port: int, batch: int = 50):
    for i in range(0, len(streams), batch):
        await asyncio.gather(*(s.open(port) for s in streams[i : i + batch]))


def main():
    from brickadmin import settings as defaults  # the bounds' defaults, read as the product reads them

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn workers (the image: 3)")
    parser.add_argument("--hold", type=float, default=20, help="seconds the streams are held open")
    parser.add_argument("--per-process", type=int, default=defaults.BRICK_RUN_STREAMS_PER_PROCESS)
    parser.add_argument("--per-user", type=int, default=defaults.BRICK_RUN_STREAMS_PER_USER)
    parser.add_argument("--followers", type=int, default=5, help="streams following the worker's run")
    args = parser.parse_args()

    pg = throwaway.Postgres(VAR)  # max_connections 100, PostgreSQL's default
    redis = throwaway.Redis(VAR, PROCS)
    try:
        pg.start()
        redis.start()
        run(args, pg, redis)
    finally:
        for proc in reversed(list(PROCS)):
            try:
                throwaway.stop(proc, PROCS)
            except Exception as exc:  # keep going: the others must end too
                print(f"could not stop pid {proc.pid}: {exc!r}", file=sys.stderr)
        if pg.running:
            pg.stop("fast")
        for f in LOGS:
            f.close()


def run(args, pg, redis):
    port = throwaway.free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": pg.url,
        "REDIS_URL": redis.url,
        "BRICK_VAR_DIR": str(VAR),
        "BRICK_STATIC_ROOT": str(VAR / "static"),
        "BRICK_CLUSTER": "twin",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "streams-bench-only-" + os.urandom(24).hex(),
        "DJANGO_ALLOWED_HOSTS": HOST,
        "LOG_LEVEL": "WARNING",
        "BRICK_RUN_STREAMS_PER_PROCESS": str(args.per_process),
        "BRICK_RUN_STREAMS_PER_USER": str(args.per_user),
    }
    py = sys.executable
    manage = [py, "manage.py"]
    for step in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run(manage + step, cwd=REPO, env=env, check=True)
    subprocess.run(
        manage + ["demo_setup", "--scenario", "seed-example"],
        cwd=REPO,
        env={**env, "DJANGO_DEBUG": "1"},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    admins = max(1, -(-(args.streams + args.followers + 1) // max(1, args.per_user)))
    out = VAR / "setup.json"
    subprocess.run(
        manage + ["shell", "-c", SETUP],
        cwd=REPO,
        env={**env, "BENCH_ADMINS": str(admins), "BENCH_OUT": str(out)},
        check=True,
    )
    setup = json.loads(out.read_text())
    sessions, (waits, waits_seq) = setup["sessions"], setup["waits"]

    web = spawn(
        "web",
        [
            py,
            "-m",
            "gunicorn",
            "brickadmin.asgi:application",
            "--worker-class",
            "uvicorn_worker.UvicornWorker",
            "--bind",
            f"{HOST}:{port}",
            "--workers",
            str(args.web_workers),
            "--timeout",
            "60",
        ],
        env,
    )
    spawn("worker", [py, "-m", "celery", "-A", "brickadmin", "worker", "--concurrency=1", "-l", "WARNING"], env)
    spawn("watcher", manage + ["watch_cluster"], env)
    base = f"http://{HOST}:{port}"
    import requests

    for _ in range(600):
        try:
            if requests.get(base + "/healthz", timeout=2).status_code < 500:
                break
        except Exception:
            time.sleep(0.2)
    else:
        sys.exit(f"the web process did not answer (see {VAR / 'web.log'})")

    conns = Connections(pg.url)
    pages(base, sessions[0], 1)  # warm: each worker's templates and imports, as far as it got one
    conns.thread.start()
    time.sleep(1)
    t_idle = time.monotonic()
    idle_pages = pages(base, sessions[0], 5)
    idle_conns = conns.now()
    print(
        f"{args.streams} streams, gunicorn + {args.web_workers} uvicorn workers (DEBUG off), PostgreSQL "
        f"max_connections {pg.max_connections}; bounds: {args.per_process} streams per process, "
        f"{args.per_user} per user ({admins} admin accounts)"
    )
    print(f"PostgreSQL client connections, no stream open: {idle_conns} (most {conns.most(t_idle, time.monotonic())})")
    rss_idle = sum(rss_mib(p) for p in children(web.pid))

    path = f"/runs/{waits}/stream/?after={waits_seq}&status=pending&cancel=0"
    streams = [Stream(path, sessions[i // args.per_user]) for i in range(args.streams)]
    state: dict = {}

    def client():
        async def go():
            t0 = time.monotonic()
            await open_all(streams, port)
            state["opened"] = time.monotonic() - t0
            state["open_done"] = True
            while not state.get("close"):
                await asyncio.sleep(0.1)
            for s in streams + state.get("followers", []):
                s.close()
            await asyncio.sleep(0.5)

        state["loop"] = asyncio.new_event_loop()
        state["loop"].run_until_complete(go())

    t_open = time.monotonic()
    opener = threading.Thread(target=client, daemon=True)
    opener.start()
    while not state.get("open_done"):
        time.sleep(0.2)
    codes = Counter(s.status for s in streams)
    retry = Counter(s.retry_after for s in streams if s.status in (429, 503))
    print(
        f"streams answered in {state['opened']:.1f} s: "
        + ", ".join(f"{c} x{n}" for c, n in sorted(codes.items(), key=str))
        + (f"; Retry-After {dict(retry)}" if retry else "")
    )
    gen0, seen0 = conns.watcher()
    t_hold = time.monotonic()

    # The worker runs a procedure while the streams are open, a few more streams following it.
    started = time.monotonic()
    subprocess.run(manage + ["shell", "-c", START], cwd=REPO, env={**env, "BENCH_OUT": str(out)}, check=True)
    moving, moving_seq = json.loads(out.read_text())
    follow = f"/runs/{moving}/stream/?after={moving_seq}&status=pending&cancel=0"
    followers = [Stream(follow, sessions[-1]) for _ in range(args.followers)]
    state["followers"] = followers
    asyncio.run_coroutine_threadsafe(open_all(followers, port), state["loop"]).result(timeout=300)
    held_pages = pages(base, sessions[0], 5)
    status, took = "?", None
    while time.monotonic() - started < max(args.hold, 300):
        status = conns.conn.execute("SELECT status FROM gpus_procedurerun WHERE id = %s", [moving]).fetchone()[0]
        if status not in ("pending", "running"):
            took = time.monotonic() - started
            break
        time.sleep(0.5)
    done_at = time.monotonic()
    while time.monotonic() - done_at < 60 and not all(b"event: done" in f.body for f in followers if f.status == 200):
        time.sleep(0.2)
    got_done = sum(b"event: done" in f.body for f in followers)
    while time.monotonic() - t_hold < args.hold:
        time.sleep(0.5)
    held_pages2 = pages(base, sessions[0], 3)
    gen1, seen1 = conns.watcher()
    rss_held = sum(rss_mib(p) for p in children(web.pid))
    t_close = time.monotonic()
    alive = sum(1 for s in streams if s.status == 200 and s.task is not None and not s.task.done())
    keep_alives = Counter(s.body.count(b": keep-alive") for s in streams if s.status == 200)
    state["close"] = True
    opener.join(timeout=30)
    time.sleep(2)
    after = conns.now()
    conns.stop.set()
    conns.thread.join(timeout=5)

    print(
        f"PostgreSQL client connections: no stream open {idle_conns}; most while the streams opened "
        f"({args.streams}, 50 at a time) {conns.most(t_open, t_hold)}; most while {codes.get(200, 0)} were held "
        f"{conns.most(t_hold, t_close)}; after they closed {after}"
    )
    per_stream = dict(sorted(keep_alives.items()))
    print(f"streams still open at the end of the hold: {alive}; keep-alives per stream: {per_stream}")
    print("pages (5 rounds each; the last 3 rounds at the end of the hold):")
    show_pages("no stream open", idle_pages)
    show_pages("streams open", held_pages)
    show_pages("end of the hold", held_pages2)
    print(
        f"worker: run #{moving} {status}"
        + (f" {took:.1f} s after it was started" if took is not None else " (still not ended)")
        + f"; {got_done} of {args.followers} streams following it got 'done' (answered: "
        + ", ".join(f"{c} x{n}" for c, n in sorted(Counter(f.status for f in followers).items(), key=str))
        + ")"
    )
    print(
        f"watcher: generation {gen0} -> {gen1} during the hold; last seen alive {seen0:%H:%M:%S} -> {seen1:%H:%M:%S}"
        if seen0 and seen1
        else f"watcher: generation {gen0} -> {gen1}; never seen alive"
    )
    print(f"web workers' resident memory: {rss_idle:.0f} MiB with no stream, {rss_held:.0f} MiB with the streams open")
    with open("/proc/loadavg") as f:
        print("load average:", " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
