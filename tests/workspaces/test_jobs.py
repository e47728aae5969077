"""Jobs: the Job form's node list (exclusive nodes selectable, the others
disabled with a reason), approval, the Kubernetes Job outside Workspace quotas, its state
read from the cluster, the warning when approval is off."""

import re

import pytest

from workspaces import approvals as ws_approvals
from workspaces import jobs as ws_jobs
from workspaces.models import Decision, JobSettings, WorkspaceJob

from .conftest import objects, text

pytestmark = pytest.mark.django_db
NEW = "/workspaces/jobs/new/"


def node_line(html, node):
    m = re.search(rf'<li[^>]*data-testid="node-{re.escape(node)}".*?</li>', html.decode(), re.S)
    return text(m.group(0)) if m else None


def radio_disabled(html, node):
    m = re.search(rf'<input type="radio" name="node" value="{re.escape(node)}"([^>]*)>', html.decode())
    return "disabled" in m.group(1)


@pytest.fixture
def ws(approved, alice):
    return approved(alice, "team-a")


def job_post(client, ws, **kw):
    data = {
        "workspace": ws.pk,
        "node": "dev-a1-ws04",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": "python train.py --epochs 3",
        "gpu": 1,
    }
    data.update(kw)
    return client.post(NEW, data)


def test_node_list_exactly_as_seed_2_4(ws, login, alice):
    html = login(alice).get(NEW).content
    assert node_line(html, "dev-a1-ws04") == "dev-a1-ws04 nvidia.com/gpu 1 / 1 available"
    assert not radio_disabled(html, "dev-a1-ws04")
    assert (
        node_line(html, "dev-a1-ws02") == "dev-a1-ws02 nvidia.com/gpu.shared — Time-slicing nodes do not support Jobs"
    )
    assert radio_disabled(html, "dev-a1-ws02")


def test_mig_nodes_are_disabled_with_their_reason(load_scenario):
    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.numbers.ledger import compute

    gw = load_scenario("qks")
    opts = {o.name: o for o in ws_jobs.job_node_options(compute(take_snapshot(gw)))}
    assert not opts["qcs07"].selectable and opts["qcs07"].reason == "MIG nodes do not support Jobs"
    assert opts["qcs07"].resource.startswith("nvidia.com/mig-")
    assert not opts["qcs05"].selectable and "Time-slicing" in opts["qcs05"].reason
    assert opts["qcs06"].selectable


def test_cordoned_and_plugin_down_nodes_are_disabled(ws, twin, login, alice):
    twin.cordon("dev-a1-ws04")
    html = login(alice).get(NEW).content
    assert radio_disabled(html, "dev-a1-ws04")
    assert "cordoned" in node_line(html, "dev-a1-ws04")
    twin.uncordon("dev-a1-ws04")
    twin.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "bogus"})  # no plugin selects it
    html = login(alice).get(NEW).content
    assert radio_disabled(html, "dev-a1-ws04")


