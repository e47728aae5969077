"""Watcher failover and publication faults (not a test): two `manage.py watch_cluster`
replicas and one view, on the twin, on a PostgreSQL of this script's own.

Setup: a throwaway PostgreSQL cluster (initdb under a temp dir, its own port; never a
service this script did not start), migrated, the twin loaded with the "demo" scenario
plus --fillers plain nodes (more rows per publication, so one takes long enough to be cut),
and two watchers (real subprocesses) coordinating through the twin's Lease.

Each round changes the cluster in one transaction (every filler node gets the label
brick.bench/round=<n>), so every snapshot the watcher can take has one round on all its
nodes: a view that shows two rounds at once is a publication torn in the middle. Faults, in turn:

* kill-leader: SIGKILL the watcher holding the Lease (idle), start a new standby;
* pause-leader: SIGSTOP it (cut off from the API server and the database alike) until the
  standby has taken over, then SIGCONT: its writes must be refused (fencing), it stands by;
* kill-mid-publish: SIGKILL the leader while its publication's transaction is open
  (seen in pg_stat_activity);
* pause-mid-publish: SIGSTOP it there, holding the view's row lock: PostgreSQL ends its
  session (idle_in_transaction_session_timeout) so the standby can claim the view;
* pg-restart-mid-publish: restart PostgreSQL (immediate mode) while the leader's
  publication's transaction is open; the same watcher process must resume by itself.

After each fault one GPU node is cordoned or uncordoned and the script waits until the
view equals a fresh list of the twin (the ledger's totals, each node's ledger line, the round on every node).
Printed: faults, views torn right after a fault (must be 0), wrong counts after recovery
(view vs fresh list; must be 0), writes by a former leader after the takeover (must be 0),
watchers that exited on a database restart (must be 0), how often the pages' "behind"
banner was up between the fault and the recovery, the time a new holder claimed the view
(takeover) and the time of its first publication (a new generation in its name), each also
counted from the Lease's last renewal before the fault, which is what the Lease's duration
bounds, and the time to recover (from the fault to the view equal to a fresh list of
the cluster as changed after the fault, polled every 0.1 s), median / max per fault, with
the Lease settings in force. The change after the fault is written (in a thread) while
the takeover is watched ("change_written_s" per fault).

The watchers are warm standbys (they list and follow the cluster while standing by);
--cold-standby runs them as before (a standby lists the cluster only once it takes the Lease).

Run: .venv/bin/python bench/chaos_watcher.py [--rounds 3] [--fillers 300] [--lease-duration 15
     --renew-deadline 10 --retry-period 2] [--cold-standby] [--json]
Everything lives in a temp dir; every process it starts is ended on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
VAR = Path(tempfile.mkdtemp(prefix="brick-bench-chaos-watcher-"))
VAR.chmod(0o755)  # PostgreSQL runs as its own user under it
LEASE_NAMESPACE = "brickadmin"
ROUND_LABEL = "brick.bench/round"
TOGGLED_NODE = "gpu-a30-01"
TOTALS = ("logical", "requested", "physical", "physical_used", "gpu_nodes", "nodes")

for _name in ("DJANGO_SETTINGS_MODULE", "BRICK_KUBECONFIG", "BRICK_IN_CLUSTER", "PROMETHEUS_URL"):
    os.environ.pop(_name, None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_pg(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.getuid() == 0 else cmd


class OwnPostgres:
    """A PostgreSQL cluster of this script's own (its data dir, its port)."""

    def __init__(self, root: Path):
        bins = sorted(
            Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: [int(x) for x in p.parent.name.split(".")]
        )
        if not bins:
            raise SystemExit("PostgreSQL not found (Debian package postgresql)")
        self.bin = bins[-1]
        self.root = root / "pg"
        self.root.mkdir()
        self.data = self.root / "data"
        self.port = free_port()
        if os.getuid() == 0:
            shutil.chown(self.root, "postgres")
        subprocess.run(
            as_pg([str(self.bin / "initdb"), "-D", str(self.data), "-U", "brick", "--auth=trust", "-E", "UTF8"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.url = f"postgres://brick@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=100 "
            "-c dynamic_shared_memory_type=mmap"
        )
        subprocess.run(
            as_pg(
                [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-o", opts, *args]
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        self._ctl("start")

    def restart(self) -> None:
        """Immediate mode: every connection is cut at once, open transactions are lost."""
        self._ctl("-m", "immediate", "restart")

    def stop(self) -> None:
        try:
            self._ctl("-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass


def retrying(fn, *, timeout=60.0):
    """Call fn, reconnecting while the database is away (this script's own connection)."""
    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError):
            connection.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Watchers:
    """The watch_cluster subprocesses, by identity."""

    def __init__(self, env: dict, lease: tuple[float, float, float], cold: bool = False):
        self.env, self.lease, self.procs, self.logs, self.n = env, lease, {}, {}, 0
        self.cold = cold

    def start(self) -> str:
        self.n += 1
        identity = f"watcher-{self.n}"
        log = open(VAR / f"{identity}.log", "ab")
        d, r, p = self.lease
        self.procs[identity] = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster", "--identity", identity, "--debounce", "0.2"]
            + ["--lease-duration", str(d), "--renew-deadline", str(r), "--retry-period", str(p)]
            + (["--cold-standby"] if self.cold else []),
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.logs[identity] = VAR / f"{identity}.log"
        return identity

    def standby(self) -> str:
        """Start a replica and wait until it stands by, has listed the cluster (a warm
        standby) and has read the Lease once (a standby that is still starting would add its
        start-up to the next takeover)."""
        identity = self.start()
        ready = "waiting for the lease" if self.cold else "the cluster is listed"
        deadline = time.monotonic() + 120
        while ready not in self.log(identity) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(self.lease[2] * 1.5)
        return identity

    def signal(self, identity: str, sig: int) -> None:
        os.killpg(self.procs[identity].pid, sig)

    def kill(self, identity: str) -> None:
        proc = self.procs.pop(identity)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)

    def stop_all(self) -> None:
        for identity in list(self.procs):
            proc = self.procs[identity]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
        for identity in list(self.procs):
            try:
                self.procs[identity].wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill(identity)

    def log(self, identity: str) -> str:
        return self.logs[identity].read_text(errors="replace")


def load_cluster(fillers: int) -> None:
    from brickadmin.cluster import scenarios
    from brickadmin.cluster.twin import TwinGateway

    objects, hardware, plugin_configs = scenarios.read("demo")
    for i in range(fillers):
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"filler-{i:04d}", "labels": {ROUND_LABEL: "0"}},
                "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    TwinGateway().load(objects, hardware, plugin_configs)


def toggle(n: int) -> None:
    """The change after a fault: the GPU node cordoned on odd n, uncordoned on even n (a
    small write: the twin's writes take turns on its version counter, the Lease's too)."""
    from django.db import connection

    from brickadmin.cluster.twin import TwinGateway

    retrying(lambda: (TwinGateway().cordon if n % 2 else TwinGateway().uncordon)(TOGGLED_NODE))
    connection.close()  # this thread's


def next_round(n: int, fillers: int) -> None:
    """Round n: every filler node labelled n, the toggled GPU node cordoned on odd rounds;
    one transaction, so the watcher sees all of it or none."""
    from django.db import transaction

    from brickadmin.cluster.twin import TwinGateway

    def write():
        gw = TwinGateway()
        with transaction.atomic():
            # the filler nodes have no GPU and no plugin: no controller acts on their labels, so
            # they are written as the API server stores them (one event each), without the
            # twin's node-by-node reconcile (seconds for a few hundred nodes)
            for i in range(fillers):
                body = gw._get("Node", f"filler-{i:04d}")
                body["metadata"]["labels"][ROUND_LABEL] = str(n)
                gw._save(body)
            gw._bump()

    retrying(write)


def fresh_list():
    """What a fresh list of the twin gives: (totals, {node: ledger line}, rounds)."""
    from brickadmin.cluster.twin import TwinGateway
    from brickadmin.cluster.watch import ClusterWatcher
    from gpus.numbers import ledger

    w = ClusterWatcher(TwinGateway())
    w.prime()
    snap = w.snapshot()
    led = ledger.compute(snap)
    totals = {
        "logical": led.logical,
        "requested": led.requested,
        "physical": led.physical,
        "physical_used": led.physical_used,
        "gpu_nodes": len(led.nodes),
        "nodes": len(snap.nodes),
    }
    rounds = {(n["metadata"].get("labels") or {}).get(ROUND_LABEL) for n in snap.nodes} - {None}
    return totals, {n.name: ledger.node_to_dict(n) for n in led.nodes}, rounds


def stored():
    """The view as the pages read it: (generation, holder, totals, {node: ledger line}, rounds, rows)."""
    from django.db import transaction

    from gpus.models import ViewNode, ViewState

    with transaction.atomic():  # one snapshot of the database for the whole read
        from django.db import connection

        with connection.cursor() as c:
            c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        state = ViewState.objects.filter(pk=1).first()
        rows = list(ViewNode.objects.values_list("name", "is_gpu", "ledger", "raw"))
    if state is None:
        return 0, "", {}, {}, set(), 0, -1
    lines = {name: line for name, is_gpu, line, _raw in rows if is_gpu}
    rounds = {(raw.get("metadata", {}).get("labels") or {}).get(ROUND_LABEL) for *_x, raw in rows} - {None}
    totals = {
        k: state.totals.get(k) for k in ("logical", "requested", "physical", "physical_used", "gpu_nodes", "nodes")
    }
    return state.generation, state.holder, totals, lines, rounds, len(rows), state.fencing_token


def wrong_counts(view, fresh) -> int:
    """Figures of the view that differ from a fresh list: totals, node lines, the round."""
    _gen, _holder, totals, lines, rounds, _rows, _token = view
    f_totals, f_lines, f_rounds = fresh
    wrong = sum(totals.get(k) != v for k, v in f_totals.items())
    wrong += sum(lines.get(name) != line for name, line in f_lines.items()) + len(set(lines) - set(f_lines))
    return wrong + (rounds != f_rounds)


def torn(view) -> bool:
    """A view that is no publication of any one snapshot: two rounds, or rows not its totals'."""
    _gen, _holder, totals, _lines, rounds, rows, _token = view
    return len(rounds) > 1 or (bool(totals.get("nodes")) and totals.get("nodes") != rows)


def behind_shown() -> bool:
    from gpus.view.stored import freshness

    fresh = retrying(lambda: freshness(live=False))
    return bool(fresh and (fresh.behind or fresh.watcher_down))


def seconds_since_renewal() -> float | None:
    """How long ago the Lease was last renewed (its renewTime; this machine's clock is the
    watchers' too), read right after a fault: a takeover counted from it is what the
    Lease's duration bounds (a standby cannot know of a renewal before it sees it)."""
    from datetime import UTC, datetime

    from brickadmin.cluster.twin import TwinGateway
    from gpus.management.commands.watch_cluster import LEASE_NAME

    spec = retrying(lambda: TwinGateway().get_lease(LEASE_NAMESPACE, LEASE_NAME)).get("spec") or {}
    if not spec.get("renewTime"):
        return None
    renewed = datetime.strptime(spec["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (datetime.now(UTC) - renewed).total_seconds()


def holder() -> str:
    from gpus.models import ViewState

    return retrying(lambda: ViewState.objects.filter(pk=1).values_list("holder", flat=True).first() or "")


def publishing() -> bool:
    """A watcher's publication is in its transaction now (it writes the view's rows)."""
    from django.db import connection

    def look():
        with connection.cursor() as c:
            c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND xact_start IS NOT NULL "
                "AND (query ILIKE '%gpus_viewnode%' OR query ILIKE '%gpus_viewworkspace%' "
                "OR query ILIKE '%gpus_viewtyperow%' OR query ILIKE '%gpus_viewproblem%')"
            )
            return c.fetchone()[0] > 0

    return retrying(look)


def catch_a_publication(round_no: int, fillers: int) -> int:
    """Make rounds until a publication is caught in its transaction; the last round's number."""
    for _ in range(20):
        round_no += 1
        next_round(round_no, fillers)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if publishing():
                return round_no
    raise TimeoutError("no publication caught in its transaction")


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="faults of each kind")
    parser.add_argument("--fillers", type=int, default=300, help="plain nodes added to the demo scenario")
    parser.add_argument("--lease-duration", type=float, default=15)
    parser.add_argument("--renew-deadline", type=float, default=10)
    parser.add_argument("--retry-period", type=float, default=2)
    parser.add_argument("--recover-timeout", type=float, default=120)
    parser.add_argument(
        "--faults", default="kill-leader,pause-leader,kill-mid-publish,pause-mid-publish,pg-restart-mid-publish"
    )
    parser.add_argument(
        "--cold-standby", action="store_true", help="standbys list the cluster only once they take the Lease"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()

    pg = OwnPostgres(VAR)
    pg.start()
    env = {
        **os.environ,
        "DATABASE_URL": pg.url,
        "BRICK_CLUSTER": "twin",
        "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
        "BRICK_VAR_DIR": str(VAR),
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "BRICK_CLUSTER", "DJANGO_SETTINGS_MODULE", "BRICK_VAR_DIR")})
    watchers = Watchers(env, (args.lease_duration, args.renew_deadline, args.retry_period), args.cold_standby)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        load_cluster(args.fillers)
        round_no = toggles = 0
        watchers.start()
        watchers.standby()
        wait_for(
            lambda: wrong_counts(retrying(stored), retrying(fresh_list)) == 0, args.recover_timeout, "a first view"
        )

        results: list[dict] = []
        kinds = [k for k in args.faults.split(",") if k]
        for _ in range(args.rounds):
            for kind in kinds:
                leader = wait_for(holder, 60, "a leader")
                token = retrying(stored)[6]  # the leader's fencing token
                live = [i for i, p in watchers.procs.items() if p.poll() is None]
                pids = {i: watchers.procs[i].pid for i in live}
                if kind.endswith("mid-publish"):
                    round_no = catch_a_publication(round_no, args.fillers)
                t0 = time.monotonic()
                if kind in ("kill-leader", "kill-mid-publish"):
                    watchers.kill(leader)
                elif kind in ("pause-leader", "pause-mid-publish"):
                    watchers.signal(leader, signal.SIGSTOP)
                elif kind == "pg-restart-mid-publish":
                    pg.restart()
                connection.close()
                renewed_before = seconds_since_renewal() if kind != "pg-restart-mid-publish" else None
                right_after = retrying(stored)
                was_torn = torn(right_after)
                toggles += 1
                writer = threading.Thread(target=toggle, args=(toggles,))
                writer.start()  # the change after the fault, written while the takeover is watched
                fresh, changed, takeover, published = None, None, None, None
                banner = False
                stale_writes = 0
                deadline = t0 + args.recover_timeout
                resumed = False
                while time.monotonic() < deadline:
                    banner |= behind_shown()
                    view = retrying(stored)
                    if takeover is None and view[1] not in ("", leader):
                        takeover = time.monotonic() - t0
                    if published is None and view[1] not in ("", leader) and view[0] > right_after[0]:
                        published = time.monotonic() - t0  # the new holder's first generation
                    if fresh is None:
                        if writer.is_alive():
                            time.sleep(0.1)
                            continue
                        changed = time.monotonic() - t0
                        fresh = retrying(fresh_list)  # the twin does not change again until the next fault
                    if kind.startswith("pause") and view[1] not in ("", leader) and not resumed:
                        watchers.signal(leader, signal.SIGCONT)  # the standby leads: wake the old one up
                        resumed = True
                    # a write in the woken leader's old name (a legitimate new leadership of it
                    # has a larger token)
                    if kind.startswith("pause") and resumed and view[1] == leader and view[6] <= token:
                        stale_writes += 1
                    if wrong_counts(view, fresh) == 0 and (not kind.startswith("pause") or resumed):
                        break
                    time.sleep(0.1)
                recovered = time.monotonic() - t0
                writer.join()
                view, fresh = retrying(stored), retrying(fresh_list)
                wrong = wrong_counts(view, fresh)
                if resumed:  # the woken leader keeps trying: give it time to write, if it could
                    time.sleep(args.renew_deadline)
                    after = retrying(stored)
                    stale_writes += after[1] == leader and after[6] <= token
                exited = 0
                if kind == "pg-restart-mid-publish":
                    exited = sum(watchers.procs[i].poll() is not None or watchers.procs[i].pid != pids[i] for i in live)
                if kind in ("kill-leader", "kill-mid-publish"):
                    watchers.standby()  # a new standby, as a Deployment would start
                results.append(
                    {
                        "fault": kind,
                        "torn": was_torn,
                        "wrong": wrong,
                        "stale_writes": stale_writes,
                        "exited": exited,
                        "banner": banner,
                        "recover_s": round(recovered, 2),
                        "change_written_s": round(changed, 2) if changed is not None else None,
                        "takeover_s": round(takeover, 2) if takeover is not None else None,
                        "takeover_after_renewal_s": round(takeover + renewed_before, 2)
                        if takeover is not None and renewed_before is not None
                        else None,
                        "published_s": round(published, 2) if published is not None else None,
                        "published_after_renewal_s": round(published + renewed_before, 2)
                        if published is not None and renewed_before is not None
                        else None,
                        "new_holder": view[1],
                    }
                )
                if not args.json:
                    print(json.dumps(results[-1]), flush=True)
        summary = summarise(results, args)
        if args.json:
            print(json.dumps(summary))
        else:
            print_summary(summary)
        bad = summary["torn"] or summary["wrong"] or summary["stale_writes"] or summary["exited"]
        return 1 if bad else 0
    finally:
        watchers.stop_all()
        pg.stop()
        if os.environ.get("KEEP_VAR") != "1":
            shutil.rmtree(VAR, ignore_errors=True)


def summarise(results: list[dict], args) -> dict:
    by_kind: dict[str, list[float]] = {}
    for r in results:
        by_kind.setdefault(r["fault"], []).append(r["recover_s"])

    def per_fault(figure: str) -> dict:
        return {
            k: {"median": statistics.median(v), "max": max(v), "n": len(v)}
            for k in by_kind
            if (v := [r[figure] for r in results if r["fault"] == k and r.get(figure) is not None])
        }

    return {
        "faults": len(results),
        "torn": sum(r["torn"] for r in results),
        "wrong": sum(r["wrong"] for r in results),
        "stale_writes": sum(r["stale_writes"] for r in results),
        "exited": sum(r["exited"] for r in results),
        "banner": {k: sum(r["banner"] for r in results if r["fault"] == k) for k in by_kind},
        "recover_s": {k: {"median": statistics.median(v), "max": max(v), "n": len(v)} for k, v in by_kind.items()},
        "takeover_s": per_fault("takeover_s"),
        "takeover_after_renewal_s": per_fault("takeover_after_renewal_s"),
        "published_s": per_fault("published_s"),
        "published_after_renewal_s": per_fault("published_after_renewal_s"),
        "standby": "cold" if args.cold_standby else "warm",
        "lease": {
            "duration": args.lease_duration,
            "renew_deadline": args.renew_deadline,
            "retry_period": args.retry_period,
        },
        "fillers": args.fillers,
        "results": results,
    }


def print_summary(s: dict) -> None:
    lease = s["lease"]
    print(
        f"\nLease {lease['duration']} s, renew deadline {lease['renew_deadline']} s, retry {lease['retry_period']} s;"
        f" demo scenario + {s['fillers']} plain nodes; {s['standby']} standby"
    )
    print(f"faults: {s['faults']}")
    print(f"views torn right after a fault: {s['torn']}")
    print(f"wrong counts after recovery (view vs fresh list): {s['wrong']}")
    print(f"writes by a former leader after the takeover: {s['stale_writes']}")
    print(f"watchers that exited on a database restart: {s['exited']}")
    for kind, t in s["recover_s"].items():
        print(
            f"{kind:24s} time to recover: median {t['median']:.1f} s, max {t['max']:.1f} s (n={t['n']});"
            f" 'behind' banner seen in {s['banner'][kind]}/{t['n']}"
        )
    for key, what in (
        ("takeover_s", "a new holder claimed the view"),
        ("takeover_after_renewal_s", "... counted from the Lease's last renewal"),
        ("published_s", "the new holder's first publication"),
        ("published_after_renewal_s", "... counted from the Lease's last renewal"),
    ):
        for kind, t in s[key].items():
            print(f"{kind:24s} {what}: median {t['median']:.1f} s, max {t['max']:.1f} s (n={t['n']})")


if __name__ == "__main__":

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    sys.exit(main())
