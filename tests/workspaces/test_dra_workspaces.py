"""Workspaces on GPUs published through Dynamic Resource Allocation, on the ``dra`` scenario:
an approval gives a DeviceClass's devices as Kubernetes counts them, the quota page changes
them like any other quota, Jobs ask for whole DRA GPUs through a ResourceClaimTemplate."""

import pytest
from django.urls import reverse

from brickadmin.cluster import dra_allocate, scenarios
from brickadmin.cluster.snapshot import take_snapshot
from brickadmin.cluster.twin import TwinGateway
from gpus.models import ProcedureRun
from gpus.numbers.ledger import compute
from gpus.tasks import execute_run
from workspaces import approvals as ws_approvals
from workspaces import quota
from workspaces.models import Decision

from .conftest import text
from .test_pod_waits import causes, record

pytestmark = pytest.mark.django_db
GPU_CLASS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_CLASS = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
COUNTING = "Kubernetes counts each device a claim requests; a request for All devices counts as 32."


@pytest.fixture(autouse=True)
def fast_engine(monkeypatch):
    monkeypatch.setenv("BRICK_PROCEDURE_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0")
    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0")


@pytest.fixture
def dra(load_scenario):
    return load_scenario("dra")


SHARES_SLICES = ("dra-l40s-shares-01-gpu.nvidia.com-s4r3d", "dra-l40s-unlimited-01-gpu.nvidia.com-s4r3d")


@pytest.fixture
def dra_pages(dra):
    """The dra scenario for the pages that read the stored view: without its consumable-shares
    nodes' slices, since the stored view's model × type row holds a sharing strategy of at most
    16 characters ("consumable-shares" is 17)."""
    for name in SHARES_SLICES:
        dra.delete("resource.k8s.io/v1", "ResourceSlice", name)
    return dra


def hard(gw, ns):
    return {q["metadata"]["name"]: q["spec"]["hard"] for q in gw.list_resource_quotas(ns)}


def test_the_device_classes_the_cluster_publishes_are_choices_named_by_their_gpus(dra):
    choices = {c.resource: c for c in ws_approvals.gpu_choices(compute(take_snapshot(dra)))}
    whole = choices[GPU_CLASS]
    assert whole.is_dra and whole.device_class == "gpu.nvidia.com"
    assert whole.label == (
        "NVIDIA A100 80GB PCIe, NVIDIA L40S · DRA gpu.nvidia.com (whole GPUs, shared GPUs (consumable shares))"
    )
    assert whole.allocated == 8  # ws-dra's quota of 8 devices
    mig = choices[MIG_CLASS]
    assert mig.label.startswith("NVIDIA A100 80GB PCIe, NVIDIA H100 80GB HBM3 · DRA mig.nvidia.com (MIG devices")
    assert "MIG device(s) of any profile" in mig.physical_text(2)
    # the device plugin's types stay beside them
    assert "nvidia.com/gpu.shared" in choices


def test_the_queue_offers_the_device_class_and_says_how_kubernetes_counts_claims(
    dra_pages, alice, admin_client, make_request
):
    make_request(alice, "team-dra", gpu=2)
    page = text(admin_client.get("/workspaces/approvals/").content)
    assert "DRA gpu.nvidia.com" in page and GPU_CLASS in page
    assert COUNTING in page


def test_approving_a_device_class_writes_its_devices_in_an_unscoped_quota_that_the_cluster_counts(
    dra, alice, admin_user, make_request
):
    before = next(r for r in compute(take_snapshot(dra)).by_resource if r.resource == GPU_CLASS).allocated
    req = make_request(alice, "team-dra", gpu=2)
    ws_approvals.approve(req.pk, admin_user, GPU_CLASS, overcommit=True)
    quotas = hard(dra, "team-dra")
    # no requests. prefix, and not in the compute quota: its PriorityClass scope matches no claim
    assert quotas["workspace-devices"] == {GPU_CLASS: "2"}
    assert not any("deviceclass" in k for k in quotas["workspace-compute"])
    assert "scopeSelector" not in next(
        q["spec"] for q in dra.list_resource_quotas("team-dra") if q["metadata"]["name"] == "workspace-devices"
    )
    ledger = compute(take_snapshot(dra))
    assert ledger.allocated_by_namespace["team-dra"] == {GPU_CLASS: 2}
    assert next(r for r in ledger.by_resource if r.resource == GPU_CLASS).allocated == before + 2
    req.refresh_from_db()
    assert req.status == "approved" and req.gpu_resource == GPU_CLASS
    decision = Decision.objects.get(action=Decision.Action.APPROVE)
    assert f"{GPU_CLASS}=2" in decision.detail and decision.gpu_resource == GPU_CLASS


