"""Workspace request form and "My workspaces", with the
per-resource Total / Used / Available table beside the form."""

import pytest
from django.contrib.auth.models import Group

from workspaces.models import ResourceLimit, WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db

URL = "/workspaces/new/"


def post(client, **kw):
    data = {"name": "team-a", "gpu": 1, "cpu": 2, "memory_gib": 8, "storage_gib": 20}
    data.update(kw)
    return client.post(URL, data)


def test_form_shows_defaults_as_max_and_the_availability_table(twin, alice_client, settings):
    page = text(alice_client.get(URL).content)
    lim = settings.BRICK_DEFAULT_LIMITS
    assert f"(Max {lim['gpu']} GPU)" in page
    assert f"(Max {lim['cpu']} CPU)" in page
    assert f"(Max {lim['memory_gib']} GiB)" in page
    assert f"(Max {lim['storage_gib']} GiB)" in page
    # Beside the form: per resource Total / Used (allocated) / Available.
    assert "nvidia.com/gpu Exclusive 1 1 0" in page
    assert "nvidia.com/gpu.shared Shared (time-slicing) 2 1 1" in page
    assert "approval may be delayed" in page


def test_user_limit_wins_over_group_and_group_over_defaults(twin, alice, alice_client):
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    ResourceLimit.objects.create(group=team, gpu=0, cpu=2, memory_gib=8, storage_gib=20)
    page = text(alice_client.get(URL).content)
    assert "(Max 0 GPU)" in page and "(Max 2 CPU)" in page and "(Max 8 GiB)" in page and "(Max 20 GiB)" in page
    r = post(alice_client, gpu=1)
    assert r.status_code == 400 and "At most 0." in text(r.content)
    ResourceLimit.objects.create(user=alice, gpu=3, cpu=8, memory_gib=32, storage_gib=100)
    assert "(Max 3 GPU)" in text(alice_client.get(URL).content)
    assert post(alice_client, gpu=3).status_code == 302


def test_request_is_pending_and_listed_for_its_owner(twin, alice, alice_client):
    r = post(alice_client)
    ws = WorkspaceRequest.objects.get(name="team-a")
    assert r.status_code == 302 and r.url == f"/workspaces/{ws.pk}/"
    assert (ws.requester, ws.status, ws.gpu, ws.cpu, ws.memory_gib, ws.storage_gib) == (alice, "pending", 1, 2, 8, 20)
    page = text(alice_client.get("/workspaces/").content)
    assert "team-a Pending 1 2 8 GiB 20 GiB Assigned on approval" in page
    # Nothing exists in the cluster until an admin approves.
    assert "team-a" not in {n["metadata"]["name"] for n in twin.list_namespaces()}


def test_name_taken_by_a_request_or_by_a_namespace(twin, alice_client, bob, client):
    assert post(alice_client).status_code == 302
    r = post(alice_client)
    assert r.status_code == 400
    assert "already exists or is waiting for approval" in text(r.content)
    r = post(alice_client, name="ws-exclusive")  # a namespace of the seed-example scenario
    assert r.status_code == 400 and "already exists in the cluster" in text(r.content)
    assert WorkspaceRequest.objects.count() == 1


def test_a_rejection_frees_the_name(twin, alice, alice_client, admin_user, make_request):
    from workspaces import approvals

    req = make_request(alice, "team-a")
    approvals.reject(req.pk, admin_user, "too big")
    assert post(alice_client).status_code == 302
    assert WorkspaceRequest.objects.filter(name="team-a").count() == 2


@pytest.mark.parametrize(
    "name,message",
    [
        ("Team-A", "lowercase"),
        ("-team", "lowercase"),
        ("team-", "lowercase"),
        ("team_a", "lowercase"),
        ("team.a", "lowercase"),
        ("a" * 64, "At most 63"),
        ("", "required"),
        ("kube-system", "reserved"),
    ],
)
def test_invalid_namespace_names(twin, alice_client, name, message):
    r = post(alice_client, name=name)
    assert r.status_code == 400
    assert message in text(r.content)
    assert not WorkspaceRequest.objects.exists()


def test_63_character_name_is_fine(twin, alice_client):
    assert post(alice_client, name="a" * 63).status_code == 302


@pytest.mark.parametrize("field", ["gpu", "cpu", "memory_gib", "storage_gib"])
def test_amounts_over_max_or_negative(twin, alice_client, field, settings):
    over = settings.BRICK_DEFAULT_LIMITS[field] + 1
    r = post(alice_client, **{field: over})
    assert r.status_code == 400 and f"At most {over - 1}." in text(r.content)
    r = post(alice_client, **{field: -1})
    assert r.status_code == 400 and "Cannot be negative." in text(r.content)
    assert not WorkspaceRequest.objects.exists()


def test_users_see_only_their_own_workspaces(twin, alice, bob, client, make_request):
    make_request(alice, "alice-ws")
    mine = make_request(bob, "bob-ws")
    client.force_login(bob)
    page = text(client.get("/workspaces/").content)
    assert "bob-ws" in page and "alice-ws" not in page
    assert client.get(f"/workspaces/{mine.pk}/").status_code == 200


def test_cluster_unreachable_request_form_says_so_and_creates_nothing(twin, alice_client, monkeypatch):
    from brickadmin.cluster import ClusterUnreachable
    from brickadmin.cluster.twin import TwinGateway

    def down(self, *a, **kw):
        raise ClusterUnreachable("connection refused")

    monkeypatch.setattr(TwinGateway, "list_namespaces", down)
    r = post(alice_client)
    assert r.status_code == 400
    assert "The cluster cannot be read to check this name" in text(r.content)
    assert not WorkspaceRequest.objects.exists()


def test_cluster_unreachable_approval_changes_nothing(twin, alice, admin_user, make_request, monkeypatch):
    from brickadmin.cluster import ClusterUnreachable
    from workspaces import approvals

    req = make_request(alice, "team-a")

    def down(*a, **kw):
        raise ClusterUnreachable("connection refused")

    monkeypatch.setattr("gpus.view.live.take_snapshot", down)  # the decision's cluster read fails
    with pytest.raises(approvals.WorkspaceError, match="cannot be read"):
        approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    req.refresh_from_db()
    assert req.status == "pending"
    assert "team-a" not in {n["metadata"]["name"] for n in twin.list_namespaces()}
