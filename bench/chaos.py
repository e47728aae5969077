"""Dependency benchmark (not a test): runs and approvals while PostgreSQL, Redis or beat restart.

On the twin (scenario "demo", reloaded before every repetition), with this script's OWN
PostgreSQL cluster (initdb in a temp dir, its own port and socket directory, as bin/test
starts one), its own redis-server (own port, no persistence: as the chart's Redis), one
Celery worker (prefork, concurrency 2, as deploy/chart) and one beat (its own process, the
reaper on its default schedule). Nothing it did not start is ever stopped.

For each fault (postgres, redis, beat), ``--reps`` repetitions of each of:
- procedure A on a target the ledger allows (rehearsed once without faults, which also gives
  the ledger the run must end with), started through the queue; the dependency is stopped
  at a random point after the worker claimed the run, kept down ``--down`` seconds, started
  again on the same port and data directory;
- a Workspace approval (workspaces.approvals.approve, as the approval page calls it) through
  a twin whose writes are slowed (``--approval-pause`` per write) so the fault lands at a
  random point of it; an approval that failed is tried again, as the admin would, once
  the page answers.

Nothing is resumed by hand unless the run stopped (failed or interrupted): then it is
resumed once, as a person would, and counted under "needed a person".

Printed per fault and kind: repetitions, runs lost (not succeeded in the end), runs that
needed a person, steps succeeded twice, changes sent twice (one write-ahead request "sent"
twice in a run; for approvals: an approval decision recorded twice, a namespace made
twice), wrong counts after recovery (the ledger differs from the fault-free rehearsal's;
for approvals: a quota or decision missing), and the time to recover, median and max: from
the dependency being back to the run's next recorded event (for approvals: to the
approval recorded).

``--cluster lab``: the same on the Kubernetes lab (lab/up; its lock is held meanwhile), the
"demo" scenario loaded again before every repetition (lab/load_scenario.py), with the fault
"apiserver": the lab's kube-apiserver stopped and started again on the same etcd (the worker,
the approvals and the reaper lose the API server, never the database).

Run: .venv/bin/python bench/chaos.py [--reps 5] [--faults postgres,redis,beat] [--down 2]
     [--seed N] [--pause 0.7] [--approval-pause 0.3] [--kinds A,approval]
     [--cluster lab --faults apiserver --targets 1]
Everything lives under a fresh temp dir; every process it starts is ended on exit.
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
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import labcluster  # noqa: E402  (bench/, the script's own directory)
import throwaway  # noqa: E402

VAR = Path(tempfile.mkdtemp(prefix="brick-bench-chaos-"))
# The cluster is chosen before Django is set up (the settings read it from the environment).
ON_LAB = labcluster.chosen()

for _name in (
    "BRICK_RUN_HEARTBEAT_STALE_SECONDS",
    "BRICK_RUN_AUTO_RESUMES",
    "BRICK_PROCEDURE_STEP_PAUSE",
    "BRICK_PROCEDURE_MAX_ATTEMPTS",
    "BRICK_PROCEDURE_RETRY_BACKOFF",
    "DJANGO_SETTINGS_MODULE",
    "CELERY_TASK_ALWAYS_EAGER",
    "PROMETHEUS_URL",
    "BRICK_KUBECONFIG",
    "BRICK_IN_CLUSTER",
):
    os.environ.pop(_name, None)

PROCS: list[subprocess.Popen] = []  # processes this script started, each in its own session
LOGS = []


def stop(proc, sig=signal.SIGTERM, timeout=15):
    throwaway.stop(proc, PROCS, sig, timeout)


PG = throwaway.Postgres(VAR)
REDIS = throwaway.Redis(VAR, PROCS)


def cleanup():
    for proc in reversed(list(PROCS)):
        try:
            stop(proc)
        except Exception as exc:  # keep going: the others must end too
            print(f"could not stop pid {proc.pid}: {exc!r}", file=sys.stderr)
    if PG.running:
        PG.stop("immediate")
    for f in LOGS:
        f.close()


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, on_sigterm)
try:
    PG.start()
    REDIS.start()
except BaseException:
    cleanup()
    raise
os.environ.update(
    {
        "BRICK_VAR_DIR": str(VAR),
        "DATABASE_URL": PG.url,
        "REDIS_URL": REDIS.url,
        "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
        "BRICK_CLUSTER": "kube" if ON_LAB else "twin",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "LOG_LEVEL": "WARNING",
    }
)

if ON_LAB:
    os.environ.update(labcluster.product_env())
    labcluster.hold(600)  # one lab per machine: tests and benches take turns

import django  # noqa: E402

try:
    django.setup()
except BaseException:
    cleanup()
    raise

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import InterfaceError, OperationalError, close_old_connections, connection  # noqa: E402

from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.snapshot import take_snapshot  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus.models import ProcedureRun, StepRun  # noqa: E402
from gpus.numbers import ledger as ledger_mod  # noqa: E402
from gpus.procedures import engine, service  # noqa: E402
from gpus.procedures.recording import RUN_EVENT  # noqa: E402
from gpus.procedures.registry import get as get_procedure  # noqa: E402
from gpus.view.live import LiveRead  # noqa: E402
from workspaces import approvals as ws  # noqa: E402
from workspaces.models import Decision, WorkspaceRequest  # noqa: E402

TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")
DB_ERRORS = (OperationalError, InterfaceError)


def db(fn, timeout=60):
    """``fn()`` against the database, waiting through a restart (the bench's own reads)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except DB_ERRORS:
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_for(predicate, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = db(predicate)
        if value:
            return value
        time.sleep(interval)
    return None


def median_max(values):
    return (statistics.median(values), max(values)) if values else (None, None)


# --- worker and beat ------------------------------------------------------------------------


class Fleet:
    def __init__(self, pause):
        self.pause = pause
        self.worker = self.beat = None
        self.log = open(VAR / "celery.log", "ab")
        LOGS.append(self.log)

    def env(self):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            "BRICK_PROCEDURE_STEP_PAUSE": str(self.pause),
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)  # brickadmin/celery.py sets it
        return env

    def _celery(self, *args):
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "brickadmin", *args],
            cwd=VAR,
            env=self.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        PROCS.append(proc)
        return proc

    def start_worker(self):
        self.worker = self._celery(
            "worker", "--pool=prefork", "--concurrency=2", "--without-gossip", "--without-mingle", "-l", "INFO"
        )

    def supervise(self):
        """As the kubelet does for the worker's pod: a worker that exited is started again
        (each exit is counted and printed: it should not happen)."""
        self.exits = 0
        self.stopping = threading.Event()

        def watch():
            while not self.stopping.wait(0.5):
                if self.worker is not None and self.worker.poll() is not None:
                    self.exits += 1
                    print(f"    (the worker exited with {self.worker.returncode}; started again)", flush=True)
                    PROCS.remove(self.worker)
                    self.start_worker()

        threading.Thread(target=watch, daemon=True).start()

    def start_beat(self):
        self.beat = self._celery("beat", "-l", "INFO", "--schedule", str(VAR / "celerybeat-schedule"))

    def stop_beat(self):
        stop(self.beat)
        self.beat = None

    def stop_all(self):
        self.stopping.set()
        for proc in (self.worker, self.beat):
            if proc is not None:
                stop(proc)
        self.worker = self.beat = None


