"""What the pages show on a cluster of every GPU layout NVIDIA documents (scenario "layouts")."""

import re

import pytest
from django.urls import reverse

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger
from workspaces import jobs

from .conftest import text


@pytest.fixture
def layouts(load_scenario):
    return load_scenario("layouts")


def test_nodes_page_names_each_mode(layouts, admin_client):
    html = text(admin_client.get(reverse("node_list") + "?per_page=50").content)
    for name, mode in [
        ("gpu-single-01", "MIG single"),
        ("gpu-mixed-01", "MIG mixed"),
        ("gpu-ts-01", "Time-slicing"),
        ("gpu-whole-01", "Exclusive"),
    ]:
        assert re.search(rf"{name} .*?{mode}", html), (name, mode)


def test_node_page_says_its_gpus_are_mig_instances_or_why_it_offers_none(layouts, admin_client):
    html = text(admin_client.get(reverse("node_detail", args=["gpu-single-01"])).content)
    assert "every nvidia.com/gpu on this node is a MIG 1g.10gb instance" in html
    bad = text(admin_client.get(reverse("node_detail", args=["gpu-single-bad"])).content)
    assert "MIG strategy single refuses this node" in bad


def test_an_operator_node_serving_gpus_is_not_flagged_for_a_plugin_pod_the_console_does_not_see(layouts, admin_client):
    html = text(admin_client.get(reverse("node_detail", args=["gpu-whole-01"])).content)
    assert "No device-plugin pod seen here: the GPU Operator" in html
    assert "No device-plugin pod on this node." not in html
    # a node the plugin refuses advertises nothing: that one is still said in red
    bad = text(admin_client.get(reverse("node_detail", args=["gpu-single-bad"])).content)
    assert "No device-plugin pod on this node." in bad and "No device-plugin pod seen here" not in bad


def test_availability_says_where_plain_gpus_are_mig_instances(layouts, alice_client):
    html = text(alice_client.get(reverse("availability")).content)
    assert "MIG instances, not whole GPUs (MIG strategy single), on: gpu-single-01 (MIG 1g.10gb: 28)" in html


def test_approval_queue_tells_slices_from_gpus(layouts, alice, admin_client, make_request):
    make_request(alice, "ws-new", gpu=2)
    html = text(admin_client.get(reverse("approval_queue")).content)
    assert "nvidia.com/gpu is MIG instances (MIG strategy single), not whole GPUs, on: gpu-single-01" in html
    assert "MIG instance(s) where it is MIG" in html


def test_job_node_list_disables_every_node_without_whole_gpus(layouts):
    led = ledger.compute(take_snapshot(layouts, use_prometheus=False))
    options = {o.name: (o.selectable, str(o.reason)) for o in jobs.job_node_options(led)}
    assert options["gpu-whole-01"] == (True, "")
    assert options["gpu-mixed-01"] == (True, "")  # its whole GPU, beside the MIG instances
    assert options["gpu-single-01"] == (False, "MIG nodes do not support Jobs")
    assert options["gpu-single-bad"] == (False, "MIG nodes do not support Jobs")
    assert options["gpu-ts-01"] == (False, "Time-slicing nodes do not support Jobs")


def test_the_workspaces_list_names_a_gpu_type_for_what_its_resource_is_on_its_nodes(layouts, admin_client):
    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    table = re.search(r'data-testid="cluster-workspaces".*?</table>', html, re.S).group(0)
    cells = {
        text(r[0]): text(r[3])
        for r in (re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S))
        if r
    }
    # its pods hold nvidia.com/gpu on gpu-single-01, where every nvidia.com/gpu is a MIG 1g.10gb instance
    assert cells["ws-mig-single"] == "nvidia.com/gpu MIG 1g.10gb"
    assert cells["ws-mixed"] == "nvidia.com/mig-3g.40gb MIG 3g.40gb"
    assert cells["ws-shared"] == "nvidia.com/gpu.shared Shared (time-slicing)"


def test_gpu_by_model_keeps_a_renamed_resource_apart(layouts, admin_client):
    html = text(admin_client.get(reverse("dashboard_models")).content)
    # gpu-ts-01 time-slices plain nvidia.com/gpu; gpu-ts-02 renames its replicas nvidia.com/gpu.shared
    assert "NVIDIA A30 (Shared) 16 0 4 nvidia.com/gpu NVIDIA A30 (Shared) 8 0 2 nvidia.com/gpu.shared" in html
    assert "NVIDIA A30 (Shared) 24" not in html


def test_the_dashboard_breaks_plain_gpus_down_as_availability_does(layouts, admin_client):
    html = admin_client.get(reverse("dashboard")).content.decode()
    parts = re.search(r'data-testid="parts-nvidia.com/gpu">(.*?)</div>', html, re.S)
    assert parts is not None
    # 1 + 8 whole, 16 replicas on gpu-ts-01, 28 + 8 MIG instances on the MIG-single nodes: the Total 61
    assert text(parts.group(1)) == (
        "whole GPUs: 9 · time-sliced replicas: 16 · MIG instances (MIG strategy single): 36"
    )
    assert 'data-testid="parts-nvidia.com/gpu.shared"' not in html  # one kind only: nothing to break down


def _gpu_map(admin_client, node: str) -> str:
    html = admin_client.get(reverse("node_detail", args=[node])).content.decode()
    return re.search(r'data-testid="gpu-map">.*?</figure>', html, re.S).group(0)


def test_the_gpu_map_draws_mig_single_pods_on_the_instances_they_hold(layouts, admin_client):
    gpu_map = _gpu_map(admin_client, "gpu-single-01")
    assert "4 physical GPUs · 28 slots" in text(gpu_map)
    assert re.findall(r'data-state="in_use" data-pod="([^"]+)"', gpu_map) == [
        "ws-mig-single/infer-0",
        "ws-mig-single/infer-1",
    ]
    assert "Pods holding more than the node" not in gpu_map  # no false alarm
    table = text(re.search(r"<table.*?</table>", gpu_map, re.S).group(0))
    assert "1g.10gb in use ws-mig-single/infer-0" in table


def test_the_gpu_map_draws_a_slot_per_replica_of_time_sliced_mig_instances(layouts, admin_client):
    gpu_map = _gpu_map(admin_client, "gpu-single-02")  # 2 H100 x 2 x 3g.40gb, each time-sliced x2
    assert "2 physical GPUs · 8 slots" in text(gpu_map)
    assert gpu_map.count('data-state="free"') == 8
    table = text(re.search(r"<table.*?</table>", gpu_map, re.S).group(0))
    assert table.count("1/2 3g.40gb free") == 4 and table.count("2/2 3g.40gb free") == 4


def test_the_gpu_map_offers_nothing_on_a_node_the_plugin_refuses(layouts, admin_client):
    gpu_map = _gpu_map(admin_client, "gpu-single-bad")  # MIG-INVALID
    assert "2 physical GPUs · 0 slots" in text(gpu_map)
    assert 'data-state="free"' not in gpu_map
    assert "none of these GPUs is offered to pods" in text(gpu_map)


def test_a_mig_single_workspace_shows_the_gpu_its_pods_hold(layouts, admin_client):
    html = text(admin_client.get(reverse("cluster_workspace", args=["ws-mig-single"])).content)
    assert "In use physically 1" in html  # both instances are on one A100
    assert "infer-0 Running gpu-single-01 nvidia.com/gpu 1 gpu-single-01 · GPU 0 (GPU-c33ef634" in html
    assert " none " not in html.split("Pods", 1)[1]
