"""The whole round trip in a real browser (Playwright driving Debian's Chromium):
a user requests a Workspace, an admin approves it as Shared, the user sees the
assigned type and nvidia.com/gpu.shared."""

import pytest

from brickadmin.cluster.twin import TwinGateway
from tests.conftest import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_request_approve_shared_and_see_it(browser, live_server, load_scenario, alice, admin_user):
    load_scenario("seed-example")
    user = browser_login(browser, live_server, "alice", "pw-alice-123")
    user.goto(f"{live_server.url}/workspaces/new/")
    assert "(Max 4 GPU)" in user.inner_text("[data-testid=workspace-request-form]")
    assert "nvidia.com/gpu.shared" in user.inner_text("[data-testid=availability-table]")
    user.fill("input[name=name]", "team-browser")
    user.fill("input[name=gpu]", "1")
    user.fill("input[name=cpu]", "2")
    user.fill("input[name=memory_gib]", "8")
    user.fill("input[name=storage_gib]", "20")
    user.click("form[data-testid=workspace-request-form] button[type=submit]")
    user.wait_for_url("**/workspaces/*/")
    assert "Pending" in user.inner_text("main")

    admin = browser_login(browser, live_server, "root", "pw-root-123")
    admin.goto(f"{live_server.url}/workspaces/approvals/")
    card = admin.locator("[data-testid=request-team-browser]")
    assert "alice" in card.inner_text()
    card.locator("input[type=radio][value='nvidia.com/gpu.shared']").check()
    asked = []
    admin.once("dialog", lambda d: (asked.append(d.message), d.accept()))  # approving asks once
    card.locator("[data-testid=approve]").click()
    admin.wait_for_load_state()
    assert "team-browser approved." in admin.inner_text(".messages")
    assert len(asked) == 1 and "team-browser" in asked[0]

    user.goto(f"{live_server.url}/workspaces/")
    row = user.locator("[data-testid=ws-team-browser]")
    assert row.locator("[data-testid=status]").inner_text() == "Approved"
    assert row.locator("[data-testid=assigned-type]").inner_text() == "Shared (time-slicing)"
    assert row.locator("[data-testid=assigned-resource]").inner_text() == "nvidia.com/gpu.shared"
    # and the cluster really has it
    quotas = {q["metadata"]["name"]: q for q in TwinGateway().list_resource_quotas("team-browser")}
    assert quotas["workspace-compute"]["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "1"
