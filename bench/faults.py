"""Fault benchmark (not a test): runs that outlive a worker killed with SIGKILL.

On the twin (scenario "demo", reloaded before every run so each starts from a clean
cluster), with a real Redis, a real Celery worker and a real Celery beat (the reaper
``gpus.tasks.reap_stale_runs`` on its schedule from settings.CELERY_BEAT_SCHEDULE), runs
procedures A, B and C in turn on targets the ledger says are valid, and for each run
kills the worker with SIGKILL at a random point after it claimed the run, starts a fresh
worker at once (one worker at a time) and waits for the run to finish. Nothing resumes a
run by hand: the reaper (or a redelivered task) has to take it over.

Per kill: recovery time = from the kill to the next StepRun row with state "running"
(intent IS NULL, i.e. not a write-ahead row) recorded after the kill; the first such row
is the new worker's "Claimed by worker" event, the step's own "running" row follows it.

Printed at the end: runs, kills, lost runs (not succeeded within the timeout: must be 0),
steps that succeeded twice in one run (must be 0), steps whose change was sent twice,
runs whose cluster is not in the target state, recovery time median / p95 / max (target
p95 < 15 s), and the settings in force (heartbeat staleness, reaper period, automatic
resumes). The heartbeat and reaper settings are the defaults: this measures them.

The beat runs as its own process, as in deploy/ (beat.yaml), and is not killed; with
--beat-in-worker it runs inside the worker (`worker --beat`, as bin/demo) and dies with it.

--lab adds 5 kills against the Kubernetes lab (lab/up; BRICK_KUBECONFIG or
/tmp/brickadmin-lab/kubeconfig), holding the lab lock; skipped, with the reason, when the
lab is not up, lab/ci.sh is running, or another process holds the lab.

Run: .venv/bin/python bench/faults.py [--kills 20] [--lab] [--seed N] [--pause-min 0.5 --pause-max 1]
Everything lives under a fresh temp dir (own SQLite file, redis-server on a free port,
worker and beat logs); every process it starts is ended on exit, Ctrl-C included.
"""

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import throwaway  # noqa: E402  (bench/, the script's own directory)

VAR = Path(tempfile.mkdtemp(prefix="brick-bench-faults-"))
DB_URL = f"sqlite:///{VAR / 'bench.sqlite3'}"
DEFAULT_LAB_KUBECONFIG = "/tmp/brickadmin-lab/kubeconfig"

# The measured defaults: nothing inherited from the caller's environment may change them.
for _name in (
    "BRICK_RUN_HEARTBEAT_STALE_SECONDS",
    "BRICK_RUN_AUTO_RESUMES",
    "BRICK_PROCEDURE_STEP_PAUSE",
    "BRICK_PROCEDURE_VERIFY_TIMEOUT",
    "BRICK_PROCEDURE_MAX_ATTEMPTS",
    "BRICK_PROCEDURE_RETRY_BACKOFF",
    "DJANGO_SETTINGS_MODULE",
    "CELERY_TASK_ALWAYS_EAGER",
):
    os.environ.pop(_name, None)

PROCS: list[subprocess.Popen] = []  # every process this script started (each in its own session)
LOGS = []


def stop(proc: subprocess.Popen, sig=signal.SIGTERM, timeout=15):
    """End one process this script started, and its process group (its own session)."""
    throwaway.stop(proc, PROCS, sig, timeout)


def cleanup():
    for proc in reversed(list(PROCS)):
        try:
            stop(proc)
        except Exception as exc:  # keep going: the others must end too
            print(f"could not stop pid {proc.pid}: {exc!r}", file=sys.stderr)
    for f in LOGS:
        f.close()
    LOGS.clear()


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def start_redis() -> str:
    redis_server = throwaway.Redis(VAR, PROCS)
    redis_server.start()
    return redis_server.url


# Redis first: Django's settings read REDIS_URL (the broker) once, at setup.
signal.signal(signal.SIGTERM, on_sigterm)
try:
    REDIS_URL = start_redis()
