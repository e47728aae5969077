"""What a Workspace's pods hold, as kube-scheduler counts it (a pod bound to a node and not
finished holds its GPUs, one still pulling its image too), and a Workspace whose GPU pods the
scheduler cannot place: waiting for GPUs, never offered for reclaiming as idle. On the twin,
through the pages."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from gpus.models import ViewWorkspace
from workspaces import approvals

from .conftest import text
from .test_cluster_workspaces import rows
from .test_pod_waits import record

pytestmark = pytest.mark.django_db

UNSCHEDULABLE = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 Preemption is not helpful for scheduling."
)


def unplaced_pod(namespace, name, resource="nvidia.com/gpu", count=8):
    """A GPU pod the scheduler could not place: Pending, no node, PodScheduled False."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-12-01T00:00:00Z"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "train:1",
                    "resources": {"limits": {resource: str(count)}, "requests": {resource: str(count)}},
                }
            ]
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": UNSCHEDULABLE}
            ],
        },
    }


def test_a_pod_pulling_its_image_is_requested_by_pods_as_the_scheduler_counts_it(load_scenario, alice, login):
    load_scenario("waiting")
    ws = record(alice, "ws-train")
    html = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    # eval-0 runs with 1 GPU; notebook is bound to gpu-a30-02 and pulls its image: it holds its GPU too
    assert 'data-testid="ws-requested">2<' in html
    assert 'data-testid="ws-physical">1<' in html  # only the Running pod is in use on the GPU map
    # the same pods fill the node the scheduler sees: 2 of gpu-a30-02's 2 GPUs are taken
    pods = re.search(r'data-testid="ws-pods".*?</table>', html, re.S).group(0)
    assert re.search(r"notebook</td><td>Pending</td>", pods)
    # train-4gpu still waits for a node: the Workspace is not idle, and says why its pods wait
    assert "1 GPU pod the scheduler cannot place yet: not idle." in text(html)
    assert 'href="#why-pods-wait"' in html and 'id="why-pods-wait"' in html


def test_a_scheduled_pod_still_starting_is_counted_in_the_list_and_on_the_node(load_scenario, admin_client):
    load_scenario("waiting")
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    got = {r[0]: r for r in rows(html)}
    assert got["ws-train"][5] == "2"  # Requested by pods: eval-0 (Running) and notebook (pulling its image)
    # the node's own count agrees: its 2 GPUs are requested by eval-0 and notebook (old-eval was refused)
    node = admin_client.get(reverse("node_detail", args=["gpu-a30-02"])).content.decode()
    assert re.search(
        r'<td><code>nvidia.com/gpu</code></td><td class="num">2</td><td class="num">2</td><td class="num">2</td>', node
    )
    line = ViewWorkspace.objects.get(namespace="ws-train")
    assert (line.requested, line.waiting) == (2, 1)


def test_a_workspace_whose_only_gpu_pods_cannot_be_scheduled_is_waiting_not_idle(load_scenario, admin_client):
    load_scenario("waiting")
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    got = {r[0]: r for r in rows(html)}
    # ws-mig's two pods wait: one for a profile only a cordoned node has, one for a profile no node has
    assert got["ws-mig"][5] == "0" and got["ws-mig"][-1] == "waiting for GPUs"
    link = reverse("cluster_workspace", args=["ws-mig"]) + "#why-pods-wait"
    assert f'href="{link}"' in html
    detail = admin_client.get(link.split("#")[0]).content.decode()
    said = text(re.search(r'data-testid="ws-waiting">(.*?)</dd>', detail, re.S).group(1))
    assert said == "2 GPU pods the scheduler cannot place yet: not idle. Why pods wait"
    assert 'id="why-pods-wait"' in detail
    assert ViewWorkspace.objects.get(namespace="ws-mig").idle_since is None


def test_an_idle_workspace_whose_team_then_waits_for_gpus_is_no_longer_offered_for_reclaiming(
    twin, admin_client, alice, admin_user
):
    approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu",
        overcommit=True,
    )
    admin_client.get(reverse("cluster_workspaces"))  # published: idle since now
    ViewWorkspace.objects.filter(namespace="team-a").update(idle_since=timezone.now() - timedelta(hours=30))
    health = text(admin_client.get(reverse("health")).content.decode())
    assert "Workspace team-a (owner alice) holds nvidia.com/gpu 1 idle since" in health
    assert "Lower or reclaim the quota of team-a" in health

    twin.apply(unplaced_pod("team-a", "train-8gpu"))  # the team asks for more GPUs than any node has free
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    got = {r[0]: r for r in rows(html)}
    assert got["team-a"][-1] == "waiting for GPUs"
    health = text(admin_client.get(reverse("health")).content.decode())
    assert "team-a (owner alice) holds nvidia.com/gpu 1 idle" not in health
    assert "Lower or reclaim the quota of team-a" not in health
    assert ViewWorkspace.objects.get(namespace="team-a").idle_since is None
    dashboard = admin_client.get(reverse("dashboard")).content.decode()
    assert 'data-testid="idle-nvidia.com/gpu">0<' in dashboard


def test_a_korean_reader_sees_the_workspace_waiting_for_gpus(load_scenario, admin_user, login):
    load_scenario("waiting")
    client = login(admin_user)
    client.cookies["django_language"] = "ko"
    html = client.get(reverse("cluster_workspaces")).content.decode()
    assert {r[0]: r for r in rows(html)}["ws-mig"][-1] == "GPU 대기 중"
    detail = text(client.get(reverse("cluster_workspace", args=["ws-mig"])).content.decode())
    assert "스케줄러가 아직 배치하지 못한 GPU Pod 2개: 유휴가 아닙니다." in detail
