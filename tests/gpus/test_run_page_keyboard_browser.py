"""A whole run of procedure A with the keyboard only, in Debian's Chromium, run by a real
worker: what the run page's live region announces (across reconnections of its stream), that
the focus stays where the admin put it while the page streams, and that "what next" is reached
with the keyboard."""

import os
import re
from pathlib import Path

import pytest

from gpus.models import ProcedureRun
from tests.conftest import browser_login

# Runs in every document of a run page: after every streamed message, which element has
# the focus (its id; "BODY" when the focus was lost to the page).
FOCUS_WATCH = """
(() => {
  if (!location.pathname.match(/^\\/runs\\/\\d+\\/$/)) return;
  window.__focus = [];
  document.addEventListener('htmx:sseMessage', () => {
    const a = document.activeElement;
    window.__focus.push(a && a !== document.body ? (a.id || a.tagName) : 'BODY');
  });
})();
"""


# With BRICK_KEYBOARD_TRANSCRIPT set to a file, the test writes there what the admin did and
# heard: each key pressed (and on what), then what the live region announced.
TRANSCRIPT = os.environ.get("BRICK_KEYBOARD_TRANSCRIPT", "")
heard: list[str] = []

FOCUSED = """() => {
  const a = document.activeElement;
  if (!a || a === document.body) return 'the page';
  const text = (a.innerText || a.value || a.getAttribute('aria-label') || '').trim().split('\\n')[0];
  const label = a.labels && a.labels.length ? a.labels[0].innerText.trim().split('\\n')[0] : '';
  const what = a.tagName.toLowerCase() + (a.id ? '#' + a.id : '') + (a.type ? '[' + a.type + ']' : '');
  return `${what} "${(label || text).slice(0, 90)}"`;
}"""


def note(line):
    if TRANSCRIPT:
        heard.append(line)


def press(page, key):
    """Press a key on what has the focus (noted for the transcript before: Enter may leave the page)."""
    if TRANSCRIPT:
        note(f"{key} on {page.evaluate(FOCUSED)}")
    page.keyboard.press(key)


def tab_to(page, selector, *, backwards=False, limit=80):
    """Press Tab (Shift+Tab) until the element matching ``selector`` has the focus."""
    key = "Shift+Tab" if backwards else "Tab"
    for pressed in range(limit):
        target = page.locator(selector)
        if target.count() and target.first.evaluate("el => el === document.activeElement"):
            if TRANSCRIPT:
                note(f"{key} ×{pressed} → focus on {page.evaluate(FOCUSED)}")
            return
        page.keyboard.press(key)
    raise AssertionError(f"{selector} not reached with {key} in {limit} presses")


