"""Decisions made twice at once (review of the approval paths): the second decision is
told "already decided" and changes nothing, and the record stays the winner's."""

import threading
import time

import pytest
from django.db import connection

from brickadmin.cluster import PermanentClusterError
from brickadmin.cluster.twin import TwinGateway
from tests.conftest import require_service
from workspaces import approvals as ws_approvals
from workspaces import jobs as ws_jobs
from workspaces.models import Decision, WorkspaceJob, WorkspaceRequest

from .conftest import objects

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws(approved, alice):
    return approved(alice, "team-a")


def job_of(alice, ws):
    return ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)


def test_a_job_approved_twice_at_once_stays_submitted(ws, twin, alice, admin_user, monkeypatch):
    """The loser read the Job as pending; the winner submits it before the loser goes on."""
    job = job_of(alice, ws)
    real_options = ws_jobs.job_node_options
    winner = []

    def winner_meanwhile(ledger):
        options = real_options(ledger)  # the loser's view: pending, node free
        if not winner:
            winner.append(True)
            ws_jobs.approve_job(job.pk, admin_user)
        return options

    monkeypatch.setattr(ws_jobs, "job_node_options", winner_meanwhile)
    with pytest.raises(ws_approvals.WorkspaceError, match="already decided"):
        ws_jobs.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.last_error, job.decided_by_name) == ("submitted", "", "root")
    assert list(objects(twin, "Job", "team-a")) == [job.k8s_name]
    assert [d.action for d in Decision.objects.filter(job=job)] == ["job_approve"]


def test_a_job_the_cluster_refuses_goes_back_to_pending_and_can_be_retried(ws, twin, alice, admin_user, monkeypatch):
    job = job_of(alice, ws)
    monkeypatch.setattr(
        TwinGateway,
        "create_job",
        lambda self, *a, **kw: (_ for _ in ()).throw(PermanentClusterError("jobs is forbidden")),
    )
    with pytest.raises(ws_approvals.WorkspaceError, match="forbidden"):
        ws_jobs.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.decided_by_name) == ("pending", "") and "forbidden" in job.last_error
    assert [d.action for d in Decision.objects.filter(job=job)] == ["job_failed"]
    monkeypatch.undo()
    ws_jobs.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.last_error) == ("submitted", "")
    assert list(objects(twin, "Job", "team-a")) == [job.k8s_name]


def test_a_job_rejected_while_the_cluster_call_fails_stays_rejected(ws, twin, alice, admin_user, monkeypatch):
    """The failure path never writes stale in-memory state over someone else's decision."""
    job = job_of(alice, ws)

    def reject_then_fail(self, *a, **kw):
        WorkspaceJob.objects.filter(pk=job.pk).update(status="rejected", rejection_reason="by another admin")
        raise PermanentClusterError("boom")

    monkeypatch.setattr(TwinGateway, "create_job", reject_then_fail)
    with pytest.raises(ws_approvals.WorkspaceError):
        ws_jobs.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.rejection_reason) == ("rejected", "by another admin")


# --- Workspace requests --------------------------------------------------------------


def test_a_request_approved_twice_at_once_keeps_the_winners_record(twin, alice, admin_user, make_request, monkeypatch):
    """Two approvals of one request, the second starting while the first is under way:
    one approves, the other is told "already decided" and writes nothing."""
    req = make_request(alice, "team-a")
    real_choices = ws_approvals.gpu_choices
    other = {}

    def other_approval_meanwhile(ledger):
        if not other:
            other["started"] = True
            try:
                ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
                other["result"] = "approved"
            except ws_approvals.WorkspaceError as exc:
                other["result"] = str(exc)
        return real_choices(ledger)

    monkeypatch.setattr(ws_approvals, "gpu_choices", other_approval_meanwhile)
    try:
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
        mine = "approved"
    except ws_approvals.WorkspaceError as exc:
        mine = str(exc)
    assert sorted([mine, other["result"]]) == ["This request was already decided.", "approved"]
    req.refresh_from_db()
    assert (req.status, req.last_error, req.gpu_resource) == ("approved", "", "nvidia.com/gpu.shared")
    assert [d.action for d in Decision.objects.filter(workspace=req)] == ["approve"]
    assert objects(twin, "Namespace")["team-a"]["metadata"]["labels"]["brick.cloud/workspace"] == "true"
    assert set(objects(twin, "ResourceQuota", "team-a")) == {"workspace-compute", "workspace-storage"}


