"""A Workspace's pods against its quota, on its owner's page and the admin's detail: an approval
caps only the GPU resource it approved (workspaces/approvals.py quota_hard), so a pod of the
namespace asking for another GPU resource is neither counted nor limited there, and the
page says so on that pod's row and beside "Requested by pods"; a pod asking for the approved
resource gets no such note. In English and Korean."""

import re
from html import unescape

import pytest
from django.urls import reverse

from brickadmin.cluster.scenarios import gpu_pod
from workspaces import approvals, jobs
from workspaces.models import USER_PRIORITY_CLASS

from .conftest import text

pytestmark = pytest.mark.django_db

SHARED_NODE, EXCLUSIVE_NODE = "dev-a1-ws02", "dev-a1-ws04"
NOT_CAPPED = (
    "Not counted against this Workspace's quota: this pod asks for nvidia.com/gpu, and the quota caps only "
    "nvidia.com/gpu.shared. Other GPU resources are not capped in this namespace: neither counted nor limited."
)
NOT_CAPPED_KO = "이 Workspace의 쿼터에 포함되지 않습니다"
JOB = "It is a Job's pod: Jobs run at the scavenging priority, outside Workspace quotas."


def user_pod(name, node, resource):
    pod = gpu_pod("team-a", name, node, resource, 1)
    pod["spec"]["priorityClassName"] = USER_PRIORITY_CLASS
    return pod


@pytest.fixture
def shared_workspace(twin, alice, admin_user):
    """team-a approved for one time-sliced GPU; one pod asks for it, another for a whole GPU."""
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    twin.apply(user_pod("notebook", SHARED_NODE, "nvidia.com/gpu.shared"))
    twin.apply(user_pod("trainer", EXCLUSIVE_NODE, "nvidia.com/gpu"))
    return ws


def notes(html) -> dict[str, str]:
    """pod name -> the quota note under the pods table, each such pod's row marked."""
    got = {
        pod: text(note)
        for pod, note in re.findall(
            r'data-testid="quota-note" data-pod="([^"]+)"><strong>[^<]+</strong>: <span>(.*?)</span></li>', html, re.S
        )
    }
    assert html.count('data-testid="quota-tag"') == len(got)
    return got


def page_in(client, url, language="en"):
    client.cookies["django_language"] = language
    return unescape(client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode())


def test_the_owner_reads_which_pod_is_outside_the_quota_and_why(shared_workspace, alice, login):
    html = page_in(login(alice), reverse("workspace_detail", args=[shared_workspace.pk]))
    assert notes(html) == {"trainer": NOT_CAPPED}  # the matching pod, notebook, has none
    assert re.search(r'data-testid="ws-requested">2<', html)
    beside = text(re.search(r'data-testid="ws-requested-uncounted">(.*?)</span>', html, re.S).group(1))
    assert beside == "1 of these is not counted against this Workspace's quota (see the pods marked below)."
    used = text(re.search(r'data-testid="quota-used-uncounted">(.*?)</p>', html, re.S).group(1))
    assert used.startswith("Used leaves out 1 GPU that this namespace's pods ask for")


def test_the_admins_detail_says_so_of_a_job_asking_for_a_whole_gpu(twin, alice, admin_user, admin_client):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    twin.apply(user_pod("notebook", SHARED_NODE, "nvidia.com/gpu.shared"))
    job = jobs.create_job(alice, ws, node=EXCLUSIVE_NODE, image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    html = page_in(admin_client, reverse("cluster_workspace", args=["team-a"]))
    ((pod, note),) = notes(html).items()  # the notebook has none
    assert pod.startswith(job.k8s_name + "-") and note == f"{NOT_CAPPED} {JOB}"
    assert "1 of these is not counted" in text(html)


def test_a_workspace_whose_pods_all_ask_for_its_resource_has_no_note(twin, alice, admin_user, login):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=2, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    twin.apply(user_pod("notebook", SHARED_NODE, "nvidia.com/gpu.shared"))
    html = page_in(login(alice), reverse("workspace_detail", args=[ws.pk]))
    assert "notebook" in text(re.search(r'data-testid="ws-pods".*?</table>', html, re.S).group(0))
    assert notes(html) == {}
    assert "ws-requested-uncounted" not in html and "quota-used-uncounted" not in html


def test_in_korean_the_note_is_korean_and_the_english_is_gone(shared_workspace, alice, login):
    html = page_in(login(alice), reverse("workspace_detail", args=[shared_workspace.pk]), "ko")
    got = notes(html)
    assert set(got) == {"trainer"}
    assert NOT_CAPPED_KO in got["trainer"] and "nvidia.com/gpu.shared" in got["trainer"]
    assert "Not counted" not in html and "of these" not in html and "Used leaves out" not in html
