"""The twin keeps what a scenario gives it, and plays kube-controller-manager's quota controller:
a loaded node's status stays as written until something in the cluster changes it, and every
ResourceQuota's status is what the controller writes (hard from the spec, used from the pods:
Pending ones count, finished ones do not). Through the scenario loader and the pages."""

import re

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from brickadmin.cluster import scenarios as s
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.twin import TwinGateway

pytestmark = pytest.mark.django_db

A100 = "NVIDIA A100 80GB PCIe"
GPU_TAINT = {"key": vocab.GPU, "operator": "Exists", "effect": "NoSchedule"}


def nvidia(gw, node):
    st = gw.get_node(node)["status"]
    pick = lambda d: {k: v for k, v in d.items() if k.startswith("nvidia.com/")}  # noqa: E731
    return pick(st["capacity"]), pick(st["allocatable"])


def load(tmp_path, objects, hardware):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"description": "a test cluster", "hardware": hardware, "objects": objects}))
    call_command("load_scenario", str(path))
    return TwinGateway()


def stale_node_scenario():
    """A time-slicing node whose status still holds nvidia.com/gpu in capacity and allocatable."""
    stale = {"capacity": {vocab.GPU: "4"}, "allocatable": {vocab.GPU: "4"}}
    objects = s.device_plugin_manifest(replicas=2) + [
        s.node("gpu-ts", model=A100, sharing="timeslicing", gpu_count=4, taints=[GPU_TAINT], extra_status=stale),
        s.node("gpu-ex", model=A100, sharing="none", gpu_count=2, taints=[GPU_TAINT]),
        s.namespace("team-a", owner="alice"),
        s.quota(
            "team-a",
            {vocab.quota_key(vocab.GPU_SHARED): 8, "requests.cpu": "16", "requests.memory": "64Gi", "pods": "10"},
        ),
    ]
    hardware = {
        "gpu-ts": s.gpus("gpu-ts", A100, 4, 81920),
        "gpu-ex": s.gpus("gpu-ex", A100, 2, 81920),
    }
    return objects, hardware


def test_a_loaded_nodes_status_stays_as_written_until_its_plugin_changes(tmp_path):
    gw = load(tmp_path, *stale_node_scenario())
    # as written, with what the running plugin serves beside it
    assert nvidia(gw, "gpu-ts") == (
        {vocab.GPU: "4", vocab.GPU_SHARED: "8"},
        {vocab.GPU: "4", vocab.GPU_SHARED: "8"},
    )
    gw.cordon("gpu-ts")
    gw.label_node("gpu-ts", {"team": "vision"})  # nothing the plugin or kubelet reads changed
    assert nvidia(gw, "gpu-ts")[1] == {vocab.GPU: "4", vocab.GPU_SHARED: "8"}
    # its plugin restarts: kubelet now reports what the plugin serves, the rest at 0
    gw.rollout_restart_daemonset("brick-nvidia", "nvidia-device-plugin-timeslicing")
    assert nvidia(gw, "gpu-ts") == (
        {vocab.GPU: "4", vocab.GPU_SHARED: "8"},
        {vocab.GPU: "0", vocab.GPU_SHARED: "8"},
    )
    assert nvidia(gw, "gpu-ex") == ({vocab.GPU: "2"}, {vocab.GPU: "2"})


def test_the_stale_resource_kept_as_loaded_is_what_the_pages_show(tmp_path, admin_client):
    load(tmp_path, *stale_node_scenario())
    page = admin_client.get(reverse("node_detail", args=["gpu-ts"])).content.decode()
    row = re.search(r"<tr class=\"row-warn\"><td><code>nvidia.com/gpu</code>.*?</tr>", page, re.S)
    assert row, "the stale resource is flagged"
    assert re.findall(r'<td class="num">(\d+)</td>', row.group(0))[:2] == ["4", "4"]
    assert "stale in allocatable: mis-scheduling risk, clean up now" in row.group(0)


def test_a_quota_loaded_without_status_gets_the_controllers_hard_and_used(load_scenario):
    gw = load_scenario("waiting")
    (q,) = gw.list_resource_quotas("ws-train")
    assert q["status"]["hard"] == q["spec"]["hard"]
    # eval-0 runs (1), notebook pulls its image (1), train-4gpu waits for a node (4): all charged;
    # old-eval, refused by the kubelet (Failed), is not. The pods ask for no cpu or memory.
    assert q["status"]["used"] == {"requests.nvidia.com/gpu": "6", "requests.cpu": "0", "requests.memory": "0"}
    (full,) = gw.list_resource_quotas("ws-full")
    assert full["status"]["used"]["requests.nvidia.com/gpu"] == "4"


def test_quota_use_follows_the_pods_as_the_controller_replenishes_it(tmp_path):
    gw = load(tmp_path, *stale_node_scenario())
    (q,) = gw.list_resource_quotas("team-a")
    assert q["status"] == {
        "hard": {"pods": "10", "requests.cpu": "16", "requests.memory": "64Gi", "requests.nvidia.com/gpu.shared": "8"},
        "used": {"pods": "0", "requests.cpu": "0", "requests.memory": "0", "requests.nvidia.com/gpu.shared": "0"},
    }
    pod = s.gpu_pod("team-a", "nb-1", "gpu-ts", vocab.GPU_SHARED, 1)
    pod["spec"]["containers"][0]["resources"]["requests"].update(cpu="2", memory="8Gi")
    gw.apply(pod)
    pending = s.gpu_pod("team-a", "nb-2", "gpu-ts", vocab.GPU_SHARED, 1, phase="Pending")
    gw.apply(pending)
    used = gw.list_resource_quotas("team-a")[0]["status"]["used"]
    assert used == {"pods": "2", "requests.cpu": "2", "requests.memory": "8Gi", "requests.nvidia.com/gpu.shared": "2"}
    gw.delete("v1", "Pod", "nb-1", "team-a")  # deleted: its requests are given back
    used = gw.list_resource_quotas("team-a")[0]["status"]["used"]
    assert used == {"pods": "1", "requests.cpu": "0", "requests.memory": "0", "requests.nvidia.com/gpu.shared": "1"}
    gw.delete("v1", "Namespace", "team-a")  # its quota goes with it; nothing is left to count
    assert gw.list_resource_quotas("team-a") == []


def test_the_workspace_page_shows_quota_used_as_its_status_says(load_scenario, admin_client):
    load_scenario("waiting")
    page = admin_client.get(reverse("cluster_workspace", args=["ws-train"])).content.decode()
    table = re.search(r'data-testid="quota-table".*?</table>', page, re.S).group(0)
    rows = {
        key: (hard, used)
        for key, hard, used in re.findall(
            r"<td><code>([^<]+)</code></td><td class=\"num\">([^<]*)</td><td class=\"num\">([^<]*)</td>", table
        )
    }
    assert rows["requests.nvidia.com/gpu"] == ("16", "6")
    assert rows["requests.cpu"] == ("64", "0")