# --- faults: stop the dependency, keep it down, start it again ---------------------------------


class Fault:
    def __init__(self, name, fleet):
        self.name, self.fleet = name, fleet

    def down(self):
        if self.name == "apiserver":
            labcluster.lab_module().stop("kube-apiserver")
        elif self.name == "postgres":
            PG.stop("fast")
        elif self.name == "redis":
            REDIS.stop()
        else:
            self.fleet.stop_beat()

    def up(self):
        if self.name == "apiserver":
            start_lab_apiserver()
        elif self.name == "postgres":
            PG.start()
        elif self.name == "redis":
            REDIS.start()
        else:
            self.fleet.start_beat()

    def inject(self, down_seconds):
        """Returns the wall-clock time (aware) the dependency was back."""
        from django.utils import timezone

        self.down()
        time.sleep(down_seconds)
        self.up()
        return timezone.now()


def start_lab_apiserver():
    """The lab's kube-apiserver started again as lab/lab.py starts it, on the same etcd (lab/up
    would build a fresh control plane when its core is not all running), until ready."""
    lab_mod = labcluster.lab_module()
    token = lab_mod.ADMIN_TOKEN_FILE.read_text().strip()
    for name, argv, ready, timeout in lab_mod.components(lab_mod.bin_dir(), token):
        if name == "kube-apiserver":
            lab_mod.start(name, argv)
            lab_mod.wait_for(name, ready, timeout, name)
            return
    raise RuntimeError("the lab has no kube-apiserver component")


