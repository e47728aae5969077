"""Every namespace holding a GPU
quota on the admin's Workspaces page (with or without a record), its detail, adoption, the
Workspace findings, the idle total on the Dashboard, and a user's own Workspace page."""

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from gpus.models import ViewWorkspace
from workspaces import approvals, jobs
from workspaces.models import Decision, WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db


def rows(html):
    """The Workspaces table's rows as lists of cell texts."""
    table = re.search(r'data-testid="cluster-workspaces".*?</table>', html, re.S).group(0)
    return [
        [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)
        if "<td" in r
    ]


def health_kinds(client):
    html = client.get(reverse("health")).content.decode()
    return text(html)


def test_every_namespace_with_a_gpu_quota_is_listed_records_or_not(twin, admin_client, alice, admin_user):
    approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    got = {r[0]: r for r in rows(html)}
    assert set(got) == {"team-a", "ws-exclusive", "ws-shared"}  # the seed's two have no record
    assert got["team-a"][1:3] == ["alice", "approved"]
    assert got["ws-exclusive"][1:3] == ["alice", "no record Adopt"]  # owner from the namespace's label
    assert got["ws-shared"][3:7] == ["nvidia.com/gpu.shared Shared (time-slicing)", "1", "0", "0"]
    # Prometheus is not configured: utilisation and memory say so, never 0
    assert got["ws-shared"][7:9] == ["not measured", "not measured"]
    assert 'data-testid="usage-not-measured"' in html


def test_the_list_sorts_searches_and_exports_csv(twin, admin_client, alice, admin_user):
    approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=2, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    url = reverse("cluster_workspaces")
    by_quota = [r[0] for r in rows(admin_client.get(url + "?sort=-allocated").content.decode())]
    assert by_quota[0] == "team-a"
    assert [r[0] for r in rows(admin_client.get(url + "?q=bob").content.decode())] == ["ws-shared"]
    resp = admin_client.get(url + "?format=csv&sort=workspace")
    lines = b"".join(resp.streaming_content).decode().splitlines()
    assert lines[0].startswith("workspace,owner,record,resource,allocated,requested,physical,utilisation,memory")
    assert lines[1].startswith("team-a,alice,approved,nvidia.com/gpu (exclusive),2,0,0,not measured,not measured,")
    assert lines[3].startswith("ws-shared,bob,none (adoptable),nvidia.com/gpu.shared (shared),1,0,0,")


def test_a_running_job_shows_requested_and_physical_on_the_workspace_and_its_detail(
    twin, admin_client, alice, admin_user
):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    got = {r[0]: r for r in rows(admin_client.get(reverse("cluster_workspaces")).content.decode())}
    assert got["team-a"][4:7] == ["1", "1", "1"]  # allocated, requested by pods, in use physically
    assert got["team-a"][-1] == "in use"
    detail = admin_client.get(reverse("cluster_workspace", args=["team-a"])).content.decode()
    pods = text(re.search(r'data-testid="ws-pods".*?</table>', detail, re.S).group(0))
    assert job.k8s_name in pods and "Running dev-a1-ws04" in pods and "dev-a1-ws04 · GPU 0" in pods
    history = text(re.search(r'data-testid="ws-decisions".*?</ul>', detail, re.S).group(0))
    assert "Approved Workspace" in history and "Approved Job" not in history  # the Workspace's own decisions


