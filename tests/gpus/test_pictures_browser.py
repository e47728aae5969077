"""The pictures and the dark theme in a real browser (Playwright driving Debian's Chromium)."""

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def login(browser, live_server, username, password, **context):
    page = browser.new_page(**context)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


def rgb(css: str) -> tuple[float, float, float, float]:
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    return (*parts[:3], parts[3] if len(parts) > 3 else 1.0)


def luminance(c) -> float:
    def lin(v):
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = c[:3]
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def colours(page, selector):
    """(text colour, the background behind it: the first opaque one up the tree)."""
    return page.evaluate(
        """(sel) => {
        const el = document.querySelector(sel);
        let bg = null, n = el;
        while (n) { const c = getComputedStyle(n).backgroundColor;
                    if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') { bg = c; break; }
                    n = n.parentElement; }
        return [getComputedStyle(el).color, bg || 'rgb(255, 255, 255)'];
    }""",
        selector,
    )


@pytest.fixture
def pages(browser, live_server, load_scenario, admin_user, settings):
    settings.PROMETHEUS_URL = ""  # the utilisation charts say "not measured"
    load_scenario("demo")

    def open_as(**context):
        return login(browser, live_server, "root", "pw-root-123", **context)

    return open_as


def test_dark_theme_follows_the_system_and_keeps_text_readable(pages, live_server):
    page = pages(color_scheme="dark")
    for path in ("/", "/availability/", "/nodes/gpu-a100-04/"):
        page.goto(live_server.url + path)
        body_text, body_bg = colours(page, "body")
        assert luminance(rgb(body_bg)) < 0.05, (path, body_bg)  # a dark page
        assert contrast(rgb(body_text), rgb(body_bg)) >= 4.5, (path, body_text, body_bg)
        for sel in ("main h1", ".card h2", ".card .muted, .card .source-note", ".pic-legend li", "main a"):
            if page.locator(sel).count():
                fg, bg = colours(page, sel)
                assert contrast(rgb(fg), rgb(bg)) >= 4.5, (path, sel, fg, bg)
    # the pictures are coloured through the same properties
    page.goto(live_server.url + "/")
    dark_fill = page.evaluate("getComputedStyle(document.querySelector('.pic-seg')).fill")
    light = pages(color_scheme="light")
    _text, light_bg = colours(light, "body")
    assert luminance(rgb(light_bg)) > 0.8
    light_fill = light.evaluate("getComputedStyle(document.querySelector('.pic-seg')).fill")
    assert dark_fill != light_fill


# Every element with text of its own: its colour, and the first opaque background behind it.
TEXTS = """() => [...document.querySelectorAll('body *')]
  .filter(el => el.offsetParent && [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
  .map(el => { let bg = null, n = el;
    while (n) { const c = getComputedStyle(n).backgroundColor;
      if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') { bg = c; break; } n = n.parentElement; }
    return [el.tagName.toLowerCase() + '.' + el.className, getComputedStyle(el).color, bg || 'rgb(255, 255, 255)',
            el.textContent.trim().slice(0, 40)]; })"""


def test_every_text_of_the_dark_theme_is_readable(pages, live_server):
    page = pages(color_scheme="dark")
    low = []
    for path in (
        "/",
        "/availability/",
        "/nodes/",
        "/nodes/gpu-a100-04/",
        "/health/",
        "/help/",
        "/procedures/",
        "/runs/",
        "/workspaces/",
        "/workspaces/new/",
        "/workspaces/approvals/",
        "/workspaces/jobs/",
    ):
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")  # the charts htmx brings in
        for where, fg, bg, text in page.evaluate(TEXTS):
            ratio = contrast(rgb(fg), rgb(bg))
            if ratio < 4.5:
                low.append((path, where, fg, bg, text, round(ratio, 2)))
    assert low == []


def test_pictures_load_lazily_and_fit_in_korean_on_a_phone(pages, live_server):
    page = pages(viewport={"width": 390, "height": 844})
    page.goto(live_server.url + "/")
    page.click("[data-testid=menu-toggle]")  # on a phone the language choice is in the menu
    with page.expect_navigation():
        page.select_option("select[name=language]", "ko")
    page.wait_for_selector("html[lang=ko]")
    for path in ("/", "/availability/", "/nodes/gpu-a100-04/"):
        page.goto(live_server.url + path)
        # the utilisation chart came by htmx after the page, and says it is not measured
        page.wait_for_selector("[data-testid=not-measured]", timeout=10000)
        assert page.locator("[data-testid=not-measured]").first.inner_text().startswith("측정")
        assert page.locator("svg.pic").count() >= 1
        overflowing = page.evaluate("""() => [...document.querySelectorAll('.pic-figure, .pic-legend, .pic-util-head')]
            .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className)""")
        assert overflowing == [], (path, overflowing)
    page.goto(live_server.url + "/nodes/gpu-a100-04/")
    tiles = page.locator("svg.pic-tile")
    assert tiles.count() == 4
    box = tiles.first.bounding_box()
    assert box["width"] <= 390
