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
