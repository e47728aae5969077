"""Procedure M end to end on the lab: a real API server (KubeGateway), a KWOK node the GPU
Operator would run mig-manager on, and gpusim playing mig-manager and the operator's device
plugin."""

import os

import pytest

from brickadmin.cluster import vocabulary as vocab
from gpus.procedures import engine, service
from tests import mig_node

pytestmark = [pytest.mark.lab]

NODE = "gpu-mig-01"


@pytest.fixture(scope="module")
def lab():
    from tests.lab.conftest import Lab, lab_kubeconfig

    kubeconfig = lab_kubeconfig()
    from lablock import LabBusy, lab_lock  # lab/ is on sys.path (tests/lab/conftest.py)

    try:
        with lab_lock(timeout=float(os.environ.get("BRICK_LAB_LOCK_TIMEOUT", "1800"))):
            yield Lab(kubeconfig)
    except LabBusy as e:
        pytest.fail(str(e))


@pytest.fixture
def mig_lab(lab, settings, db):
    import load_scenario  # lab/ is on sys.path

    from tests.lab.conftest import wait_until

    settings.PROMETHEUS_URL = lab.prometheus_url
    settings.BRICK_SNAPSHOT_CACHE_SECONDS = 0
    try:
        lab.load("seed-example")
    except SystemExit as exc:
        pytest.fail(f"could not load seed-example into the lab: {exc}")
    for obj in mig_node.operator_objects() + [mig_node.node(NODE)]:
        load_scenario.create(lab.admin, obj)
    load_scenario.gpusim("PUT", "/hardware", {**lab.gpusim("/hardware"), NODE: mig_node.hardware(NODE)})
    lab.gpusim_syncs(2)
    wait_until(lambda: labels(lab).get(vocab.MIG_CONFIG_STATE_LABEL) == "success", 30, "mig-manager settled")
    return lab


def labels(lab):
    return lab.admin.get_node(NODE)["metadata"].get("labels") or {}


def run(lab, params):
    r = service.start_run("M", NODE, params, actor_name="lab-test", dispatch=False)
    engine.execute(r.pk, gateway=lab.admin)
    r.refresh_from_db()
    return r


def test_a_mig_layout_then_back_on_the_lab(mig_lab):
    lab = mig_lab
    r = run(lab, {"mig_config": "all-1g.10gb"})
    assert r.status == "succeeded", r.message
    assert labels(lab)[vocab.MIG_CONFIG_STATE_LABEL] == "success"
    assert lab.nvidia(NODE) == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "28"}
    assert [g.get("mig") for g in lab.gpusim("/hardware")[NODE]] == [["1g.10gb"] * 7] * 4
    assert not (lab.admin.get_node(NODE).get("spec") or {}).get("unschedulable")

    back = run(lab, {"mig_config": "all-disabled"})
    assert back.status == "succeeded", back.message
    assert lab.nvidia(NODE) == {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "0"}


def test_a_layout_the_gpus_cannot_hold_is_refused_before_anything_changes_on_the_lab(mig_lab):
    r = run(mig_lab, {"mig_config": "all-1g.5gb"})
    assert r.status == "failed" and "has no MIG profile 1g.5gb" in r.message
    assert labels(mig_lab)[vocab.MIG_CONFIG_LABEL] == "all-disabled"
    assert not (mig_lab.admin.get_node(NODE).get("spec") or {}).get("unschedulable")
