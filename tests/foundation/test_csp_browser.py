"""Under the Content-Security-Policy the htmx setup keeps working
(the Dashboard's magnifier swaps the per-model table in, a list's search narrows the table in
place, the language menu submits itself) and the browser reports no violation of the policy."""

import pytest

from tests.conftest import browser_login
from workspaces.models import Decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every refusal the policy causes fires securitypolicyviolation on the document, and Chromium
# also says it in the console; both are collected. The init script runs outside the page's policy.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sample || ""));
});
"""


def watched(page):
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
    page.add_init_script(RECORD_VIOLATIONS)
    return console


def violations(page, console):
    return page.evaluate("window.__csp") + [t for t in console if "Content Security Policy" in t or "CSP" in t]


def test_htmx_swaps_work_under_the_policy_with_no_violation(browser, live_server, admin_user, twin):
    Decision.objects.create(
        actor_name="root", action=Decision.Action.APPROVE, subject="team-alpha", gpu_resource="nvidia.com/gpu", amount=1
    )
    Decision.objects.create(
        actor_name="root", action=Decision.Action.APPROVE, subject="lab-gamma", gpu_resource="nvidia.com/gpu", amount=1
    )
    page = browser_login(browser, live_server, "root", "pw-root-123")
    console = watched(page)

    response = page.goto(f"{live_server.url}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    detail = page.locator("#model-detail")
    assert not detail.is_visible()  # empty until the magnifier fills it
    page.click("a.magnifier")
    detail.locator("table").wait_for()  # the htmx swap happened
    assert detail.is_visible() and detail.locator("tbody tr").count() > 0
    assert page.url == f"{live_server.url}/"  # in place, not a navigation
    assert page.locator("meter.bar").first.evaluate("m => m.getBoundingClientRect().height") > 0
    assert violations(page, console) == []

    page.goto(f"{live_server.url}/workspaces/audit/")
    rows = page.locator("[data-testid=audit-table] tbody tr")
    assert rows.count() == 2
    page.fill("input[name=q]", "team")
    page.wait_for_url("**/workspaces/audit/?q=team")
    page.wait_for_function("document.querySelectorAll('[data-testid=audit-table] tbody tr').length === 1")
    assert violations(page, console) == []

    page.select_option("select[name=language]", "ko")  # data-autosubmit, no inline onchange
    page.wait_for_function("document.documentElement.lang === 'ko'")
    assert violations(page, console) == []


def test_an_inline_script_is_refused_and_reported(browser, live_server, admin_user, twin):
    """The check above can see a violation: the same watch catches one that a page causes."""
    page = browser_login(browser, live_server, "root", "pw-root-123")
    console = watched(page)
    page.goto(f"{live_server.url}/")
    page.evaluate("""() => { const s = document.createElement('script');
                            s.textContent = 'window.__ran = true'; document.body.appendChild(s); }""")
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__ran === undefined")
    assert any(v.startswith("script-src") for v in violations(page, console))
