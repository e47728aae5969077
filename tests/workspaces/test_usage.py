"""After approval: the Workspace page says how to use it (namespace, access, an example pod
with the GPU resource and count of its quota, the nodes that serve it); a user sees the
namespaces labelled as theirs; adoption proposes the owner from that label. The request form
starts at one GPU and says what the Workspace is for."""

import re

import pytest
import yaml
from django.urls import reverse

from brickadmin.cluster.vocabulary import GPU, GPU_SHARED
from workspaces.models import Decision, WorkspaceRequest
from workspaces.usage import PodPlan, example_pod, pod_plan

from .conftest import text

pytestmark = pytest.mark.django_db


# --- how many GPUs a pod asks for (pure) ---------------------------------------------


@pytest.mark.parametrize(
    ("resource", "quota", "largest_node", "expected"),
    [
        (GPU, 1, 1, PodPlan(GPU, 1, 1, 1)),
        (GPU, 4, 8, PodPlan(GPU, 4, 4, 1)),
        (GPU, 4, 2, PodPlan(GPU, 4, 2, 2, "node")),  # no node serves 4: two pods of 2
        (GPU, 5, 2, PodPlan(GPU, 5, 2, 3, "node")),
        (GPU, 3, 0, PodPlan(GPU, 3, 3, 1)),  # no serving node known: the quota in one pod
        (GPU_SHARED, 1, 4, PodPlan(GPU_SHARED, 1, 1, 1)),
        (GPU_SHARED, 3, 4, PodPlan(GPU_SHARED, 3, 1, 3, "shared")),  # failRequestsGreaterThanOne
        ("nvidia.com/mig-1g.5gb", 2, 7, PodPlan("nvidia.com/mig-1g.5gb", 2, 2, 1)),
        (GPU, 0, 1, PodPlan(GPU, 0, 0, 0)),
        ("", 2, 1, PodPlan("", 0, 0, 0)),
    ],
)
def test_pod_plan(resource, quota, largest_node, expected):
    assert pod_plan(resource, quota, largest_node) == expected


def test_example_pod_asks_for_the_resource_in_its_limits_in_the_namespace():
    pod = yaml.safe_load(example_pod("team-x", pod_plan(GPU_SHARED, 3, 2), "brick-user-priority"))
    assert pod["metadata"]["namespace"] == "team-x"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"][GPU_SHARED] == 1
    assert pod["spec"]["priorityClassName"] == "brick-user-priority"
    cpu_only = yaml.safe_load(example_pod("team-y", pod_plan("", 0, 0), "brick-user-priority"))
    assert not any(k.startswith("nvidia.com/") for k in cpu_only["spec"]["containers"][0]["resources"]["limits"])


# --- the Workspace page ----------------------------------------------------------------


def how_to(html: str) -> str:
    return re.search(r'data-testid="how-to-use".*?</section>', html, re.S).group(0)


def pod_on_page(html: str) -> dict:
    from html import unescape

    return yaml.safe_load(unescape(re.search(r'<pre[^>]*id="pod-example"[^>]*>(.*?)</pre>', html, re.S).group(1)))


def test_a_shared_workspace_page_gives_a_pod_of_one_shared_gpu_and_its_nodes(approved, alice, alice_client):
    ws = approved(alice, "team-s", resource=GPU_SHARED, gpu=2)
    html = alice_client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    section = how_to(html)
    assert "team-s" in text(section)
    pod = pod_on_page(html)
    assert pod["metadata"]["namespace"] == "team-s"
    assert pod["spec"]["containers"][0]["resources"]["limits"][GPU_SHARED] == 1  # one per pod, two pods
    assert "run up to 2 pods" in text(section)
    assert 'data-testid="serving-dev-a1-ws02"' in section  # the time-slicing node
    assert 'data-testid="serving-dev-a1-ws04"' not in section
    assert "kubeconfig" in text(section) and "SSO" in text(section)  # the default access text
    assert 'data-copy="pod-example"' in section


def test_an_exclusive_workspace_page_gives_its_whole_gpu_and_the_exclusive_node(approved, alice, alice_client):
    ws = approved(alice, "team-e", resource=GPU, gpu=1)
    html = alice_client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    assert pod_on_page(html)["spec"]["containers"][0]["resources"]["limits"][GPU] == 1
    section = how_to(html)
    assert 'data-testid="serving-dev-a1-ws04"' in section and 'data-testid="serving-dev-a1-ws02"' not in section


