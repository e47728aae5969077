"""In Chromium: the Nodes list's search and filters narrow the table in place (htmx) and keep
every choice in the address, so the view can be shared: opening that address again shows the
same rows, and the CSV link follows what is shown."""

import pytest

from tests.conftest import browser_login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def node_names(page):
    return sorted(page.locator("#node-table tbody td:first-child a").all_inner_texts())


def test_the_nodes_search_and_filter_stay_in_the_address(browser, live_server, load_scenario, admin_user):
    load_scenario("demo")
    page = browser_login(browser, live_server, "root", "pw-root-123")
    page.goto(f"{live_server.url}/nodes/")
    everything = node_names(page)
    assert len(everything) > 3
    page.fill("input[name=q]", "a30")
    page.wait_for_url("**/nodes/?*q=a30*")
    page.wait_for_function(
        "[...document.querySelectorAll('#node-table tbody td:first-child a')].every(a => a.textContent.includes('a30'))"
    )
    narrowed = node_names(page)
    assert narrowed and len(narrowed) < len(everything)
    mode = page.locator("select[name=mode] option").nth(1).get_attribute("value")
    page.select_option("select[name=mode]", mode)
    page.wait_for_url(f"**mode={mode}**")
    assert "q=a30" in page.url  # the search is kept beside the filter
    page.wait_for_load_state("networkidle")
    shown = node_names(page)
    csv = page.locator("#node-table a.csv").get_attribute("href")
    assert "q=a30" in csv and f"mode={mode}" in csv and "format=csv" in csv
    page.click("th >> text=Physical")
    page.wait_for_url("**sort=**")
    assert "q=a30" in page.url and f"mode={mode}" in page.url
    shared = page.url
    other = browser_login(browser, live_server, "root", "pw-root-123")
    other.goto(shared)
    assert node_names(other) == shown and other.locator("input[name=q]").input_value() == "a30"
    assert other.locator("select[name=mode]").input_value() == mode
