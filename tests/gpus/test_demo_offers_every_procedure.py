"""The demo shows every procedure: its scenario holds a node for each, and the procedure
command answers --help before any database is migrated."""

import os
import subprocess
import sys
from pathlib import Path

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.twin import TwinGateway
from gpus.procedures.catalogue.mig import mig_configs
from gpus.procedures.registry import get
from gpus.view.live import LiveRead

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_offers_the_mig_wizard_with_the_operators_stock_layouts(demo):
    node = LiveRead(TwinGateway()).ledger().node("gpu-a100-mig-01")
    assert node is not None and get("M").offered_on(node)
    configs, why = mig_configs(TwinGateway())
    assert why == "" and {"all-disabled", "all-1g.10gb", "all-balanced"} <= set(configs)
    assert node.labels[vocab.MIG_CONFIG_LABEL] == "all-disabled"


def test_procedure_help_answers_without_a_migrated_database(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    for args in (["procedure", "--help"], ["procedure", "plan", "--help"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    assert "--mig-config" in done.stdout


def test_the_demo_offers_the_conversions_to_and_from_mps(demo):
    led = LiveRead(TwinGateway()).ledger()
    mps, exclusive, ts = led.node("gpu-a30-05"), led.node("gpu-a30-01"), led.node("gpu-a30-03")
    assert (mps.mode, mps.replicas, mps.logical, mps.plugin_state) == ("mps", 3, 6, "running")
    assert get("H").offered_on(mps) and get("J").offered_on(mps)
    assert get("E").offered_on(exclusive) and get("I").offered_on(ts)


def test_procedure_plan_help_lists_the_mps_conversions(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    done = subprocess.run(
        [sys.executable, "manage.py", "procedure", "plan", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for label in ("E. Exclusive → MPS", "H. MPS → Exclusive", "I. Time-slicing → MPS", "J. MPS → Time-slicing"):
        assert "".join(label.split()) in "".join(done.stdout.split()), label  # however argparse wraps it