# --- the cluster: the twin, or the lab --------------------------------------------------------


def ledger_counts(gw):
    """What a person counts on the Nodes page: per node its mode, replicas, cordon and per
    resource its capacity and allocatable."""
    led = ledger_mod.compute(take_snapshot(gw))
    return {
        n.name: (
            n.mode,
            n.replicas,
            n.cordoned,
            tuple(sorted((r, line.capacity, line.allocatable) for r, line in n.resources.items())),
        )
        for n in led.nodes
    }


class Twin:
    def __init__(self, rng, targets=0):
        self.rng, self.targets = rng, targets
        self.objects, self.hardware, self.plugin_configs = scenarios.read("demo")
        self.gw = TwinGateway()

    def reset(self):
        db(lambda: self.gw.load(self.objects, self.hardware, self.plugin_configs))

    def rehearse(self):
        """Every A target the ledger and pre-checks allow, run once inline without faults; the
        ledger each ends with is what a faulted run of the same target must end with."""
        self.reset()
        led = LiveRead(self.gw).ledger()
        proc = get_procedure("A")
        self.expected = {}
        for n in led.nodes:
            if proc.eligibility(n):
                continue
            self.reset()
            checks = proc.prechecks(self.gw, n.name, {})
            if any(c.level == "block" for c in checks):
                continue
            params = {"acknowledged": True} if any(c.level == "ack" for c in checks) else {}
            run = service.start_run("A", n.name, params, actor_name="bench-chaos-rehearsal", dispatch=False)
            if engine.execute(run.pk, gateway=self.gw) == "succeeded":
                self.expected[n.name] = (params, ledger_counts(self.gw))
                if self.targets and len(self.expected) >= self.targets:
                    break
        print(f"  A targets on the demo: {sorted(self.expected)}")
        if not self.expected:
            raise RuntimeError("procedure A has no valid target on the demo")


class Lab(Twin):
    """The Kubernetes lab: the demo loaded as lab/load_scenario.py loads it."""

    def __init__(self, rng, targets=0):
        from brickadmin.cluster.kube import KubeGateway

        self.rng, self.targets = rng, targets
        self.gw = KubeGateway(labcluster.KUBECONFIG)

    def reset(self):
        labcluster.load("demo")


class SlowTwin:
    """The cluster's gateway with a pause before every write, so a fault lands inside an approval."""

    WRITES = {"create_namespace", "create_resource_quota", "apply", "create_priority_class", "delete"}

    def __init__(self, pause, gw=None):
        self._gw, self._pause = gw or TwinGateway(), pause
        self.writes = 0  # writes begun (an approval makes about five)

    def __getattr__(self, name):
        attr = getattr(self._gw, name)
        if name not in self.WRITES:
            return attr

        def slow(*args, **kwargs):
            self.writes += 1
            time.sleep(self._pause)
            return attr(*args, **kwargs)

        return slow


# --- one repetition -----------------------------------------------------------------------------


def run_rows_after(run_id, at):
    return StepRun.objects.filter(run_id=run_id, recorded_at__gt=at)


