"""The pages that show a problem (an unreachable cluster and the sign-in lockout), in
Chromium, English and Korean: with the cluster unreachable the banner's technical detail is
folded away until asked for; these pages pass axe-core like every other page and do not
scroll sideways at 390 px."""

import pytest

from .browsing import context, signed_in
from .test_accessibility_browser import violations
from .test_layout_browser import OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_unreachable_cluster_pages(browser, live_server, admin_user, lang, request):
    port = request.getfixturevalue("unreachable")
    found = []
    for w, h in ((1366, 900), (390, 844)):
        ctx = context(browser, live_server, lang, viewport={"width": w, "height": h})
        page = signed_in(ctx, live_server, "admin")
        for path, status in (("/help/", 200), ("/nodes/", 503), ("/workspaces/jobs/new/", 200)):
            assert page.goto(f"{live_server.url}{path}").status == status
            banner = page.locator("[data-testid=cluster-error]")
            detail = banner.locator("details code")
            assert banner.locator("strong").is_visible() and not detail.is_visible()
            assert str(port) not in banner.inner_text()
            found += [f"[{w}px {lang}] {path}: {v}" for v in violations(page)]
            found += [f"[{w}px {lang}] {path}: {p}" for p in page.evaluate(OVERFLOW, w >= 1366)]
        banner.locator("summary").click()
        assert detail.is_visible() and f"127.0.0.1:{port}" in detail.inner_text()
        ctx.close()
    assert not found, "\n".join(found)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_lockout_page(browser, live_server, alice, lang, settings):
    found = []
    ctx = context(browser, live_server, lang, viewport={"width": 390, "height": 844})
    page = signed_in(ctx, live_server, "anonymous")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "not-her-password")
        page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=lockout]")
    found += violations(page) + page.evaluate(OVERFLOW, False)
    ctx.close()
    assert not found, "\n".join(found)