def test_job_waits_for_approval_then_becomes_a_pinned_low_priority_batch_job(ws, twin, login, alice, admin_user):
    client = login(alice)
    r = job_post(client, ws)
    assert r.status_code == 302
    job = WorkspaceJob.objects.get()
    assert job.status == "pending" and not objects(twin, "Job", "team-a")
    assert "Waiting for approval" in text(client.get("/workspaces/jobs/").content)

    admin = login(admin_user)
    assert f"brick-job-{job.pk}" in text(admin.get("/workspaces/approvals/jobs/").content)
    assert admin.post(f"/workspaces/approvals/jobs/{job.pk}/approve/").status_code == 302
    k8s = objects(twin, "Job", "team-a")[f"brick-job-{job.pk}"]
    pod = k8s["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "dev-a1-ws04"}
    (container,) = pod["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    assert container["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert container["command"] == ["python", "train.py", "--epochs", "3"]
    pcs = objects(twin, "PriorityClass")
    assert pod["priorityClassName"] == "brick-job-priority"
    assert pcs["brick-job-priority"]["value"] <= 0 < pcs["brick-user-priority"]["value"]
    assert pcs["brick-job-priority"]["preemptionPolicy"] == "Never"
    # The Job's pod landed on the node and the ledger counts it as requested.
    pods = [p for p in twin.list_pods(namespace="team-a") if p["metadata"]["labels"].get("job-name")]
    assert [p["spec"]["nodeName"] for p in pods] == ["dev-a1-ws04"]
    job.refresh_from_db()
    assert job.status == "submitted" and job.decided_by_name == "root"
    assert Decision.objects.filter(job=job, action="job_approve", actor=admin_user).exists()
    assert "Running" in text(client.get("/workspaces/jobs/").content)


def test_job_list_shows_the_state_read_from_the_cluster(ws, twin, admin_user, alice, login):
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="true", gpu=1)
    ws_jobs.approve_job(job.pk, admin_user)
    twin.set_job_status(
        "team-a", job.k8s_name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    )
    client = login(alice)
    assert re.search(
        rf"{job.k8s_name} team-a dev-a1-ws04 1 busybox Complete", text(client.get("/workspaces/jobs/").content)
    )
    twin.set_job_status("team-a", job.k8s_name, {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]})
    assert "Failed" in text(client.get(f"/workspaces/jobs/{job.pk}/").content)
    twin.delete("batch/v1", "Job", job.k8s_name, "team-a")
    assert "Not found in the cluster" in text(client.get("/workspaces/jobs/").content)


def test_approval_off_sends_jobs_at_once_and_warns_admins(ws, twin, login, alice, admin_user):
    admin = login(admin_user)
    assert "no resource ceiling" not in text(admin.get("/workspaces/approvals/").content)
    r = admin.post("/workspaces/settings/", {})  # unticked box: approval off
    assert r.status_code == 302
    assert JobSettings.load().approval_required is False
    assert Decision.objects.filter(action="setting", actor=admin_user).exists()
    for url in ("/workspaces/approvals/", "/workspaces/approvals/jobs/", "/workspaces/settings/", "/workspaces/all/"):
        assert "Jobs now go to the cluster without review and have no resource ceiling" in text(admin.get(url).content)
    for url in ("/", "/nodes/"):  # every admin page: the nav carries it
        assert "Jobs unlimited" in text(admin.get(url).content)
    user = login(alice)
    assert "Jobs unlimited" not in text(user.get("/").content)
    job_post(user, ws)
    job = WorkspaceJob.objects.get()
    assert job.status == "submitted" and job.k8s_name in objects(twin, "Job", "team-a")
    admin.post("/workspaces/settings/", {"approval_required": "on"})
    assert "Jobs unlimited" not in text(admin.get("/").content)


def test_gpu_count_must_fit_the_free_gpus_and_the_node_must_be_selectable(ws, login, alice):
    client = login(alice)
    r = job_post(client, ws, gpu=2)
    assert r.status_code == 400 and "At most 1: the free GPUs on dev-a1-ws04." in text(r.content)
    r = job_post(client, ws, node="dev-a1-ws02")
    assert r.status_code == 400 and "Select a valid choice" in text(r.content)
    r = job_post(client, ws, gpu=0)
    assert r.status_code == 400 and "at least 1 GPU" in text(r.content)
    assert not WorkspaceJob.objects.exists()


def test_a_node_that_filled_up_is_refused_at_approval(ws, twin, alice, admin_user):
    first = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    second = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    ws_jobs.approve_job(first.pk, admin_user)
    with pytest.raises(ws_approvals.WorkspaceError, match="No free GPU"):
        ws_jobs.approve_job(second.pk, admin_user)
    second.refresh_from_db()
    assert second.status == "pending" and second.k8s_name not in objects(twin, "Job", "team-a")


