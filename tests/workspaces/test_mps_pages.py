"""MPS as the admin sees it on scenario "sharing" (GPU Operator nodes sharing whole GPUs by
NVIDIA's MPS, and configs whose MPS the device plugin refuses), loaded through the scenario
loader: the Nodes page, a node's page, the Dashboard, Availability, the approval queue, the Job
form's node list and the Health page."""

import re
from html import unescape

import pytest
from django.urls import reverse

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger
from workspaces import jobs

from .conftest import text


@pytest.fixture
def sharing(load_scenario):
    return load_scenario("sharing")


def test_the_nodes_page_shows_mps_nodes_as_mps_and_the_refused_ones_as_offering_nothing(sharing, admin_client):
    html = text(admin_client.get(reverse("node_list") + "?per_page=50").content)
    assert re.search(r"\bgpu-mps [A-Za-z0-9 ]*? MPS ×4 ", html)
    assert re.search(r"\bgpu-mps-renamed [A-Za-z0-9 ]*? MPS ×2 ", html)
    assert not re.search(r"\bgpu-mps [A-Za-z0-9 ]*? Time-slicing", html)
    # the mode filter offers MPS and keeps to it
    only_mps = text(admin_client.get(reverse("node_list") + "?mode=mps&per_page=50").content)
    assert "gpu-mps " in only_mps and "gpu-mps-renamed" in only_mps and "gpu-ts " not in only_mps


def test_a_node_page_says_mps_with_its_replicas(sharing, admin_client):
    html = text(admin_client.get(reverse("node_detail", args=["gpu-mps"])).content)
    assert re.search(r"Mode ?: MPS, replicas 4 ", html)
    assert "Time-slicing" not in html.split("Mode", 1)[1][:60]


def test_the_dashboard_and_availability_count_mps_apart(sharing, admin_client):
    dashboard = text(admin_client.get(reverse("dashboard_models")).content)
    # 8 on gpu-mps; gpu-mps-renamed's 2 are nvidia.com/gpu.shared, a row of their own
    assert (
        "NVIDIA A100 80GB PCIe (MPS) 8 1 2 nvidia.com/gpu NVIDIA A100 80GB PCIe (MPS) 2 0 1 nvidia.com/gpu.shared"
        in (dashboard)
    )
    assert "MPS)" not in dashboard.replace("NVIDIA A100 80GB PCIe (MPS)", "")  # no other MPS row
    availability = text(admin_client.get(reverse("availability")).content)
    assert "Shared by MPS (each replica a share of the GPU's compute and memory) on: gpu-mps (replicas 4: 8)" in (
        availability
    )
    assert "gpu-single-mps" not in availability and "gpu-mps-49" not in availability


def test_the_approval_queue_names_mps_and_its_rule(sharing, alice, admin_client, make_request):
    make_request(alice, "ws-new", gpu=2)
    html = text(admin_client.get(reverse("approval_queue")).content)
    assert "nvidia.com/gpu is shared by MPS (each replica a share of the GPU's memory and compute) on: gpu-mps" in html
    time_sliced = re.search(r"nvidia\.com/gpu is time-sliced \(shared, no memory isolation\) on: ([^.]*)\.", html)
    assert time_sliced and "gpu-ts" in time_sliced.group(1) and "gpu-mps" not in time_sliced.group(1)
    assert "physical GPU where it is shared by MPS (gpu-mps (replicas 4: 8 of" in html


def test_the_approval_queue_calls_a_resource_only_mps_shares_shared_by_mps():
    from workspaces import approvals

    row = ledger.ResourceRow("nvidia.com/gpu", logical=8, shared_logical=8)
    row.shared_on = row.mps_on = [["gpu-mps", 4, 8]]
    [choice] = approvals.gpu_choices(_OneRow(row))
    assert (choice.gpu_type, choice.by_mps, choice.mps_nodes_text) == ("shared", True, "gpu-mps (replicas 4: 8 of 8)")
    assert choice.time_sliced_on == []


class _OneRow:
    def __init__(self, row):
        self.by_resource = [row]
        self.nodes = []
        self.timeslicing_replicas = [4]


def test_jobs_refuse_mps_nodes_as_they_refuse_time_sliced_ones(sharing):
    led = ledger.compute(take_snapshot(sharing, use_prometheus=False))
    options = {o.name: (o.selectable, str(o.reason)) for o in jobs.job_node_options(led)}
    assert options["gpu-mps"] == (False, "MPS nodes do not support Jobs")
    assert options["gpu-mps-renamed"] == (False, "MPS nodes do not support Jobs")
    assert options["gpu-ts"] == (False, "Time-slicing nodes do not support Jobs")


def test_health_names_the_mps_the_plugin_refuses_and_the_pod_it_refused(sharing, admin_client):
    html = unescape(text(admin_client.get(reverse("health")).content))
    assert (
        "The device plugin refuses to share this node's GPUs by MPS (config device-plugin-configs/mig-single-mps-2): "
        "failed to create plugin: sharing using MPS is not supported for MIG devices" in html
    )
    assert "MPS does not share MIG devices" in html
    assert (
        "(config device-plugin-configs/mps-49): invalid MPS configuration: invalid device maximum allowed replicas "
        "exceeded: 49 > 48" in html
    )
    assert "Give MPS at most 48 replicas" in html and "compute capability 8.0" in html
    assert (
        "(config device-plugin-configs/mps-mig-mixed): flags.migStrategy: MPS cannot be used with migStrategy mixed."
        in html
    )
    assert "(config device-plugin-configs/mps-4)" not in html  # the MPS it serves is no finding
    assert (
        "Pod ws-sharing/mps-two (Workspace ws-sharing, owner alice) asked for 2 nvidia.com/gpu: the node shares it "
        "by MPS, which gives a container one replica" in html
    )


def test_dcgm_cannot_attribute_an_mps_gpu_to_one_workspace(sharing):
    from gpus.numbers import occupancy

    led = ledger.compute(take_snapshot(sharing, use_prometheus=False))
    # dcgm-exporter gives every MPS client the device's figures: no pod's own use is measurable
    assert "ws-sharing/mps-0" in occupancy.time_sliced_pods(led.nodes)
