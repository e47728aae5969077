"""Helpers of the page-by-page browser tests: a browser context in a chosen language and
signed in through the real login form."""

from pathlib import Path

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe.min.js"  # axe-core, MPL-2.0: tests/vendor/README.md

VIEWPORTS = [(1366, 900), (390, 844)]  # a laptop, a phone

USERS = {"admin": ("root", "pw-root-123"), "user": ("alice", "pw-alice-123")}


def context(browser, live_server, lang: str, **kwargs):
    """A fresh browser context whose language is chosen as the language menu chooses it
    (Django's set_language stores it in the django_language cookie)."""
    ctx = browser.new_context(**kwargs)
    ctx.add_cookies([{"name": "django_language", "value": lang, "url": live_server.url}])
    return ctx


def signed_in(ctx, live_server, role: str):
    page = ctx.new_page()
    if role == "anonymous":
        return page
    username, password = USERS[role]
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def open_page(page, live_server, p):
    """Open a page of tests/foundation/pages.py and check it answered what it should."""
    response = page.goto(f"{live_server.url}{p.path}")
    assert response.status == p.status, f"{p.name} {p.path}: {response.status}, expected {p.status}"
    page.wait_for_load_state("load")
    page.wait_for_timeout(100)  # htmx's first swaps
