"""The Workspace pages (the owner's and the admin's detail) read a constant number of SQL
queries whatever the number of GPU pods, pending and running: counted at the cursor
(a request's start empties Django's query log, so CaptureQueriesContext counts nothing)."""

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from brickadmin.cluster.scenarios import gpu_pod
from workspaces.models import WorkspaceRequest

pytestmark = pytest.mark.django_db


def record(user, namespace):
    return WorkspaceRequest.objects.create(
        name=namespace,
        requester=user,
        requester_name=user.get_username(),
        gpu=4,
        cpu=8,
        memory_gib=32,
        storage_gib=20,
        status=WorkspaceRequest.Status.APPROVED,
        decided_at=timezone.now(),
        decided_by_name="root",
        gpu_resource="nvidia.com/gpu",
        gpu_type="exclusive",
    )


def queries_of(client, url) -> list[str]:
    client.get(url)  # the twin's view brought up to date
    seen: list[str] = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        resp = client.get(url)
    assert resp.status_code == 200
    return seen


def add_pods(gateway, namespace, first, last):
    """Pods first..last-1 of the Workspace: every other one Pending (unschedulable), the
    others Running on the H100 node."""
    for i in range(first, last):
        if i % 2:
            pod = gpu_pod(namespace, f"sweep-{i}", "", "nvidia.com/gpu", 1, phase="Pending")
            del pod["spec"]["nodeName"]
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
                }
            ]
        else:
            pod = gpu_pod(namespace, f"sweep-{i}", "gpu-h100-01", "nvidia.com/gpu", 1)
        gateway._create(pod)


@pytest.mark.parametrize("page", ["owner", "admin"])
def test_fifty_gpu_pods_pending_and_running_cost_the_page_the_queries_of_five(
    page, load_scenario, alice, admin_user, login
):
    gateway = load_scenario("waiting")
    ws = record(alice, "ws-full")
    if page == "owner":
        client, url = login(alice), reverse("workspace_detail", args=[ws.pk])
    else:
        client, url = login(admin_user), reverse("cluster_workspace", args=["ws-full"])
    add_pods(gateway, "ws-full", 2, 5)  # with its own two: five
    five = queries_of(client, url)
    add_pods(gateway, "ws-full", 5, 50)
    fifty = queries_of(client, url)
    html = client.get(url).content.decode()
    assert all(f"sweep-{i}" in html for i in range(2, 50))  # every pod, pending or running, on the page
    assert five, "no query counted"
    assert len(fifty) == len(five), "\n".join(sql for sql in fifty if sql not in five)