except BaseException:
    cleanup()
    raise
os.environ.update(
    {
        "BRICK_VAR_DIR": str(VAR),
        "DATABASE_URL": DB_URL,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
        "BRICK_CLUSTER": "twin",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "LOG_LEVEL": "WARNING",
    }
)
for _name in ("PROMETHEUS_URL", "BRICK_KUBECONFIG", "BRICK_IN_CLUSTER"):
    os.environ.pop(_name, None)

import django  # noqa: E402

try:
    django.setup()
except BaseException:
    cleanup()
    raise

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402

from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.deviceplugin import PLUGIN_NAMESPACE  # noqa: E402
from brickadmin.cluster.snapshot import take_snapshot  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus.choices import GpuMode  # noqa: E402
from gpus.models import ProcedureRun, StepRun  # noqa: E402
from gpus.numbers import ledger as ledger_mod  # noqa: E402
from gpus.procedures import engine, service  # noqa: E402
from gpus.procedures.recording import RUN_EVENT  # noqa: E402
from gpus.procedures.registry import get as get_procedure  # noqa: E402
from gpus.view import reading  # noqa: E402

TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def wait_for(predicate, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


# --- processes ----------------------------------------------------------------------


class Fleet:
    """One Celery worker at a time (killed and replaced), and one beat."""

    def __init__(self, rng, pause_range, pool, beat_in_worker, env_extra=None):
        self.rng, self.pause_range, self.pool, self.beat_in_worker = rng, pause_range, pool, beat_in_worker
        self.env_extra = env_extra or {}
        self.worker = None
        self.pause = None
        self.beat = None
        self.n = 0
        self.log = open(VAR / "celery.log", "ab")
        LOGS.append(self.log)

    def env(self, **extra):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            **self.env_extra,
            **extra,
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)  # brickadmin/celery.py sets it
        return env

    def start_beat(self):
        if self.beat_in_worker:
            return
        self.beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "brickadmin",
                "beat",
                "-l",
                "INFO",
                "--schedule",
                str(VAR / "celerybeat-schedule"),
                "--pidfile",
                str(VAR / "beat.pid"),
            ],
            cwd=VAR,
            env=self.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        PROCS.append(self.beat)

    def start_worker(self):
        self.n += 1
        self.pause = round(self.rng.uniform(*self.pause_range), 2)
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "brickadmin",
            "worker",
            f"--pool={self.pool}",
            "--concurrency=2" if self.pool == "prefork" else "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
            "-n",
            f"faults{self.n}@%h",
        ]
        if self.beat_in_worker:
            cmd += ["--beat", "--schedule", str(VAR / "celerybeat-schedule")]
        self.worker = subprocess.Popen(
            cmd,
            cwd=VAR,
            env=self.env(BRICK_PROCEDURE_STEP_PAUSE=str(self.pause)),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        PROCS.append(self.worker)
        return self.worker

    def kill_worker(self):
        """SIGKILL to the worker's process group (pool children too). Returns when the kill
        was sent and when the worker was seen dead (rows after that are not its own)."""
        proc = self.worker
        at = timezone.now()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        dead = timezone.now()
        PROCS.remove(proc)
        return at, dead

    def stop_all(self):
        for proc in (self.worker, self.beat):
            if proc is not None and proc in PROCS:
                stop(proc)
        self.worker = self.beat = None


# --- the twin: targets from the ledger ----------------------------------------------------


class TwinTarget:
    name = "twin"

    def __init__(self, rng):
        self.rng = rng
        self.objects, self.hardware, self.plugin_configs = scenarios.read("demo")
        self.gw = TwinGateway()

    def reset(self, index):
        self.gw.load(self.objects, self.hardware, self.plugin_configs)

    def _runnable(self, code, node, params):
        checks = get_procedure(code).prechecks(self.gw, node, params)
        if any(c.level == "block" for c in checks):
            return None
        if any(c.level == "ack" for c in checks):
            params = {**params, "acknowledged": True}
        return params

    def rehearse(self):
        """The valid targets: every (procedure, node or replicas) the ledger and the pre-checks
        allow on the demo, run once inline (no worker, no pause) from a clean load; those that
        succeed are kept (a pre-check does not see everything: a drain blocked by a
        PodDisruptionBudget fails at run time)."""
        self.reset(0)
        led = reading.live_view(self.gw).ledger
        have = ledger_mod.brick_replicas(self.gw.list_configmaps(namespace=PLUGIN_NAMESPACE))
        candidates = [("C", "", {"replicas": r}) for r in (2, 3, 5, 6, 8) if r != have]
        for code in "AB":
            candidates += [(code, n.name, {}) for n in led.nodes if not get_procedure(code).eligibility(n)]
        self.valid = {"A": [], "B": [], "C": []}
        refused = []
        for code, node, params in candidates:
            self.reset(0)
            params = self._runnable(code, node, params)
            if params is None:
                refused.append(f"{code} {node or 'C'}: pre-check blocks")
                continue
            run = service.start_run(code, node, params, actor_name="bench-faults-rehearsal", dispatch=False)
            status = engine.execute(run.pk, gateway=self.gw)
            if status == "succeeded":
                self.valid[code].append((node, params))
            else:
                refused.append(f"{code} {node or params}: {ProcedureRun.objects.get(pk=run.pk).message[:80]}")
        print(
            f"  valid targets on the demo: A {[n for n, _ in self.valid['A']]}, "
            f"B {[n for n, _ in self.valid['B']]}, C replicas {[p['replicas'] for _, p in self.valid['C']]}"
        )
        for why in refused:
            print(f"    not used: {why}")
        if not all(self.valid.values()):
            raise RuntimeError("a procedure has no valid target on the demo")

    def pick(self, index):
        """(code, node, params) for run ``index``: A, B, C in turn, on a rehearsed target."""
        code = "ABC"[index % 3]
        node, params = self.rng.choice(self.valid[code])
        return code, node, params

    def check(self, code, node, params):
        """'' when the cluster is in the run's target state, else what differs."""
        return target_state(self.gw, code, node, params)


def target_state(gw, code, node, params) -> str:
    """What the definition says the run ends with: the replicas it was given, or the mode of
    the sharing label it sets (``target``) on an uncordoned node."""
    proc = get_procedure(code)
    if "replicas" in params:
        have = ledger_mod.brick_replicas(gw.list_configmaps(namespace=PLUGIN_NAMESPACE))
        return "" if have == int(params["replicas"]) else f"ConfigMap replicas {have}, wanted {params['replicas']}"
    n = next((x for x in ledger_mod.compute(take_snapshot(gw)).nodes if x.name == node), None)
    want = GpuMode.TIMESLICING if proc.target == "timeslicing" else GpuMode.EXCLUSIVE
    problems = []
    if n is None or n.mode != want:
        problems.append(f"mode {getattr(n, 'mode', None)}, wanted {want}")
    if (gw.get_node(node).get("spec") or {}).get("unschedulable"):
        problems.append("still cordoned")
    return "; ".join(problems)


# --- the lab ------------------------------------------------------------------------------


class LabTarget:
    """seed-example on the lab: A on dev-a1-ws04, B on dev-a1-ws02 (fits once A made ws04
    time-slicing), C to 4 replicas; reloaded every third run (as tests/gpus/test_procedures_lab.py)."""

    name = "lab"
    PLAN = [("A", "dev-a1-ws04", {}), ("B", "dev-a1-ws02", {}), ("C", "", {"replicas": 4})]

    def __init__(self, kubeconfig, lab_env):
        from brickadmin.cluster.kube import KubeGateway

        self.kubeconfig = kubeconfig
        self.lab_env = lab_env
        self.gw = KubeGateway(kubeconfig)

    def reset(self, index):
        if index % len(self.PLAN) == 0:
            import load_scenario  # lab/ is on sys.path

            load_scenario.GPUSIM = self.lab_env.get("BRICK_LAB_GPUSIM_URL", load_scenario.GPUSIM)
            load_scenario.load("seed-example", self.kubeconfig)

    def pick(self, index):
        code, node, params = self.PLAN[index % len(self.PLAN)]
        checks = get_procedure(code).prechecks(self.gw, node, params)
        blocks = [c.detail for c in checks if c.level == "block"]
        if blocks:
            raise RuntimeError(f"procedure {code} on {node or 'the cluster'} is blocked on the lab: {blocks}")
        if any(c.level == "ack" for c in checks):
            params = {**params, "acknowledged": True}
        return code, node, params

    def check(self, code, node, params):
        return target_state(self.gw, code, node, params)


def lab_unavailable(kubeconfig) -> str:
    """'' when the lab can be used now, else why not."""
    if not Path(kubeconfig).exists():
        return f"no lab: {kubeconfig} does not exist (run lab/up)"
    ci = subprocess.run(["pgrep", "-f", "lab/ci.sh"], capture_output=True, text=True).stdout.split()
    ci = [p for p in ci if p != str(os.getpid())]
    if ci:
        return f"lab/ci.sh is running (pid {', '.join(ci)}): the lab is in use by the lab tests"
    try:
        from brickadmin.cluster.kube import KubeGateway

        KubeGateway(kubeconfig, request_timeout=5).ping()
    except Exception as exc:
        return f"the lab's API server does not answer ({exc})"
    return ""


def read_lab_env() -> dict:
    out = {}
    env = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab")) / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export ") :].split("=", 1)
                out[k.strip()] = v.strip()
    return out


