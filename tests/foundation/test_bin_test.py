"""The test command leaves nothing behind. bin/test runs a test that leaves a
process running in its own session; once bin/test has returned, that process is gone, and so
are the PostgreSQL and Redis it started (the lab's teardown is the same cleanup, see bin/test)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# a whole bin/test of its own (PostgreSQL, Redis, checks, pytest): bin/test runs it apart
pytestmark = pytest.mark.alone


def alive(pid: int) -> bool:
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return " Z " not in state + " "  # a zombie has ended; only its parent has not reaped it yet


def test_bin_test_stops_what_the_tests_left_running(tmp_path):
    pidfile = tmp_path / "leftover.pid"
    # its own PostgreSQL and Redis, not this run's, and not marked as this run's processes
    # (nor the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE, which the inner check --deploy refuses)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "BRICK_TEST_RUN", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    env["BRICK_LEFTOVER_PIDFILE"] = str(pidfile)
    done = subprocess.run(
        [str(ROOT / "bin/test"), "tests/foundation/leftover_probe.py", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    pid = int(pidfile.read_text())
    try:
        assert not alive(pid), f"bin/test left pid {pid} running"
        assert "stopped 1 process(es) the tests left running" in done.stderr
        run_dir = next(line.split("=", 1)[1] for line in done.stdout.splitlines() if line.startswith("bin/test: RUN="))
        assert not Path(run_dir).exists()  # PostgreSQL's data, Redis's pid file: all gone
    finally:
        if alive(pid):
            os.kill(pid, 9)
