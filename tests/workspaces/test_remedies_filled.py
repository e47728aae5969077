"""Every remedy is one click to a filled form: "Request more GPUs" and "Change the GPU type"
beside a waiting pod open the request form filled from the Workspace; the Workspace page says
at its top how many pods wait, linking to why; Health's "Quota over the Total" links each
Workspace it names to its quota page; a plan's "Lower the Workspace quotas first" is a link."""

import re
from html import unescape

import pytest
from django.urls import reverse

from brickadmin.cluster import vocabulary as vocab
from tests.gpus.test_capacity_plan import _over_allocate_exclusive

from .test_pod_waits import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(load_scenario):
    return load_scenario("waiting")


def form_values(html: str) -> dict[str, str]:
    values = {n: unescape(v) for n, v in re.findall(r'<input[^>]*name="(\w+)"[^>]*value="([^"]*)"', html)}
    purpose = re.search(r'<textarea[^>]*name="purpose"[^>]*>(.*?)</textarea>', html, re.S)
    values["purpose"] = unescape(purpose.group(1)).strip() if purpose else ""
    return values


def test_change_the_gpu_type_opens_a_form_filled_from_the_workspace(waiting, alice, login):
    ws = record(alice, "ws-train")
    client = login(alice)
    page = client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    link = unescape(re.search(r'data-pod="train-4gpu">.*?href="([^"]*why=type[^"]*)"', page, re.S).group(1))
    form = client.get(link).content.decode()
    got = form_values(form)
    assert got["name"] == "ws-train-2" and got["gpu"] == "4"
    assert (got["cpu"], got["memory_gib"], got["storage_gib"]) == ("8", "32", "20")
    assert got["purpose"].startswith("Like ws-train on another GPU type: its pods wait for 4 of exclusive")
    assert 'data-testid="filled-from"' in form and reverse("workspace_detail", args=[ws.pk]) in form


def test_request_more_gpus_opens_a_form_filled_from_the_workspace(waiting, alice, login):
    ws = record(alice, "ws-full")
    client = login(alice)
    page = client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    link = unescape(re.search(r'data-cause="quota-full".*?href="([^"]*why=more[^"]*)"', page, re.S).group(1))
    got = form_values(client.get(link).content.decode())
    assert got["name"] == "ws-full-2" and got["gpu"] == "4"
    assert got["purpose"].startswith("More GPUs beside ws-full: its quota of 4 is used up")


def test_someone_elses_workspace_fills_nothing(waiting, alice, bob, login):
    record(alice, "ws-train")
    form = login(bob).get(reverse("workspace_request") + "?from=ws-train&why=type").content.decode()
    assert 'data-testid="filled-from"' not in form
    assert "ws-train" not in form_values(form).get("name", "") and "ws-train" not in form_values(form)["purpose"]


def test_the_workspace_page_says_at_its_top_how_many_pods_wait(waiting, alice, login):
    ws = record(alice, "ws-train")
    page = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    banner = re.search(r'data-testid="pods-wait-banner">(.*?)</p>', page, re.S)
    assert banner and re.search(r"\d+ pods wait or were refused", banner.group(1))
    assert 'href="#why-pods-wait"' in banner.group(1) and 'id="why-pods-wait"' in page
    assert page.index('data-testid="pods-wait-banner"') < page.index('id="why-pods-wait"')
    assert page.index('data-testid="pods-wait-banner"') < page.index("<h2")  # before any section


def test_health_links_each_workspace_over_the_total_to_its_quota_page(twin, admin_client):
    _over_allocate_exclusive(twin, -2)
    page = admin_client.get(reverse("health")).content.decode()
    block = re.search(rf'data-testid="quota-links-{re.escape(vocab.GPU)}">(.*?)</span>', page, re.S)
    assert block, "the finding names no Workspace as a link"
    named = re.findall(r'href="/workspaces/cluster/([^/"]+)/quota/">([^<]+)</a>', block.group(1))
    assert named and all(ns == text for ns, text in named)


def test_a_plans_lower_the_quotas_first_is_a_link(twin, admin_client):
    _over_allocate_exclusive(twin, 0)
    plan = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"}).content.decode()
    block = re.search(r'data-testid="lower-quotas-first">(.*?)</span>', plan, re.S).group(1)
    assert f'href="{reverse("cluster_workspaces")}?q=nvidia.com/gpu&amp;sort=-allocated"' in block
    assert "Lower the Workspace quotas of nvidia.com/gpu first" in block