# --- one kill ----------------------------------------------------------------------------


def run_rows(run_id):
    return list(
        StepRun.objects.filter(run_id=run_id)
        .order_by("seq")
        .values_list("seq", "recorded_at", "step_key", "state", "attempt", "intent", "title")
    )


def dump_rows(run_id, out=sys.stdout):
    for seq, at, key, state, attempt, intent, title in run_rows(run_id):
        what = f" intent={intent.get('state')}:{intent.get('request', {}).get('call')}" if intent else ""
        print(f"      #{seq:<3} {at:%H:%M:%S.%f} {key:<14} {state:<9} a{attempt} {title[:60]}{what}", file=out)


def one_kill(fleet, target, index, rng, timeout, claim_timeout):
    target.reset(index)
    code, node, params = target.pick(index)
    steps = get_procedure(code).steps(params)
    if fleet.worker is None or fleet.worker.poll() is not None:
        fleet.start_worker()
    run = service.start_run(code, node, params, actor_name="bench-faults", source="cli")  # enqueued on commit
    t_start = time.monotonic()
    claimed = wait_for(
        lambda: ProcedureRun.objects.filter(pk=run.pk).exclude(status="pending").exists(), claim_timeout, 0.05
    )
    if not claimed:
        raise RuntimeError(f"run #{run.pk} was not claimed within {claim_timeout:.0f}s (see {VAR / 'celery.log'})")
    # A random point of the run: the steps take about pause each (plus their own work).
    delay = rng.uniform(0.0, 0.9 * len(steps) * fleet.pause)
    time.sleep(delay)
    status = ProcedureRun.objects.filter(pk=run.pk).values_list("status", flat=True).get()
    result = {
        "run": run.pk,
        "code": code,
        "target": node or f"replicas {params.get('replicas')}",
        "delay": delay,
        "pause": fleet.pause,
        "killed": False,
    }
    if status != "running":
        # Finished before the kill point: no kill for this run (the next run gets one).
        wait_for(lambda: ProcedureRun.objects.filter(pk=run.pk, status__in=TERMINAL).exists(), timeout)
        result["status"] = ProcedureRun.objects.filter(pk=run.pk).values_list("status", flat=True).get()
        return result
    last = StepRun.objects.filter(run_id=run.pk).order_by("-seq").values_list("step_key", "state", "intent").first()
    kill_at, dead_at = fleet.kill_worker()
    t_kill = time.monotonic()
    result.update(killed=True, at_step=last[0], at_state=last[1] + (f" ({last[2]['state']} write)" if last[2] else ""))
    fleet.start_worker()  # at once: the old one is dead
    done = wait_for(lambda: ProcedureRun.objects.filter(pk=run.pk, status__in=TERMINAL).exists(), timeout)
    result["finished_after_kill"] = time.monotonic() - t_kill if done else None
    run.refresh_from_db()
    result["status"] = run.status
    result["message"] = run.message
    after = StepRun.objects.filter(run_id=run.pk, recorded_at__gt=dead_at)
    first_running = after.filter(state="running", intent__isnull=True).order_by("seq").first()
    first_step = after.filter(state="running", intent__isnull=True).exclude(step_key=RUN_EVENT).order_by("seq").first()
    takeover = after.filter(step_key=RUN_EVENT, title="Resumed automatically").order_by("seq").first()
    result["recovery"] = (first_running.recorded_at - kill_at).total_seconds() if first_running else None
    result["recovery_step"] = (first_step.recorded_at - kill_at).total_seconds() if first_step else None
    result["takeover"] = (takeover.recorded_at - kill_at).total_seconds() if takeover else None
    result["auto_resumes"] = StepRun.objects.filter(
        run_id=run.pk, step_key=RUN_EVENT, title="Resumed automatically"
    ).count()
    twice = (
        StepRun.objects.filter(run_id=run.pk, state="succeeded")
        .exclude(step_key=RUN_EVENT)
        .values("step_key")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    )
    result["succeeded_twice"] = [(x["step_key"], x["n"]) for x in twice]
    sent_twice = (
        StepRun.objects.filter(run_id=run.pk, sent__isnull=False)
        .exclude(step_key=RUN_EVENT)
        .values("step_key")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    )
    result["sent_twice"] = [(x["step_key"], x["n"]) for x in sent_twice]
    result["state_problem"] = target.check(code, node, params) if run.status == "succeeded" else ""
    result["elapsed"] = time.monotonic() - t_start
    return result


