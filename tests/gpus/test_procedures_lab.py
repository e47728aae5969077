"""Procedures A, B, C and D end to end on the lab: a real API server (KubeGateway), KWOK
nodes, gpusim playing device plugin + kubelet, kube-state-metrics and Prometheus (the
step-7 check reads Prometheus, not the fallback)."""
import os

import pytest

from gpus.models import ProcedureRun
from gpus.procedures import engine, service

pytestmark = [pytest.mark.lab]

SHARED, GPU = "nvidia.com/gpu.shared", "nvidia.com/gpu"


@pytest.fixture(scope="module")
def lab():
    from tests.lab.conftest import Lab, lab_kubeconfig

    kubeconfig = lab_kubeconfig()
    from lablock import LabBusy, lab_lock  # lab/ is on sys.path (tests/lab/conftest.py)

    # one user of the lab at a time: these tests load scenarios and change the cluster
    try:
        with lab_lock(timeout=float(os.environ.get("BRICK_LAB_LOCK_TIMEOUT", "1800"))):
            yield Lab(kubeconfig)
    except LabBusy as e:
        pytest.fail(str(e))


@pytest.fixture
def on_lab(lab, settings, db):
    settings.PROMETHEUS_URL = lab.prometheus_url
    settings.BRICK_SNAPSHOT_CACHE_SECONDS = 0
    try:
        lab.load("seed-example")
    except SystemExit as exc:  # load_scenario exits on a timeout: a failure, not an interpreter exit
        pytest.fail(f"could not load seed-example into the lab: {exc}")
    return lab


def run(lab, code, node="", params=None):
    r = service.start_run(code, node, params or {}, actor_name="lab-test", dispatch=False)
    engine.execute(r.pk, gateway=lab.admin)
    r.refresh_from_db()
    return r


def prometheus_step(r):
    return r.steps.filter(step_key="prometheus", state="succeeded").get()


def test_a_then_b_then_c_on_the_lab(on_lab):
    lab = on_lab
    a = run(lab, "A", "dev-a1-ws04")
    assert a.status == "succeeded", a.message
    assert lab.nvidia("dev-a1-ws04") == {SHARED: "2"}
    assert lab.nvidia("dev-a1-ws04", "capacity") == {SHARED: "2"}
    out = prometheus_step(a).output
    assert 'resource="nvidia_com_gpu_shared"} 2' in out and "fell back" not in out
    assert not lab.admin.get_node("dev-a1-ws04")["spec"].get("unschedulable")

    b = run(lab, "B", "dev-a1-ws02")  # the pre-check reads Prometheus: 2 shared left >= 1 allocated
    assert b.status == "succeeded", b.message
    assert "from Prometheus" in b.steps.filter(step_key="precheck", state="succeeded").get().output
    assert lab.nvidia("dev-a1-ws02") == {GPU: "1"}
    assert 'resource="nvidia_com_gpu"} 1' in prometheus_step(b).output

    c = run(lab, "C", params={"replicas": 4})
    assert c.status == "succeeded", c.message
    assert lab.nvidia("dev-a1-ws04") == {SHARED: "4"}
    assert "dev-a1-ws04" in prometheus_step(c).output and "fell back" not in prometheus_step(c).output
    cm = lab.admin.get_configmap("brick-nvidia", "nvidia-device-plugin-config-timeslicing")
    assert "replicas: 4" in cm["data"]["config.yaml"]


def test_b_precheck_blocks_on_the_lab(on_lab):
    b = run(on_lab, "B", "dev-a1-ws02")
    assert b.status == "failed" and "ws-shared" in b.message
    assert on_lab.nvidia("dev-a1-ws02") == {SHARED: "2"}


def test_d_adds_a_node_on_the_lab(on_lab):
    from brickadmin.cluster import scenarios as s
    from tests.lab.conftest import make_node

    lab = on_lab
    make_node(lab, "gpu-new-01")
    hardware = lab.gpusim("/hardware")
    hardware["gpu-new-01"] = s.gpus("gpu-new-01", "NVIDIA A30", 2, 24576)
    import json
    import urllib.request

    req = urllib.request.Request(lab.gpusim_url + "/hardware", data=json.dumps(hardware).encode(), method="PUT",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    try:
        d = run(lab, "D", "gpu-new-01", {"sharing": "timeslicing", "checklist_confirmed": True})
        assert d.status == "succeeded", d.message
        labels = lab.admin.get_node("gpu-new-01")["metadata"]["labels"]
        assert labels["brick.cloud/gpu.type"] == "nvidia" and labels["brick.cloud/gpu.sharing"] == "timeslicing"
        assert lab.nvidia("gpu-new-01") == {SHARED: "4"}
        assert ProcedureRun.objects.get(pk=d.pk).steps.filter(step_key="status-patch", state="skipped").exists()
    finally:
        lab.admin.delete("v1", "Node", "gpu-new-01")


def test_a_fix_removes_a_stale_resource_then_finds_nothing_to_do_on_the_lab(on_lab):
    """Issue 11 items 7-8 end to end: a node relabelled by hand (no procedure) keeps the old
    nvidia.com/gpu in its status; the Fix (procedure S) removes it through the real status
    subresource; run again, it ends as "nothing to do" without sending anything."""
    from tests.lab.conftest import wait_until

    lab, node = on_lab, "dev-a1-ws04"
    lab.admin.label_node(node, {"brick.cloud/gpu.sharing": "timeslicing"})
    wait_until(lambda: lab.nvidia(node).get(SHARED) == "2", 60, "the time-slicing plugin's resources")
    assert GPU in lab.nvidia(node, "capacity")  # kubelet never removes the old resource by itself
    fix = run(lab, "S", node, {"stale_resource": GPU})
    assert fix.status == "succeeded", fix.message
    assert GPU not in lab.nvidia(node, "capacity") and GPU not in lab.nvidia(node)
    assert lab.nvidia(node) == {SHARED: "2"}
    again = run(lab, "S", node, {"stale_resource": GPU})
    assert again.status == "succeeded" and again.message.startswith("Nothing to do"), again.message
    assert not again.steps.filter(intent__isnull=False).exists()
