"""In a real browser: the approval's confirmation comes only once the form is valid and names
the GPU type and count; a refused approval comes back with its card in view; a full queue
page is folded; the Workspace page's example pod is copied with one click."""

import pytest

from brickadmin.cluster import PermanentClusterError
from brickadmin.cluster.twin import TwinGateway
from tests.conftest import browser_login
from workspaces import approvals as ws_approvals
from workspaces.models import WorkspaceRequest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _request(user, name, gpu=1):
    return ws_approvals.create_request(user, name=name, gpu=gpu, cpu=2, memory_gib=8, storage_gib=20)


def test_the_approval_is_confirmed_after_the_form_is_valid_and_names_type_and_count(
    browser, live_server, load_scenario, alice, admin_user
):
    load_scenario("seed-example")
    req = _request(alice, "team-confirm", gpu=2)  # more than the one shared GPU left: overcommit
    admin = browser_login(browser, live_server, "root", "pw-root-123")
    admin.goto(f"{live_server.url}/workspaces/approvals/")
    card = admin.locator("[data-testid=request-team-confirm]")
    asked = []
    admin.on("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    card.locator("[data-testid=approve]").click()  # no GPU type chosen: the browser says so, nothing asked
    card.locator("input[type=radio][value='nvidia.com/gpu.shared']").check()
    card.locator("[data-testid=approve]").click()  # too few available and overcommit not ticked
    assert asked == []
    assert card.locator(f"input[name=r{req.pk}-overcommit]").evaluate("b => !b.validity.valid")
    card.locator(f"input[name=r{req.pk}-overcommit]").check()
    card.locator("[data-testid=approve]").click()
    assert len(asked) == 1
    assert "team-confirm" in asked[0] and "2 × nvidia.com/gpu.shared" in asked[0]
    req.refresh_from_db()
    assert req.status == WorkspaceRequest.Status.PENDING  # dismissed: nothing approved


def test_a_refused_approval_comes_back_at_its_card(browser, live_server, load_scenario, alice, bob, admin_user):
    load_scenario("seed-example")
    for i in range(12):
        _request(bob, f"before-{i:02d}")
    _request(alice, "team-last")
    original = TwinGateway.create_namespace

    def refuse(self, *a, **kw):
        raise PermanentClusterError("namespaces is forbidden", status=403)

    TwinGateway.create_namespace = refuse
    try:
        admin = browser_login(browser, live_server, "root", "pw-root-123")
        admin.set_viewport_size({"width": 1280, "height": 800})
        admin.goto(f"{live_server.url}/workspaces/approvals/")
        height = admin.evaluate("document.documentElement.scrollHeight")
        print(f"queue of 13 folded requests: {height} px")
        card = admin.locator("[data-testid=request-team-last]")
        card.locator("summary").click()
        card.locator("input[type=radio][value='nvidia.com/gpu.shared']").check()
        admin.once("dialog", lambda d: d.accept())
        with admin.expect_navigation():
            card.locator("[data-testid=approve]").click()
        assert admin.url.endswith("/approve/#req-" + str(WorkspaceRequest.objects.get(name="team-last").pk))
        card = admin.locator("[data-testid=request-team-last]")
        assert "namespaces is forbidden" in card.inner_text()
        box = card.bounding_box()
        assert box is not None and 0 <= box["y"] < 800  # in view, not at the top of a long page
    finally:
        TwinGateway.create_namespace = original


def test_a_full_queue_page_is_folded(browser, live_server, load_scenario, bob, admin_user):
    load_scenario("seed-example")
    for i in range(25):
        _request(bob, f"many-{i:02d}")
    admin = browser_login(browser, live_server, "root", "pw-root-123")
    admin.set_viewport_size({"width": 1280, "height": 800})
    admin.goto(f"{live_server.url}/workspaces/approvals/")
    height = admin.evaluate("document.documentElement.scrollHeight")
    print(f"queue of 25 requests, folded: {height} px")
    assert admin.locator("details.decide[open]").count() == 0
    assert height < 6000


def test_the_example_pod_is_copied_with_one_click(browser, live_server, load_scenario, alice, admin_user):
    load_scenario("seed-example")
    ws = ws_approvals.approve(_request(alice, "team-copy").pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    user = browser_login(browser, live_server, "alice", "pw-alice-123")
    user.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    user.goto(f"{live_server.url}/workspaces/{ws.pk}/")
    user.locator("[data-testid=copy-pod]").click()
    user.wait_for_selector("[data-testid=copy-pod][data-state=copied]")
    copied = user.evaluate("navigator.clipboard.readText()")
    assert "nvidia.com/gpu.shared: 1" in copied and "namespace: team-copy" in copied
