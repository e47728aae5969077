"""lab/up itself: idempotent reuse of a running lab, and a plain refusal without Go."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from .conftest import REPO

pytestmark = pytest.mark.lab


def test_lab_up_reuses_the_running_lab(lab):
    t0 = time.monotonic()
    r = subprocess.run([str(REPO / "lab" / "up")], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert "reusing the running lab" in r.stderr
    assert f"KUBECONFIG={lab.kubeconfig}" in r.stdout
    assert f"PROMETHEUS_URL={lab.prometheus_url}" in r.stdout
    assert took < 20
    st = subprocess.run([str(REPO / "lab" / "status")], capture_output=True, text=True, timeout=30)
    assert st.returncode == 0 and "STOPPED" not in st.stdout


def test_lab_up_without_go_says_so_plainly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GO",)}
    env.update(
        PATH="/usr/bin:/bin",
        GO=str(tmp_path / "no-go-here"),
        BRICK_LAB_CACHE=str(tmp_path / "cache"),
        BRICK_LAB_DIR=str(tmp_path / "state"),
    )
    r = subprocess.run([str(REPO / "lab" / "up")], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0
    assert "Go is not installed" in r.stderr
    assert "install Go" in r.stderr
    assert not (tmp_path / "state").exists()  # nothing was started