def test_an_admin_adopts_a_namespace_into_a_workspace_record_with_an_owner(twin, admin_client, bob, admin_user):
    assert (
        "Namespace ws-shared holds GPU quota nvidia.com/gpu.shared 1 (owner label: bob) but brickadmin has no "
        "Workspace record of it." in health_kinds(admin_client)
    )
    url = reverse("workspace_adopt", args=["ws-shared"])
    form = admin_client.get(url).content.decode()
    assert "data-confirm" in form and "Record namespace ws-shared as a Workspace of the chosen owner?" in form
    missing = admin_client.post(url, {"owner": ""})
    assert missing.status_code == 400 and "This field is required." in missing.content.decode()
    resp = admin_client.post(url, {"owner": bob.pk, "note": "found in the seed"})
    assert resp.status_code == 302 and resp["Location"] == reverse("cluster_workspace", args=["ws-shared"])
    req = WorkspaceRequest.objects.get(name="ws-shared")
    assert (req.status, req.requester, req.gpu, req.gpu_resource, req.gpu_type, req.cpu, req.memory_gib) == (
        "approved",
        bob,
        1,
        "nvidia.com/gpu.shared",
        "shared",
        2,
        8,
    )
    decision = Decision.objects.get(action=Decision.Action.ADOPT)
    assert (decision.actor, decision.subject, decision.amount) == (admin_user, "ws-shared", 1)
    assert "found in the seed" in decision.detail
    got = {r[0]: r for r in rows(admin_client.get(reverse("cluster_workspaces")).content.decode())}
    assert got["ws-shared"][1:3] == ["bob", "approved"]
    health = health_kinds(admin_client)
    assert "Namespace ws-shared holds" not in health and "Namespace ws-exclusive holds" in health
    # bob sees it as his own Workspace now; adopting it again is refused
    assert admin_client.post(url, {"owner": bob.pk}).status_code == 302
    assert WorkspaceRequest.objects.filter(name="ws-shared").count() == 1


