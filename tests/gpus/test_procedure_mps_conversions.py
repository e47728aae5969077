"""The conversions to and from MPS on the simulated cluster: E (exclusive → MPS), H (MPS →
exclusive), I (time-slicing → MPS), J (MPS → time-slicing). What the node ends up with (its
labels, the plugin that serves it, NVIDIA's MPS control daemon, its capacity), what the pages
show, the pre-checks the plugin's refusals call for, and Restore after a failed step."""

import pytest

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.twin import TwinGateway
from gpus.numbers import ledger as ledger_mod
from gpus.procedures.registry import get
from gpus.view.live import LiveRead
from tests.gpus.test_procedures_engine import run_now, status

pytestmark = pytest.mark.usefixtures("fast_engine")

GPU, SHARED = vocab.GPU, vocab.GPU_SHARED
MPS_REPLICAS = 3  # the shipped manifest's nvidia-device-plugin-config-mps


def plugin_pods(gw, node):
    """{component: phase} of the brick-nvidia pods on the node."""
    pods = gw.list_pods(namespace=vocab.PLUGIN_NAMESPACE, field_selector=f"spec.nodeName={node}")
    return {p["metadata"]["labels"][vocab.COMPONENT_LABEL]: p["status"]["phase"] for p in pods}


def node_line(node):
    return LiveRead(TwinGateway()).ledger().node(node)


def test_e_converts_an_exclusive_node_to_mps(twin):
    run = run_now("E", "dev-a1-ws04")
    assert run.status == "succeeded", run.message
    labels, spec, cap, alloc = status(twin, "dev-a1-ws04")
    assert labels[vocab.SHARING_LABEL] == "mps" and labels[vocab.MPS_CAPABLE_LABEL] == "true"
    assert not spec.get("unschedulable")
    assert alloc[SHARED] == cap[SHARED] == str(MPS_REPLICAS)  # 1 physical × 3 MPS clients
    assert GPU not in cap and GPU not in alloc
    assert plugin_pods(twin, "dev-a1-ws04") == {"mps": "Running", vocab.MPS_CONTROL_COMPONENT: "Running"}
    n = node_line("dev-a1-ws04")
    assert (n.mode, n.sharing_strategy, n.replicas) == ("mps", ledger_mod.MPS, MPS_REPLICAS)
    assert n.plugin_state == "running"  # the MPS control daemon is not taken for a second plugin
    steps = list(run.steps.values_list("step_key", flat=True))
    assert "mps-daemon" in steps


def test_h_converts_it_back_and_the_mps_daemon_leaves(twin):
    assert run_now("E", "dev-a1-ws04").status == "succeeded"
    run = run_now("H", "dev-a1-ws04")
    assert run.status == "succeeded", run.message
    labels, spec, cap, alloc = status(twin, "dev-a1-ws04")
    assert labels[vocab.SHARING_LABEL] == "none" and vocab.MPS_CAPABLE_LABEL not in labels
    assert alloc[GPU] == cap[GPU] == "1" and SHARED not in cap and SHARED not in alloc
    assert plugin_pods(twin, "dev-a1-ws04") == {"default": "Running"}
    assert node_line("dev-a1-ws04").mode == "exclusive"


def test_i_and_j_move_a_time_slicing_node_to_mps_and_back(twin):
    before = status(twin, "dev-a1-ws02")[3][SHARED]
    run = run_now("I", "dev-a1-ws02", {"capacity_acknowledged": 0, "evictions_acknowledged": 9})
    assert run.status == "succeeded", run.message
    labels, _spec, cap, alloc = status(twin, "dev-a1-ws02")
    assert labels[vocab.SHARING_LABEL] == "mps" and labels[vocab.MPS_CAPABLE_LABEL] == "true"
    assert alloc[SHARED] == str(MPS_REPLICAS) and GPU not in cap
    assert node_line("dev-a1-ws02").mode == "mps"
    run = run_now("J", "dev-a1-ws02", {"capacity_acknowledged": 9, "evictions_acknowledged": 9})
    assert run.status == "succeeded", run.message
    labels, _spec, cap, alloc = status(twin, "dev-a1-ws02")
    assert labels[vocab.SHARING_LABEL] == "timeslicing" and vocab.MPS_CAPABLE_LABEL not in labels
    assert alloc[SHARED] == before
    assert plugin_pods(twin, "dev-a1-ws02") == {"timeslicing": "Running"}


def test_each_procedure_is_offered_on_the_nodes_it_converts(twin):
    exclusive, ts = node_line("dev-a1-ws04"), node_line("dev-a1-ws02")
    assert get("E").offered_on(exclusive) and not get("E").offered_on(ts)
    assert get("I").offered_on(ts) and not get("I").offered_on(exclusive)
    assert not get("H").offered_on(exclusive) and not get("J").offered_on(ts)
    assert run_now("E", "dev-a1-ws04").status == "succeeded"
    mps = node_line("dev-a1-ws04")
    assert get("H").offered_on(mps) and get("J").offered_on(mps)
    assert not any(get(c).offered_on(mps) for c in "ABEI")
    assert "H (MPS → Exclusive) or J" in str(get("B").eligibility(mps))
    assert str(get("E").eligibility(mps)) == "Already MPS."