def one_run(fault, twin, rng, args):
    twin.reset()
    node = rng.choice(sorted(twin.expected))
    params, expected = twin.expected[node]
    steps = get_procedure("A").steps(params)
    run = db(lambda: service.start_run("A", node, params, actor_name="bench-chaos", source="cli"))
    if not wait_for(lambda: ProcedureRun.objects.filter(pk=run.pk).exclude(status="pending").exists(), 120, 0.05):
        raise RuntimeError(f"run #{run.pk} was not claimed (see {VAR / 'celery.log'})")
    time.sleep(rng.uniform(0, 0.8 * len(steps) * args.pause))
    r = {"kind": "A", "id": run.pk, "target": node, "person": False}
    status = db(lambda: ProcedureRun.objects.filter(pk=run.pk).values_list("status", flat=True).get())
    last = db(lambda: StepRun.objects.filter(run_id=run.pk).exclude(step_key=RUN_EVENT).order_by("-seq").first())
    r["faulted_in"] = f"{status}, in {last.step_key} ({last.state})" if last else status
    back = fault.inject(args.down)
    done = wait_for(lambda: ProcedureRun.objects.filter(pk=run.pk, status__in=TERMINAL).exists(), args.timeout)
    run = db(lambda: ProcedureRun.objects.get(pk=run.pk))
    if done and run.status != "succeeded":
        # It stopped with a reason: a person resumes it from the step it was in.
        r["person"], r["stopped"] = True, f"{run.status}: {run.message[:160]}"
        db(lambda: service.resume_run(run, actor_name="bench-chaos-person"))
        wait_for(lambda: ProcedureRun.objects.filter(pk=run.pk, status__in=TERMINAL).exists(), args.timeout)
        run = db(lambda: ProcedureRun.objects.get(pk=run.pk))
    r["status"] = run.status
    first = db(lambda: run_rows_after(run.pk, back).order_by("seq").values_list("recorded_at", flat=True).first())
    r["recover"] = (first - back).total_seconds() if first and not r["person"] else None
    rows = db(lambda: list(StepRun.objects.filter(run_id=run.pk).exclude(step_key=RUN_EVENT)))
    succeeded = {}
    sent = {}
    for row in rows:
        if row.state == "succeeded":
            succeeded[row.step_key] = succeeded.get(row.step_key, 0) + 1
        if row.intent and row.intent.get("state") == "sent":
            key = repr(row.intent.get("request"))
            sent[key] = sent.get(key, 0) + 1
    r["twice"] = [k for k, n in succeeded.items() if n > 1]
    r["sent_twice"] = [k for k, n in sent.items() if n > 1]
    r["wrong"] = ""
    if run.status == "succeeded":
        got = db(lambda: ledger_counts(twin.gw))
        if got != expected:
            r["wrong"] = "ledger: " + ledger_difference(expected, got)
            # Read again for a while: a difference that goes away by itself was read too early
            # (the simulated kubelet catching up); one that stays is what the run left.
            settle = time.monotonic() + args.settle
            while time.monotonic() < settle and got != expected:
                time.sleep(1)
                got = db(lambda: ledger_counts(twin.gw))
            r["wrong"] += (
                f"; equal {args.settle - (settle - time.monotonic()):.0f}s later"
                if got == expected
                else f"; still after {args.settle:g}s: {ledger_difference(expected, got)}"
            )
    return r


def ledger_difference(expected, got):
    """What differs between two ledger_counts, node by node: "node: field want -> got"."""
    fields = ("mode", "replicas", "cordoned", "resources")
    out = []
    for node in sorted(set(expected) | set(got)):
        want, have = expected.get(node), got.get(node)
        if want == have:
            continue
        if want is None or have is None:
            out.append(f"{node}: {'missing' if have is None else 'unexpected'}")
            continue
        out.extend(f"{node}: {f} {w!r} -> {h!r}" for f, w, h in zip(fields, want, have, strict=True) if w != h)
    return "; ".join(out)