def fmt(v):
    return "-" if v is None else f"{v:.1f}s"


def campaign(fleet, target, kills, rng, timeout, claim_timeout, max_runs):
    results = []
    index = 0
    killed = 0
    while killed < kills and index < max_runs:
        r = one_kill(fleet, target, index, rng, timeout, claim_timeout)
        index += 1
        results.append(r)
        if not r["killed"]:
            print(
                f"  run #{r['run']:<4} {r['code']} {r['target']:<14} finished ({r['status']}) before the kill "
                f"point {r['delay']:.1f}s; no kill",
                flush=True,
            )
            if r["status"] != "succeeded":
                dump_rows(r["run"])
            continue
        killed += 1
        if r["status"] not in TERMINAL:
            print(
                f"  run #{r['run']} is still {r['status']} {r.get('message')!r} {timeout:.0f}s after the kill: "
                f"stopping here (the next run could not start cleanly)"
            )
            dump_rows(r["run"])
            break
        flag = "" if r["status"] == "succeeded" and not r["succeeded_twice"] else "  <-- !"
        print(
            f"  kill {killed:>2}: run #{r['run']:<4} {r['code']} {r['target']:<14} pause {r['pause']:.2f}s, "
            f"killed {r['delay']:.1f}s after the claim in {r['at_step']} [{r['at_state']}]; "
            f"taken over {fmt(r['takeover'])}, recovery {fmt(r['recovery'])} (step {fmt(r['recovery_step'])}); "
            f"{r['status']} {fmt(r['finished_after_kill'])} after the kill{flag}",
            flush=True,
        )
        if flag or r["state_problem"]:
            print(f"    message: {r.get('message')!r}; target state: {r['state_problem'] or 'ok'}")
            dump_rows(r["run"])
    return results


