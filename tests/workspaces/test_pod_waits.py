"""Why a GPU pod waits, on the Workspace pages: the twin loads the ``waiting`` scenario (one
pod for each cause); the owner's page and the admin's detail name the cause in words, with
the figures and the links to what each can do, from the view alone."""

import re
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from workspaces.models import WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(load_scenario):
    return load_scenario("waiting")


def record(user, namespace, resource="nvidia.com/gpu", gpu=4):
    now = timezone.now()
    return WorkspaceRequest.objects.create(
        name=namespace,
        requester=user,
        requester_name=user.get_username(),
        gpu=gpu,
        cpu=8,
        memory_gib=32,
        storage_gib=20,
        status=WorkspaceRequest.Status.APPROVED,
        decided_at=now,
        decided_by_name="root",
        gpu_resource=resource,
        gpu_type="exclusive",
    )


def causes(html: str) -> dict[str, tuple[str, str]]:
    """pod (or the resource of a quota) -> (cause kind, the item's visible text)."""
    block = re.search(r'data-testid="pod-waits".*?</ul>', html, re.S)
    assert block, "no causes shown"
    out = {}
    for attrs, body in re.findall(r'<li class="banner banner-warn" ([^>]*)>(.*?)</li>', block.group(0), re.S):
        kind = re.search(r'data-cause="([^"]+)"', attrs).group(1)
        pod = re.search(r'data-pod="([^"]+)"', attrs)
        out[pod.group(1) if pod else kind] = (kind, unescape(text(body)))
    return out


def links(html: str, pod: str) -> list[str]:
    block = re.search(rf'data-pod="{pod}">(.*?)</li>', html, re.S).group(1)
    return re.findall(r'href="([^"]+)"', block)


def test_the_owner_sees_why_each_pod_waits_with_the_figures_and_what_to_do(waiting, alice, login):
    ws = record(alice, "ws-train")
    page = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    got = causes(page)
    assert got["train-4gpu"][0] == "taint"
    assert (
        "Pod train-4gpu waits for 4 nvidia.com/gpu: the free ones are on nodes with a taint it does not "
        "tolerate (brick.cloud/dedicated=llm:NoSchedule); 14 exist, 0 are free on other nodes (at most 0 on "
        "one)."
    ) in got["train-4gpu"][1]
    assert "The scheduler says: 0/5 nodes are available: 1 node(s) had untolerated taint" in got["train-4gpu"][1]
    filled = reverse("workspace_request") + "?from=ws-train&amp;why=type&amp;gpu=4"
    assert links(page, "train-4gpu") == [reverse("availability"), filled]
    assert got["notebook"][0] == "container" and "ImagePullBackOff" in got["notebook"][1]
    assert got["old-eval"][0] == "admission"
    assert (
        "was refused by the kubelet: Allocate failed due to requested number of devices unavailable"
        in got["old-eval"][1]
    )
    assert "The pod will not start by itself: an admin has been told." in got["old-eval"][1]
    assert "eval-0" not in got  # Running: nothing to say


def test_a_quota_held_whole_names_its_pods_and_links_to_request_more(waiting, alice, login):
    ws = record(alice, "ws-full")
    page = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    _kind, words = causes(page)["quota-full"]
    assert (
        "The Workspace's quota of nvidia.com/gpu is used up: 4 of 4, held by train-a (2), train-b (2). A new pod "
        "asking for it is refused until one of them ends."
    ) in words
    item = re.search(r'data-cause="quota-full".*?</li>', page, re.S).group(0)
    assert re.findall(r'href="([^"]+)"', item) == [reverse("workspace_request") + "?from=ws-full&amp;why=more"]


