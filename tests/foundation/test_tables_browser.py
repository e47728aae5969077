"""In Chromium: typing in a list's search box narrows the table in place and puts the search
in the address bar (a view can be shared), and a header click sorts, keeping the search."""

import pytest

from tests.conftest import browser_login
from workspaces.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_search_narrows_in_place_and_the_address_keeps_it(browser, live_server, admin_user):
    for subject in ("team-alpha", "team-beta", "lab-gamma"):
        Decision.objects.create(
            actor_name="root", action=Decision.Action.APPROVE, subject=subject, gpu_resource="nvidia.com/gpu", amount=1
        )
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/workspaces/audit/")
    rows = page.locator("[data-testid=audit-table] tbody tr")
    assert rows.count() == 3
    page.fill("input[name=q]", "team")
    page.wait_for_url("**/workspaces/audit/?q=team")
    page.wait_for_function("document.querySelectorAll('[data-testid=audit-table] tbody tr').length === 2")
    page.click("th >> text=Subject")
    page.wait_for_url("**sort=subject**")
    assert "q=team" in page.url
    assert rows.all_inner_texts()[0].find("team-alpha") >= 0 and rows.count() == 2