@pytest.mark.browser
@pytest.mark.worker
def test_a_whole_run_with_the_keyboard_only_is_announced_step_by_step(
    browser, live_server, transactional_db, load_scenario, admin_user, worker_factory, settings
):
    # Each stream ends after 2 s: the browser reconnects several times during the run, and
    # resumes after the last event it saw (Last-Event-ID), so nothing is said twice or missed.
    settings.BRICK_RUN_STREAM_SECONDS = 2
    twin = load_scenario("seed-example")
    worker_factory(BRICK_PROCEDURE_STEP_PAUSE=0.6)
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.add_init_script(FOCUS_WATCH)
    streams = []  # each request of the run's stream: the first, then each reconnection
    page.on("request", lambda r: streams.append(r) if "/stream/" in r.url else None)

    # The wizard: the node is chosen by the link; Tab to each button, Enter to press it.
    page.goto(f"{live_server.url}/procedures/A/?node=dev-a1-ws04")
    note(f"(page {page.url.removeprefix(live_server.url)})")
    tab_to(page, "button:has-text('Show the plan')")
    press(page, "Enter")
    page.wait_for_url(re.compile(r".*/procedures/A/plan/.*"))
    note(f"(page {page.url.removeprefix(live_server.url)})")
    tab_to(page, "[data-testid=confirm-capacity_acknowledged] input")  # its exclusive GPUs leave with it
    press(page, "Space")
    tab_to(page, "button:has-text('Confirm and run')")
    press(page, "Enter")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    note(f"(page {page.url.removeprefix(live_server.url)})")
    run = ProcedureRun.objects.get()

    # The admin tabs to a control of the run page while it runs: the stream must leave it there.
    tab_to(page, "#audit-csv")
    page.evaluate("window.__focus = []")  # from here on
    assert page.locator("#run-progress[data-status=succeeded]").count() == 0  # still running
    assert page.locator("#run-position progress").count() == 1
    page.wait_for_selector("#run-progress[data-status=succeeded]", timeout=90_000)
    focus = page.evaluate("window.__focus")
    assert focus and set(focus) == {"audit-csv"}, focus  # never lost to <body>, never moved

    said = page.locator("#run-announcements p").all_inner_texts()
    print("\nannounced:\n  " + "\n  ".join(said))
    note("(the run streams; the focus stays on #audit-csv; the live region, aria-live=polite, says:)")
    for text in said:
        note(f"  announced: {text}")
    titles = {
        2: "Drain dev-a1-ws04",
        3: "Label dev-a1-ws04 brick.cloud/gpu.sharing=timeslicing",
        8: "Uncordon dev-a1-ws04",
    }
    for n in range(2, 10):  # from the drain on, every step's start then its end, in order
        started = next(i for i, s in enumerate(said) if s.startswith(f"Step {n} of 9 started: "))
        done = next(i for i, s in enumerate(said) if s.startswith(f"Step {n} of 9 done: "))
        assert started < done, (n, said)
        if n in titles:
            assert said[done].startswith(f"Step {n} of 9 done: {titles[n]}"), said[done]
    assert said[-1] == "Run succeeded. Done: 9 of 9 steps after the pre-check."
    assert all(s.startswith(("Pre-check ", "Step ", "Run ")) for s in said), said  # steps and the end, nothing else
    resumed = [r.all_headers().get("last-event-id") for r in streams[1:]]
    assert resumed and all(n and n.isdigit() for n in resumed), resumed  # it reconnected, after what it saw
    assert len(said) == len(set(said))  # each said once (no replay after a reconnection)
    assert page.locator("#run-announcements").get_attribute("aria-live") == "polite"
    assert page.locator("#run-position-text").inner_text() == "9 of 9 steps after the pre-check done."
    assert page.locator("#run-position progress").get_attribute("value") == "10"

    # What next, reached from where the focus is: back (Shift+Tab) to "View node", Enter.
    assert page.locator("#cancel-run").count() == 0 and page.locator("#resume-run").count() == 0
    tab_to(page, "#what-next-node", backwards=True)
    press(page, "Enter")
    page.wait_for_url(f"{live_server.url}/nodes/dev-a1-ws04/")
    note(f"(page {page.url.removeprefix(live_server.url)})")
    if TRANSCRIPT:
        Path(TRANSCRIPT).write_text("\n".join(heard) + "\n", encoding="utf-8")
    assert twin.get_node("dev-a1-ws04")["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
    run.refresh_from_db()
    assert run.status == "succeeded"


LANDMARK_RULES = [
    "landmark-one-main",
    "landmark-no-duplicate-main",
    "landmark-no-duplicate-banner",
    "landmark-no-duplicate-contentinfo",
    "landmark-unique",
]

LANDMARKS = """() => [...document.querySelectorAll(
    'main, nav, [role=region], section[aria-labelledby], section[aria-label]')]
  .map(el => [el.getAttribute('role') || el.tagName.toLowerCase(),
              el.getAttribute('aria-label') ||
              (document.getElementById(el.getAttribute('aria-labelledby') || '') || {}).textContent || ''])"""


@pytest.mark.browser
def test_a_finished_runs_page_has_one_main_and_each_landmark_named_once_at_every_width(
    browser, live_server, transactional_db, load_scenario, admin_user, monkeypatch
):
    from gpus.procedures import service
    from gpus.tasks import execute_run

    from ..foundation.browsing import AXE, VIEWPORTS, context, signed_in

    for knob in ("BRICK_PROCEDURE_RETRY_BACKOFF", "BRICK_PROCEDURE_VERIFY_TIMEOUT", "BRICK_PROCEDURE_STEP_PAUSE"):
        monkeypatch.setenv(knob, "0")
    load_scenario("seed-example")
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    for width, height in VIEWPORTS:
        ctx = context(browser, live_server, "en", viewport={"width": width, "height": height})
        page = signed_in(ctx, live_server, "admin")
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        page.wait_for_load_state("load")
        page.wait_for_timeout(200)  # the scroll regions are named once laid out
        assert page.locator("#what-next-title").count() == 1  # the "What next" region is there
        landmarks = [tuple(x) for x in page.evaluate(LANDMARKS)]
        assert [r for r, _name in landmarks].count("main") == 1, landmarks
        named = [x for x in landmarks if x[0] != "main"]
        assert all(name.strip() for _r, name in named), landmarks
        assert len(set(named)) == len(named), (width, landmarks)
        page.evaluate(AXE.read_text())
        found = page.evaluate(
            "rules => axe.run(document, {runOnly: {type: 'rule', values: rules}})"
            ".then(r => r.violations.map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join('; ')))",
            LANDMARK_RULES,
        )
        assert found == [], (width, found)
        ctx.close()
