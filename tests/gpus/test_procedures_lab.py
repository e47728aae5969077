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

    req = urllib.request.Request(
        lab.gpusim_url + "/hardware",
        data=json.dumps(hardware).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
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
    """End to end: a node relabelled by hand (no procedure) keeps the old
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


# --- the Fixes, each end to end on the lab -----------------------------------------------
# Each finding is read from the lab as the watcher would publish it (the live view through the
# health registry); the fix runs through the engine against the real API server; the finding is
# then gone, and where a second run would find nothing left, it ends as "nothing to do".


def findings(lab, kind, subject=""):
    from gpus.numbers import health
    from gpus.view import reading

    found = health.problems(reading.health_inputs(reading.live_view(lab.admin)), reads="cluster")
    return [p for p in found if p.kind == kind and (not subject or p.subject == subject)]


def fix_of(problem):
    """The procedure and facts the finding's "Fix" (or wizard) runs with."""
    code = problem.fix or problem.wizard
    return code, dict(problem.fix_params) if problem.fix else {}


def nothing_left(lab, code, node, params):
    again = run(lab, code, node, params)
    assert again.status == "succeeded" and again.message.startswith("Nothing to do"), again.message
    assert not again.steps.filter(intent__isnull=False).exists()  # not one request sent


def test_a_fix_restarts_the_plugin_when_replicas_are_not_reflected_on_the_lab(on_lab):
    """The ConfigMap says 4 but nobody restarted the plugin: the node still advertises 2; the Fix
    (procedure P) restarts it and every time-slicing node then shows the configured replicas."""
    import re

    from tests.lab.conftest import wait_until

    lab, node = on_lab, "dev-a1-ws02"
    cm = lab.admin.get_configmap("brick-nvidia", "nvidia-device-plugin-config-timeslicing")
    lab.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": cm["metadata"]["name"], "namespace": "brick-nvidia"},
            "data": {"config.yaml": re.sub(r"replicas: \d+", "replicas: 4", cm["data"]["config.yaml"])},
        },
        field_manager="lab-tests",
    )
    lab.gpusim_syncs(3)
    assert lab.nvidia(node) == {SHARED: "2"}  # the plugin read its config when it started
    (problem,) = findings(lab, "replicas-not-reflected", node)
    code, params = fix_of(problem)
    assert code == "P"
    fix = run(lab, code, "", params)
    assert fix.status == "succeeded", fix.message
    wait_until(lambda: lab.nvidia(node) == {SHARED: "4"}, 60, "gpu.shared 4")
    assert findings(lab, "replicas-not-reflected") == []
    nothing_left(lab, code, "", params)


def test_a_fix_deletes_a_failed_pod_after_telling_its_owner_on_the_lab(on_lab):
    """A pod the kubelet refused (phase Failed, UnexpectedAdmissionError: two shared GPUs asked
    for): the Fix (procedure F) records a notice for the Workspace's owner, then deletes the pod
    through the real API server."""
    from gpus.models import OwnerNotice
    from tests.lab.conftest import make_namespace

    lab, node, ns, name = on_lab, "dev-a1-ws02", "ws-fixlab", "trainer-retry"
    make_namespace(lab, ns)
    lab.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"brick.cloud/workspace": "true", "brick.cloud/owner": "carol"}},
        },
        field_manager="lab-tests",
    )
    try:
        gpu = {SHARED: "2"}
        lab.admin._request(
            "POST",
            f"/api/v1/namespaces/{ns}/pods",
            body={
                "apiVersion": "v1",
                "kind": "Pod",
                # KWOK leaves this pod's status alone: it stays as the kubelet's refusal leaves it
                "metadata": {"name": name, "namespace": ns, "annotations": {"kwok.x-k8s.io/status": "custom"}},
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "busybox", "resources": {"limits": gpu, "requests": gpu}}],
                },
            },
        )
        why = "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu.shared"
        lab.admin._request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            body={"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": why}},
            content_type="application/merge-patch+json",
        )
        (problem,) = findings(lab, "pod-admission-failed", node)
        assert "carol" in problem.message and "failRequestsGreaterThanOne" in problem.message
        code, params = fix_of(problem)
        assert (code, params) == ("F", {"pod_namespace": ns, "pod_name": name})
        fix = run(lab, code, node, params)
        assert fix.status == "succeeded", fix.message
        assert lab.admin.list_pods(namespace=ns, field_selector=f"metadata.name={name}") == []
        notice = OwnerNotice.objects.get(run_id=fix.pk)
        assert (notice.namespace, notice.owner_name, notice.subject) == (ns, "carol", f"{ns}/{name}")
        assert why in notice.message
        assert findings(lab, "pod-admission-failed") == []
        nothing_left(lab, code, node, params)
    finally:
        lab.admin.delete("v1", "Namespace", ns)