def summarize(label, results, timeout):
    killed = [r for r in results if r["killed"]]
    lost = [r for r in killed if r["status"] != "succeeded"]
    twice = [(r["run"], k, n) for r in killed for k, n in r["succeeded_twice"]]
    sent_twice = [(r["run"], k, n) for r in killed for k, n in r["sent_twice"]]
    wrong = [(r["run"], r["state_problem"]) for r in killed if r["state_problem"]]
    rec = [r["recovery"] for r in killed if r["recovery"] is not None]
    rec_step = [r["recovery_step"] for r in killed if r["recovery_step"] is not None]
    take = [r["takeover"] for r in killed if r["takeover"] is not None]
    no_rec = [r["run"] for r in killed if r["recovery"] is None]
    print(f"\n{label}:")
    print(
        f"  runs: {len(results)}  kills: {len(killed)}  (runs that finished before their kill point: "
        f"{len(results) - len(killed)})"
    )
    print(
        f"  lost runs (not succeeded within {timeout:.0f}s of the kill): {len(lost)}"
        + (f"  {[(r['run'], r['status']) for r in lost]}" if lost else "")
    )
    print(f"  steps that succeeded twice in one run: {len(twice)}" + (f"  {twice}" if twice else ""))
    print(
        f"  steps whose change was sent twice in one run: {len(sent_twice)}" + (f"  {sent_twice}" if sent_twice else "")
    )
    print(f"  runs whose cluster is not in the target state: {len(wrong)}" + (f"  {wrong}" if wrong else ""))
    if rec:
        print(
            f"  recovery (kill -> next 'running' row, intent NULL): median {statistics.median(rec):.1f}s, "
            f"p95 {pct(rec, 95):.1f}s, max {max(rec):.1f}s, min {min(rec):.1f}s  (target p95 < 15 s)"
            + ("" if pct(rec, 95) < 15 else "  <-- above target")
        )
    if rec_step:
        print(
            f"  kill -> the interrupted step running again: median {statistics.median(rec_step):.1f}s, "
            f"p95 {pct(rec_step, 95):.1f}s"
        )
    if take:
        print(
            f"  kill -> 'Resumed automatically' (take-over): median {statistics.median(take):.1f}s, "
            f"p95 {pct(take, 95):.1f}s; runs taken over: {len(take)} of {len(killed)}"
        )
    if no_rec:
        print(f"  kills with no 'running' row after them: {no_rec}")
    return {"lost": len(lost), "twice": len(twice), "p95": pct(rec, 95) if rec else None}