def test_workspaces_out_of_step_with_the_cluster_are_findings(twin, admin_client, alice, admin_user):
    for name in ("team-gone", "team-edited", "team-noquota"):
        approvals.approve(
            approvals.create_request(alice, name=name, gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
            admin_user,
            "nvidia.com/gpu.shared",
            overcommit=True,
        )
    twin.delete("v1", "Namespace", "team-gone")
    twin.delete("v1", "ResourceQuota", "workspace-compute", "team-edited")
    twin.create_resource_quota("team-edited", "workspace-compute", {"requests.nvidia.com/gpu.shared": "3"})
    for q in ("workspace-compute", "workspace-storage"):
        twin.delete("v1", "ResourceQuota", q, "team-noquota")
    html = admin_client.get(reverse("health")).content.decode()
    page = text(html)
    assert "Workspace team-gone (owner alice) is approved but its namespace is not in the cluster." in page
    assert (
        "Workspace team-edited (owner alice): the cluster&#x27;s GPU quota is nvidia.com/gpu.shared 3, the "
        "approval record says nvidia.com/gpu.shared 1."
    ) in page
    assert "Workspace team-noquota (owner alice) has no ResourceQuota in the cluster" in page
    assert reverse("fix_plan", args=["W"]) + "?workspace=team-gone" in html
    assert reverse("fix_plan", args=["W"]) + "?workspace=team-noquota" in html
    # the help page explains each
    help_page = text(admin_client.get(reverse("help")).content.decode())
    for title in (
        "Workspace namespace missing",
        "Workspace quota missing",
        "Workspace quota edited outside brickadmin",
        "GPU quota without a Workspace record",
        "Idle GPU allocation",
    ):
        assert title in help_page


def test_an_allocation_idle_for_the_window_is_a_finding_and_the_dashboard_shows_the_idle_total(
    twin, admin_client, alice, login
):
    admin_client.get(reverse("cluster_workspaces"))  # the view publishes the lines, idle since now
    assert "idle since" not in text(admin_client.get(reverse("health")).content.decode())
    ViewWorkspace.objects.filter(namespace="ws-shared").update(idle_since=timezone.now() - timedelta(hours=25))
    page = text(admin_client.get(reverse("health")).content.decode())
    assert re.search(
        r"Workspace ws-shared \(owner bob\) holds nvidia.com/gpu.shared 1 idle since .* \(no Running GPU "
        r"pod\): that quota could be reclaimed.",
        page,
    )
    dashboard = login(alice).get(reverse("dashboard")).content.decode()
    assert 'data-testid="idle-nvidia.com/gpu.shared">1<' in dashboard
    assert 'data-testid="idle-nvidia.com/gpu">0<' in dashboard


def test_idleness_survives_a_new_generation_and_ends_with_a_running_pod(twin, admin_client, alice, admin_user):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    admin_client.get(reverse("cluster_workspaces"))
    long_ago = timezone.now() - timedelta(hours=30)
    ViewWorkspace.objects.filter(namespace="team-a").update(idle_since=long_ago)
    twin.cordon("dev-a1-ws02")  # the cluster moves on: a new generation, still no pod in team-a
    admin_client.get(reverse("cluster_workspaces"))
    assert ViewWorkspace.objects.get(namespace="team-a").idle_since == long_ago
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    admin_client.get(reverse("cluster_workspaces"))
    assert ViewWorkspace.objects.get(namespace="team-a").idle_since is None


def test_a_users_workspace_page_shows_quota_pods_and_utilisation_from_the_view(twin, alice, admin_user, login):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    html = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    assert re.search(r'data-testid="ws-allocated">1 <code>nvidia.com/gpu</code>', html)
    assert 'data-testid="ws-requested">1<' in html and 'data-testid="ws-physical">1<' in html
    assert "not measured" in text(re.search(r'data-testid="ws-utilisation">.*?</dd>', html, re.S).group(0))
    assert job.k8s_name in html
    # the utilisation over the last day, loaded lazily from the chart fragment
    assert reverse("utilisation_chart", args=["workspace"]) + "?range=day&amp;of=team-a" in html
    assert "requests.nvidia.com/gpu" in text(re.search(r'data-testid="quota-table".*?</table>', html, re.S).group(0))


def test_users_see_only_their_own_workspace(twin, alice, bob, admin_user, login):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    bob_c = login(bob)
    assert bob_c.get(reverse("workspace_detail", args=[ws.pk])).status_code == 404
    assert bob_c.get(reverse("cluster_workspace", args=["team-a"])).status_code == 403
    assert bob_c.get(reverse("cluster_workspaces")).status_code == 403
    assert bob_c.post(reverse("workspace_adopt", args=["ws-shared"]), {"owner": bob.pk}).status_code == 403
    assert bob_c.get(reverse("utilisation_chart", args=["workspace"]) + "?of=team-a").status_code == 404
    assert not WorkspaceRequest.objects.filter(name="ws-shared").exists()
    assert login(alice).get(reverse("workspace_detail", args=[ws.pk])).status_code == 200


def _page_cost(client, url):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_list_costs_the_same_queries_whatever_the_number_of_workspaces(twin, admin_client, settings):
    settings.PAGE_SIZE = 5
    url = reverse("cluster_workspaces")
    admin_client.get(url)
    small = _page_cost(admin_client, url)
    for i in range(30):
        twin.create_namespace(f"many-{i:02d}", {"brick.cloud/workspace": "true", "brick.cloud/owner": "dave"})
        twin.create_resource_quota(f"many-{i:02d}", "workspace-compute", {"requests.nvidia.com/gpu": "1"})
    admin_client.get(url)  # the twin's view catches up (publishing is the watcher's cost, not the page's)
    assert len(rows(admin_client.get(url).content.decode())) == 5
    assert _page_cost(admin_client, url) == small
    assert _page_cost(admin_client, reverse("cluster_workspace", args=["many-07"])) == _page_cost(
        admin_client, reverse("cluster_workspace", args=["ws-shared"])
    )


def test_the_dashboard_headline_is_per_type_and_names_what_it_counts(twin, alice_client):
    html = alice_client.get(reverse("dashboard")).content.decode()
    table = re.search(r'data-testid="headline-by-type".*?</table>', html, re.S).group(0)
    cells = [
        [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)
        if "<td" in r
    ]
    assert cells == [
        ["nvidia.com/gpu Exclusive", "1", "0", "0", "1", "0"],
        ["nvidia.com/gpu.shared Shared (time-slicing)", "2", "1", "0", "1", "0"],
    ]
    heads = text(re.search(r"<thead>.*?</thead>", table, re.S).group(0))
    assert heads == "GPU type Total Quota headroom Requested by pods Allocated to Workspaces Idle"
    for page in ("dashboard", "availability", "dashboard_models"):
        assert not re.search(r'data-term="[a-z_]+">Used<', alice_client.get(reverse(page)).content.decode()), page
    glossary = text(alice_client.get(reverse("help")).content.decode())
    for term in (
        "Requested by pods What pods hold now",
        "Allocated to Workspaces Workspace quota ceilings",
        "In use physically Physical GPU devices a Running pod holds",
    ):
        assert term in glossary


def test_a_column_headers_unit_keeps_its_case(twin, admin_client):
    """Headers are shown in capitals; their units are not (MiB, never MIB)."""
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    assert 'GPU memory used (<span class="unit">MiB</span>)' in html
    css = (settings.BASE_DIR / "static" / "css" / "brickadmin.css").read_text()
    assert re.search(r"th \.unit[^{]*\{ text-transform:none; \}", css)
