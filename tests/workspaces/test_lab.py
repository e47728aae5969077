"""The same flows against the lab's real API server (lab/up): the namespace and quotas
really created, the quota really enforced (so its key is one the API server enforces),
Jobs outside it, and all-or-nothing with a real 422. Skips locally without the lab;
fails in CI. The lab's loaded scenario is read, never reloaded (other tests share it)."""

import os
import time
import uuid
from pathlib import Path

import pytest

from brickadmin.cluster import ClusterError, PermanentClusterError
from brickadmin.cluster.kueue import Grant
from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers.ledger import Ledger, ResourceRow, compute
from tests.conftest import require_service
from workspaces import approvals
from workspaces import jobs as ws_jobs
from workspaces.models import JOB_PRIORITY_CLASS, USER_PRIORITY_CLASS

pytestmark = [pytest.mark.lab, pytest.mark.django_db]

KUBECONFIG = os.environ.get(
    "BRICK_LAB_KUBECONFIG", str(Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab")) / "kubeconfig")
)


@pytest.fixture
def kube(monkeypatch):
    gw = None
    if Path(KUBECONFIG).exists():
        from brickadmin.cluster.kube import KubeGateway

        try:
            gw = KubeGateway(KUBECONFIG)
            gw.list_namespaces()
        except ClusterError:
            gw = None
    require_service(gw is not None, f"the lab API server ({KUBECONFIG})")
    from tests.lab.conftest import hold_lab

    hold_lab()  # the lab is one cluster per machine: take turns with other runs (lab/lablock.py)
    monkeypatch.setattr(approvals, "get_gateway", lambda: gw)
    monkeypatch.setattr(ws_jobs, "get_gateway", lambda: gw)
    created = []
    yield gw, created
    for ns in created:
        for api, kind, name in (("v1", "Namespace", ns), ("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"brick-ws-{ns}")):
            try:
                gw.delete(api, kind, name)
            except ClusterError:
                pass


def gone_or_terminating(gw, ns):
    for n in gw.list_namespaces():
        if n["metadata"]["name"] == ns:
            return bool(n["metadata"].get("deletionTimestamp")) or n.get("status", {}).get("phase") == "Terminating"
    return True


def pod(ns, name, resources, priority=None):
    spec = {"containers": [{"name": "c", "image": "busybox", "resources": resources}], "restartPolicy": "Never"}
    if priority:
        spec["priorityClassName"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_approval_creates_an_enforced_workspace_on_the_lab(kube, alice, admin_user, make_request):
    gw, created = kube
    # Whatever scenario the lab holds now (other tests reload it), offer Shared: quotas do
    # not depend on nodes, and the API server is what is under test here.
    ledger = Ledger(
        nodes=[],
        by_type=[],
        by_resource=[ResourceRow("nvidia.com/gpu.shared", logical=2)],
        allocated_by_namespace={},
        device_source="labels",
    )
    (choice,) = approvals.gpu_choices(ledger)
    name = f"ws-lab-{uuid.uuid4().hex[:6]}"
    created.append(name)
    req = make_request(alice, name, gpu=1, cpu=2, memory_gib=4, storage_gib=10)
    # Kueue runs in the lab: a grant with no burst keeps the ResourceQuota at the guarantee,
    # whose enforcement by the API server is what is under test
    approvals.approve(req.pk, admin_user, choice.resource, overcommit=True, ledger=ledger, grant=Grant(1, 0))

    ns = next(n for n in gw.list_namespaces() if n["metadata"]["name"] == name)
    assert ns["metadata"]["labels"]["brick.cloud/workspace"] == "true"
    assert ns["metadata"]["labels"]["brick.cloud/owner"] == "alice"
    quotas = {q["metadata"]["name"]: q for q in gw.list_resource_quotas(name)}
    assert quotas["workspace-compute"]["spec"]["hard"] == {
        f"requests.{choice.resource}": "1",
        "requests.cpu": "2",
        "requests.memory": "4Gi",
    }
    assert quotas["workspace-storage"]["spec"]["hard"] == {"requests.storage": "10Gi"}
    pcs = {p["metadata"]["name"]: p for p in gw.list_priority_classes()}
    assert pcs[USER_PRIORITY_CLASS]["value"] > 0
    # The ledger reads it back as allocated.
    after = compute(take_snapshot(gw, use_prometheus=False))
    assert after.allocated_by_namespace[name] == {choice.resource: 1}

    # The API server enforces the key: a second GPU beyond the quota is refused...
    gpu = {"limits": {choice.resource: "1"}, "requests": {choice.resource: "1"}}
    gw.apply(pod(name, "p1", gpu, USER_PRIORITY_CLASS))
    with pytest.raises(PermanentClusterError, match="exceeded quota"):
        gw.apply(pod(name, "p2", gpu, USER_PRIORITY_CLASS))
    # ...also for a pod with no PriorityClass at all (the scope is NotIn brick-job-priority)...
    with pytest.raises(PermanentClusterError, match="exceeded quota"):
        gw.apply(pod(name, "p3", gpu))
    # ...while a scavenging Job's pod runs outside the Workspace quota
    # (docs/operator-guide.md#jobs).
    approvals.ensure_priority_class(gw, JOB_PRIORITY_CLASS, -10, "jobs", "Never")
    exclusive = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    # The API server's Priority admission reads PriorityClasses from its informer: a class
    # created a moment ago may not be there yet (a Job's controller retries the same way).
    deadline = time.monotonic() + 15
    while True:
        try:
            gw.apply(pod(name, "job-pod", exclusive, JOB_PRIORITY_CLASS))
            break
        except ClusterError as exc:
            if "no PriorityClass with name" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_real_422_midway_leaves_nothing(kube, alice, admin_user, make_request, monkeypatch):
    gw, created = kube
    ledger = compute(take_snapshot(gw, use_prometheus=False))
    name = f"ws-lab-{uuid.uuid4().hex[:6]}"
    created.append(name)
    req = make_request(alice, name, gpu=0)
    real = approvals.workspace_manifests

    def with_an_invalid_quota(r, resource):
        out = real(r, resource)
        out[0]["spec"]["hard"]["requests.storage"] = "1Gi"  # PriorityClass scope on storage: 422
        return out

    monkeypatch.setattr(approvals, "workspace_manifests", with_an_invalid_quota)
    with pytest.raises(approvals.WorkspaceError, match="unsupported scope"):
        approvals.approve(req.pk, admin_user, "", ledger=ledger)
    assert gone_or_terminating(gw, name)
    req.refresh_from_db()
    assert req.status == "pending"


def test_an_approved_job_is_a_pinned_batch_job_on_the_lab(kube, alice, admin_user, make_request):
    gw, created = kube
    ledger = compute(take_snapshot(gw, use_prometheus=False))
    node = next((o.name for o in ws_jobs.job_node_options(ledger) if o.allocatable), "dev-a1-ws04")
    name = f"ws-lab-{uuid.uuid4().hex[:6]}"
    created.append(name)
    req = make_request(alice, name, gpu=0)
    ws = approvals.approve(req.pk, admin_user, "", ledger=ledger)
    job = ws_jobs.create_job(alice, ws, node=node, image="busybox", command="sleep 1", gpu=1)
    ws_jobs.submit_job(job, admin_user)  # the node may be busy with other tests' pods: no free check here
    k8s = next(j for j in gw.list_jobs(name) if j["metadata"]["name"] == job.k8s_name)
    spec = k8s["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": node}
    assert spec["priorityClassName"] == JOB_PRIORITY_CLASS
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    pcs = {p["metadata"]["name"]: p for p in gw.list_priority_classes()}
    assert pcs[JOB_PRIORITY_CLASS]["value"] <= 0 < pcs[USER_PRIORITY_CLASS]["value"]
    assert ws_jobs.job_state(k8s) in ("Pending", "Running", "Complete", "Failed", "Suspended")