def test_the_access_text_is_the_admins_setting(approved, alice, login, admin_user):
    ws = approved(alice, "team-t")
    admin = login(admin_user)
    r = admin.post(
        reverse("workspace_settings"),
        {"approval_required": "on", "access_text": "Download your kubeconfig from https://portal.example/k"},
    )
    assert r.status_code == 302
    assert Decision.objects.filter(subject="workspace_access_text").exists()
    page = text(login(alice).get(reverse("workspace_detail", args=[ws.pk])).content)
    assert "Download your kubeconfig from https://portal.example/k" in page
    assert "single sign-on" not in page


def test_a_pending_workspace_page_has_no_usage_yet(make_request, alice, alice_client, twin):
    req = make_request(alice, "team-p")
    html = alice_client.get(reverse("workspace_detail", args=[req.pk])).content.decode()
    assert 'data-testid="how-to-use"' not in html


def test_another_user_never_sees_the_usage_of_a_workspace(approved, alice, bob, login):
    ws = approved(alice, "team-secret")
    assert login(bob).get(reverse("workspace_detail", args=[ws.pk])).status_code == 404


# --- what a user holds; adoption ------------------------------------------------------


def test_a_user_sees_the_namespaces_labelled_as_theirs_without_a_request(twin, alice, bob, login, admin_user):
    mine = login(alice).get(reverse("workspace_list")).content.decode()
    assert 'data-testid="held-ws-exclusive"' in mine  # the seed's namespace labelled owner=alice
    assert 'data-testid="held-ws-shared"' not in mine  # bob's
    assert 'data-testid="held-ws-exclusive"' not in login(bob).get(reverse("workspace_list")).content.decode()
    # once adopted it is one of her Workspaces, no longer a namespace without a request
    login(admin_user).post(reverse("workspace_adopt", args=["ws-exclusive"]), {"owner": alice.pk})
    after = login(alice).get(reverse("workspace_list")).content.decode()
    assert 'data-testid="held-ws-exclusive"' not in after and 'data-testid="ws-ws-exclusive"' in after


def test_adoption_proposes_the_owner_its_label_names(twin, alice, bob, admin_client):
    html = admin_client.get(reverse("workspace_adopt", args=["ws-shared"])).content.decode()
    assert re.search(rf'<option value="{bob.pk}" selected>', html)
    assert "brick.cloud/owner=bob" in text(html)


def test_adoption_proposes_nobody_when_the_label_names_no_user(twin, alice, admin_client):
    html = admin_client.get(reverse("workspace_adopt", args=["ws-shared"])).content.decode()  # no user bob here
    assert re.search(r"<option value=\"\" selected>", html)  # the empty choice: the admin picks
    assert "names no user here" in text(html)


# --- the request form ------------------------------------------------------------------


def test_the_request_form_starts_at_one_gpu(alice_client, twin):
    html = alice_client.get(reverse("workspace_request")).content.decode()
    assert re.search(r'<input type="number" name="gpu" value="1"', html)


def test_a_request_without_a_gpu_count_is_refused(alice_client, twin):
    r = alice_client.post(
        reverse("workspace_request"), {"name": "team-n", "gpu": "", "cpu": "2", "memory_gib": "8", "storage_gib": "20"}
    )
    assert r.status_code == 400
    assert "0 for a CPU-only Workspace" in text(r.content)
    assert not WorkspaceRequest.objects.filter(name="team-n").exists()


def test_the_purpose_reaches_the_admins_queue_and_the_workspace_page(alice, alice_client, login, admin_user, twin):
    r = alice_client.post(
        reverse("workspace_request"),
        {
            "name": "team-llm",
            "gpu": "1",
            "cpu": "2",
            "memory_gib": "8",
            "storage_gib": "20",
            "purpose": "Fine-tuning Llama 3 8B for the support bot",
        },
    )
    ws = WorkspaceRequest.objects.get(name="team-llm")
    assert r.status_code == 302 and ws.purpose == "Fine-tuning Llama 3 8B for the support bot"
    queue = login(admin_user).get(reverse("approval_queue")).content.decode()
    card = re.search(r'data-testid="request-team-llm".*?</article>', queue, re.S).group(0)
    assert "Fine-tuning Llama 3 8B for the support bot" in text(card)
    page = text(login(alice).get(reverse("workspace_detail", args=[ws.pk])).content)
    assert "Fine-tuning Llama 3 8B for the support bot" in page
