"""Elastic quota on Kueue: whether the console knows Kueue is served, and what an approval
writes with it (and, without it, exactly what it always wrote)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brickadmin.cluster import PermanentClusterError
from brickadmin.cluster.base import KUEUE_CRD
from workspaces import approvals as ws_approvals
from workspaces import elastic
from workspaces.models import Decision, WorkspaceRequest

from .conftest import objects

pytestmark = pytest.mark.django_db


@pytest.fixture
def kueue_twin(twin, settings):
    settings.BRICK_TWIN_KUEUE = True
    return twin


def crd():
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": KUEUE_CRD},
        "spec": {"group": "kueue.x-k8s.io"},
    }


def test_the_twin_serves_kueue_when_a_setting_or_its_crd_says_so(twin, settings):
    assert twin.kueue_served() is False
    assert twin.list_kueue("ClusterQueue") == []
    with pytest.raises(PermanentClusterError) as refused:
        twin.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}})
    assert refused.value.status == 404
    twin.apply(crd())
    assert twin.kueue_served() is True
    twin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", KUEUE_CRD)
    settings.BRICK_TWIN_KUEUE = True
    assert twin.kueue_served() is True


def test_pages_read_the_last_read_without_the_api_server(kueue_twin, settings):
    assert elastic.facts().served is None  # never read: not known
    elastic.read_kueue(kueue_twin)
    with CaptureQueriesContext(connection) as queries:
        seen = elastic.facts()
    assert seen.served is True and len(queries) == 1
    settings.BRICK_TWIN_KUEUE = False
    assert elastic.read_kueue(kueue_twin).served is False
    assert elastic.facts().served is False


def test_an_old_read_is_not_trusted(kueue_twin, settings):
    elastic.read_kueue(kueue_twin)
    settings.BRICK_KUEUE_FACTS_SECONDS = -1
    assert elastic.facts().served is None


def test_the_beat_task_reads_kueue(kueue_twin):
    from workspaces.tasks import read_kueue

    assert read_kueue() == "Kueue served"


def test_approval_with_kueue_writes_flavor_cluster_queue_local_queue_and_the_ceiling(
    kueue_twin, alice, admin_user, make_request
):
    req = make_request(alice, "team-a", gpu=2, cpu=4, memory_gib=16)
    ws_approvals.approve(
        req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(2, 2, 1)
    )
    gw = kueue_twin
    quota = objects(gw, "ResourceQuota", "team-a")["workspace-compute"]
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "4"  # guarantee + burst
    ns = objects(gw, "Namespace")["team-a"]
    assert ns["metadata"]["labels"]["brick.cloud/kueue"] == "managed"
    assert ns["metadata"]["labels"]["brick.cloud/workspace"] == "true"
    flavors = objects(gw, "ResourceFlavor")
    assert set(flavors) == {"brick-gpu-shared", "brick-any-node"}
    cq = objects(gw, "ClusterQueue")["brick-ws-team-a"]
    assert cq["spec"]["cohortName"] == "brick-gpu-shared"
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu.shared", "nominalQuota": "2", "borrowingLimit": "2", "lendingLimit": "1"}
    ]
    cpu_mem = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][1]["flavors"][0]["resources"]}
    assert cpu_mem == {"cpu": "4", "memory": "16Gi"}
    lq = objects(gw, "LocalQueue", "team-a")["default"]
    assert lq["spec"] == {"clusterQueue": "brick-ws-team-a"}
    req.refresh_from_db()
    assert req.status == "approved" and req.gpu == 4  # the record follows its ResourceQuota
    granted = Decision.objects.get(workspace=req, action=Decision.Action.QUOTA)
    assert "guarantee 2, burst ceiling 2, lend ceiling 1" in granted.detail


def test_approval_with_kueue_takes_the_defaults_from_settings(kueue_twin, alice, admin_user, make_request, settings):
    settings.BRICK_KUEUE_BURST_PERCENT = 50
    settings.BRICK_KUEUE_LEND_PERCENT = 100
    req = make_request(alice, "team-b", gpu=2)
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    (res,) = objects(kueue_twin, "ClusterQueue")["brick-ws-team-b"]["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"
    ]
    assert (res["nominalQuota"], res["borrowingLimit"], res["lendingLimit"]) == ("2", "1", "2")
    hard = objects(kueue_twin, "ResourceQuota", "team-b")["workspace-compute"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu.shared"] == "3"


def test_approving_again_after_a_failure_writes_each_object_once(kueue_twin, alice, admin_user, make_request):
    """Kueue refuses the ClusterQueue: the namespace and the queue go, the request stays
    pending, the shared flavors stay; approved afterwards, everything is there once."""
    req = make_request(alice, "team-c", gpu=1)
    with pytest.raises(ws_approvals.WorkspaceError, match="lendingLimit"):
        ws_approvals.approve(
            req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(1, 1, 5)
        )
    req.refresh_from_db()
    assert req.status == "pending"
    assert "team-c" not in objects(kueue_twin, "Namespace")
    assert "brick-ws-team-c" not in objects(kueue_twin, "ClusterQueue")
    assert "brick-gpu-shared" in objects(kueue_twin, "ResourceFlavor")
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(1, 1))
    assert list(objects(kueue_twin, "ClusterQueue")) == ["brick-ws-team-c"]
    assert list(objects(kueue_twin, "LocalQueue", "team-c")) == ["default"]


def test_a_cluster_queue_left_by_a_failed_namespace_step_is_removed(
    kueue_twin, alice, admin_user, make_request, monkeypatch
):
    """The LocalQueue write fails after the ClusterQueue was made: the undo deletes both."""
    req = make_request(alice, "team-d", gpu=1)
    real_apply = type(kueue_twin).apply

    def apply(self, manifest, **kw):
        if manifest["kind"] == "LocalQueue":
            raise PermanentClusterError("admission webhook denied the request", status=422)
        return real_apply(self, manifest, **kw)

    monkeypatch.setattr(type(kueue_twin), "apply", apply)
    with pytest.raises(ws_approvals.WorkspaceError, match="webhook denied"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    assert objects(kueue_twin, "ClusterQueue") == {}
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "pending"


def test_without_kueue_an_approval_writes_what_it_always_did(twin, alice, admin_user, make_request):
    req = make_request(alice, "plain", gpu=2)
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(2, 2))
    hard = objects(twin, "ResourceQuota", "plain")["workspace-compute"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu.shared"] == "2"
    assert "brick.cloud/kueue" not in objects(twin, "Namespace")["plain"]["metadata"]["labels"]
    assert not twin._list("ClusterQueue") and not twin._list("LocalQueue")
    req.refresh_from_db()
    assert req.gpu == 2
    assert not Decision.objects.filter(workspace=req, action=Decision.Action.QUOTA).exists()


def test_a_product_job_in_a_kueue_workspace_names_its_queue(kueue_twin, alice, admin_user, make_request):
    from workspaces.jobs import job_manifest
    from workspaces.models import WorkspaceJob

    req = make_request(alice, "team-j", gpu=1)
    req = ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    job = WorkspaceJob.objects.create(workspace=req, owner=alice, owner_name="alice", node="n", image="i", gpu=1)
    labels = elastic.queued(kueue_twin, job_manifest(job))["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "default"
    other = WorkspaceJob.objects.create(workspace=req, owner=alice, owner_name="alice", node="n", image="i", gpu=1)
    manifest = job_manifest(other)
    manifest["metadata"]["namespace"] = "elsewhere"
    assert "kueue.x-k8s.io/queue-name" not in elastic.queued(kueue_twin, manifest)["metadata"]["labels"]


def test_the_approval_form_offers_the_grant_only_where_kueue_is_served(
    kueue_twin, alice, admin_client, make_request, settings
):
    settings.BRICK_TWIN_KUEUE = False
    req = make_request(alice, "team-f", gpu=2)
    page = admin_client.get("/workspaces/approvals/").content.decode()
    assert 'data-testid="elastic-grant"' not in page  # the view: Kueue not served, not offered
    settings.BRICK_TWIN_KUEUE = True  # installed: a setting, not an event the view would follow
    elastic.read_kueue(kueue_twin)
    page = admin_client.get("/workspaces/approvals/").content.decode()
    assert 'data-testid="elastic-grant"' in page
    assert f'name="r{req.pk}-burst" value="2"' in page  # BRICK_KUEUE_BURST_PERCENT 100
    refused = admin_client.post(
        f"/workspaces/approvals/{req.pk}/approve/",
        {
            f"r{req.pk}-resource": "nvidia.com/gpu.shared",
            f"r{req.pk}-overcommit": "on",
            f"r{req.pk}-guarantee": "2",
            f"r{req.pk}-burst": "1",
            f"r{req.pk}-lend": "3",
        },
    )
    assert refused.status_code == 400 and "At most the guarantee" in refused.content.decode()
    admin_client.post(
        f"/workspaces/approvals/{req.pk}/approve/",
        {
            f"r{req.pk}-resource": "nvidia.com/gpu.shared",
            f"r{req.pk}-overcommit": "on",
            f"r{req.pk}-guarantee": "2",
            f"r{req.pk}-burst": "1",
            f"r{req.pk}-lend": "0",
        },
    )
    (res,) = objects(kueue_twin, "ClusterQueue")["brick-ws-team-f"]["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"
    ]
    assert (res["nominalQuota"], res["borrowingLimit"], res["lendingLimit"]) == ("2", "1", "0")


def approve_two(kueue_twin, alice, bob, admin_user, make_request):
    for user, name in ((alice, "team-a"), (bob, "team-b")):
        req = make_request(user, name, gpu=2)
        ws_approvals.approve(
            req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(2, 2)
        )
    usage = lambda total, borrowed: [  # noqa: E731 (Kueue's status, as its controller writes it)
        {
            "name": "brick-gpu-shared",
            "resources": [{"name": "nvidia.com/gpu.shared", "total": str(total), "borrowed": str(borrowed)}],
        }
    ]
    kueue_twin.set_kueue_status(
        "ClusterQueue",
        "brick-ws-team-a",
        {"flavorsReservation": usage(4, 2), "flavorsUsage": usage(4, 2), "pendingWorkloads": 0},
    )
    kueue_twin.set_kueue_status(
        "ClusterQueue",
        "brick-ws-team-b",
        {"flavorsReservation": usage(0, 0), "flavorsUsage": usage(0, 0), "pendingWorkloads": 1},
    )
    elastic.read_kueue(kueue_twin)


def test_the_quota_page_shows_guarantee_borrowed_lent_and_burst_per_workspace_of_the_cohort(
    kueue_twin, alice, bob, admin_user, admin_client, make_request
):
    from .conftest import text

    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    page = text(admin_client.get("/workspaces/cluster/team-a/quota/").content)
    assert "team-a nvidia.com/gpu.shared 2 4 2 0 2 all of the guarantee 0" in page
    assert "team-b nvidia.com/gpu.shared 2 0 0 2 2 all of the guarantee 1" in page
    assert "Cohort brick-gpu-shared: 4 guaranteed across 2 Workspaces, 2 borrowed now, 0 idle" in page


def test_unlimited_borrowing_is_no_limit_never_zero(kueue_twin, alice, bob, admin_user, admin_client, make_request):
    from .conftest import text

    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    cq = objects(kueue_twin, "ClusterQueue")["brick-ws-team-a"]
    del cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"]
    kueue_twin._save(cq)
    elastic.read_kueue(kueue_twin)
    page = text(admin_client.get("/workspaces/cluster/team-a/quota/").content)
    assert "team-a nvidia.com/gpu.shared 2 4 2 0 no limit" in page


def test_a_user_sees_their_own_workspaces_quota_context_only(kueue_twin, alice, bob, admin_user, login, make_request):
    from .conftest import text

    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    ws = WorkspaceRequest.objects.get(name="team-a")
    page = text(login(alice).get(f"/workspaces/{ws.pk}/").content)
    assert (
        "Guaranteed: 2 nvidia.com/gpu.shared. You may burst to 4 now (at most 4); borrowed GPUs can be taken back."
        in page
    )
    assert "team-b" not in page  # the cohort's other Workspaces are not theirs to see
    assert "Cohort brick-gpu-shared: 4 guaranteed across 2 Workspaces, 2 borrowed now" in page
    b = WorkspaceRequest.objects.get(name="team-b")
    assert "You may burst to 2 now" in text(login(bob).get(f"/workspaces/{b.pk}/").content)


def test_a_change_of_the_grant_is_an_audited_run_setting_the_cluster_queue_and_the_resource_quota(
    kueue_twin, alice, bob, admin_user, admin_client, make_request, monkeypatch
):
    from gpus.models import ProcedureRun
    from gpus.tasks import execute_run

    for k in ("BRICK_PROCEDURE_RETRY_BACKOFF", "BRICK_PROCEDURE_VERIFY_TIMEOUT", "BRICK_PROCEDURE_STEP_PAUSE"):
        monkeypatch.setenv(k, "0")
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    response = admin_client.post(
        "/workspaces/cluster/team-b/quota/", {"guarantee": "1", "burst": "3", "lend": "1", "reason": "B lends more"}
    )
    run = ProcedureRun.objects.get(procedure="Q", params__workspace="team-b")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert run.params["before_grant"] == [2, 2, None]
    (res,) = objects(kueue_twin, "ClusterQueue")["brick-ws-team-b"]["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"
    ]
    assert (res["nominalQuota"], res["borrowingLimit"], res["lendingLimit"]) == ("1", "3", "1")
    hard = objects(kueue_twin, "ResourceQuota", "team-b")["workspace-compute"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu.shared"] == "4"
    assert Decision.objects.filter(subject="team-b", action=Decision.Action.QUOTA).count() == 2  # granted, changed
    assert elastic.of_workspace("team-b").lines[0][0].guarantee == 1  # the pages read it at once


def test_a_ceiling_raised_over_the_total_asks_the_plans_acknowledgement(
    kueue_twin, alice, bob, admin_user, admin_client, make_request
):
    import re

    from gpus.models import ProcedureRun

    from .conftest import text

    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    grant = {"guarantee": "2", "burst": "40", "lend": "1", "reason": "a deadline"}
    refused = admin_client.post("/workspaces/cluster/team-b/quota/", grant)
    assert refused.status_code == 400 and not ProcedureRun.objects.filter(procedure="Q").exists()
    page = refused.content.decode()
    over = int(re.search(r'name="capacity_acknowledged" value="(\d+)" required', page).group(1))
    assert f"I understand {over} GPUs of allocated quota will be over the Total." in text(page)
    started = admin_client.post("/workspaces/cluster/team-b/quota/", {**grant, "capacity_acknowledged": str(over)})
    run = ProcedureRun.objects.get(procedure="Q", params__workspace="team-b")
    assert started.status_code == 302 and run.params["capacity_acknowledged"] == over and run.params["burst"] == 40


# --- Health -------------------------------------------------------------------------------


def record_findings(served, records=1, cohorts=()):
    from gpus.numbers import health as health_mod
    from workspaces import health

    inputs = health.WorkspaceInputs(
        records=[
            health.Record(name=f"ws-{i}", owner="alice", gpu=1, resource="nvidia.com/gpu") for i in range(records)
        ],
        kueue_served=served,
        kueue_cohorts=list(cohorts),
    )
    found = health_mod.problems(health_mod.HealthInputs(ledger=None, workspaces=inputs), reads="records")
    return [(p.kind, p.severity, p.subject) for p in found if "kueue" in p.kind or "borrowing" in p.kind]


def test_without_kueue_health_says_elastic_quota_is_available_once_it_is_installed():
    assert record_findings(False) == [("kueue-not-installed", "info", "kueue.x-k8s.io")]
    assert record_findings(False, records=0) == []  # no Workspace: nothing to lend
    assert record_findings(None) == []  # not known (the beat is not running): nothing said
    assert record_findings(True) == []


def test_with_kueue_a_workspace_borrowing_while_another_of_its_cohort_waits_is_shown(
    kueue_twin, alice, bob, admin_user, make_request
):
    from workspaces import health

    approve_two(kueue_twin, alice, bob, admin_user, make_request)  # team-a borrows 2, team-b has 1 waiting
    found = [p for p in health.workspace_problems() if p.kind == "workspace-borrowing-while-waiting"]
    assert [(p.subject, p.severity) for p in found] == [("team-a", "warn")]
    assert "Workspace team-a borrows 2 nvidia.com/gpu.shared of cohort brick-gpu-shared while team-b has 1" in (
        found[0].message
    )
    assert not [p for p in health.workspace_problems() if p.kind == "kueue-not-installed"]


def test_with_kueue_and_nobody_waiting_borrowing_is_no_finding(kueue_twin):
    from brickadmin.cluster import kueue

    cohorts = kueue.cohort_lines([objects_queue("brick-ws-a", borrowed=2), objects_queue("brick-ws-b", borrowed=0)])
    assert record_findings(True, cohorts=cohorts) == []


def objects_queue(name, borrowed, pending=0):
    usage = [
        {"name": "f", "resources": [{"name": "nvidia.com/gpu", "total": str(2 + borrowed), "borrowed": str(borrowed)}]}
    ]
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "c",
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]}
            ],
        },
        "status": {"flavorsReservation": usage, "pendingWorkloads": pending},
    }