def one_approval(fault, twin, rng, args, admin, requester, n):
    twin.reset()
    gw = SlowTwin(args.approval_pause, twin.gw)
    ws.get_gateway = lambda: gw  # the approval's cluster, slowed
    choice = db(lambda: ws.gpu_choices(LiveRead(twin.gw).ledger())[0])
    req = db(
        lambda: ws.create_request(
            requester, name=f"chaos-{n}-{rng.randrange(10**6)}", gpu=1, cpu=1, memory_gib=1, storage_gib=1
        )
    )
    outcome = {}

    def approve_until_done():
        """The admin: approves; when the page reports a failure, tries again a second later."""
        tries = 0
        while time.monotonic() < outcome["deadline"]:
            tries += 1
            try:
                ws.approve(req.pk, admin, choice.resource, overcommit=True)
                outcome["ok"] = True
                break
            except ws.WorkspaceError as exc:
                outcome.setdefault("errors", []).append(str(exc)[:120])
                if "already decided" in str(exc):
                    break
            except DB_ERRORS as exc:
                outcome.setdefault("errors", []).append(type(exc).__name__)
                connection.close()
            time.sleep(1)
        outcome["tries"] = tries
        connection.close()

    outcome["deadline"] = time.monotonic() + args.timeout
    t = threading.Thread(target=approve_until_done)
    t.start()
    time.sleep(rng.uniform(0, 5 * args.approval_pause))
    writes_at_fault = gw.writes
    back = fault.inject(args.down)
    t.join()
    close_old_connections()
    r = {"kind": "approval", "id": req.pk, "target": req.name, "person": False}
    r["faulted_in"] = f"approval write {writes_at_fault}" if writes_at_fault else "approval reading the cluster"
    r["stopped"] = "; ".join(outcome.get("errors", []))
    req = db(lambda: WorkspaceRequest.objects.get(pk=req.pk))
    r["status"] = "succeeded" if req.status == WorkspaceRequest.Status.APPROVED else req.status
    decisions = db(lambda: Decision.objects.filter(workspace_id=req.pk, action=Decision.Action.APPROVE).count())
    r["twice"] = ["approval recorded twice"] if decisions > 1 else []
    namespaces = db(lambda: [x for x in twin.gw.list_namespaces() if x["metadata"]["name"] == req.namespace])
    r["sent_twice"] = ["namespace twice"] if len(namespaces) > 1 else []
    quotas = db(lambda: twin.gw.list_resource_quotas(namespace=req.namespace))
    want = ws.quota_hard(req, choice.resource)
    have = {}
    for q in quotas:
        have.update((q.get("spec") or {}).get("hard") or {})
    r["wrong"] = (
        ""
        if r["status"] != "succeeded" or (decisions == 1 and all(have.get(k) == v for k, v in want.items()))
        else f"decisions {decisions}, quota {have}"
    )
    at = db(
        lambda: (
            Decision.objects.filter(workspace_id=req.pk, action=Decision.Action.APPROVE)
            .values_list("at", flat=True)
            .first()
        )
    )
    r["recover"] = max(0.0, (at - back).total_seconds()) if at else None
    r["tries"] = outcome.get("tries")
    r["person"] = (r["tries"] or 0) > 1  # the admin pressed Approve again after the error page
    return r


