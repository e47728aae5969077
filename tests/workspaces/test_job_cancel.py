"""Admins see every Job; the owner or an admin cancels a Job, which is
deleted through the gateway and recorded; charlie never sees or cancels alice's Job.
Approve pre-selects no GPU type: the admin picks one."""

import re

import pytest
from django.test import Client

from brickadmin.cluster.twin import TwinGateway
from workspaces import jobs as ws_jobs
from workspaces.models import Decision, WorkspaceJob

from .conftest import objects, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def ws(approved, alice):
    return approved(alice, "team-a")


@pytest.fixture
def running_job(ws, alice, admin_user):
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="sleep 1000", gpu=1)
    ws_jobs.approve_job(job.pk, admin_user)
    return job


def test_admin_sees_every_users_jobs_and_their_detail(ws, approved, bob, alice, admin_user, login):
    bws = approved(bob, "team-b")
    a = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="alice-image", command="", gpu=1)
    b = ws_jobs.create_job(bob, bws, node="dev-a1-ws04", image="bob-image", command="", gpu=1)
    admin = login(admin_user)
    page = text(admin.get("/workspaces/jobs/").content)
    assert f"{a.k8s_name} alice team-a" in page and f"{b.k8s_name} bob team-b" in page
    assert "No Jobs yet." not in page
    detail = admin.get(f"/workspaces/jobs/{a.pk}/")
    assert detail.status_code == 200 and "alice-image" in text(detail.content)
    # a user still sees only their own
    mine = text(login(alice).get("/workspaces/jobs/").content)
    assert a.k8s_name in mine and b.k8s_name not in mine and "bob-image" not in mine


def test_owner_cancels_a_running_job_deleted_from_the_cluster_and_recorded(running_job, alice, admin_user, login, twin):
    gw = TwinGateway()
    assert running_job.k8s_name in objects(gw, "Job", "team-a")
    client = login(alice)
    page = client.get(f"/workspaces/jobs/{running_job.pk}/").content.decode()
    assert re.search(
        r'data-confirm="Cancel Job brick-job-\d+\? It is deleted from the cluster with its pods in '
        r"Workspace team-a",
        page,
    )
    r = client.post(f"/workspaces/jobs/{running_job.pk}/cancel/")
    assert r.status_code == 302
    assert running_job.k8s_name not in objects(gw, "Job", "team-a")
    assert not gw.list_pods(namespace="team-a", label_selector=f"job-name={running_job.k8s_name}")
    running_job.refresh_from_db()
    assert running_job.status == WorkspaceJob.Status.CANCELLED
    d = Decision.objects.get(action=Decision.Action.JOB_CANCEL)
    assert d.actor_name == "alice" and d.job == running_job and d.subject == running_job.k8s_name
    page = text(client.get(f"/workspaces/jobs/{running_job.pk}/").content)
    assert "Cancelled" in page and "Cancel the Job" not in page  # nothing left to cancel
    assert "Cancelled Job" in text(login(admin_user).get("/workspaces/audit/").content)


def test_admin_cancels_a_users_waiting_job(ws, alice, admin_user, login, twin):
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    r = login(admin_user).post(f"/workspaces/jobs/{job.pk}/cancel/")
    assert r.status_code == 302
    job.refresh_from_db()
    assert job.status == WorkspaceJob.Status.CANCELLED
    assert Decision.objects.get(action=Decision.Action.JOB_CANCEL).actor_name == "root"
    assert not objects(TwinGateway(), "Job", "team-a")  # it never reached the cluster
    assert f"pending-job-{job.pk}" not in login(admin_user).get("/workspaces/approvals/jobs/").content.decode()


