"""Sustained load benchmark (not a test): the production setup under people for minutes.

Started here, on loopback only, each on its own port and temp dir: PostgreSQL and Redis
(bench/throwaway.py, as bin/test starts them), the web process as the image runs it
(gunicorn with uvicorn workers, 3 workers, DJANGO_DEBUG=0, collected static files), one
Celery worker (prefork, concurrency 2, the beat inside it for the reaper) and the cluster
watcher (manage.py watch_cluster), on the twin (scenario "demo").

``--cluster lab``: the same against the Kubernetes lab (lab/up; bench/labcluster.py, as
bench/chaos.py points at it): the product's gateway is the lab's API server and its Prometheus
the lab's, the watcher watches the lab, runs execute on the lab's nodes (KWOK and lab/gpusim.py
simulate the kubelets and the device plugin), approvals create real namespaces and quotas. The
lab's lock is held meanwhile; the demo is loaded with lab/load_scenario.py before the load and
again after it, which removes the namespaces the load approved and undoes the runs. Printed
besides: the API server's requests during the load (its own ``apiserver_request_total``, all
clients) and every request a web worker sent to it, per page (bench/counted_asgi.py; the
target is 0 for pages that only show).

Then, for ``--minutes`` (default 10): ``--users`` (50) people sign in and browse (Dashboard,
Nodes, a node, Availability, their Workspaces, Jobs, Help, notifications), now and then
requesting a Workspace; ``--admins`` (5) cluster admins read the approval queue and approve
what waits, read the runs and the Health page, and start runs of procedure A or B on a node
the pick page offers (through the pick and plan pages, ticking what the plan asks). Each
person waits ``--think`` seconds (uniform) between pages.

Printed: per page p50 / p95 / p99 time and count; errors (5xx or no answer: the target is
0) and refusals (4xx, e.g. a run refused because another holds the node); runs started and
how they ended; approvals; the resident memory of each web worker and of the watcher at the
start (after a warm-up in which every person reads each page of its turns once) and at the
end (flat: no growth beyond 10 %), and at each minute between (a leak keeps growing, a
warm-up levels off); the load average.

Run: .venv/bin/python bench/load.py [--minutes 10] [--users 50] [--admins 5] [--think 3 8]
     [--cluster lab] [--seed N]
"""

import argparse
import html.parser
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import labcluster  # noqa: E402  (bench/, the script's own directory)
import throwaway  # noqa: E402

VAR = Path(tempfile.mkdtemp(prefix="brick-bench-load-"))
PROCS: list[subprocess.Popen] = []
PG = None  # the PostgreSQL this run started
LAB_LOADED = False  # the demo was loaded into the lab: loaded again at the end (what the load made removed)
LOGS = []
PASSWORD = "load-bench-pw-8271"  # noqa: S105  (throwaway accounts of a throwaway database; sessions are made directly)

for _name in (
    "DJANGO_SETTINGS_MODULE",
    "CELERY_TASK_ALWAYS_EAGER",
    "PROMETHEUS_URL",
    "BRICK_KUBECONFIG",
    "BRICK_IN_CLUSTER",
    "BRICK_CLUSTER",
):
    os.environ.pop(_name, None)


def cleanup(pg):
    for proc in reversed(list(PROCS)):
        try:
            throwaway.stop(proc, PROCS)
        except Exception as exc:  # keep going: the others must end too
            print(f"could not stop pid {proc.pid}: {exc!r}", file=sys.stderr)
    if pg is not None and pg.running:
        pg.stop("fast")
    for f in LOGS:
        f.close()


def spawn(name, cmd, env):
    return throwaway.spawn(VAR / f"{name}.log", cmd, env, REPO, PROCS, LOGS)


rss_mib, children = throwaway.rss_mib, throwaway.children


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# --- the people ------------------------------------------------------------------------------


