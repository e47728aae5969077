"""One meaning per word, and a way past the menus: the first Tab stop is "Skip to content", which
moves the focus to the page's content; a cordoned node counts 0 unrequested GPUs; the cluster's
quota headroom and a node's unrequested GPUs are named differently."""

import pytest

from tests.foundation.browsing import context, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("lang,words", [("en", "Skip to content"), ("ko", "본문으로 건너뛰기")])
def test_the_first_tab_skips_to_the_content(browser, live_server, alice, lang, words):
    ctx = context(browser, live_server, lang, viewport={"width": 1366, "height": 900})
    page = signed_in(ctx, live_server, "user")
    page.goto(f"{live_server.url}/profile/")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.dataset.testid")
    assert focused == "skip-link"
    link = page.get_by_test_id("skip-link")
    assert link.inner_text() == words and link.is_visible()  # shown while it has the focus
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"
    page.keyboard.press("Tab")  # the next stop is inside the content, past every menu
    assert page.evaluate("document.querySelector('main').contains(document.activeElement)")
    ctx.close()


def test_resource_names_in_headers_keep_their_own_case(browser, live_server, alice):
    ctx = context(browser, live_server, "en", viewport={"width": 1366, "height": 900})
    page = signed_in(ctx, live_server, "user")
    page.goto(f"{live_server.url}/profile/")
    page.evaluate(
        "() => { const t = document.createElement('table');"
        " t.innerHTML = '<thead><tr><th>Type <code>nvidia.com/gpu</code></th></tr></thead>"
        "<tbody><tr><th scope=row>gpu-h100-02</th></tr></tbody>'; document.querySelector('main').append(t); }"
    )
    shown = page.locator("main table th").all_inner_texts()
    assert shown == ["TYPE nvidia.com/gpu", "gpu-h100-02"]  # a column's label shouts, a name never
    ctx.close()