def test_no_free_gpu_two_shared_gpus_a_cordoned_only_profile_and_a_profile_no_node_has(
    waiting, bob, login, django_user_model
):
    ws = record(bob, "ws-shared", resource="nvidia.com/gpu.shared")
    got = causes(login(bob).get(reverse("workspace_detail", args=[ws.pk])).content.decode())
    assert got["nb-wait"] == ("no-free", got["nb-wait"][1])
    assert (
        "Pod nb-wait waits for 1 nvidia.com/gpu.shared: 8 exist, 0 are free, at most 0 on one node" in got["nb-wait"][1]
    )
    assert got["two-shared"][0] == "shared-many"
    assert "Pod two-shared asked for 2 shared GPUs and the kubelet refused it" in got["two-shared"][1]
    dave = django_user_model.objects.create_user("dave", password="pw-dave-123")
    ws = record(dave, "ws-mig", resource="nvidia.com/mig-3g.40gb", gpu=2)
    got = causes(login(dave).get(reverse("workspace_detail", args=[ws.pk])).content.decode())
    assert got["infer-0"][0] == "cordoned-only"
    assert "only cordoned nodes (gpu-a100-01) have room for it" in got["infer-0"][1]
    assert got["infer-small"][0] == "no-such-type"
    assert "Pod infer-small waits for nvidia.com/mig-1g.10gb, which no node offers now." in got["infer-small"][1]


def test_the_admin_detail_links_each_cause_to_its_fix(waiting, admin_client):
    page = admin_client.get(reverse("cluster_workspace", args=["ws-train"])).content.decode()
    got = causes(page)
    assert "Remove the taint if the node is no longer reserved" in got["train-4gpu"][1]
    assert links(page, "train-4gpu") == [reverse("node_detail", args=["gpu-h100-01"])]
    fix = links(page, "old-eval")
    assert len(fix) == 1 and fix[0].startswith(reverse("fix_plan", args=["F"])) and "pod_name=old-eval" in fix[0]
    mig = causes(admin_client.get(reverse("cluster_workspace", args=["ws-mig"])).content.decode())
    assert "Uncordon the node when its maintenance is over" in mig["infer-0"][1]
    full = admin_client.get(reverse("cluster_workspace", args=["ws-full"])).content.decode()
    assert "Raise the quota if the owner needs more" in causes(full)["quota-full"][1]


def test_a_user_sees_only_their_own_workspace(waiting, alice, bob, login):
    ws = record(alice, "ws-train")
    assert login(bob).get(reverse("workspace_detail", args=[ws.pk])).status_code == 404
    assert login(alice).get(reverse("cluster_workspace", args=["ws-train"])).status_code in (302, 403)


def test_the_causes_are_in_korean_for_a_korean_reader(waiting, alice, login):
    ws = record(alice, "ws-full")
    client = login(alice)
    client.cookies["django_language"] = "ko"
    page = client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    _kind, words = causes(page)["quota-full"]
    assert (
        "Workspace의 nvidia.com/gpu 쿼터가 모두 사용 중입니다: 4 중 4, 사용 중인 Pod: train-a (2), train-b (2)."
        in words
    )


def test_the_page_reads_the_view_in_a_constant_number_of_queries(waiting, alice, login):
    ws = record(alice, "ws-train")
    client = login(alice)
    url = reverse("workspace_detail", args=[ws.pk])
    client.get(url)  # the twin's view brought up to date
    with CaptureQueriesContext(connection) as one:
        client.get(url)
    ws2 = record(alice, "ws-full")
    client.get(reverse("workspace_detail", args=[ws2.pk]))
    with CaptureQueriesContext(connection) as other:
        client.get(reverse("workspace_detail", args=[ws2.pk]))
    # ws-train has five GPU pods and a kubelet refusal to explain, ws-full two pods: the same reads
    # (the refusal's finding is one more query)
    assert len(one) <= len(other) + 1


def test_fifty_waiting_pods_cost_the_page_no_more_queries_than_five(waiting, alice, login):
    from brickadmin.cluster.scenarios import gpu_pod

    ws = record(alice, "ws-train")
    client = login(alice)
    url = reverse("workspace_detail", args=[ws.pk])
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for i in range(46):  # with its own four: 50 GPU pods
        pod = gpu_pod("ws-train", f"sweep-{i}", "", "nvidia.com/gpu", 1 + i % 4, phase="Pending")
        del pod["spec"]["nodeName"]
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
            }
        ]
        waiting._create(pod)
    client.get(url)  # the twin's view brought up to date
    with CaptureQueriesContext(connection) as many:
        page = client.get(url).content.decode()
    assert len(causes(page)) == 50  # 49 pods waiting or refused, and the quota
    assert len(many) == len(few)
