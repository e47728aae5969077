"""Quotas and capacities as the API server writes them back: a quota or a capacity of 1000
is stored as "1k", and the pages, the findings and adoption read 1000, never 0."""

import re

import pytest
from django.urls import reverse

from brickadmin.cluster import scenarios
from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers.ledger import compute
from workspaces.models import WorkspaceRequest

from .conftest import objects, text

pytestmark = pytest.mark.django_db

SHARED = "nvidia.com/gpu.shared"


def rows(html):
    table = re.search(r'data-testid="cluster-workspaces".*?</table>', html, re.DOTALL).group(0)
    return {
        cells[0]: cells
        for cells in (
            [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.DOTALL)]
            for r in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
            if "<td" in r
        )
    }


def write_quota(gw, gpus):
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "workspace-quota", "namespace": "ws-shared"},
            "spec": {"hard": {"requests." + SHARED: gpus, "requests.cpu": "2", "requests.memory": "8Gi"}},
        }
    )


@pytest.fixture
def thousand_shared(twin):
    """ws-shared's quota raised to 1000 shared GPUs, as the API server hands it back."""
    write_quota(twin, "1k")
    return twin


def test_the_twin_stores_a_quota_of_a_thousand_as_the_api_server_does(twin):
    write_quota(twin, 1000)
    hard = objects(twin, "ResourceQuota", "ws-shared")["workspace-quota"]["spec"]["hard"]
    assert hard == {"requests." + SHARED: "1k", "requests.cpu": "2", "requests.memory": "8Gi"}


def test_a_quota_of_1k_is_an_allocation_of_1000_on_the_pages(thousand_shared, admin_client):
    row = rows(admin_client.get(reverse("cluster_workspaces")).content.decode())["ws-shared"]
    assert row[3:5] == [f"{SHARED} Shared (time-slicing)", "1000"]
    led = compute(take_snapshot(thousand_shared)).resource(SHARED)
    assert (led.logical, led.allocated, led.available) == (2, 1000, -998)
    health = text(admin_client.get(reverse("health")).content)
    assert f"Namespace ws-shared holds GPU quota {SHARED} 1000 (owner label: bob)" in health


def test_adopting_a_namespace_with_a_quota_of_1k_records_1000_gpus(thousand_shared, admin_client, bob):
    admin_client.get(reverse("cluster_workspaces"))  # the admin finds it in the list, then adopts it
    resp = admin_client.post(reverse("workspace_adopt", args=["ws-shared"]), {"owner": bob.pk})
    assert resp.status_code == 302, text(resp.content)
    req = WorkspaceRequest.objects.get(name="ws-shared")
    assert (req.status, req.gpu, req.gpu_resource, req.cpu, req.memory_gib) == ("approved", 1000, SHARED, 2, 8)


def test_a_node_with_a_capacity_of_1k_counts_1000_logical_gpus(load_scenario, admin_client):
    objs, hardware, configs = scenarios.read("seed-example")
    big = scenarios.node(
        "big-1",
        model="NVIDIA A30",
        gpu_count=1000,
        extra_status={"capacity": {"nvidia.com/gpu": "1k"}, "allocatable": {"nvidia.com/gpu": "1k"}},
    )
    gw = load_scenario("seed-example")
    gw.load([*objs, big], hardware, configs)
    node = compute(take_snapshot(gw)).node("big-1")
    assert (node.logical, node.physical) == (1000, 1000)
    page = text(admin_client.get(reverse("node_detail", args=["big-1"])).content)
    assert "nvidia.com/gpu 1000 1000 0" in page