def test_charlie_can_neither_see_nor_cancel_alices_job(running_job, charlie, login):
    client = login(charlie)
    assert client.get(f"/workspaces/jobs/{running_job.pk}/").status_code == 404
    assert client.post(f"/workspaces/jobs/{running_job.pk}/cancel/").status_code == 404
    assert running_job.k8s_name not in client.get("/workspaces/jobs/").content.decode()
    running_job.refresh_from_db()
    assert running_job.status == WorkspaceJob.Status.SUBMITTED
    assert running_job.k8s_name in objects(TwinGateway(), "Job", "team-a")
    assert not Decision.objects.filter(action=Decision.Action.JOB_CANCEL).exists()


def test_cancel_needs_post_and_csrf(running_job, alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(f"/workspaces/jobs/{running_job.pk}/cancel/").status_code == 405
    assert client.post(f"/workspaces/jobs/{running_job.pk}/cancel/").status_code == 403
    running_job.refresh_from_db()
    assert running_job.status == WorkspaceJob.Status.SUBMITTED


def test_a_refused_delete_leaves_the_job_as_it_was(running_job, alice, login, monkeypatch):
    from brickadmin.cluster import PermanentClusterError

    def refuse(self, *a, **kw):
        raise PermanentClusterError("forbidden", status=403, reason="Forbidden")

    monkeypatch.setattr(TwinGateway, "delete", refuse)
    r = login(alice).post(f"/workspaces/jobs/{running_job.pk}/cancel/", follow=True)
    assert "was not cancelled" in text(r.content)
    running_job.refresh_from_db()
    assert running_job.status == WorkspaceJob.Status.SUBMITTED
    assert not Decision.objects.filter(action=Decision.Action.JOB_CANCEL).exists()


def test_approve_preselects_no_gpu_type_and_asks_for_one(make_request, alice, admin_user, login, twin):
    req = make_request(alice, "team-c", gpu=1)
    admin = login(admin_user)
    page = admin.get("/workspaces/approvals/").content.decode()
    card = re.search(r'data-testid="request-team-c".*?</article>', page, re.S).group(0)
    assert "checked" not in re.sub(r'name="r\d+-overcommit"[^>]*', "", card)  # no radio pre-selected
    # each GPU type's confirmation names it and the count approved
    assert 'data-confirm="Approve Workspace team-c for alice with 1 × nvidia.com/gpu.shared (Shared' in card
    r = admin.post(f"/workspaces/approvals/{req.pk}/approve/", {})
    assert r.status_code == 400
    assert "Choose Exclusive, Shared or a MIG profile." in text(r.content)
    req.refresh_from_db()
    assert req.status == "pending"
    assert "team-c" not in [ns["metadata"]["name"] for ns in TwinGateway().list_namespaces()]


def test_a_cancelled_job_keeps_who_decided_it_and_names_who_cancelled_it(running_job, alice, admin_user, login, twin):
    assert login(alice).post(f"/workspaces/jobs/{running_job.pk}/cancel/").status_code == 302
    page = text(login(admin_user).get(f"/workspaces/jobs/{running_job.pk}/").content)
    assert f"Decided by {admin_user.get_username()}" in page
    assert "Cancelled by alice" in page
    running_job.refresh_from_db()
    assert (running_job.decided_by_name, running_job.cancelled_by_name) == (admin_user.get_username(), "alice")


def test_the_audit_log_says_a_decisions_detail_in_the_readers_language(ws, alice, admin_user, login, twin):
    from django.utils import translation

    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    with translation.override("ko"):  # decided by an admin reading Korean
        ws_jobs.cancel_job(job.pk, admin_user)
    assert Decision.objects.get(action=Decision.Action.JOB_CANCEL).detail == "withdrawn before approval"  # as written
    admin = login(admin_user)
    english = text(admin.get("/workspaces/audit/", HTTP_ACCEPT_LANGUAGE="en").content)
    assert "withdrawn before approval" in english and "승인 전에 철회됨" not in english
    admin.cookies["django_language"] = "ko"
    korean = text(admin.get("/workspaces/audit/", HTTP_ACCEPT_LANGUAGE="ko").content)
    assert "승인 전에 철회됨" in korean and "withdrawn before approval" not in korean
