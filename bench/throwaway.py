"""Throwaway services for the benchmarks, as bin/test starts them: a PostgreSQL cluster of
their own (initdb in the run's temp dir, its own port and socket directory, run as the
postgres user when root) and a redis-server on its own port without persistence (as the
chart's Redis). Each process started is put in ``procs`` (its own session), so the caller
ends exactly those and nothing else."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def spawn(log_path: Path, cmd, env, cwd: Path, procs: list, logs: list) -> subprocess.Popen:
    """A bench's own process in its own session, its output appended to ``log_path``."""
    log = open(log_path, "ab")
    logs.append(log)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    procs.append(proc)
    return proc


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, procs: list, sig=signal.SIGTERM, timeout=15):
    """End one process the caller started, and its process group (its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
    if proc in procs:
        procs.remove(proc)


def as_pg(cmd):
    """PostgreSQL refuses to run as root: as root, run it as the postgres user (as bin/test)."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.getuid() == 0 else cmd


class Postgres:
    def __init__(self, var: Path, max_connections: int = 100):
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
        if not bins:
            sys.exit("PostgreSQL not found (apt-get install postgresql)")
        self.bin, self.var, self.max_connections = bins[-1], var, max_connections
        self.data = var / "pg"
        self.port = free_port()
        self.url = f"postgres://brick@127.0.0.1:{self.port}/postgres"
        os.chmod(var, 0o755)
        if os.getuid() == 0:
            shutil.chown(var, "postgres")
        subprocess.run(
            as_pg([str(self.bin / "initdb"), "-D", str(self.data), "-U", "brick", "--auth=trust", "-E", "UTF8"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.running = False

    def start(self):
        opts = (
            f"-p {self.port} -k {self.var} -c listen_addresses=127.0.0.1 -c max_connections={self.max_connections} "
            "-c dynamic_shared_memory_type=mmap"
        )
        log = str(self.var / "pg.log")
        subprocess.run(
            as_pg([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", log, "-w", "-o", opts, "start"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.running = True

    def stop(self, mode="fast"):
        """fast: what a pod's termination or an operator's restart does (sessions are ended)."""
        subprocess.run(
            as_pg([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.running = False

    def pids(self) -> list[int]:
        """The server's processes (postmaster and backends), for memory figures."""
        try:
            master = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        kids = Path(f"/proc/{master}/task/{master}/children")
        return [master, *(int(p) for p in kids.read_text().split())] if kids.exists() else [master]


class Redis:
    def __init__(self, var: Path, procs: list):
        self.binary = shutil.which("redis-server")
        if not self.binary:
            sys.exit("redis-server not found (apt-get install redis-server)")
        self.var, self.procs = var, procs
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = None

    def start(self):
        # As the chart's Redis: no persistence, so a restart loses what was queued.
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.var,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(self.proc)
        import redis

        for _ in range(200):
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            except Exception:
                time.sleep(0.05)
        sys.exit("redis-server did not start")

    def stop(self):
        if self.proc is not None:
            stop(self.proc, self.procs)
            self.proc = None
