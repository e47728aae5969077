"""A browser in Seoul sees Korean time without choosing anything: the settings page says
"Now: HH:MM KST" with the zone it took from the browser, and so does every time after."""

import zoneinfo
from datetime import datetime

import pytest

from tests.foundation.browsing import context, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_seoul_browser_sees_kst(browser, live_server, alice):
    ctx = context(browser, live_server, "en", timezone_id="Asia/Seoul")
    page = signed_in(ctx, live_server, "user")  # the sign-in page already told the server its zone
    page.goto(f"{live_server.url}/profile/")
    now = page.get_by_test_id("zone-now").inner_text()
    seoul = datetime.now(zoneinfo.ZoneInfo("Asia/Seoul"))
    assert "KST" in now and page.get_by_test_id("zone-name").inner_text() == "Asia/Seoul"
    assert now.split("Now: ")[1][:2] in {seoul.strftime("%H"), (seoul.replace(minute=0)).strftime("%H")}
    assert "your browser's time zone" in now
    ctx.close()


def test_a_korean_seoul_browser_reads_its_zone_in_korean(browser, live_server, alice):
    ctx = context(browser, live_server, "ko", timezone_id="Asia/Seoul")
    page = signed_in(ctx, live_server, "user")
    page.goto(f"{live_server.url}/profile/")
    now = page.get_by_test_id("zone-now").inner_text()
    assert now.startswith("현재: ") and "KST" in now and "브라우저" in now
    ctx.close()
