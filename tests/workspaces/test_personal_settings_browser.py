"""The personal settings page as drawn: the "Also by email" box sits just before its label, on
the label's line, at 1366 and 390 px in English and Korean; without an email address it is
unticked and cannot be ticked."""

import pytest

from tests.conftest import require_service
from tests.foundation.browsing import VIEWPORTS, context, signed_in
from tests.foundation.test_layout_browser import OVERFLOW, korean_font, shots_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_the_email_box_sits_beside_its_label_and_is_off_without_an_address(
    browser, live_server, alice, lang, width, height, tmp_path
):
    if lang == "ko":
        require_service(korean_font(), "a Korean font (Debian package fonts-nanum)")
    ctx = context(browser, live_server, lang, viewport={"width": width, "height": height})
    page = signed_in(ctx, live_server, "user")
    page.goto(f"{live_server.url}/profile/")
    box = page.locator("input[name=email_notifications]")
    words = page.locator("[data-testid=email-notifications] span")
    b, w = box.bounding_box(), words.bounding_box()
    gap = w["x"] - (b["x"] + b["width"])
    assert 0 <= gap <= 16, f"the box ends {gap:.0f} px before its label's text"
    assert b["y"] < w["y"] + w["height"] and w["y"] < b["y"] + b["height"], "the box is not on its label's line"
    assert box.is_disabled() and not box.is_checked()
    box.click(force=True)  # a disabled box ignores the click
    assert not box.is_checked()
    assert page.evaluate(OVERFLOW, width >= 1366) == []
    page.screenshot(
        path=str(shots_dir(tmp_path) / f"{width}-{lang}-user-personal-settings-no-email.png"), full_page=True
    )
    ctx.close()


def test_with_an_address_the_box_is_ticked_and_unticked_beside_its_label(browser, live_server, alice):
    alice.email = "alice@example.test"
    alice.save()
    ctx = context(browser, live_server, "en", viewport={"width": 390, "height": 844})
    page = signed_in(ctx, live_server, "user")
    page.goto(f"{live_server.url}/profile/")
    box = page.locator("input[name=email_notifications]")
    assert box.is_enabled() and box.is_checked()
    page.locator("[data-testid=email-notifications] span").click()  # the label's text ticks it too
    assert not box.is_checked()
    ctx.close()