def test_e_refuses_a_node_whose_gpus_are_in_mig_mode(demo):
    checks = get("E").prechecks(TwinGateway(), "gpu-a100-05", {})
    [block] = [c for c in checks if c.level == "block"]
    assert "2 GPUs of gpu-a100-05 are in MIG mode" in block.detail
    assert "refuses MPS on MIG devices" in block.detail
    run = run_now("E", "gpu-a100-05")
    assert run.status == "failed"
    labels, spec, *_ = status(demo, "gpu-a100-05")
    assert labels[vocab.SHARING_LABEL] == "none" and not spec.get("unschedulable")  # nothing touched


def test_e_asks_for_the_gpu_pods_it_evicts(demo):
    checks = get("E").prechecks(TwinGateway(), "gpu-a30-01", {})
    [ack] = [c for c in checks if c.level == "ack" and c.ack == "evictions_acknowledged"]
    assert "ws-vision/segmenter-eval" in " ".join(map(str, ack.items))
    refused = run_now("E", "gpu-a30-01")
    assert refused.status == "failed" and "acknowledgement" in refused.message
    assert status(demo, "gpu-a30-01")[0][vocab.SHARING_LABEL] == "none"


def test_h_blocks_when_the_shared_quota_would_not_fit_without_the_node(twin):
    # dev-a1-ws02, the only node serving nvidia.com/gpu.shared, goes to MPS; back to exclusive,
    # ws-shared's quota would have nothing left under it
    assert run_now("I", "dev-a1-ws02", {"capacity_acknowledged": 0, "evictions_acknowledged": 9}).status == "succeeded"
    checks = get("H").prechecks(TwinGateway(), "dev-a1-ws02", {})
    [block] = [c for c in checks if c.level == "block"]
    assert "Shared total left after removing dev-a1-ws02: 0" in str(block.detail)
    assert "ws-shared" in str(block.fix) and "bob" in str(block.fix)
    run = run_now("H", "dev-a1-ws02")
    assert run.status == "failed"
    labels, spec, *_ = status(twin, "dev-a1-ws02")
    assert labels[vocab.SHARING_LABEL] == "mps" and not spec.get("unschedulable")  # nothing touched


def test_a_failed_step_is_restored_with_the_mps_label_taken_away(twin, monkeypatch):
    from gpus.procedures import steps

    def plugin_never_starts(self, ctx):
        from gpus.procedures.base import Check

        return Check(False, "no pod", "the plugin did not start")

    monkeypatch.setattr(steps.PluginPodRunning, "verify", plugin_never_starts)
    run = run_now("E", "dev-a1-ws04")
    assert run.status == "failed"
    labels, spec, *_ = status(twin, "dev-a1-ws04")
    assert labels[vocab.MPS_CAPABLE_LABEL] == "true" and spec.get("unschedulable")
    monkeypatch.undo()
    from gpus.procedures import service

    restore = service.restore_params(run, TwinGateway())
    before = {vocab.GPU_TYPE_LABEL: "nvidia", vocab.SHARING_LABEL: "none", vocab.MPS_CAPABLE_LABEL: None}
    assert restore["labels"] == before
    done = run_now("R", "dev-a1-ws04", restore)
    assert done.status == "succeeded", done.message
    labels, spec, cap, alloc = status(twin, "dev-a1-ws04")
    assert labels[vocab.SHARING_LABEL] == "none" and vocab.MPS_CAPABLE_LABEL not in labels
    assert not spec.get("unschedulable") and alloc[GPU] == "1"
    assert plugin_pods(twin, "dev-a1-ws04") == {"default": "Running"}


def test_the_pages_plan_e_and_offer_h_and_j_on_the_mps_node_it_made(twin, admin_client):
    from django.urls import reverse

    plan = admin_client.get(reverse("wizard_plan", args=["E"]), {"node": "dev-a1-ws04"}).content.decode()
    assert "kubectl label node dev-a1-ws04 brick.cloud/gpu.sharing=mps nvidia.com/mps.capable=true --overwrite" in plan
    assert "Verify the MPS control daemon pod is Running on dev-a1-ws04" in plan
    node_page = admin_client.get(reverse("node_detail", args=["dev-a1-ws04"])).content.decode()
    assert "Convert to MPS (E)" in node_page and "Convert to exclusive (H)" not in node_page
    assert run_now("E", "dev-a1-ws04").status == "succeeded"
    node_page = admin_client.get(reverse("node_detail", args=["dev-a1-ws04"])).content.decode()
    assert "Convert to exclusive (H)" in node_page and "Convert to time-slicing (J)" in node_page
    assert "Convert to MPS (E)" not in node_page and "Convert to exclusive (B)" not in node_page
    plan_h = admin_client.get(reverse("wizard_plan", args=["H"]), {"node": "dev-a1-ws04"}).content.decode()
    assert "kubectl label node dev-a1-ws04 brick.cloud/gpu.sharing=none nvidia.com/mps.capable- --overwrite" in plan_h
    pick_b = admin_client.get(reverse("wizard_pick", args=["B"])).content.decode()
    assert 'value="dev-a1-ws04" disabled' in pick_b and "convert it with H (MPS → Exclusive)" in pick_b