def print_settings(args, pool):
    sched = settings.CELERY_BEAT_SCHEDULE["reap-stale-runs"]
    print("settings (defaults, not shortened):")
    print(
        f"  BRICK_RUN_HEARTBEAT_STALE_SECONDS={settings.BRICK_RUN_HEARTBEAT_STALE_SECONDS} "
        f"(heartbeat every {max(0.5, settings.BRICK_RUN_HEARTBEAT_STALE_SECONDS / 4):g}s), "
        f"reaper {sched['task']} every {sched['schedule']:g}s (CELERY_BEAT_SCHEDULE), "
        f"BRICK_RUN_AUTO_RESUMES={settings.BRICK_RUN_AUTO_RESUMES}, "
        f"broker visibility_timeout={settings.CELERY_BROKER_TRANSPORT_OPTIONS.get('visibility_timeout')}s, "
        f"acks_late={settings.CELERY_TASK_ACKS_LATE}, "
        f"reject_on_worker_lost={settings.CELERY_TASK_REJECT_ON_WORKER_LOST}"
    )
    print(
        f"  bench: BRICK_PROCEDURE_STEP_PAUSE uniform {args.pause_min:g}-{args.pause_max:g}s per worker, "
        f"worker pool {pool}, beat {'inside the worker (--beat)' if args.beat_in_worker else 'its own process'}, "
        f"seed {args.seed}, database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, "
        f"Redis {REDIS_URL}, logs in {VAR}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lab", action="store_true", help="also 5 kills against the Kubernetes lab")
    parser.add_argument("--lab-kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--pause-min", type=float, default=0.5)
    parser.add_argument("--pause-max", type=float, default=1.0)
    parser.add_argument(
        "--pool",
        choices=("prefork", "solo"),
        default="prefork",
        help="worker pool (deploy/chart worker: prefork, concurrency 2)",
    )
    parser.add_argument(
        "--beat-in-worker",
        action="store_true",
        help="run beat inside the worker (killed with it) instead of as its own process",
    )
    parser.add_argument("--timeout", type=float, default=120, help="seconds after a kill for the run to succeed")
    args = parser.parse_args()
    args.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    rng = random.Random(args.seed)

    call_command("migrate", verbosity=0)
    print(
        f"bench/faults.py: {args.kills} SIGKILLs of the Celery worker across procedures A, B, C on the twin "
        f"(demo){' + lab' if args.lab else ''}"
    )
    print_settings(args, args.pool)
    outcome = []
    fleet = Fleet(rng, (args.pause_min, args.pause_max), args.pool, args.beat_in_worker)
    fleet.start_beat()
    try:
        print("\ntwin (demo):", flush=True)
        twin = TwinTarget(rng)
        twin.rehearse()
        results = campaign(fleet, twin, args.kills, rng, args.timeout, 120, max_runs=args.kills * 3)
        outcome.append(summarize(f"twin (demo), {args.kills} kills", results, args.timeout))
        fleet.stop_all()

        if args.lab:
            kubeconfig = os.environ.get("BRICK_KUBECONFIG") or DEFAULT_LAB_KUBECONFIG
            why = lab_unavailable(kubeconfig)
            lock = None
            if not why:
                sys.path.insert(0, str(REPO / "lab"))
                from lablock import LabBusy, lab_lock

                lock = lab_lock(timeout=10)
                try:
                    lock.__enter__()
                except LabBusy as exc:
                    why, lock = f"another process holds the lab ({exc})", None
            if why:
                print(f"\nlab: skipped: {why}")
            else:
                try:
                    lab_env = read_lab_env()
                    prom = lab_env.get("BRICK_LAB_PROMETHEUS_URL", "")
                    settings.PROMETHEUS_URL = prom  # B's pre-check reads it, here and in the worker
                    env = {"BRICK_KUBECONFIG": kubeconfig, "BRICK_CLUSTER": "kube", "PROMETHEUS_URL": prom}
                    lab_fleet = Fleet(rng, (args.pause_min, args.pause_max), args.pool, args.beat_in_worker, env)
                    lab_fleet.start_beat()
                    try:
                        print(f"\nlab ({kubeconfig}, seed-example):", flush=True)
                        results = campaign(
                            lab_fleet,
                            LabTarget(kubeconfig, lab_env),
                            args.lab_kills,
                            rng,
                            max(args.timeout, 600),
                            180,
                            max_runs=args.lab_kills * 3,
                        )
                        outcome.append(summarize(f"lab, {args.lab_kills} kills", results, max(args.timeout, 600)))
                    finally:
                        lab_fleet.stop_all()
                finally:
                    lock.__exit__(None, None, None)
        else:
            print("\nlab: skipped (no --lab)")
    finally:
        fleet.stop_all()
    bad = any(o["lost"] or o["twice"] for o in outcome)
    print(
        "\nresult:",
        "FAIL (a lost run or a step succeeded twice)"
        if bad
        else "ok: no lost run, no step "
        "succeeded twice"
        + ("" if all(o["p95"] is not None and o["p95"] < 15 for o in outcome) else "; recovery p95 above 15 s"),
    )
    return 1 if bad else 0


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the worker, beat and redis", file=sys.stderr)
        code = 130
    finally:
        cleanup()
        if code == 0:
            shutil.rmtree(VAR, ignore_errors=True)
        else:
            print(f"(logs and database kept in {VAR})", file=sys.stderr)
    sys.exit(code)
