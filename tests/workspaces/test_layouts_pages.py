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
