"""Every page at 1366×900 and 390×844, for an admin and a user, in English
and Korean. Fails when the page scrolls sideways, when a table is wider than the box it sits
in (outside an explicit `.table-scroll` wrapper, the one place a wide table may scroll), or
when any other element's content overflows a box that cuts or scrolls it, or when a header,
badge, button or menu entry breaks inside a word (Korean one syllable per line). Full-page
screenshots are saved for looking: under $BRICK_SCREENSHOTS when set, else pytest's tmp dir
(the path is printed). At 1366 px even a `.table-scroll` may not need to scroll: on a
desktop every table is seen whole."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_service

from .browsing import VIEWPORTS, context, open_page, signed_in
from .pages import ANONYMOUS_PAGES, Page, admin_pages, build_world, user_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OVERFLOW = r"""(desktop) => {
  const vw = window.innerWidth, out = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\s+/).join('.') : '')
    + (el.dataset && el.dataset.testid ? '[data-testid=' + el.dataset.testid + ']' : '');
  const path = el => { const p = []; for (let e = el; e && e !== document.body && p.length < 4; e = e.parentElement) p.unshift(name(e)); return p.join(' > '); };
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden'
    && !el.closest('.visually-hidden');  // clipped on purpose: read by screen readers only
  const width = document.scrollingElement.scrollWidth;
  if (width > vw + 1) {
    const sticking = [...document.body.querySelectorAll('*')].filter(el => visible(el)
      && el.getBoundingClientRect().right > vw + 1
      && ![...el.children].some(c => c.getBoundingClientRect().right > vw + 1));
    out.push('the page scrolls sideways (' + width + ' px in ' + vw + ' px); sticking out: '
      + sticking.slice(0, 6).map(path).join(' | '));
  }
  for (const t of document.querySelectorAll('table')) {
    if (!visible(t) || t.closest('.table-scroll')) continue;
    const box = t.parentElement;
    if (t.offsetWidth > box.clientWidth + 1)
      out.push('table ' + path(t) + ' is ' + t.offsetWidth + ' px wide in a box of ' + box.clientWidth + ' px');
  }
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el) || el.matches('pre, textarea, input, select, .bar') || (!desktop && el.matches('.table-scroll'))) continue;
    const ox = getComputedStyle(el).overflowX;
    if (ox !== 'visible' && el.scrollWidth > el.clientWidth + 1) {
      const right = el.getBoundingClientRect().right;
      const wide = [...el.querySelectorAll('*')].filter(c => visible(c) && c.getBoundingClientRect().right > right + 1
        && ![...c.children].some(d => d.getBoundingClientRect().right > right + 1));
      out.push(path(el) + ' cuts or scrolls its content (overflow-x: ' + ox + ', ' + el.scrollWidth + ' px in '
        + el.clientWidth + ' px): ' + wide.slice(0, 4).map(path).join(' | '));
    }
  }
  // A word split over lines: a header, a badge or a button whose text takes more lines than
  // it has words (Korean broken one syllable per line).
  for (const el of document.querySelectorAll('th, .tag, button, .button, nav a')) {
    const text = el.innerText.trim();
    if (!visible(el) || !text) continue;
    const range = document.createRange();
    range.selectNodeContents(el);
    const tops = [...range.getClientRects()].filter(r => r.width > 0).map(r => r.top).sort((a, b) => a - b);
    const lineHeight = parseFloat(getComputedStyle(el).fontSize) * 0.8;
    let lines = tops.length ? 1 : 0;
    for (let i = 1; i < tops.length; i++) if (tops[i] - tops[i - 1] > lineHeight) lines++;
    const words = text.split(/\s+/).length;
    if (lines > words) out.push(path(el) + ' breaks inside a word: "' + text.replace(/\s+/g, ' ') + '" on ' + lines + ' lines');
  }
  return out;
}"""

# The figures a decision rests on (Available, After approving, Free, Requested, Idle, a node's
# load): on a phone each must be on screen without scrolling sideways, neither past the
# viewport's edge nor past the edge of a box that scrolls or cuts it.
KEY_FIGURES = r"""() => {
  const sel = '[data-testid="available"], [data-testid="after-approving"], [data-testid^="free-"],'
    + ' [data-testid^="requested-"], [data-testid^="idle-"], [data-testid^="load-"]';
  const vw = window.innerWidth, out = [];
  let seen = 0;
  for (const el of document.querySelectorAll(sel)) {
    if (el.getClientRects().length === 0 || el.closest('.visually-hidden')) continue;
    seen++;
    const r = el.getBoundingClientRect();
    let edge = vw;
    for (let box = el.parentElement; box && box !== document.body; box = box.parentElement)
      if (getComputedStyle(box).overflowX !== 'visible') edge = Math.min(edge, box.getBoundingClientRect().right);
    if (r.left < -1 || r.right > edge + 1)
      out.push(el.dataset.testid + ' ("' + el.innerText.trim() + '") is off-screen: ' + Math.round(r.left) + '..'
        + Math.round(r.right) + ' px, visible up to ' + Math.round(edge) + ' px');
  }
  return {seen, out};
}"""

# Pages whose deciding figures the phone check must find (it checks every page it opens).
PAGES_WITH_KEY_FIGURES = {"dashboard", "availability", "workspace request", "nodes", "approvals"}


def korean_font() -> bool:
    try:
        return bool(subprocess.run(["fc-list", ":lang=ko"], capture_output=True, text=True).stdout.strip())
    except OSError:
        return False


def shots_dir(tmp_path) -> Path:
    d = Path(os.environ.get("BRICK_SCREENSHOTS") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_no_page_scrolls_sideways_and_no_table_is_cut(
    browser, live_server, load_scenario, admin_user, alice, bob, lang, tmp_path
):
    if lang == "ko":  # without one, Korean is drawn as boxes of another width
        require_service(korean_font(), "a Korean font (Debian package fonts-nanum)")
    ids = build_world(load_scenario, admin_user, alice, bob)
    shots = shots_dir(tmp_path)
    found, seen, figures = [], 0, {}
    for w, h in VIEWPORTS:
        for role, pages in (("anonymous", ANONYMOUS_PAGES), ("user", user_pages(ids)), ("admin", admin_pages(ids))):
            ctx = context(browser, live_server, lang, viewport={"width": w, "height": h})
            page = signed_in(ctx, live_server, role)
            for p in pages:
                open_page(page, live_server, p)
                slug = re.sub(r"[^a-z0-9]+", "-", p.name.lower()).strip("-")
                page.screenshot(path=str(shots / f"{w}-{lang}-{role}-{slug}.png"), full_page=True)
                found += [
                    f"[{w}px {lang} {role}] {p.name} {p.path}: {problem}"
                    for problem in page.evaluate(OVERFLOW, w >= 1366)
                ]
                if w < 600:
                    key = page.evaluate(KEY_FIGURES)
                    found += [f"[{w}px {lang} {role}] {p.name} {p.path}: {problem}" for problem in key["out"]]
                    figures[(role, p.name)] = key["seen"]
                seen += 1
            ctx.close()
    print(f"screenshots: {shots}")
    assert seen == 2 * (len(ANONYMOUS_PAGES) + len(user_pages(ids)) + len(admin_pages(ids)))
    assert not found, f"{len(found)} overflows:\n" + "\n".join(found)
    missing = [(role, name) for (role, name), n in figures.items() if name in PAGES_WITH_KEY_FIGURES and not n]
    assert not missing, f"no deciding figure found on {missing}"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_node_detail_with_a_stale_resource_is_whole_at_1366(
    browser, live_server, load_scenario, admin_user, lang, tmp_path
):
    """The widest GPU table: a node relabelled without the status patch keeps its old
    resource in capacity, and the row says so in a badge."""
    if lang == "ko":
        require_service(korean_font(), "a Korean font (Debian package fonts-nanum)")
    twin = load_scenario("seed-example")
    twin.label_node("dev-a1-ws02", {"brick.cloud/gpu.sharing": "none"})
    ctx = context(browser, live_server, lang, viewport={"width": 1366, "height": 900})
    page = signed_in(ctx, live_server, "admin")
    open_page(page, live_server, Page("node detail (stale)", "/nodes/dev-a1-ws02/"))
    assert page.locator("tr.row-warn .tag").count() == 1  # the stale resource's badge
    page.screenshot(path=str(shots_dir(tmp_path) / f"1366-{lang}-admin-node-detail-stale.png"), full_page=True)
    assert page.evaluate(OVERFLOW, True) == []
    ctx.close()


def test_on_a_phone_the_menus_fold_behind_a_button_with_44_px_targets(browser, live_server, load_scenario, admin_user):
    """At 390 px the header is the brand and a Menu button; the button opens the menus (a
    disclosure: aria-expanded), Escape closes them, every link in them is a 44 px target.
    Without JavaScript no button shows and the menus are simply open."""
    load_scenario("seed-example")
    ctx = context(browser, live_server, "en", viewport={"width": 390, "height": 844})
    page = signed_in(ctx, live_server, "admin")
    open_page(page, live_server, Page("dashboard", "/"))
    toggle = page.locator("[data-testid=menu-toggle]")
    assert toggle.is_visible() and toggle.get_attribute("aria-expanded") == "false"
    assert page.locator("#main-nav a").first.is_hidden() and page.locator("#admin-nav a").first.is_hidden()
    header = page.locator("header.topbar").bounding_box()
    assert header["height"] <= 70  # the first screen is for the page, not the menus
    assert toggle.bounding_box()["height"] >= 44

    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    links = page.locator("#main-nav a, #admin-nav a, #user-menu a")
    assert links.count() >= 10
    heights = {links.nth(i).inner_text(): links.nth(i).bounding_box()["height"] for i in range(links.count())}
    assert all(h >= 44 for h in heights.values()), heights
    assert page.evaluate(OVERFLOW, False) == []
    page.keyboard.press("Escape")
    assert toggle.get_attribute("aria-expanded") == "false" and page.locator("#main-nav a").first.is_hidden()
    ctx.close()

    ctx = context(browser, live_server, "en", viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = ctx.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", "pw-root-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("[data-testid=menu-toggle]").is_hidden()
    nodes = page.locator("#admin-nav a", has_text="Nodes")
    assert nodes.is_visible() and nodes.bounding_box()["height"] >= 44
    ctx.close()