def test_a_device_class_the_cluster_does_not_serve_is_refused(dra, alice, admin_user, make_request):
    req = make_request(alice, "team-dra", gpu=1)
    with pytest.raises(ws_approvals.WorkspaceError):
        ws_approvals.approve(req.pk, admin_user, "vfio.nvidia.com.deviceclass.resource.k8s.io/devices")
    assert not any(ns["metadata"]["name"] == "team-dra" for ns in dra.list_namespaces())


def test_the_quota_page_changes_a_device_class_quota_counting_the_claims_in_an_audited_run(
    dra, alice, admin_user, login
):
    # ws-dra holds 8 gpu.nvidia.com devices; its six claims of the class ask for one device each
    seen = quota.preview(dra, "ws-dra", 7)
    assert seen.resource == GPU_CLASS and seen.before == 8 and seen.is_dra
    assert seen.requested == 6
    assert {p.name for p in seen.pods} == {"both-gpu", "shared-gpu", "share-1", "share-2", "train-gpu", "unlimited-1"}
    assert "cannot go below" in str(quota.preview(dra, "ws-dra", 5).problem)
    admin = login(admin_user)
    page = text(admin.get(reverse("workspace_quota", args=["ws-dra"])).content)
    assert "Its ResourceClaims count 6 devices now" in page and COUNTING in page
    r = admin.post(reverse("workspace_quota", args=["ws-dra"]), {"gpu": "7", "reason": "one idle"})
    run = ProcedureRun.objects.get()
    assert r.status_code == 302 and run.params["resource"] == GPU_CLASS
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    quotas = hard(dra, "ws-dra")
    assert quotas["workspace-quota"][GPU_CLASS] == "7"
    assert not any(k.startswith("requests.") for k in quotas["workspace-quota"])
    decision = Decision.objects.get(action=Decision.Action.QUOTA)
    assert decision.gpu_resource == GPU_CLASS and "8 → 7" in decision.detail
    assert login(alice).get(reverse("workspace_quota", args=["ws-dra"])).status_code == 403


# --- Jobs on whole DRA GPUs -------------------------------------------------------------

JOB_FORM = "/workspaces/jobs/new/"


@pytest.fixture
def dra_workspace(dra_pages, alice, admin_user, make_request):
    req = make_request(alice, "team-dra", gpu=2)
    return ws_approvals.approve(req.pk, admin_user, GPU_CLASS, overcommit=True)


def test_a_job_on_dra_gpus_gets_a_claim_template_and_a_pod_that_claims_from_it(
    dra_workspace, dra_pages, alice, admin_user, login
):
    from workspaces import jobs
    from workspaces.models import WorkspaceJob

    user = login(alice)
    form = text(user.get(JOB_FORM).content)
    assert "team-dra" in form and "ResourceClaimTemplate" in form
    r = user.post(
        JOB_FORM,
        {"workspace": dra_workspace.pk, "node": "dra-stranded-01", "image": "busybox", "command": "", "gpu": "1"},
    )
    assert r.status_code == 302, text(r.content)
    job = WorkspaceJob.objects.get()
    jobs.approve_job(job.pk, admin_user, ledger=compute(take_snapshot(dra_pages)))
    template = dra_pages._get("ResourceClaimTemplate", job.k8s_name, "team-dra")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    (pod,) = dra_pages.list_pods(namespace="team-dra", label_selector=f"job-name={job.k8s_name}")
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": job.k8s_name}]
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"claims": [{"name": "gpu"}]}  # no nvidia.com/gpu limits
    assert pod["spec"]["nodeName"] == "dra-stranded-01"
    assert Decision.objects.get(action=Decision.Action.JOB_APPROVE).gpu_resource == GPU_CLASS
    # cancelled: the Job and its template go
    jobs.cancel_job(job.pk, alice)
    assert not dra_pages._list("ResourceClaimTemplate", "team-dra")


def test_the_job_form_keeps_dra_workspaces_on_dra_nodes_and_the_others_off_them(dra_workspace, dra_pages, alice, login):
    user = login(alice)
    data = {"workspace": dra_workspace.pk, "node": "gpu-a100-01", "image": "busybox", "command": "", "gpu": "1"}
    r = user.post(JOB_FORM, data)
    assert r.status_code == 400 and "come through DRA (gpu.nvidia.com): choose a node" in text(r.content)
    # a node whose whole DRA GPUs are all held: none free
    r = user.post(JOB_FORM, {**data, "node": "dra-a100-01"})
    assert r.status_code == 400


# --- showback: the GPUs claims hold ---------------------------------------------------------


