"""Procedure A clicked through in Debian's Chromium: plan, confirm, and the run page
updating step by step (htmx polling of rows) without a reload, run by a real worker."""

import pytest

from gpus.models import ProcedureRun
from tests.conftest import browser_login

# Runs in every document: counts page loads of run pages and records each step row's
# states as the page shows them.
OBSERVER = """
(() => {
  if (!location.pathname.match(/^\\/runs\\/\\d+\\/$/)) return;
  sessionStorage.runLoads = String(Number(sessionStorage.runLoads || 0) + 1);
  window.__history = {};
  const snap = () => document.querySelectorAll('tr.step').forEach(tr => {
    const h = (window.__history[tr.id] = window.__history[tr.id] || []);
    if (h[h.length - 1] !== tr.dataset.state) h.push(tr.dataset.state);
  });
  document.addEventListener('DOMContentLoaded', () => {
    snap();
    new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, attributes: true});
  });
})();
"""


@pytest.mark.browser
@pytest.mark.worker
def test_procedure_a_from_plan_to_end_live(
    browser, live_server, transactional_db, load_scenario, admin_user, worker_factory
):
    twin = load_scenario("seed-example")
    worker_factory(BRICK_PROCEDURE_STEP_PAUSE=0.8)
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.add_init_script(OBSERVER)
    streams = []
    page.on("request", lambda r: streams.append(r.url) if "/stream/" in r.url else None)

    page.goto(f"{live_server.url}/nodes/dev-a1-ws04/")
    page.click("text=Convert to time-slicing (A)")
    page.check("input[name=node][value=dev-a1-ws04]")
    page.click("button:has-text('Show the plan')")
    assert page.locator("pre.kubectl", has_text="kubectl drain dev-a1-ws04 --ignore-daemonsets").count() == 1
    assert ProcedureRun.objects.count() == 0
    page.locator("[data-testid=confirm-capacity_acknowledged] input").check()  # its exclusive GPUs leave with it
    page.click("button:has-text('Confirm and run')")

    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=90_000)
    run = ProcedureRun.objects.get()
    assert page.url == f"{live_server.url}/runs/{run.pk}/"
    assert page.evaluate("sessionStorage.runLoads") == "1"  # no reload: htmx swapped the rows in
    # one stream: the one the page opened while it loaded, taken over by htmx, never a second
    assert len(streams) == 1, streams
    listed = page.eval_on_selector_all("#run-events > li", "items => items.map((li) => li.id)")
    assert listed == [f"event-{n}" for n in range(1, run.last_seq + 1)]  # every event once, in order
    history = page.evaluate("window.__history")
    keys = [
        "cordon",
        "drain",
        "label",
        "plugin-pod",
        "allocatable",
        "remove-stale",
        "no-stale",
        "uncordon",
        "prometheus",
    ]
    for key in keys:
        states = history.get(f"step-{key}", [])
        assert states[-1] == "succeeded", (key, states)
        assert "running" in states, (key, states)  # seen while it ran, then done
    assert page.locator("#run-status").inner_text() == "Succeeded"
    assert page.locator("button:has-text('Cancel')").count() == 0
    assert twin.get_node("dev-a1-ws04")["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"

    # A browser arriving late catches up from the rows.
    late = browser_login(browser, live_server, "root", "pw-root-123")
    late.goto(f"{live_server.url}/runs/{run.pk}/")
    assert late.locator("tr.step[data-state=succeeded]").count() == 10
