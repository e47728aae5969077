"""In Debian's Chromium: Approve and Reject ask once and Approve
needs a chosen type; an admin sees alice's Job and cancels it (asked once, deleted from
the cluster); charlie cannot open it."""

import pytest

from brickadmin.cluster.twin import TwinGateway
from tests.conftest import browser_login
from workspaces import approvals as ws_approvals
from workspaces import jobs as ws_jobs
from workspaces.models import Decision, WorkspaceJob, WorkspaceRequest

from .conftest import objects

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def answer(page, accept: bool, seen: list):
    def handle(dialog):
        seen.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", handle)


def test_approve_asks_once_and_needs_a_chosen_type(browser, live_server, load_scenario, alice, admin_user):
    load_scenario("seed-example")
    ws_approvals.create_request(alice, name="team-x", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    ws_approvals.create_request(alice, name="team-y", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/workspaces/approvals/")
    card = page.locator("[data-testid=request-team-x]")
    assert card.locator("input[type=radio]:checked").count() == 0  # nothing pre-selected

    seen = []

    def dismiss(dialog):
        seen.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    card.locator("[data-testid=approve]").click()
    page.wait_for_timeout(300)
    # no type chosen: the browser's own check stops it before any question, and nothing is sent
    assert seen == []
    assert card.locator("input[type=radio]:invalid").count() > 0
    assert WorkspaceRequest.objects.get(name="team-x").status == "pending"

    card.locator("input[type=radio][value='nvidia.com/gpu.shared']").check()
    card.locator("[data-testid=approve]").click()
    page.wait_for_timeout(300)
    # the question names the type and count; dismissed: nothing sent
    assert len(seen) == 1 and seen[0].startswith("Approve Workspace team-x for alice with 1 × nvidia.com/gpu.shared")
    assert WorkspaceRequest.objects.get(name="team-x").status == "pending"
    page.remove_listener("dialog", dismiss)
    answer(page, True, seen)
    card.locator("[data-testid=approve]").click()
    page.wait_for_load_state()
    assert "team-x approved." in page.inner_text(".messages")
    assert "team-x" in objects(TwinGateway(), "Namespace")

    card = page.locator("[data-testid=request-team-y]")
    card.locator("textarea").fill("No budget this quarter")
    answer(page, True, seen)
    card.locator("[data-testid=reject]").click()
    page.wait_for_load_state()
    assert seen[-1] == (
        "Reject Workspace team-y? alice sees your reason, and the request cannot be approved afterwards."
    )
    assert WorkspaceRequest.objects.get(name="team-y").status == "rejected"


def test_admin_sees_and_cancels_alices_job_charlie_cannot(
    browser, live_server, load_scenario, alice, charlie, admin_user
):
    load_scenario("seed-example")
    req = ws_approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    ws = ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="sleep 1000", gpu=1)
    ws_jobs.approve_job(job.pk, admin_user)

    other = browser_login(browser, live_server, "charlie", "pw-charlie-123")
    assert job.k8s_name not in other.goto(f"{live_server.url}/workspaces/jobs/").text()
    assert other.goto(f"{live_server.url}/workspaces/jobs/{job.pk}/").status == 404

    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/workspaces/jobs/")
    row = page.locator(f"[data-testid=job-{job.pk}]")
    assert row.locator("[data-testid=owner]").inner_text() == "alice"
    row.locator(f"a:has-text('{job.k8s_name}')").click()
    page.wait_for_url(f"**/workspaces/jobs/{job.pk}/")
    seen = []
    answer(page, False, seen)
    page.click("[data-testid=cancel-job]")
    page.wait_for_timeout(300)
    assert job.k8s_name in objects(TwinGateway(), "Job", "team-a")
    assert seen == [
        f"Cancel Job {job.k8s_name}? It is deleted from the cluster with its pods in Workspace team-a; "
        "this cannot be taken back."
    ]
    answer(page, True, seen)
    page.click("[data-testid=cancel-job]")
    page.wait_for_selector(".messages")
    assert f"Job {job.k8s_name} cancelled." in page.inner_text(".messages")
    assert page.locator("[data-testid=job-status]").inner_text() == "Cancelled"
    assert job.k8s_name not in objects(TwinGateway(), "Job", "team-a")
    job.refresh_from_db()
    assert job.status == WorkspaceJob.Status.CANCELLED
    assert Decision.objects.get(action=Decision.Action.JOB_CANCEL).actor_name == "root"