def report(fault, kind, results):
    lost = [r for r in results if r["status"] != "succeeded"]
    person = [r for r in results if r["person"]]
    twice = sum(len(r["twice"]) for r in results)
    sent = sum(len(r["sent_twice"]) for r in results)
    wrong = [r for r in results if r["wrong"]]
    med, mx = median_max([r["recover"] for r in results if r["recover"] is not None])
    rec = "-" if med is None else f"{med:.1f}s / {mx:.1f}s"
    print(
        f"| {fault:<8} | {kind:<8} | {len(results):>4} | {len(lost):>4} | {len(person):>6} | {twice:>5} | {sent:>4} "
        f"| {len(wrong):>5} | {rec:>15} |"
    )
    return {"lost": len(lost), "twice": twice, "sent": sent, "wrong": len(wrong), "person": len(person)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each kind per fault")
    parser.add_argument("--faults", default="postgres,redis,beat")
    parser.add_argument("--kinds", default="A,approval")
    parser.add_argument("--down", type=float, default=2.0, help="seconds the dependency stays down")
    parser.add_argument("--pause", type=float, default=0.7, help="BRICK_PROCEDURE_STEP_PAUSE of the worker")
    parser.add_argument("--approval-pause", type=float, default=0.3, help="seconds before each approval write")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument(
        "--settle", type=float, default=30, help="seconds a wrong count is read again to see whether it goes away"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--cluster", choices=("twin", "lab"), default="twin", help="where the runs go")
    parser.add_argument("--targets", type=int, default=0, help="rehearse at most this many A targets (0: all)")
    args = parser.parse_args()
    args.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    rng = random.Random(args.seed)
    faults = [f for f in args.faults.split(",") if f]
    kinds = [k for k in args.kinds.split(",") if k]

    call_command("migrate", verbosity=0)
    from django.conf import settings

    print(
        f"bench/chaos.py: {args.reps} restarts of each of {', '.join(faults)} during {' and '.join(kinds)} "
        f"on the {'lab' if ON_LAB else 'twin'} (demo); down {args.down:g}s each; seed {args.seed}"
    )
    print(
        f"  own PostgreSQL {PG.url} ({PG.bin}), own Redis {REDIS.url}; worker prefork x2, beat apart; "
        f"step pause {args.pause:g}s; reaper every {settings.CELERY_BEAT_SCHEDULE['reap-stale-runs']['schedule']:g}s, "
        f"heartbeat stale after {settings.BRICK_RUN_HEARTBEAT_STALE_SECONDS}s; logs in {VAR}"
    )
    User = get_user_model()
    admin = User.objects.create_superuser("chaos-admin", "", "x")
    requester = User.objects.create_user("chaos-user", "", "x")
    twin = (Lab if ON_LAB else Twin)(rng, args.targets)
    twin.rehearse()
    fleet = Fleet(args.pause)
    fleet.start_worker()
    fleet.supervise()
    fleet.start_beat()
    table = []
    try:
        for fault_name in faults:
            fault = Fault(fault_name, fleet)
            for kind in kinds:
                results = []
                for i in range(args.reps):
                    if kind == "approval":
                        r = one_approval(fault, twin, rng, args, admin, requester, len(table) * 100 + i)
                    else:
                        r = one_run(fault, twin, rng, args)
                    results.append(r)
                    flag = (
                        ""
                        if r["status"] == "succeeded" and not (r["twice"] or r["sent_twice"] or r["wrong"])
                        else f" <-- ! twice {r['twice']} sent twice {r['sent_twice']} wrong {r['wrong'] or '-'}"
                    )
                    rec = "-" if r["recover"] is None else f"{r['recover']:.1f}s"
                    print(
                        f"  {fault_name:<8} {kind:<8} #{r['id']:<4} {r['target']:<22} {r['status']:<10} "
                        f"recover {rec:<6}{' person' if r['person'] else ''} [fault while {r['faulted_in'] or '-'}]"
                        f"{' (' + r['stopped'][:150] + ')' if r.get('stopped') else ''}{flag}",
                        flush=True,
                    )
                table.append((fault_name, kind, results))
    finally:
        fleet.stop_all()
    print(
        "\n| fault    | kind     | reps | lost | person | twice | sent | wrong | recover med/max |\n"
        "|----------|----------|------|------|--------|-------|------|-------|-----------------|"
    )
    sums = [report(f, k, rs) for f, k, rs in table]
    print(
        "(lost: not succeeded in the end; person: stopped and resumed by hand; twice: a step succeeded twice; "
        "sent: a change sent twice; wrong: counts differ from the fault-free run; recover: dependency back -> "
        "next event recorded)"
    )
    print(f"worker exits (started again, as the kubelet would): {fleet.exits}")
    bad = any(s["lost"] or s["twice"] or s["sent"] or s["wrong"] for s in sums) or fleet.exits
    print("\nresult:", "FAIL" if bad else "ok" + (" (some needed a person)" if any(s["person"] for s in sums) else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    code = 1
    try:
        code = main()
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    finally:
        connection.close()
        cleanup()
        if code == 0:
            shutil.rmtree(VAR, ignore_errors=True)
        else:
            print(f"(logs kept in {VAR})", file=sys.stderr)
    sys.exit(code)
