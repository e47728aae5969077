"""Decisions made twice at once (review of the approval paths): the second decision is
told "already decided" and changes nothing, and the record stays the winner's."""
import pytest

from brickadmin.cluster import PermanentClusterError
from brickadmin.cluster.twin import TwinGateway
from workspaces import services
from workspaces.models import Decision, WorkspaceJob

from .conftest import objects

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws(approved, alice):
    return approved(alice, "team-a")


def job_of(alice, ws):
    return services.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)


def test_a_job_approved_twice_at_once_stays_submitted(ws, twin, alice, admin_user, monkeypatch):
    """The loser read the Job as pending; the winner submits it before the loser goes on."""
    job = job_of(alice, ws)
    real_options = services.job_node_options
    winner = []

    def winner_meanwhile(ledger):
        options = real_options(ledger)  # the loser's view: pending, node free
        if not winner:
            winner.append(True)
            services.approve_job(job.pk, admin_user)
        return options

    monkeypatch.setattr(services, "job_node_options", winner_meanwhile)
    with pytest.raises(services.WorkspaceError, match="already decided"):
        services.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.last_error, job.decided_by_name) == ("submitted", "", "root")
    assert list(objects(twin, "Job", "team-a")) == [job.k8s_name]
    assert [d.action for d in Decision.objects.filter(job=job)] == ["job_approve"]


def test_a_job_the_cluster_refuses_goes_back_to_pending_and_can_be_retried(ws, twin, alice, admin_user,
                                                                             monkeypatch):
    job = job_of(alice, ws)
    monkeypatch.setattr(TwinGateway, "create_job",
                        lambda self, *a, **kw: (_ for _ in ()).throw(PermanentClusterError("jobs is forbidden")))
    with pytest.raises(services.WorkspaceError, match="forbidden"):
        services.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.decided_by_name) == ("pending", "") and "forbidden" in job.last_error
    assert [d.action for d in Decision.objects.filter(job=job)] == ["job_failed"]
    monkeypatch.undo()
    services.approve_job(job.pk, admin_user)
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
    with pytest.raises(services.WorkspaceError):
        services.approve_job(job.pk, admin_user)
    job.refresh_from_db()
    assert (job.status, job.rejection_reason) == ("rejected", "by another admin")
