"""Two real watchers on a PostgreSQL of their own (bench/chaos_watcher.py, one fault of each
kind, a short Lease): the leader killed, paused past its Lease then woken, killed in the
middle of a publication, and PostgreSQL restarted in the middle of one. Afterwards the view
equals a fresh list, no view was ever torn, a woken former leader wrote nothing, and the
watcher whose database restarted resumed without exiting."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_service

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_view_survives_a_killed_paused_or_cut_leader_and_a_database_restart():
    require_service(any(Path("/usr/lib/postgresql").glob("*/bin/initdb")), "PostgreSQL (Debian package postgresql)")
    run = subprocess.run(
        [sys.executable, "bench/chaos_watcher.py", "--json", "--rounds", "1", "--fillers", "100"]
        + ["--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5", "--recover-timeout", "120"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode in (0, 1), run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    faults = {r["fault"]: r for r in figures["results"]}
    assert set(faults) == {
        "kill-leader",
        "pause-leader",
        "kill-mid-publish",
        "pause-mid-publish",
        "pg-restart-mid-publish",
    }
    assert figures["torn"] == 0, "a view showed two generations at once"
    assert figures["wrong"] == 0, "the view differs from a fresh list after the recovery"
    assert figures["stale_writes"] == 0, "a former leader wrote the view after the takeover"
    assert figures["exited"] == 0, "a watcher exited when the database restarted"
    for kind in ("kill-leader", "pause-leader", "kill-mid-publish", "pause-mid-publish"):
        assert faults[kind]["takeover_s"] is not None, f"{kind}: the standby never took over"
    assert run.returncode == 0