class Form(html.parser.HTMLParser):
    """The inputs of the forms on a page: {action: {name: value}}, with checkboxes ticked,
    the first option of a select, and the enabled radio values per name."""

    def __init__(self):
        super().__init__()
        self.forms, self.radios, self._action, self._select = {}, defaultdict(list), None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._action = a.get("action") or ""
            self.forms.setdefault(self._action, {})
        elif self._action is None:
            return
        elif tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind == "radio":
                if "disabled" not in a:
                    self.radios[a["name"]].append(a.get("value", ""))
            elif kind == "checkbox":
                self.forms[self._action][a["name"]] = a.get("value", "on")
            elif kind not in ("submit", "button"):
                self.forms[self._action].setdefault(a["name"], a.get("value", ""))
        elif tag == "select" and a.get("name"):
            self._select = a["name"]
        elif tag == "option" and self._select and a.get("value"):
            self.forms[self._action].setdefault(self._select, a["value"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._action = None
        elif tag == "select":
            self._select = None


def parse(page: str) -> Form:
    f = Form()
    f.feed(page)
    return f


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.times = defaultdict(list)
        self.errors = defaultdict(int)
        self.refused = defaultdict(int)
        self.samples = []
        self.runs, self.approved, self.requested, self.resent = [], 0, 0, 0

    def add(self, page, seconds, status, why=""):
        with self.lock:
            self.times[page].append(seconds)
            if status is None or status >= 500:
                self.errors[page] += 1
                if len(self.samples) < 10:
                    self.samples.append(f"{page}: {status} {why}")
            elif status >= 400:
                self.refused[page] += 1


class Person(threading.Thread):
    def __init__(self, base, username, stats, stop_at, think, rng, admin=False, session=""):
        super().__init__(daemon=True)
        import requests

        self.base, self.username, self.stats, self.stop_at = base, username, stats, stop_at
        self.think, self.rng, self.admin = think, rng, admin
        self.s = requests.Session()
        origin = base.replace("http://", "https://")
        # Behind the TLS proxy of production: Django sees https (SECURE_PROXY_SSL_HEADER).
        self.s.headers.update({"X-Forwarded-Proto": "https", "Origin": origin, "Referer": origin + "/"})
        host = base.split("//", 1)[1].split(":")[0]
        if session:
            self.s.cookies.set("sessionid", session, domain=host)
        # A CSRF secret of our own (32 letters and digits), as the cookie a first page would set.
        self.s.cookies.set(
            "csrftoken", "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(32)), domain=host
        )

    def fetch(self, page, path, data=None, expect_redirect=False):
        import requests

        t0 = time.monotonic()
        r, status, why = None, None, ""
        for attempt in (1, 2):
            try:
                if data is None:
                    r = self.s.get(self.base + path, timeout=60, allow_redirects=False)
                else:
                    data = {"csrfmiddlewaretoken": self.s.cookies.get("csrftoken", ""), **data}
                    r = self.s.post(self.base + path, data=data, timeout=60, allow_redirects=False)
                status = r.status_code
                break
            except requests.ConnectionError as exc:
                # A kept-alive connection the server closed as it was reused: a browser sends
                # a GET again on a new one; counted apart, not as an error.
                why = repr(exc)[:160]
                if data is None and attempt == 1:
                    with self.stats.lock:
                        self.stats.resent += 1
                    continue
                break
            except Exception as exc:
                why = repr(exc)[:160]
                break
        self.stats.add(page, time.monotonic() - t0, status, why)
        for c in self.s.cookies:
            c.secure = False  # the session and CSRF cookies are Secure; this client speaks plain HTTP
        return r

    def pause(self):
        time.sleep(self.rng.uniform(*self.think))

    USER_PAGES = (
        ("dashboard", "/"),
        ("availability", "/availability/"),
        ("profile", "/profile/"),
        ("workspaces", "/workspaces/"),
        ("jobs", "/workspaces/jobs/"),
        ("help", "/help/"),
        ("notifications", "/notifications/"),
    )

    def warm(self):
        """Every page this person's turns read, once, before the measured load: the memory at
        start is then that of a site that has served each of them (templates compiled,
        modules imported, caches filled), so what grows after it is the load's."""
        for page, path in self.USER_PAGES + (("workspace request", "/workspaces/new/"),):
            self.fetch(page, path)
        if not self.admin:
            return
        for page, path in (
            ("approval queue", "/workspaces/approvals/"),
            ("runs", "/runs/"),
            ("health", "/health/"),
            ("all workspaces", "/workspaces/all/"),
        ):
            self.fetch(page, path)
        r = self.fetch("nodes", "/nodes/")
        names = [x.split('"')[0] for x in r.text.split('href="/nodes/')[1:]] if r is not None else []
        if names and names[0]:
            self.fetch("node", f"/nodes/{names[0]}")
        for code in "AB":
            r = self.fetch("procedure pick", f"/procedures/{code}/")
            nodes = (parse(r.text).radios.get("node") or []) if r is not None and r.status_code == 200 else []
            if nodes:
                self.fetch("procedure plan", f"/procedures/{code}/plan/?node={nodes[0]}")

    def run(self):
        n = 0
        while time.monotonic() < self.stop_at:
            n += 1
            try:
                (self.admin_turn if self.admin else self.user_turn)(n)
            except Exception as exc:  # a page that could not be read: counted, the person goes on
                self.stats.add("bench-client", 0.0, None)
                self.stats.samples.append(f"{self.username}: {exc!r}"[:200])
            self.pause()

    def user_turn(self, n):
        page, path = self.rng.choice(self.USER_PAGES)
        self.fetch(page, path)
        if n % 20 == 5:  # now and then, a Workspace
            self.fetch("workspace request", "/workspaces/new/")
            name = f"{self.username}-{n}-{self.rng.randrange(1000)}"
            r = self.fetch(
                "workspace request",
                "/workspaces/new/",
                {"name": name, "gpu": 0, "cpu": 1, "memory_gib": 1, "storage_gib": 1},
            )
            if r is not None and r.status_code == 302:
                with self.stats.lock:
                    self.stats.requested += 1

    def admin_turn(self, n):
        turn = n % 4
        if turn == 0:
            r = self.fetch("approval queue", "/workspaces/approvals/")
            if r is None or r.status_code != 200:
                return
            forms = parse(r.text).forms
            todo = [a for a in forms if a.endswith("/approve/") and "/approvals/jobs/" not in a]
            if todo:
                action = self.rng.choice(todo)
                r = self.fetch(
                    "approve", action, {k: v for k, v in forms[action].items() if k != "csrfmiddlewaretoken"}
                )
                if r is not None and r.status_code == 302:
                    with self.stats.lock:
                        self.stats.approved += 1
        elif turn == 1:
            self.fetch("runs", "/runs/")
            self.fetch("health", "/health/")
        elif turn == 2:
            self.start_run()
        else:
            r = self.fetch("nodes", "/nodes/")
            names = [x.split('"')[0] for x in r.text.split('href="/nodes/')[1:]] if r is not None else []
            if names and names[0]:
                self.pause()
                self.fetch("node", f"/nodes/{self.rng.choice(names[:20])}")
            self.fetch("all workspaces", "/workspaces/all/")

    def start_run(self):
        code = self.rng.choice("AB")
        r = self.fetch("procedure pick", f"/procedures/{code}/")
        if r is None or r.status_code != 200:
            return
        nodes = parse(r.text).radios.get("node") or []
        if not nodes:
            return
        node = self.rng.choice(nodes)
        self.pause()
        r = self.fetch("procedure plan", f"/procedures/{code}/plan/?node={node}")
        if r is None or r.status_code != 200:
            return
        forms = parse(r.text).forms
        action = next((a for a in forms if a.endswith("/start/")), None)
        if action is None:
            return
        self.pause()
        data = {k: v for k, v in forms[action].items() if k != "csrfmiddlewaretoken"}
        r = self.fetch("procedure start", action, data)
        if r is not None and r.status_code == 302 and "/runs/" in r.headers.get("Location", ""):
            location = r.headers["Location"]
            with self.stats.lock:
                self.stats.runs.append(int(location.rstrip("/").rsplit("/", 1)[-1]))
            self.pause()
            self.fetch("run page", location)


def page_shape(page: str) -> str:
    """ "GET /nodes/gpu-a-1" -> "GET /nodes/…": the page, without the node, run or request it is about."""
    method, _, path = page.partition(" ")
    parts = [p for p in path.split("/") if p]
    keep = []
    for part in parts:
        if part.isdigit() or (keep and keep[-1] == "nodes"):
            keep.append("…")
        else:
            keep.append(part)
    return f"{method} /{'/'.join(keep)}{'/' if path.endswith('/') and keep else ''}"


def api_resource(path: str) -> str:
    """ "/api/v1/namespaces/x/pods/y" -> "pods"; "/apis/apps/v1/daemonsets" -> "daemonsets"."""
    seg = [p for p in path.split("/") if p]
    seg = seg[2:] if seg[:1] == ["api"] else seg[3:] if seg[:1] == ["apis"] else seg
    if seg[:1] == ["namespaces"] and len(seg) > 2:
        seg = seg[2:]
    return "/".join([seg[0], *seg[2:3]]) if seg else path


def report_api(start, end, log: Path, elapsed: float) -> int:
    """The lab API server's requests during the load (all its clients), and those the web
    workers sent, per page. Returns how many came from pages that only show (GET), the
    procedure pages apart (their pre-checks read the node live, before a change)."""
    delta = end - start
    total = sum(delta.values())
    print(
        f"\nthe lab's API server during the load (all clients: product, KWOK, controllers, gpusim, KSM): {total} "
        f"requests ({total / elapsed:.1f}/s); by verb: "
        + ", ".join(
            f"{v} {n}" for v, n in sorted(sum((Counter({k[0]: n}) for k, n in delta.items()), Counter()).items())
        )
    )
    import json

    per_page: dict[str, Counter] = defaultdict(Counter)
    for line in log.read_text().splitlines():
        _pid, page, verb, path = json.loads(line)
        per_page[page_shape(page)][f"{verb} {api_resource(path)}"] += 1
    print(f"the web workers' requests to it: {sum(sum(c.values()) for c in per_page.values())}, per page:")
    showing = 0
    for page, calls in sorted(per_page.items()):
        n = sum(calls.values())
        print(f"  {n:6d}  {page:<24} {', '.join(f'{k} {v}' for k, v in sorted(calls.items()))}")
        if page.startswith("GET ") and not page.startswith("GET /procedures/"):
            showing += n
    print(f"  from pages that only show (GET, the procedure pages apart): {showing}  (target 0)")
    return showing


# --- the product ---------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--admins", type=int, default=5)
    parser.add_argument("--think", type=float, nargs=2, default=(3.0, 8.0), metavar=("MIN", "MAX"))
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn workers (the image: 3)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cluster", choices=("twin", "lab"), default="twin", help="the product's cluster")
    args = parser.parse_args()
    args.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    on_lab = args.cluster == "lab"

    global PG, LAB_LOADED
    if on_lab:
        labcluster.hold(600)  # one lab per machine: tests and benches take turns
        LAB_LOADED = True
        labcluster.load("demo")  # a fresh demo: what earlier loads approved or ran is gone
        labcluster.release_namespace()
    pg = PG = throwaway.Postgres(VAR, max_connections=200)
    pg.start()
    redis = throwaway.Redis(VAR, PROCS)
    redis.start()
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
        **(labcluster.product_env(prometheus=True) if on_lab else {}),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "load-bench-only-" + os.urandom(24).hex(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
    }
    py = sys.executable
    manage = [py, "manage.py"]
    for step in (["migrate", "--noinput", "-v0"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run(manage + step, cwd=REPO, env=env, check=True)
    if not on_lab:
        # The twin loaded with the demo scenario (demo_setup runs only with DEBUG on; the site then runs with it off).
        subprocess.run(
            manage + ["demo_setup", "--scenario", "demo"],
            cwd=REPO,
            env={**env, "DJANGO_DEBUG": "1"},
            check=True,
            stdout=subprocess.DEVNULL,
        )
    users = [f"user{i:02d}" for i in range(args.users)]
    admins = [f"admin{i}" for i in range(args.admins)]
    # Each person gets a signed-in session made here, as the login page would make it: 55
    # sign-ins at once would measure the password hash (about a second of CPU each, by
    # design), not the pages.
    make = (
        "import json, os\n"
        "from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model\n"
        "from django.contrib.auth.hashers import make_password\n"
        "from django.contrib.sessions.backends.db import SessionStore\n"
        "U = get_user_model(); h = make_password(os.environ['LOAD_PASSWORD'])\n"
        "names = os.environ['LOAD_ACCOUNTS'].split()\n"
        "U.objects.bulk_create([U(username=n, password=h, is_staff=n.startswith('admin')) for n in names])\n"
        "out = {}\n"
        "for u in U.objects.filter(username__in=names):\n"
        "    s = SessionStore()\n"
        "    s[SESSION_KEY] = str(u.pk)\n"
        "    s[BACKEND_SESSION_KEY] = 'brickadmin.sso.backend.LocalBackend'\n"
        "    s[HASH_SESSION_KEY] = u.get_session_auth_hash()\n"
        "    s.create()\n"
        "    out[u.username] = s.session_key\n"
        "open(os.environ['LOAD_SESSIONS'], 'w').write(json.dumps(out))\n"
    )
    sessions_file = VAR / "sessions.json"
    accounts = {
        **env,
        "LOAD_PASSWORD": PASSWORD,
        "LOAD_ACCOUNTS": " ".join(users + admins),
        "LOAD_SESSIONS": str(sessions_file),
    }
    subprocess.run(manage + ["shell", "-c", make], cwd=REPO, env=accounts, check=True)
    import json

    sessions = json.loads(sessions_file.read_text())

    api_log = VAR / "web-api-requests.jsonl"
    web = spawn(
        "web",
        [
            py,
            "-m",
            "gunicorn",
            *(["--pythonpath", str(REPO / "bench"), "counted_asgi:application"] if on_lab else []),
            *([] if on_lab else ["brickadmin.asgi:application"]),
            "--worker-class",
            "uvicorn_worker.UvicornWorker",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.web_workers),
            "--timeout",
            "60",
        ],
        {**env, "BRICK_BENCH_API_LOG": str(api_log)},
    )
    worker = spawn(
        "worker",
        [
            py,
            "-m",
            "celery",
            "-A",
            "brickadmin",
            "worker",
            "--beat",
            "--concurrency=2",
            "-l",
            "WARNING",
            "--schedule",
            str(VAR / "celerybeat-schedule"),
        ],
        env,
    )
    watcher = spawn("watcher", manage + ["watch_cluster"], env)
    base = f"http://127.0.0.1:{port}"
    import requests

    for _ in range(300):
        try:
            if requests.get(base + "/healthz", timeout=2).status_code < 500:
                break
        except Exception:
            time.sleep(0.2)
    else:
        sys.exit(f"the web process did not answer (see {VAR / 'web.log'})")

    def memory():
        return {
            "web": {pid: rss_mib(pid) for pid in children(web.pid)},
            "watcher": rss_mib(watcher.pid),
        }

    stats = Stats()
    rng = random.Random(args.seed)
    # Warm-up: every person signs in and sees a page, so the memory at start is that of a
    # running site, not of freshly forked workers; the measured load goes on in those sessions.
    stop_at = time.monotonic() + 1e9  # set when the load starts
    people = [
        Person(
            base,
            name,
            Stats(),
            stop_at,
            tuple(args.think),
            random.Random(rng.random()),
            name.startswith("admin"),
            sessions[name],
        )
        for name in users + admins
    ]
    warmers = [threading.Thread(target=p.warm) for p in people]
    for t in warmers:
        t.start()
        time.sleep(0.1)
    for t in warmers:
        t.join()
    at_start = memory()
    load_start = os.getloadavg()
    api_start = labcluster.apiserver_requests() if on_lab else None
    api_log.write_text("")  # the web workers' API requests from here on (the warm-up's dropped)
    print(
        f"bench/load.py: {args.users} users and {args.admins} admins for {args.minutes:g} min, think "
        f"{args.think[0]:g}-{args.think[1]:g}s; gunicorn + uvicorn workers x{args.web_workers} (DEBUG off), "
        f"PostgreSQL {pg.url}, Redis {redis.url}, worker (prefork x2, beat inside), watcher; "
        f"{'the lab (demo; API server ' + labcluster.lab_module().API_URL + ')' if on_lab else 'twin (demo)'}; "
        f"seed {args.seed}; logs in {VAR}",
        flush=True,
    )
    stop_at = time.monotonic() + args.minutes * 60
    for p in people:
        p.stats, p.stop_at = stats, stop_at
    for p in people:
        p.start()
        time.sleep(0.05)
    loads, trail, next_sample = [], [], time.monotonic() + 60
    while any(p.is_alive() for p in people):
        time.sleep(5)
        loads.append(os.getloadavg()[0])
        if time.monotonic() >= next_sample:  # a leak grows minute after minute; a warm-up levels off
            trail.append(memory())
            next_sample += 60
    at_end = memory()
    api_end = labcluster.apiserver_requests() if on_lab else None
    elapsed = args.minutes * 60

    print("\n| page | count | p50 ms | p95 ms | p99 ms | errors | refused (4xx) |")
    print("|---|---|---|---|---|---|---|")
    total = 0
    for page in sorted(stats.times):
        t = [x * 1000 for x in stats.times[page]]
        total += len(t)
        print(
            f"| {page} | {len(t)} | {statistics.median(t):.0f} | {pct(t, 95):.0f} | {pct(t, 99):.0f} | "
            f"{stats.errors[page]} | {stats.refused[page]} |"
        )
    errors = sum(stats.errors.values())
    print(
        f"\nrequests: {total} ({total / elapsed:.1f}/s); errors (5xx or no answer): {errors}  (target 0); "
        f"GETs sent again on a new connection (kept-alive one closed): {stats.resent}"
    )
    for sample in stats.samples:
        print(f"  {sample}")
    os.environ.update(
        {"DATABASE_URL": pg.url, "DJANGO_SETTINGS_MODULE": "brickadmin.settings", "BRICK_VAR_DIR": str(VAR)}
    )
    import django

    django.setup()
    from gpus.models import ProcedureRun

    ends = defaultdict(int)
    deadline = time.monotonic() + (180 if on_lab else 60)  # the runs started last finish
    while time.monotonic() < deadline:
        states = list(ProcedureRun.objects.filter(pk__in=stats.runs).values_list("status", flat=True))
        if not any(s in ("pending", "running") for s in states):
            break
        time.sleep(1)
    for s in states:
        ends[s] += 1
    for pk, message in ProcedureRun.objects.filter(pk__in=stats.runs, status="failed").values_list("pk", "message"):
        print(f"  run #{pk} failed: {message[:160]}")
    print(
        f"runs started: {len(stats.runs)} ({dict(ends)}); Workspaces requested: {stats.requested}, "
        f"approved: {stats.approved}"
    )
    page_api = report_api(api_start, api_end, api_log, elapsed) if on_lab else 0
    grew = []
    print("\nresident memory (MiB), start (after every person's warm-up) -> end; then each minute of the load:")
    for pid, mib in sorted(at_start["web"].items()):
        end = at_end["web"].get(pid)
        change = (end / mib - 1) * 100 if end else float("nan")
        minutes = " ".join(f"{m['web'].get(pid, float('nan')):.0f}" for m in trail)
        print(
            f"  web worker {pid}: {mib:.0f} -> {end:.0f} ({change:+.1f} %); by minute: {minutes}"
            if end
            else f"  web worker {pid}: gone"
        )
        if not end or change > 10:
            grew.append(f"web {pid}")
    change = (at_end["watcher"] / at_start["watcher"] - 1) * 100
    minutes = " ".join(f"{m['watcher']:.0f}" for m in trail)
    print(
        f"  watcher {watcher.pid}: {at_start['watcher']:.0f} -> {at_end['watcher']:.0f} ({change:+.1f} %); "
        f"by minute: {minutes}"
    )
    if change > 10:
        grew.append("watcher")
    new_web = set(at_end["web"]) - set(at_start["web"])
    if new_web:
        print(f"  web workers started during the load (gunicorn replaced one): {sorted(new_web)}")
    print(
        f"load average (2 shared cores): at start {load_start[0]:.2f}, during the load median "
        f"{statistics.median(loads):.2f} max {max(loads):.2f}, at end {os.getloadavg()[0]:.2f}"
    )
    for name, proc in (("web", web), ("worker", worker), ("watcher", watcher)):
        if proc.poll() is not None:
            print(f"  the {name} process exited ({proc.returncode}): see {VAR / (name + '.log')}")
            grew.append(name)
    ok = errors == 0 and not grew and not page_api
    print(
        "\nresult:",
        "ok"
        if ok
        else f"FAIL ({errors} errors; memory grew or process gone: {grew}; API requests of pages that only show: "
        f"{page_api})",
    )
    from django.db import connection

    connection.close()
    return 0 if ok else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    code = 1
    try:
        code = main()
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    finally:
        cleanup(PG)
        if LAB_LOADED:
            try:
                labcluster.load("demo")  # the lab as the load found it: its namespaces and runs undone
                print("the lab: the demo loaded again (the namespaces the load approved removed, the runs undone)")
            except Exception as exc:
                print(f"the lab could not be reset: {exc!r}", file=sys.stderr)
                code = code or 1
        if code == 0:
            shutil.rmtree(VAR, ignore_errors=True)
        else:
            print(f"(logs kept in {VAR})", file=sys.stderr)
    sys.exit(code)
