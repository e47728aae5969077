"""In Debian's Chromium: the blast radius on the plan page and its
acknowledgement, Cancel asking once, and "Restore the node" after a stopped run."""

import pytest

from gpus.models import ProcedureRun
from gpus.procedures import service, steps
from gpus.procedures.base import Check
from gpus.tasks import execute_run
from tests.conftest import browser_login

from .test_safe_actions import NODE, SHARING, pod

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_engine")]


def answer(page, accept: bool, seen: list):
    def handle(dialog):
        seen.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", handle)


def test_plan_lists_pods_and_the_run_needs_the_counted_acknowledgement(browser, live_server, load_scenario, admin_user):
    twin = load_scenario("seed-example")
    twin.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ws-alice", "labels": {"brick.cloud/workspace": "true", "brick.cloud/owner": "alice"}},
        }
    )
    for name in ("train-0", "train-1", "train-2"):
        twin.apply(pod(name, "ws-alice", gpu=1))
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/nodes/{NODE}/")
    page.click("text=Convert to time-slicing (A)")
    page.check(f"input[name=node][value={NODE}]")
    page.click("button:has-text('Show the plan')")
    # the node's exclusive GPUs leave with it: the capacity acknowledgement is ticked first
    page.locator("[data-testid=confirm-capacity_acknowledged] input").check()
    check = page.locator("li.check-ack", has_text="will be evicted")
    assert "3 GPU pods on dev-a1-ws04 will be evicted" in check.inner_text()
    items = check.locator("ul li").all_inner_texts()
    assert items == [f"ws-alice/train-{i} · Workspace ws-alice · owner alice · GPU nvidia.com/gpu 1" for i in range(3)]
    ack = page.locator("[data-testid=confirm-evictions_acknowledged]")
    assert ack.inner_text().strip() == "I understand 3 GPU pods will be evicted."

    page.click("button:has-text('Confirm and run')")  # unticked: the browser does not send it
    page.wait_for_timeout(300)
    assert ProcedureRun.objects.count() == 0 and "/plan/" in page.url
    ack.locator("input").check()
    page.click("button:has-text('Confirm and run')")
    page.wait_for_url("**/runs/*/")
    run = ProcedureRun.objects.get()
    assert run.params["evictions_acknowledged"] == 3 and page.url == f"{live_server.url}/runs/{run.pk}/"


def test_cancel_asks_once_and_dismissing_changes_nothing(browser, live_server, load_scenario, admin_user):
    load_scenario("seed-example")
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    seen = []
    answer(page, False, seen)
    page.click("[data-testid=cancel-run]")
    page.wait_for_timeout(400)
    run.refresh_from_db()
    assert run.status == "pending" and len(seen) == 1
    assert seen[0].startswith(f"Cancel run #{run.pk}? It stops before its next step and cannot be taken back")
    answer(page, True, seen)
    page.click("[data-testid=cancel-run]")
    page.wait_for_selector("#run-status:has-text('Cancelled')")
    run.refresh_from_db()
    assert run.status == "cancelled" and len(seen) == 2


def test_restore_the_node_beside_resume(browser, live_server, load_scenario, admin_user, monkeypatch):
    twin = load_scenario("seed-example")
    monkeypatch.setattr(steps.PluginPodRunning, "verify", lambda self, ctx: Check(False, "no pod", "fix it"))
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    monkeypatch.undo()
    assert twin.get_node(NODE)["spec"].get("unschedulable")

    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    actions = page.locator(".run-actions")
    assert actions.locator("button:has-text('Resume from the step that did not finish')").count() == 1
    seen = []
    answer(page, False, seen)
    actions.locator("[data-testid=restore-node]").click()
    page.wait_for_timeout(300)
    assert ProcedureRun.objects.count() == 1
    assert seen == [
        f"Restore {NODE}? A new run puts its GPU labels back as they were before run #{run.pk} and "
        "uncordons it, so pods can be scheduled there again."
    ]
    answer(page, True, seen)
    actions.locator("[data-testid=restore-node]").click()
    page.wait_for_url(lambda url: url != f"{live_server.url}/runs/{run.pk}/")
    restore = ProcedureRun.objects.exclude(pk=run.pk).get()
    assert page.url == f"{live_server.url}/runs/{restore.pk}/"
    assert "Restoring dev-a1-ws04 as it was before run" in page.inner_text(".messages")

    execute_run(restore.pk)  # the worker's part
    page.reload()
    assert page.locator("#run-status").inner_text() == "Succeeded"
    node = twin.get_node(NODE)
    assert node["metadata"]["labels"][SHARING] == "none" and not node["spec"].get("unschedulable")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("[data-testid=restore-node]").count() == 0
