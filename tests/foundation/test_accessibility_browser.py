"""Axe-core (tests/vendor/axe.min.js, MPL-2.0) on every page, for an admin
and a user, in English and Korean, on a desktop (1366 px) and a phone (390 px: what scrolls
there must be reachable from the keyboard), with something on every list: no serious or
critical violation, and every form control has a label (axe's naming rules, whatever their
impact)."""

import pytest

from .browsing import AXE, VIEWPORTS, context, open_page, signed_in
from .pages import ANONYMOUS_PAGES, admin_pages, build_world, user_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# axe's rules that a form control (or a button) has an accessible name.
NAMING_RULES = {
    "label",
    "label-title-only",
    "select-name",
    "button-name",
    "input-button-name",
    "aria-input-field-name",
    "aria-toggle-field-name",
    "form-field-multiple-labels",
}


def violations(page) -> list[str]:
    # Evaluated by the driver, not added as an inline <script> the page's CSP would refuse.
    page.evaluate(AXE.read_text())
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    out = []
    for v in result["violations"]:
        if v["impact"] in ("serious", "critical") or v["id"] in NAMING_RULES:
            targets = "; ".join(" ".join(n["target"]) for n in v["nodes"][:5])
            out.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])}×): {v['help']} — {targets}")
    return out


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_page_has_no_serious_violation(browser, live_server, load_scenario, admin_user, alice, bob, lang):
    ids = build_world(load_scenario, admin_user, alice, bob)
    found, seen = [], 0
    for w, h in VIEWPORTS:
        for role, pages in (("anonymous", ANONYMOUS_PAGES), ("user", user_pages(ids)), ("admin", admin_pages(ids))):
            ctx = context(browser, live_server, lang, viewport={"width": w, "height": h})
            page = signed_in(ctx, live_server, role)
            for p in pages:
                open_page(page, live_server, p)
                assert page.locator("html").get_attribute("lang") == lang
                found += [f"[{w}px {lang} {role}] {p.name} {p.path}: {v}" for v in violations(page)]
                seen += 1
            ctx.close()
    assert seen == 2 * (len(ANONYMOUS_PAGES) + len(user_pages(ids)) + len(admin_pages(ids)))
    assert not found, f"{len(found)} violations:\n" + "\n".join(found)