def test_reject_job_needs_a_reason(ws, alice, admin_user, login):
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    admin = login(admin_user)
    admin.post(f"/workspaces/approvals/jobs/{job.pk}/reject/", {f"j{job.pk}-reason": ""})
    job.refresh_from_db()
    assert job.status == "pending"
    admin.post(f"/workspaces/approvals/jobs/{job.pk}/reject/", {f"j{job.pk}-reason": "use the shared pool"})
    job.refresh_from_db()
    assert (job.status, job.rejection_reason) == ("rejected", "use the shared pool")
    assert "use the shared pool" in text(login(alice).get("/workspaces/jobs/").content)


def test_jobs_only_in_ones_own_approved_workspaces(ws, approved, bob, charlie, login, make_request, alice):
    pending = make_request(alice, "not-yet")
    client = login(alice)
    r = job_post(client, pending)
    assert r.status_code == 400 and "Select a valid choice" in text(r.content)
    r = job_post(login(charlie), ws)
    assert r.status_code == 400 and "You need an approved Workspace" in text(r.content)
    bobs = approved(bob, "bob-ws")
    r = job_post(client, bobs)
    assert r.status_code == 400
    assert not WorkspaceJob.objects.exists()


def test_failed_submission_keeps_the_job_pending_and_shows_the_error(ws, twin, alice, admin_user, monkeypatch, login):
    from brickadmin.cluster import PermanentClusterError
    from brickadmin.cluster.twin import TwinGateway

    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    monkeypatch.setattr(
        TwinGateway,
        "create_job",
        lambda *a, **k: (_ for _ in ()).throw(PermanentClusterError("jobs.batch is forbidden")),
    )
    admin = login(admin_user)
    admin.post(f"/workspaces/approvals/jobs/{job.pk}/approve/")
    job.refresh_from_db()
    assert job.status == "pending" and "forbidden" in job.last_error
    assert "jobs.batch is forbidden" in text(admin.get("/workspaces/approvals/jobs/").content)


def test_job_pages_read_the_state_the_watcher_keeps_not_the_api_server(ws, twin, admin_user, alice, login, request):
    """The watcher keeps the product's Jobs: with the API server gone, the Jobs
    pages still show each Job's last known state, and say nothing about the cluster."""
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="true", gpu=1)
    ws_jobs.approve_job(job.pk, admin_user)
    twin.set_job_status(
        "team-a", job.k8s_name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    )
    client = login(alice)
    client.get("/workspaces/jobs/")  # the twin's view catches up (in production: the watcher)
    request.getfixturevalue("unreachable")  # now a real cluster whose API server does not answer
    page = text(client.get("/workspaces/jobs/").content)
    assert re.search(rf"{job.k8s_name} team-a dev-a1-ws04 1 busybox Complete", page)
    assert "cannot be reached" not in page
    assert "Complete" in text(client.get(f"/workspaces/jobs/{job.pk}/").content)


def test_an_exclusive_node_with_mig_partitions_offers_its_whole_gpus_to_jobs(load_scenario):
    """Gpu-a100-05 has 4 A100s, two split into MIG instances and two whole
    (mixed strategy): its 2 whole GPUs are offered; a node with MIG only stays disabled."""
    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.numbers.ledger import compute

    gw = load_scenario("demo")
    opts = {o.name: o for o in ws_jobs.job_node_options(compute(take_snapshot(gw)))}
    mixed = opts["gpu-a100-05"]
    assert mixed.selectable and mixed.resource == "nvidia.com/gpu" and (mixed.free, mixed.allocatable) == (2, 2)

    gw = load_scenario("qks")
    opts = {o.name: o for o in ws_jobs.job_node_options(compute(take_snapshot(gw)))}
    assert not opts["qcs07"].selectable and opts["qcs07"].reason == "MIG nodes do not support Jobs"


def test_a_job_on_the_whole_gpus_of_a_mig_node_is_offered_on_the_form(approved, load_scenario, login, alice):
    approved(alice, "team-a")
    load_scenario("demo")
    html = login(alice).get(NEW).content
    assert not radio_disabled(html, "gpu-a100-05")
    assert node_line(html, "gpu-a100-05") == "gpu-a100-05 nvidia.com/gpu 2 / 2 available"