def test_a_claimed_request_is_already_decided_and_nothing_is_written(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a")
    WorkspaceRequest.objects.filter(pk=req.pk).update(status="approving")  # another approval under way
    with pytest.raises(ws_approvals.WorkspaceError, match="already decided"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    with pytest.raises(ws_approvals.WorkspaceError, match="already decided"):
        ws_approvals.reject(req.pk, admin_user, "no")
    req.refresh_from_db()
    assert (req.status, req.last_error) == ("approving", "")
    assert not Decision.objects.exists()
    assert "team-a" not in objects(twin, "Namespace")
    # The claim holds the name, like pending and approved requests do.
    with pytest.raises(ws_approvals.WorkspaceError, match="already exists"):
        make_request(alice, "team-a")


def test_a_refused_approval_releases_its_claim(twin, alice, admin_user, make_request, monkeypatch):
    req = make_request(alice, "team-a")
    monkeypatch.setattr(
        TwinGateway,
        "apply",
        lambda self, *a, **kw: (_ for _ in ()).throw(PermanentClusterError("limitranges is forbidden")),
    )
    with pytest.raises(ws_approvals.WorkspaceError, match="forbidden"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    req.refresh_from_db()
    assert req.status == "pending" and "forbidden" in req.last_error
    assert [d.action for d in Decision.objects.filter(workspace=req)] == ["approve_failed"]
    assert "team-a" not in objects(twin, "Namespace")


def test_refusals_before_the_cluster_leave_the_request_pending(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a", gpu=2)
    with pytest.raises(ws_approvals.WorkspaceError, match="overcommit box"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    with pytest.raises(ws_approvals.WorkspaceError, match="GPU type"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/mig-1g.5gb")
    req.refresh_from_db()
    assert (req.status, req.last_error) == ("pending", "")
    assert not Decision.objects.exists()


# --- availability: approvals of different requests ------------------------------------


def shared_allocated(gw):
    return sum(int(q["spec"]["hard"].get("requests.nvidia.com/gpu.shared", 0)) for q in gw.list_resource_quotas())


def test_availability_is_read_after_the_approvals_before(
    twin, alice, bob, admin_user, make_request, login, monkeypatch
):
    """The admin's page read 1 shared GPU available for both requests; another admin
    approved the first before this POST was handled: the second needs the overcommit box."""
    from workspaces import views

    first = make_request(alice, "team-a")
    second = make_request(bob, "team-b")
    real_read = views.read_cluster

    def first_approved_meanwhile(*args, **kwargs):
        got = real_read(*args, **kwargs)  # this POST's view of the cluster: 1 shared available
        if first.status == "pending":
            first.status = ws_approvals.approve(first.pk, admin_user, "nvidia.com/gpu.shared").status
        return got

    monkeypatch.setattr(views, "read_cluster", first_approved_meanwhile)
    allocated_before = shared_allocated(twin)
    r = login(admin_user).post(
        f"/workspaces/approvals/{second.pk}/approve/", {f"r{second.pk}-resource": "nvidia.com/gpu.shared"}
    )
    assert r.status_code == 400
    second.refresh_from_db()
    assert (second.status, second.overcommit) == ("pending", False)
    assert "team-b" not in objects(twin, "Namespace")
    assert shared_allocated(twin) == allocated_before + 1  # the first one only
    assert not Decision.objects.filter(workspace=second).exists()


def test_simultaneous_approvals_of_different_requests_never_overcommit(
    transactional_db, load_scenario, django_user_model, monkeypatch
):
    if connection.vendor == "sqlite" and "memory" in str(connection.settings_dict["NAME"]):
        require_service(False, "a file database shared by threads")  # never in-memory in CI (PostgreSQL)
    twin = load_scenario("seed-example")  # shared: 2 logical, 1 allocated
    admin = django_user_model.objects.create_user("root", is_staff=True)
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(3)]
    reqs = [
        ws_approvals.create_request(u, name=f"ws-{i}", gpu=1, cpu=1, memory_gib=1, storage_gib=1)
        for i, u in enumerate(users)
    ]
    allocated_before = shared_allocated(twin)
    real_create_namespace = TwinGateway.create_namespace

    def slow_create_namespace(self, *a, **kw):
        time.sleep(0.3)  # every approval has read the ledger by now, unless approvals are serialised
        return real_create_namespace(self, *a, **kw)

    monkeypatch.setattr(TwinGateway, "create_namespace", slow_create_namespace)
    barrier = threading.Barrier(len(reqs))
    approved, refused, errors = [], [], []

    def approve(req):
        try:
            barrier.wait()
            approved.append(ws_approvals.approve(req.pk, admin, "nvidia.com/gpu.shared").pk)
        except ws_approvals.WorkspaceError as exc:
            refused.append(str(exc))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(r,)) for r in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(approved) == 1 and len(refused) == 2
    assert all("Only 0 nvidia.com/gpu.shared available now" in m for m in refused)
    assert shared_allocated(twin) == allocated_before + 1 == 2
    statuses = sorted(WorkspaceRequest.objects.values_list("status", flat=True))
    assert statuses == ["approved", "pending", "pending"]
    assert Decision.objects.filter(action="approve").count() == 1
    assert not Decision.objects.filter(action="approve_failed").exists()


def test_an_approval_does_not_hold_the_lock_while_it_reads_the_cluster(
    transactional_db, load_scenario, django_user_model, monkeypatch
):
    """A slow cluster read (a large cluster, a slow Prometheus) of one approval does not make
    the approval of another Workspace wait: the second is approved, with its namespace and
    quotas, while the first is still reading; then the first is approved too."""
    require_service(connection.vendor == "postgresql", "PostgreSQL")
    twin = load_scenario("seed-example")
    admin = django_user_model.objects.create_user("root", is_staff=True)
    slow_req, other_req = (
        ws_approvals.create_request(
            django_user_model.objects.create_user(f"u{i}"), name=name, gpu=1, cpu=1, memory_gib=1, storage_gib=1
        )
        for i, name in enumerate(("ws-slow", "ws-other"))
    )
    entered, release = threading.Event(), threading.Event()

    class SlowToRead(TwinGateway):
        """The twin, whose quotas take as long to list as the test says, in the slow approval's thread."""

        def list_resource_quotas(self, namespace=None):
            if threading.current_thread().name == "slow-approval":
                entered.set()
                release.wait(timeout=30)
            return super().list_resource_quotas(namespace)

    monkeypatch.setattr(ws_approvals, "get_gateway", SlowToRead)
    outcome = {}

    def approve_slowly():
        try:
            outcome["slow"] = ws_approvals.approve(slow_req.pk, admin, "nvidia.com/gpu.shared", overcommit=True).status
        except Exception as exc:  # pragma: no cover - reported below
            outcome["slow"] = repr(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=approve_slowly, name="slow-approval")
    thread.start()
    try:
        assert entered.wait(timeout=30), "the slow approval never read the cluster"
        other = ws_approvals.approve(other_req.pk, admin, "nvidia.com/gpu.shared", overcommit=True)
        first_still_reading = "slow" not in outcome and not release.is_set()
    finally:
        release.set()
        thread.join()
    assert other.status == "approved"
    assert set(objects(twin, "ResourceQuota", "ws-other")) == {"workspace-compute", "workspace-storage"}
    assert first_still_reading, "the second approval waited for the first one's cluster read"
    assert outcome["slow"] == "approved"
    assert set(objects(twin, "ResourceQuota", "ws-slow")) == {"workspace-compute", "workspace-storage"}
    assert Decision.objects.filter(action="approve").count() == 2
