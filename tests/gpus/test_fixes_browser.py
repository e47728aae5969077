"""In Debian's Chromium: Health → Fix → the plan → Confirm and run, asked once
in one sentence → the run page, which shows it Succeeded once the worker ran it."""

import pytest

from gpus.models import ProcedureRun
from gpus.tasks import execute_run
from tests.conftest import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_engine")]

NODE = "gpu-a100-04"  # the demo's node with a stale nvidia.com/gpu in capacity


def test_fix_a_stale_resource_through_confirm_to_a_succeeded_run(browser, live_server, load_scenario, admin_user):
    twin = load_scenario("demo")
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/health/")
    page.click(f"[data-testid=fix-stale-capacity-{NODE}]")
    page.wait_for_url("**/fixes/S/**")
    assert "kubectl patch node gpu-a100-04 --subresource=status" in page.inner_text(".plan-steps")

    seen = []

    def dismiss(dialog):
        seen.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("[data-testid=run-fix]")
    page.wait_for_timeout(300)
    assert ProcedureRun.objects.count() == 0 and len(seen) == 1
    assert seen[0].startswith(f"Run “Remove a stale resource from node status” on {NODE}?")

    page.once("dialog", lambda dialog: (seen.append(dialog.message), dialog.accept()))
    page.click("[data-testid=run-fix]")
    page.wait_for_url("**/runs/*/")
    run = ProcedureRun.objects.get()
    assert page.url == f"{live_server.url}/runs/{run.pk}/" and run.actor_name == "root"
    execute_run(run.pk)  # the worker's part
    page.wait_for_selector("#run-status:has-text('Succeeded')", timeout=10_000)
    assert "nvidia.com/gpu" not in twin.get_node(NODE)["status"]["capacity"]
    page.goto(f"{live_server.url}/health/")
    assert page.locator(f"[data-testid=fix-stale-capacity-{NODE}]").count() == 0
