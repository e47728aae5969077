"""With the cluster unreachable, the banner says one short human sentence
(the technical detail behind a disclosure), and no page claims the cluster is empty: where a
list needs the cluster, it says its numbers could not be read."""

import re

import pytest
from django.test import Client

from gpus.models import ViewState
from workspaces import approvals as ws_approvals
from workspaces import jobs as ws_jobs

from .pages import EXCLUSIVE_NODE

EMPTY_CLAIMS = ["No GPU nodes", "No GPU resources", "node not found", "offers no GPU type", "No pod holds a GPU"]


def text(html: str) -> str:
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def banner(html: str) -> tuple[str, str]:
    """(what the banner says before its disclosure, what the disclosure holds)."""
    m = re.search(r'<div class="banner banner-error" role="alert" data-testid="cluster-error">(.*?)</div>', html, re.S)
    assert m, "no cluster banner"
    said, _sep, detail = m.group(1).partition("<details>")
    return text(said), detail


def test_the_banner_is_a_sentence_and_the_detail_is_disclosed(admin_client, unreachable):
    html = admin_client.get("/help/").content.decode()
    said, detail = banner(html)
    assert said == (
        "The cluster cannot be reached. Numbers on this page are unavailable until it answers; "
        "nothing has been changed."
    )
    assert "<summary>Technical detail</summary>" in detail and f"127.0.0.1:{unreachable}" in detail


def test_the_banner_speaks_korean(admin_client, unreachable):
    admin_client.cookies["django_language"] = "ko"
    said, detail = banner(admin_client.get("/help/").content.decode())
    assert "클러스터" in said and "127.0.0.1" not in said and "Technical detail" not in detail


def test_no_list_says_the_cluster_is_empty_when_it_could_not_be_read(request, load_scenario, admin_user, alice):
    load_scenario("seed-example")
    ws = ws_approvals.approve(
        ws_approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    ws_approvals.create_request(alice, name="team-b", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    ws_jobs.create_job(alice, ws, node=EXCLUSIVE_NODE, image="busybox", command="sleep 60", gpu=1)
    ViewState.objects.all().delete()  # the watcher never published: nothing to show but the truth
    port = request.getfixturevalue("unreachable")
    admin, user = Client(), Client()
    admin.force_login(admin_user)
    user.force_login(alice)
    said = {}
    for client, path in [
        (admin, "/"),
        (admin, "/nodes/"),
        (admin, f"/nodes/{EXCLUSIVE_NODE}/"),
        (admin, "/health/"),
        (user, "/availability/"),
        (user, "/dashboard/models/"),
        (user, "/workspaces/new/"),
        (user, "/workspaces/jobs/new/"),
        (admin, "/workspaces/approvals/"),
        (admin, "/workspaces/approvals/jobs/"),
    ]:
        resp = client.get(path)
        html = resp.content.decode()
        page = text(html)
        assert resp.status_code in (200, 503), path
        assert banner(html)[0].startswith("The cluster cannot be reached."), path
        assert f"127.0.0.1:{port}" not in banner(html)[0], path
        assert not [claim for claim in EMPTY_CLAIMS if claim in page], (path, page)
        said[path] = page
    assert "The cluster did not answer" in said["/nodes/"]  # the lists that need it: the 503 page
    assert "Availability is unknown: the cluster could not be read." in said["/workspaces/new/"]
    assert "The GPU nodes could not be read: the cluster did not answer." in said["/workspaces/jobs/new/"]
    assert "The GPU types could not be read: the cluster did not answer." in said["/workspaces/approvals/"]
    assert "unknown: the cluster could not be read" in said["/workspaces/approvals/jobs/"]


@pytest.mark.parametrize(
    "path,shown", [("/workspaces/jobs/new/", EXCLUSIVE_NODE), ("/workspaces/approvals/", "nvidia.com/gpu.shared")]
)
def test_with_the_cluster_read_the_lists_are_as_before(admin_client, twin, admin_user, path, shown):
    ws_approvals.approve(
        ws_approvals.create_request(admin_user, name="ops", gpu=1, cpu=1, memory_gib=4, storage_gib=10).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    ws_approvals.create_request(admin_user, name="ops-2", gpu=1, cpu=1, memory_gib=4, storage_gib=10)
    page = text(admin_client.get(path).content.decode())
    assert "could not be read" not in page and shown in page