def test_a_fix_adds_the_missing_toleration_then_applies_the_manifest_on_the_lab(on_lab):
    """A GPU node with a taint neither plugin DaemonSet tolerates gets no plugin pod; the Fix
    (procedure T) saves a new manifest version with the toleration, applies it, and the
    DaemonSet controller starts the plugin there."""
    import json
    import urllib.request

    from brickadmin.cluster import scenarios as s
    from gpus import manifest as manifest_mod
    from tests.lab.conftest import make_node, wait_until

    lab, node = on_lab, "gpu-taint-01"
    taint = {"key": "brick.cloud/dedicated", "value": "llm", "effect": "NoSchedule"}
    make_node(
        lab,
        node,
        {"brick.cloud/gpu.type": "nvidia", "brick.cloud/gpu.sharing": "none", "nvidia.com/gpu.product": "NVIDIA-A30"},
        taints=[taint],
    )
    hardware = lab.gpusim("/hardware")
    hardware[node] = s.gpus(node, "NVIDIA A30", 1, 24576)
    urllib.request.urlopen(
        urllib.request.Request(
            lab.gpusim_url + "/hardware",
            data=json.dumps(hardware).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        ),
        timeout=10,
    ).read()
    try:
        lab.gpusim_syncs(3)
        (problem,) = findings(lab, "plugin-missing", node)
        assert "brick.cloud/dedicated=llm:NoSchedule" in problem.message
        code, params = fix_of(problem)
        assert code == "T" and params == {
            "taint_key": "brick.cloud/dedicated",
            "taint_value": "llm",
            "taint_effect": "NoSchedule",
        }
        before = manifest_mod.current().version
        fix = run(lab, code, node, {**params, "drift_acknowledged": True})
        assert fix.status == "succeeded", fix.message
        assert manifest_mod.current().version == before + 1 and manifest_mod.current().run_id == fix.pk
        for name in ("nvidia-device-plugin-default", "nvidia-device-plugin-timeslicing"):
            tolerations = lab.admin.get_daemonset("brick-nvidia", name)["spec"]["template"]["spec"]["tolerations"]
            assert {
                "key": "brick.cloud/dedicated",
                "operator": "Equal",
                "value": "llm",
                "effect": "NoSchedule",
            } in tolerations
        wait_until(lambda: lab.nvidia(node) == {GPU: "1"}, 60, "the plugin's nvidia.com/gpu on the tainted node")
        assert findings(lab, "plugin-missing", node) == []
        nothing_left(lab, code, node, params)
    finally:
        lab.admin.delete("v1", "Node", node)


def test_a_fix_restores_a_node_a_stopped_run_left_cordoned_on_the_lab(on_lab, monkeypatch):
    """A run of A stops after cordoning and draining (its relabel refused here); the Fix of
    "left cordoned by a stopped run" (procedure R, completed from the run's record) uncordons
    the node with its labels as before."""
    from gpus.procedures import registry, steps
    from gpus.procedures.base import StepFailed

    lab, node = on_lab, "dev-a1-ws04"

    def refuse(self, ctx):
        raise StepFailed("stopped by the test before the relabel")

    monkeypatch.setattr(steps.Label, "ensure", refuse)
    stopped = run(lab, "A", node)
    monkeypatch.undo()
    assert stopped.status == "failed" and lab.admin.get_node(node)["spec"].get("unschedulable")
    proc = registry.get("R")
    params = service.fix_params(proc, node, {"restore_of": stopped.pk}, lab.admin)
    assert params["uncordon"] is True
    fix = run(lab, "R", node, params)
    assert fix.status == "succeeded", fix.message
    raw = lab.admin.get_node(node)
    assert not raw["spec"].get("unschedulable") and raw["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "none"
    assert lab.nvidia(node) == {GPU: "1"}
    assert proc.nothing_to_do(lab.admin, node, params)  # the plan page now says "Nothing to do"


def test_a_label_typo_is_corrected_by_the_wizard_it_meant_on_the_lab(on_lab):
    """A sharing-label typo leaves the node without a plugin; the finding's wizard (A, for
    "time-slicing") drains the node and sets the label exactly: the node serves shared GPUs."""
    from tests.lab.conftest import wait_until

    lab, node = on_lab, "dev-a1-ws04"
    lab.admin.label_node(node, {"brick.cloud/gpu.sharing": "time-slicing"})
    wait_until(lambda: findings(lab, "label-typo", node), 60, "the typo found")
    (problem,) = findings(lab, "label-typo", node)
    assert problem.wizard == "A" and not problem.fix  # never a bare relabel
    fix = run(lab, "A", node)
    assert fix.status == "succeeded", fix.message
    assert lab.admin.get_node(node)["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
    assert lab.nvidia(node) == {SHARED: "2"}
    assert findings(lab, "label-typo") == []


def test_a_fix_recreates_a_missing_workspace_namespace_and_quotas_on_the_lab(on_lab, monkeypatch):
    """An approved Workspace whose namespace was deleted by hand (its quotas with it) gets both
    back from its approval record (procedure W) through the real API server."""
    import uuid

    from django.contrib.auth import get_user_model

    from tests.lab.conftest import wait_until
    from workspaces import approvals

    lab = on_lab
    monkeypatch.setattr(approvals, "get_gateway", lambda: lab.admin)
    User = get_user_model()
    admin = User.objects.create_user("root-fixlab", is_staff=True)
    carol = User.objects.create_user("carol-fixlab")
    name = f"team-fixlab-{uuid.uuid4().hex[:6]}"
    req = approvals.create_request(carol, name=name, gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    approvals.approve(req.pk, admin, SHARED, overcommit=True)
    try:
        quotas = lambda: {q["metadata"]["name"]: q["spec"]["hard"] for q in lab.admin.list_resource_quotas(name)}  # noqa: E731
        before = quotas()
        assert before
        lab.admin.delete("v1", "Namespace", name)  # by hand: its quotas go with it
        wait_until(
            lambda: all(n["metadata"]["name"] != name for n in lab.admin.list_namespaces()),
            120,
            f"namespace {name} gone",
        )
        fix = run(lab, "W", "", {"workspace": name})
        assert fix.status == "succeeded", fix.message
        ns = next(n for n in lab.admin.list_namespaces() if n["metadata"]["name"] == name)
        assert ns["metadata"]["labels"]["brick.cloud/workspace"] == "true"
        assert ns["metadata"]["labels"]["brick.cloud/owner"] == approvals.owner_label_value("carol-fixlab")
        assert quotas() == before
        nothing_left(lab, "W", "", {"workspace": name})
    finally:
        lab.admin.delete("v1", "Namespace", name)