def test_showback_counts_the_physical_gpus_each_claim_holds_on_its_node(dra):
    from gpus.numbers import occupancy
    from workspaces import showback

    snapshot = take_snapshot(dra)
    ledger = compute(snapshot)
    held = showback.claim_gpus(ledger.nodes)
    # ws-dra's claims: whole GPUs (train-gpu, the claim its three infer pods share, both-gpu) 1 each;
    # dynamic MIG 3g and 1g on one H100: 2 of its 4 units (the two held, two more 1g.10gb fit);
    # three static 1g.10gb of the 14 on two A100s; consumable shares 3 of 8 on two L40S; an
    # unlimited-shares device's one claim holds at most its GPU. The admin-access claim of
    # gpu-monitoring is no use.
    assert held == {"ws-dra": pytest.approx(3 + 2 / 4 + 3 / 7 + 3 / 4 + 1)}
    lines = occupancy.compute(snapshot, ledger).values()
    figures = showback.hour_figures(ledger.nodes, lines, measured=False)
    ws = figures["ws-dra"]
    # and its pod on the device plugin's side of dra-both-01 requests one whole nvidia.com/gpu
    assert ws.requested == pytest.approx(held["ws-dra"] + 1)
    # its quota of 8 gpu.nvidia.com devices at the cluster's average of that class
    shares = {r: v for r, v in ledger_physical_shares(ledger).items() if r == GPU_CLASS}
    assert ws.allocated == pytest.approx(8 * shares[GPU_CLASS]) and ws.allocated > 0


def ledger_physical_shares(ledger):
    from gpus.numbers.ledger import physical_shares

    return physical_shares(ledger.nodes)


def test_the_hour_rolled_up_from_the_view_counts_claim_gpu_hours(dra_pages):
    from datetime import UTC, datetime

    from gpus.view.reading import read_cluster
    from workspaces import showback, showback_rollups

    read_cluster()
    row = showback_rollups.roll_up(datetime(2026, 11, 3, 14, 20, tzinfo=UTC))
    ws = showback.HourFigures.from_list(row.lines["ws-dra"])
    # without the L40S nodes: 3 whole GPUs, dynamic MIG's 2 of an H100's 4 units, 3/7 of static MIG
    assert ws.requested == pytest.approx(3 + 2 / 4 + 3 / 7 + 1)  # and one nvidia.com/gpu of a pod
    assert ws.allocated == pytest.approx(8.0)  # 8 whole-GPU devices, each worth one GPU


# --- why a pod on a DRA claim waits ----------------------------------------------------


def test_the_owner_sees_the_schedulers_selector_error_for_a_waiting_claim_pod(alice, login):
    """A claim whose CEL selector reads an attribute NVIDIA's driver does not publish: the
    scheduler (and the twin) refuse it with the CEL error, and the Workspace page says so."""
    objects, hardware, plugin_configs = scenarios.read("dra")
    objects = [
        o
        for o in dra_allocate.unallocated(objects)
        if not (o["kind"] == "ResourceSlice" and o["metadata"]["name"] in SHARES_SLICES)
    ]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "nvlink-gpu", "namespace": "ws-dra"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].nvlink == 'a'"}}],
                        },
                    }
                ]
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nvlink-0", "namespace": "ws-dra"},
        "spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "nvlink-gpu"}],
        },
    }
    TwinGateway().load([*objects, claim, pod], hardware, plugin_configs)
    ws = record(alice, "ws-dra", resource=GPU_CLASS)
    client = login(alice)
    got = causes(client.get(reverse("workspace_detail", args=[ws.pk])).content.decode())
    assert got["nvlink-0"][0] == "claims"
    assert (
        "Pod nvlink-0 waits for its ResourceClaims (nvlink-gpu): the scheduler cannot allocate them."
        in got["nvlink-0"][1]
    )
    assert (
        'The scheduler says: running "DynamicResources" filter plugin: claim ws-dra/nvlink-gpu: selector #0: '
        "CEL runtime error: no such key: nvlink"
    ) in got["nvlink-0"][1]
    assert "Check its claims' device class and selectors" in got["nvlink-0"][1]
    # the shares nodes' slices are left out (dra_pages): their pods wait for their claims too
    assert {pod for pod, (kind, _w) in got.items() if kind == "claims"} == {
        "nvlink-0",
        "share-pod-1",
        "share-pod-2",
        "unlimited-pod-1",
    }
    assert "The scheduler says: 0/" in got["share-pod-1"][1] and "cannot allocate all claims" in got["share-pod-1"][1]
    client.cookies["django_language"] = "ko"
    korean = causes(client.get(reverse("workspace_detail", args=[ws.pk])).content.decode())
    assert "Pod nvlink-0이(가) ResourceClaim(nvlink-gpu)을 기다리는 중입니다" in korean["nvlink-0"][1]
