"""A run page whose live stream the server refuses (every web process full) follows the run by
polling its progress in Debian's Chromium: the steps still appear, without a reload."""

import pytest

from gpus.procedures import service
from gpus.tasks import execute_run
from tests.conftest import browser_login

COUNT_LOADS = """
(() => {
  if (location.pathname.match(/^\\/runs\\/\\d+\\/$/)) {
    sessionStorage.runLoads = String(Number(sessionStorage.runLoads || 0) + 1);
  }
})();
"""


@pytest.mark.browser
@pytest.mark.usefixtures("fast_engine")
def test_a_page_refused_its_stream_shows_the_run_by_polling(
    browser, live_server, transactional_db, load_scenario, admin_user, settings
):
    load_scenario("seed-example")
    settings.BRICK_RUN_STREAMS_PER_PROCESS = 0  # every stream answered 503 with Retry-After
    settings.BRICK_RUN_STREAM_RETRY_AFTER_SECONDS = 1
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.add_init_script(COUNT_LOADS)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.wait_for_selector("#run-progress[hx-get]", timeout=30_000)  # refused: it polls instead

    execute_run(run.pk)  # the worker's steps, recorded while the page polls

    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=60_000)
    assert page.locator("tr.step[data-state=succeeded]").count() == 10
    assert page.locator("#run-status").inner_text() == "Succeeded"
    assert page.evaluate("sessionStorage.runLoads") == "1"  # no reload: the region was swapped in
