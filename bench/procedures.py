"""Procedure engine benchmark (not a test).

1. Engine overhead per step: procedures A and B run inline on the twin; the time the
   engine spends outside the steps' own ensure/verify work (claiming, recording each
   event in its own transaction, cancel checks, heartbeat), per executed step.
2. Commit-to-browser latency of step state changes: the web process as the image runs it
   (gunicorn with uvicorn workers, ASGI, DJANGO_DEBUG=0 and the collected static files;
   `--debug` for DJANGO_DEBUG=1, `--server runserver` for Django's WSGI server), a real Celery
   worker on Redis, Debian's Chromium on the run page (its live stream: Server-Sent Events
   woken by NOTIFY on PostgreSQL, by the file's data_version on SQLite). For every event row
   that arrives after the page loaded: the time the browser showed it minus the time the row
   was recorded (just before its commit). Median, p95 and max, the load average, and the rows
   committed while the page was still loading shown apart. Target p95 < 100 ms. `--hops`
   times each hop (bench/stream_trace.py) and prints the slowest row's timeline.

Run: .venv/bin/python bench/procedures.py [--runs N] [--browser-runs N] [--no-browser] [--server S] [--debug]
     [--hops] [--postgres]
(own SQLite file under a temp dir unless DATABASE_URL is set; --postgres: a throwaway PostgreSQL
of its own; starts its own redis-server unless REDIS_URL is set.)
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
VAR = Path(os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-proc-")))
PG = None
if "--postgres" in sys.argv:  # a throwaway PostgreSQL of its own, as bin/test starts one
    import throwaway  # noqa: E402  (bench/, the script's own directory)

    PG = throwaway.Postgres(Path(tempfile.mkdtemp(prefix="brick-bench-pg-")))
    PG.start()
    os.environ["DATABASE_URL"] = PG.url
os.environ.setdefault("DATABASE_URL", f"sqlite:///{VAR / 'bench.sqlite3'}")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)
os.environ["BRICK_PROCEDURE_VERIFY_TIMEOUT"] = "0"
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright sync API runs an event loop

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus.models import ProcedureRun  # noqa: E402
from gpus.procedures import base, engine, service  # noqa: E402


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(name="seed-example"):
    objects, hardware, plugin_configs = scenarios.read(name)
    TwinGateway().load(objects, hardware, plugin_configs)


# --- 1. engine overhead -----------------------------------------------------------


def engine_overhead(runs: int):
    step_time = {"t": 0.0}

    def timed(fn):
        def wrapper(self, ctx):
            t0 = time.perf_counter()
            try:
                return fn(self, ctx)
            finally:
                step_time["t"] += time.perf_counter() - t0

        return wrapper

    classes = set()
    for proc in ("A", "B"):
        for s in engine.get_procedure(proc).steps({}):
            classes.add(type(s))
    for cls in classes:  # measure the steps' own work, to subtract it
        for name in ("ensure", "verify"):
            if name in cls.__dict__ or name in base.Step.__dict__:
                setattr(cls, name, timed(getattr(cls, name)))

    per_step, totals = [], []
    load()
    for i in range(runs):
        code, node = ("A", "dev-a1-ws04") if i % 2 == 0 else ("B", "dev-a1-ws04")
        run = service.start_run(code, node, {}, actor_name="bench", dispatch=False)
        step_time["t"] = 0.0
        t0 = time.perf_counter()
        status = engine.execute(run.pk)
        total = time.perf_counter() - t0
        assert status == "succeeded", ProcedureRun.objects.get(pk=run.pk).message
        executed = len(engine.get_procedure(code).steps({}))
        per_step.append((total - step_time["t"]) / executed * 1000)
        totals.append(total * 1000)
    print(f"engine overhead per step ({runs} runs of A/B, {executed} steps each, twin, {django.db.connection.vendor}):")
    print(
        f"  median {statistics.median(per_step):.1f} ms, p95 {pct(per_step, 95):.1f} ms "
        f"(whole run median {statistics.median(totals):.0f} ms, steps' own work excluded)"
    )
    return per_step


# --- 2. commit-to-browser latency ---------------------------------------------------

OBSERVER = """
(() => {
  window.__seen = {};
  window.__initial = {};
  const snap = (initial) => document.querySelectorAll('li[data-seq]').forEach(li => {
    const seq = li.dataset.seq;
    if (initial) { window.__initial[seq] = true; }
    if (!(seq in window.__seen)) window.__seen[seq] = Date.now();
  });
  window.__recv = {};
  window.__marks = {start: Date.now()};
  document.addEventListener('htmx:sseOpen', () => { window.__marks.open = window.__marks.open || Date.now(); });
  document.addEventListener('htmx:sseBeforeMessage', (e) => {
    const id = e.detail.lastEventId;
    if (id && !(id in window.__recv)) window.__recv[id] = Date.now();
  });
  document.addEventListener('DOMContentLoaded', () => {
    window.__marks.dcl = Date.now();
    snap(true);
    new MutationObserver(() => snap(false)).observe(document.body, {subtree: true, childList: true});
  });
})();
"""


def web_command(server: str, port: int, hops: bool = False) -> list[str]:
    if server == "runserver":
        return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    return [
        sys.executable,
        "-m",
        "gunicorn",
        *(["--pythonpath", "bench", "stream_trace:application"] if hops else ["brickadmin.asgi:application"]),
        "-k",
        "uvicorn_worker.UvicornWorker",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--access-logfile",
        "-",
    ]


def browser_latency(runs: int, pause: float, server: str = "gunicorn", hops: bool = False, debug: bool = False):
    chromium = "/usr/bin/chromium"
    if not os.path.exists(chromium):
        print("commit-to-browser latency: skipped (no /usr/bin/chromium)")
        return None
    procs = []
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    shutil.which("redis-server"),
                    "--port",
                    str(port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(VAR),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        redis_url = f"redis://127.0.0.1:{port}/0"
        time.sleep(0.5)
    from brickadmin.celery import app

    app.conf.broker_url = redis_url
    # This process set Django up without REDIS_URL (the embedded broker's transport): the worker's.
    app.conf.broker_transport = None
    app.conf.broker_transport_options = {"visibility_timeout": 3600}
    app._pool = None
    app.amqp._producer_pool = None
    env = {**os.environ, "REDIS_URL": redis_url, "BRICK_PROCEDURE_STEP_PAUSE": str(pause)}
    web_port = free_port()
    if not debug:
        # As the image runs it: DJANGO_DEBUG=0 and the collected, hashed static files (cached by the
        # browser for good, so a page load asks only for the page and its stream), behind the TLS
        # proxy (the browser's requests say X-Forwarded-Proto: https).
        env.update(
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY="procedures-bench-only-" + os.urandom(24).hex(),
            DJANGO_ALLOWED_HOSTS="127.0.0.1",
            BRICK_STATIC_ROOT=str(VAR / "static"),
            DJANGO_CSRF_TRUSTED_ORIGINS=f"http://127.0.0.1:{web_port}",
        )
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=REPO, env=env, check=True
        )
    if hops:
        env["BRICK_STREAM_TRACE"] = str(VAR / "hops")
    log = open(VAR / "bench-procs.log", "ab")
    procs.append(
        subprocess.Popen(
            web_command(server, web_port, hops and server == "gunicorn"),
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    procs.append(
        subprocess.Popen(
            [
                sys.executable,
                *(["bench/stream_trace.py"] if hops else ["-m", "celery", "-A", "brickadmin"]),
                "worker",
                "--pool=solo",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "WARNING",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    base_url = f"http://127.0.0.1:{web_port}"
    latencies, browser = [], []  # browser: (run, seq, recorded, seen, message id -> received)
    try:
        import urllib.request

        for _ in range(100):
            try:
                urllib.request.urlopen(base_url + "/login/", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = b.new_page(extra_http_headers={} if debug else {"X-Forwarded-Proto": "https"})
            page.goto(base_url + "/login/")
            page.fill("input[name=username]", "bench")
            page.fill("input[name=password]", "bench-pw-123")
            page.click("button[type=submit]")
            page.wait_for_url(base_url + "/")
            page.add_init_script(OBSERVER)
            for _ in range(runs):
                load()
                run = service.start_run("A", "dev-a1-ws04", {}, actor_name="bench")  # enqueued on commit
                page.goto(f"{base_url}/runs/{run.pk}/")
                page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=120_000)
                page.wait_for_timeout(50)
                seen = page.evaluate("window.__seen")
                initial = page.evaluate("window.__initial")
                recv = page.evaluate("window.__recv")
                recv.update({"mark:" + k: v for k, v in page.evaluate("window.__marks").items()})
                for e in run.steps.all():
                    key = str(e.seq)
                    if key in seen and key not in initial:
                        latencies.append(seen[key] - e.recorded_at.timestamp() * 1000)
                        browser.append((run.pk, e.seq, e.recorded_at.timestamp(), seen[key] / 1000, recv))
            b.close()
    finally:
        for pr in reversed(procs):  # the processes this script started, by their own ids
            try:
                os.killpg(pr.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pr.terminate()
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pr.kill()
        log.close()
    from django.conf import settings

    how = (
        f"SQLite looked at every {settings.BRICK_RUN_STREAM_POLL_MS} ms"
        if django.db.connection.vendor == "sqlite"
        else "LISTEN/NOTIFY on postgresql"
    )
    print(
        f"commit-to-browser latency (Chromium, Server-Sent Events served by {server} with "
        f"DJANGO_DEBUG={int(debug)}, {how}, {runs} runs of A, {len(latencies)} step events that arrived after "
        f"the page loaded; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}):"
    )
    print(
        f"  median {statistics.median(latencies):.0f} ms, p95 {pct(latencies, 95):.0f} ms, "
        f"max {max(latencies):.0f} ms  (target p95 < 100 ms)"
    )
    # A row committed before the page's stream had opened waited for the page itself (its render,
    # the browser's parsing, the stream's connection): shown apart, in the same units.
    loading = [ms for ms, b in zip(latencies, browser, strict=True) if b[2] * 1000 < b[4].get("mark:open", 0)]
    streaming = [ms for ms, b in zip(latencies, browser, strict=True) if b[2] * 1000 >= b[4].get("mark:open", 0)]
    for label, part in (("committed while the page was loading", loading), ("committed once it streamed", streaming)):
        if part:
            print(
                f"    {label}: {len(part)} events, median {statistics.median(part):.0f} ms, "
                f"p95 {pct(part, 95):.0f} ms, max {max(part):.0f} ms"
            )
    by_run = {}
    for b in browser:
        if b[2] * 1000 < b[4].get("mark:open", 0):
            by_run[b[0]] = by_run.get(b[0], 0) + 1
    runs_in_order = sorted({b[0] for b in browser})
    print(
        "    committed while the page was loading, per run in order (the first: the run page's scripts not yet "
        "cached): " + ", ".join(str(by_run.get(r, 0)) for r in runs_in_order)
    )
    if hops:
        print_hops(browser)
    return latencies


def print_hops(browser):
    """Where the time goes between a row's recording and the browser showing it (--hops)."""
    import stream_trace

    traces = stream_trace.read(str(VAR / "hops"))
    commit = {(run, seq): t for hop, run, seq, t in traces if hop == "commit"}
    by_id = {}  # the web process's hops of the message whose last row is seq: (hop -> time)
    for hop, run, seq, t in traces:
        if hop in ("call", "fetch0", "fetch1", "sent"):
            by_id.setdefault((run, seq), {}).setdefault(hop, t)
    wakes = sorted((run, t) for hop, run, _, t in traces if hop == "wake")
    lags = [(t, seq) for hop, _, seq, t in traces if hop == "lag"]
    segments = {
        k: []
        for k in (
            "recorded -> committed",
            "committed -> stream woke",
            "woke -> read asked",
            "read asked -> read began (thread queue)",
            "read + render",
            "rendered -> sent",
            "sent -> browser received",
            "received -> in the DOM",
            "committed -> in the DOM",
        )
    }
    rows = []
    for run, seq, recorded, dom, recv in browser:
        ids = sorted(int(i) for i in recv if i.isdigit() and int(i) >= seq)
        if not ids or (run, seq) not in commit or (run, ids[0]) not in by_id:
            continue
        m = ids[0]
        web, got = by_id[(run, m)], recv[str(m)] / 1000
        c = commit[(run, seq)]
        woke = next((w for r, w in reversed(wakes) if r == run and w <= web.get("call", 0)), None)
        points = [
            ("recorded -> committed", recorded, c),
            ("committed -> stream woke", c, woke if woke and woke >= c else None),
            ("woke -> read asked", woke if woke and woke >= c else None, web.get("call")),
            ("read asked -> read began (thread queue)", web.get("call"), web.get("fetch0")),
            ("read + render", web.get("fetch0"), web.get("fetch1")),
            ("rendered -> sent", web.get("fetch1"), web.get("sent")),
            ("sent -> browser received", web.get("sent"), got),
            ("received -> in the DOM", got, dom),
            ("committed -> in the DOM", c, dom),
        ]
        row = {}
        for name, a, b in points:
            if a is not None and b is not None:
                segments[name].append((b - a) * 1000)
                row[name] = (b - a) * 1000
        blocked = [ms for t, ms in lags if recorded <= t <= dom + 0.001]
        if blocked:
            row["loop blocked"] = max(blocked)
        rows.append((dom - recorded, seq, m, row, (run, seq, recorded, dom, recv)))
    print(f"  hops ({len(rows)} events; ms: median / p95 / max):")
    for name, values in segments.items():
        if values:
            print(f"    {name:42s} {statistics.median(values):6.1f} {pct(values, 95):6.1f} {max(values):6.1f}")
    print("  the slowest events (recorded -> DOM; each hop in ms):")
    for total, seq, m, row, _ in sorted(rows, key=lambda r: r[0], reverse=True)[:8]:
        print(
            f"    seq {seq} (message {m}) {total * 1000:.0f} ms: " + ", ".join(f"{k} {v:.0f}" for k, v in row.items())
        )
    # The slowest event's timeline (every hop of the web process and the browser around it), and
    # the slowest of those committed while the page was loading, when it is another.
    loading = [r for r in rows if r[4][2] * 1000 < r[4][4].get("mark:open", 0)]
    shown = []
    for title, among in (("the slowest", rows), ("the slowest committed while the page loaded", loading)):
        if not among or (pick := max(among, key=lambda r: r[0])) in shown:
            continue
        shown.append(pick)
        total, seq, m, _, (run, _, recorded, dom, recv) = pick
        around = [(t, f"{hop} {sq}" if sq >= 0 else hop) for hop, r, sq, t in traces if r in (run, -1)]
        around += [(t / 1000, f"browser {'received message ' if i.isdigit() else ''}{i}") for i, t in recv.items()]
        around.append((dom, f"browser showed {seq}"))
        print(f"  timeline of {title}, seq {seq} (ms after it was recorded; lag: the event loop blocked that long):")
        for t, what in sorted(x for x in around if recorded - 0.4 <= x[0] <= dom + 0.02):
            if not what.startswith("lag ") or int(what.split()[1]) >= 10:
                print(f"    {(t - recorded) * 1000:7.1f} {what}")
    if lags:
        print(f"  event loop blocked > 5 ms: {len(lags)} times, max {max(s for _, s in lags)} ms")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--browser-runs", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds each step pauses (worker)")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="serve with DJANGO_DEBUG=1 (static files revalidated on every page load) instead of as deployed",
    )
    parser.add_argument(
        "--hops",
        action="store_true",
        help="also time each hop (commit, the stream's wake-up, read, send, browser) via bench/stream_trace.py",
    )
    parser.add_argument(
        "--server",
        choices=("gunicorn", "runserver"),
        default="gunicorn",
        help="the web process: gunicorn with uvicorn workers (ASGI, as deployed) or runserver",
    )
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
    args = parser.parse_args()
    try:
        call_command("migrate", verbosity=0)
        User = get_user_model()
        if not User.objects.filter(username="bench").exists():
            User.objects.create_user("bench", password="bench-pw-123", is_staff=True)
        engine_overhead(args.runs)
        if not args.no_browser:
            browser_latency(args.browser_runs, args.pause, args.server, args.hops, args.debug)
    finally:
        if PG is not None:
            django.db.connections.close_all()
            PG.stop()


if __name__ == "__main__":
    main()
