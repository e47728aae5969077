"""Every list sorts, searches and exports CSV from its URL (brickadmin/tables.py), keeping its
own filters in the links, so a view can be shared: Nodes, runs, Jobs (a user's and an admin's),
the two approval queues, Health findings and manifest versions. Through the test client, in a
world with something on each list (tests/foundation/pages.py)."""

import csv
import io
import re

import pytest
from django.test import Client

from gpus import manifest as manifest_mod
from gpus.models import ManifestVersion

from .pages import EXCLUSIVE_NODE, SHARED_NODE, build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(load_scenario, admin_user, alice, bob):
    return build_world(load_scenario, admin_user, alice, bob)


def client_of(user):
    c = Client()
    c.force_login(user)
    return c


def html(client, path, **query):
    response = client.get(path, query)
    assert response.status_code == 200, (path, query, response.status_code)
    return response.content.decode()


def exported(client, path, **query):
    response = client.get(path, {**query, "format": "csv"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def sort_link(page, key):
    """The href of the header link that sorts by ``key`` (either way)."""
    found = re.search(r'href="(\?[^"]*sort=-?' + key + r'(?:&amp;[^"]*)?)"', page)
    assert found, f"no sort link for {key}"
    return found.group(1).replace("&amp;", "&")


def test_nodes_sort_in_sql_search_export_and_keep_the_filters(world, admin_user):
    admin = client_of(admin_user)
    page = html(admin, "/nodes/", sort="-physical")
    names = re.findall(r'<td><a href="/nodes/([^/]+)/">', page)
    rows = exported(admin, "/nodes/", sort="-physical")
    assert [r["name"] for r in rows][: len(names)] == names  # the page is the first rows of the export
    physical = [int(r["physical"]) for r in rows]
    assert physical == sorted(physical, reverse=True) and len(rows) > 1
    assert set(rows[0]) == {
        "name",
        "model",
        "mode",
        "stack",
        "physical",
        "in_use",
        "logical",
        "requested",
        "findings",
    }
    assert 'aria-sort="descending"' in page

    # search and a filter together, and both are in every sort link (a shareable address)
    page = html(admin, "/nodes/", mode="exclusive", q="ws04")
    assert set(re.findall(r'<td><a href="/nodes/([^/]+)/">', page)) == {EXCLUSIVE_NODE}
    link = sort_link(page, "model")
    assert "mode=exclusive" in link and "q=ws04" in link
    assert 'name="q" value="ws04"' in page and '<option value="exclusive" selected>' in page
    assert [r["name"] for r in exported(admin, "/nodes/", mode="exclusive", q="ws04")] == [EXCLUSIVE_NODE]
    assert "No node matches these filters." in html(admin, "/nodes/", q="no-such-node")


def test_runs_sort_by_duration_search_and_export(world, admin_user):
    admin = client_of(admin_user)
    rows = exported(admin, "/runs/")
    assert {r["id"] for r in rows} == {str(world["run"]), str(world["pending_run"])}
    assert rows[0]["id"] == str(world["pending_run"])  # newest first
    done = next(r for r in rows if r["id"] == str(world["run"]))
    assert float(done["took"]) >= 0 and done["status"] == "succeeded"
    by_took = exported(admin, "/runs/", sort="-took")
    assert by_took[0]["id"] == str(world["run"]) and by_took[-1]["took"] == ""  # not started: last

    page = html(admin, "/runs/", q=SHARED_NODE, status="pending")
    assert f">#{world['pending_run']}<" in page and f">#{world['run']}<" not in page
    link = sort_link(page, "took")
    assert "status=pending" in link and f"q={SHARED_NODE}" in link
    assert [r["id"] for r in exported(admin, "/runs/", q=SHARED_NODE)] == [str(world["pending_run"])]


def test_jobs_a_user_sees_and_exports_only_their_own_an_admin_everyone(world, admin_user, alice, bob):
    from workspaces import jobs as ws_jobs
    from workspaces.models import WorkspaceRequest

    bobs = WorkspaceRequest.objects.get(name__startswith="team-bravo")
    ws_jobs.create_job(bob, bobs, node=EXCLUSIVE_NODE, image="bob/image:1", command="true", gpu=1)
    mine = exported(client_of(alice), "/workspaces/jobs/")
    assert len(mine) == 2 and "owner" not in mine[0] and {r["workspace"] for r in mine} == {"team-alpha"}
    everyone = exported(client_of(admin_user), "/workspaces/jobs/", sort="owner")
    assert [r["owner"] for r in everyone] == ["alice", "alice", "bob"]

    page = html(client_of(alice), "/workspaces/jobs/", q="busybox")
    assert "busybox" in page and "nvcr.io/nvidia/pytorch" not in page
    assert "bob/image" not in html(client_of(alice), "/workspaces/jobs/", q="bob")
    assert "No Job matches this search." in html(client_of(alice), "/workspaces/jobs/", q="bob")
    assert "q=busybox" in sort_link(page, "gpu")


def test_the_approval_queues_sort_search_and_export(world, admin_user, alice):
    from workspaces import approvals as ws_approvals

    ws_approvals.create_request(alice, name="team-echo", gpu=4, cpu=2, memory_gib=8, storage_gib=20)
    admin = client_of(admin_user)
    rows = exported(admin, "/workspaces/approvals/", sort="-gpu")
    assert [r["name"] for r in rows] == ["team-echo", "team-charlie"]
    page = html(admin, "/workspaces/approvals/", q="echo")
    assert 'data-testid="request-team-echo"' in page and 'data-testid="request-team-charlie"' not in page
    assert "q=echo" in sort_link(page, "gpu")  # the cards' sort links keep the search
    assert [r["name"] for r in exported(admin, "/workspaces/approvals/", q="echo")] == ["team-echo"]

    jobs = exported(admin, "/workspaces/approvals/jobs/")
    assert [r["job"] for r in jobs] == [f"brick-job-{world['waiting_job']}"] and "decide" not in jobs[0]
    assert jobs[0]["command"] == "sleep 60" and jobs[0]["requester"] == "alice"
    assert "No Job matches this search." in html(admin, "/workspaces/approvals/jobs/", q="no-such-image")


def test_health_findings_sort_search_and_export(load_scenario, admin_user):
    load_scenario("demo")
    admin = client_of(admin_user)
    rows = exported(admin, "/health/")
    ranks = {"bad": 0, "warn": 1, "info": 2}
    assert len(rows) > 2 and [ranks[r["severity"]] for r in rows] == sorted(ranks[r["severity"]] for r in rows)
    subject = rows[-1]["where"]
    found = exported(admin, "/health/", q=subject)
    assert found and all(subject in (r["where"] + r["problem"]) for r in found) and len(found) < len(rows)
    by_where = exported(admin, "/health/", sort="-where")
    assert [r["where"].casefold() for r in by_where] == sorted((r["where"].casefold() for r in rows), reverse=True)
    page = html(admin, "/health/", q=subject)
    assert f"q={subject}" in sort_link(page, "where")


def test_manifest_versions_sort_search_and_export(twin, admin_user):
    base = manifest_mod.current()
    manifest_mod.save_version(base.content + "\n# one\n", actor=admin_user, note="raise the replicas")
    manifest_mod.save_version(base.content + "\n# two\n", actor=admin_user, note="=cmd|' /C calc'!A0")
    admin = client_of(admin_user)
    rows = exported(admin, "/manifest/")
    assert [int(r["version"]) for r in rows] == sorted(
        ManifestVersion.objects.values_list("version", flat=True), reverse=True
    )
    assert rows[0]["note"] == "'=cmd|' /C calc'!A0"  # never a formula
    page = html(admin, "/manifest/", q="replicas")
    assert "raise the replicas" in page and "calc" not in page
    assert [r["note"] for r in exported(admin, "/manifest/", q="replicas")] == ["raise the replicas"]
    assert "q=replicas" in sort_link(page, "version")


def test_csv_exports_are_for_who_may_see_the_list(world, alice):
    user = client_of(alice)
    for path in (
        "/nodes/",
        "/runs/",
        "/health/",
        "/manifest/",
        "/workspaces/approvals/",
        "/workspaces/approvals/jobs/",
    ):
        assert user.get(path, {"format": "csv"}).status_code == 403, path
