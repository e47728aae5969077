"""The DRA levers on the simulated cluster (scenario dra): a DeviceTaintRule on one GPU (G) with
its eviction preview, its removal (X, the Fix of dra-device-taint), a node moved to DRA (K) and
back to the device plugin (L), whose kubelet plugin the twin plays; a failure that says why and
resumes; Restore; admins only."""

import pytest
from django.urls import reverse

from brickadmin.cluster import dra_publish
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.twin import TwinGateway
from gpus.procedures import registry, service
from gpus.procedures.catalogue.dra import stack_labels
from gpus.procedures.registry import get
from gpus.tasks import execute_run

pytestmark = pytest.mark.usefixtures("fast_engine")

DRA_NODE = "dra-a100-01"  # 2 whole A100s; gpu-1 held by a claim of three pods (and an admin-access one)
PLUGIN_NODE = "gpu-a100-01"  # brick-nvidia, exclusive, 4 GPUs


@pytest.fixture
def dra(load_scenario):
    return load_scenario("dra")


def run_now(code, node, params):
    run = service.start_run(code, node, params, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def labels(gw, node):
    return gw.get_node(node)["metadata"].get("labels") or {}


def slices(gw, node):
    return gw.list_resource_slices(node)


# --- the twin's DRA kubelet plugin ----------------------------------------------------------


def test_the_published_slices_are_the_drivers_shape():
    gpus = [
        {"uuid": "GPU-a", "model": "NVIDIA A100 80GB PCIe", "memoryMiB": 81920, "mig": []},
        {"uuid": "GPU-b", "model": "NVIDIA A100 80GB PCIe", "memoryMiB": 81920, "mig": ["3g.40gb", "1g.10gb"]},
    ]
    [s] = dra_publish.resource_slices("n1", gpus, generation=3, node_uid="u")
    assert s["spec"]["pool"] == {"name": "n1", "generation": 3, "resourceSliceCount": 1}
    assert s["spec"]["driver"] == "gpu.nvidia.com" and s["spec"]["nodeName"] == "n1"
    assert s["metadata"]["ownerReferences"][0]["kind"] == "Node"
    names = [d["name"] for d in s["spec"]["devices"]]
    assert names == ["gpu-0", "gpu-1-mig-3g40gb-9-0", "gpu-1-mig-1g10gb-19-4"]
    mig = s["spec"]["devices"][1]["attributes"]
    assert mig["type"] == {"string": "mig"} and mig["parentUUID"] == {"string": "GPU-b"}
    assert dra_publish.resource_slices("n1", []) == []


def test_the_twin_publishes_when_the_node_is_labelled_and_unpublishes_when_not(dra):
    assert len(slices(dra, DRA_NODE)) == 1  # the scenario's own
    dra.label_node(DRA_NODE, {vocab.DRA_DRIVER_DEPLOY_LABEL: None})
    assert slices(dra, DRA_NODE) == []
    dra.label_node(DRA_NODE, {vocab.DRA_DRIVER_DEPLOY_LABEL: "true"})
    [s] = slices(dra, DRA_NODE)
    assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-1"]


# --- G: a DeviceTaintRule on one GPU -----------------------------------------------------------


def test_the_plan_of_a_dry_run_says_what_noexecute_would_evict(dra):
    checks = get("G").prechecks(TwinGateway(), DRA_NODE, {"device": "gpu-1", "effect": "None"})
    dry = [c for c in checks if "Dry run" in str(c.detail)]
    assert dry and dry[0].level == "info"
    assert {str(i).split(" ")[0] for i in dry[0].items} == {"ws-dra/infer-0", "ws-dra/infer-1", "ws-dra/infer-2"}
    assert any("dra-a100-01-gpu-1-maintenance" in str(c.detail) for c in checks)  # the rule already there


def test_noexecute_with_pods_asks_once_and_refuses_without_it(dra):
    checks = get("G").prechecks(TwinGateway(), DRA_NODE, {"device": "gpu-1", "effect": "NoExecute"})
    [ack] = [c for c in checks if c.level == "ack"]
    assert ack.ack_count == 3
    refused = run_now("G", DRA_NODE, {"device": "gpu-1", "effect": "NoExecute"})
    assert refused.status == "failed" and "acknowledgement" in refused.message.lower()
    assert len(dra.list_device_taint_rules()) == 1  # nothing created


def test_a_taint_is_created_idempotently_and_verified(dra):
    params = {"device": "gpu-0", "effect": "NoSchedule", "taint_key": "brick.cloud/maintenance", "taint_value": "x"}
    run = run_now("G", DRA_NODE, params)
    assert run.status == "succeeded", run.message
    mine = [r for r in dra.list_device_taint_rules() if r["spec"]["deviceSelector"]["device"] == "gpu-0"]
    assert len(mine) == 1
    assert mine[0]["spec"]["taint"] == {"key": "brick.cloud/maintenance", "value": "x", "effect": "NoSchedule"}
    assert mine[0]["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": DRA_NODE, "device": "gpu-0"}
    again = run_now("G", DRA_NODE, params)
    assert again.status == "succeeded", again.message
    assert len(dra.list_device_taint_rules()) == 2  # the scenario's and ours, not a second of ours


def test_a_stopped_taint_run_is_restored_by_deleting_its_rule(dra, monkeypatch):
    from gpus.procedures.catalogue import dra as dra_mod

    def broken_verify(self, ctx):
        from gpus.procedures.base import Check

        return Check(False, "rule not reported", "look at the API server")

    monkeypatch.setattr(dra_mod.CreateTaintRule, "verify", broken_verify)
    run = run_now("G", DRA_NODE, {"device": "gpu-0", "effect": "NoSchedule"})
    assert run.status == "failed" and "look at the API server" in run.message
    monkeypatch.undo()
    params = service.restore_params(run, TwinGateway())
    assert params["delete_rules"]
    restore = service.start_restore(run, TwinGateway(), actor_name="root", dispatch=False)
    execute_run(restore.pk)
    restore.refresh_from_db()
    assert restore.status == "succeeded", restore.message
    assert [r["metadata"]["name"] for r in dra.list_device_taint_rules()] == ["dra-a100-01-gpu-1-maintenance"]


def test_the_device_taint_finding_offers_removing_the_rule(dra):
    fixers = registry.fixers("dra-device-taint", {"device": "gpu-1", "pool": DRA_NODE})
    assert [p.code for p, _params in fixers] == ["X"]
    run = run_now("X", DRA_NODE, {"device": "gpu-1", "pool": DRA_NODE})
    assert run.status == "succeeded", run.message
    assert dra.list_device_taint_rules() == []
    nothing = run_now("X", DRA_NODE, {"device": "gpu-1", "pool": DRA_NODE})
    assert nothing.status == "succeeded" and "No DeviceTaintRule selects gpu-1" in str(nothing.message)


# --- K and L: a node between the device plugin and DRA --------------------------------------


def test_the_labels_are_the_charts(dra):
    brick = {vocab.GPU_TYPE_LABEL: "nvidia", vocab.SHARING_LABEL: "none"}
    assert stack_labels(brick, "dra") == {
        vocab.DRA_DRIVER_DEPLOY_LABEL: "true",
        vocab.GPU_TYPE_LABEL: None,
        vocab.SHARING_LABEL: None,
    }
    operator = {vocab.GPU_PRESENT_LABEL: "true", vocab.GPU_ALLOCATION_MODE_LABEL: "device-plugin"}
    assert stack_labels(operator, "dra") == {
        vocab.DRA_DRIVER_DEPLOY_LABEL: "true",
        vocab.DEVICE_PLUGIN_DEPLOY_LABEL: "false",
        vocab.GPU_ALLOCATION_MODE_LABEL: "dra",
    }


def test_the_move_to_dra_plan_names_evictions_and_quotas(dra):
    checks = get("K").prechecks(TwinGateway(), PLUGIN_NODE, {})
    assert checks[0].ok and vocab.DRA_DRIVER_DEPLOY_LABEL in str(checks[0].detail)
    assert not [c for c in checks if c.level == "block"]
    assert any(c.capacity for c in checks)  # the capacity table: nvidia.com/gpu loses the node's 4
    [line] = [line for c in checks for line in c.capacity if line.resource == vocab.GPU]
    assert line.total - line.total_after == 4
    blocked = get("K").prechecks(TwinGateway(), DRA_NODE, {})
    assert [c.level for c in blocked] == ["block"]  # already DRA


def test_a_node_moves_to_dra_and_back(dra):
    run = run_now("K", PLUGIN_NODE, {"capacity_acknowledged": 99})
    assert run.status == "succeeded", run.message
    node = dra.get_node(PLUGIN_NODE)
    assert labels(dra, PLUGIN_NODE).get(vocab.DRA_DRIVER_DEPLOY_LABEL) == "true"
    assert vocab.GPU_TYPE_LABEL not in labels(dra, PLUGIN_NODE)
    assert not any(k.startswith("nvidia.com/") for k in node["status"]["allocatable"])
    [s] = slices(dra, PLUGIN_NODE)
    assert len(s["spec"]["devices"]) == 4
    assert not node["spec"].get("unschedulable")

    back = run_now("L", PLUGIN_NODE, {"sharing": "none", "capacity_acknowledged": 99})
    assert back.status == "succeeded", back.message
    assert slices(dra, PLUGIN_NODE) == []
    assert dra.get_node(PLUGIN_NODE)["status"]["allocatable"][vocab.GPU] == "4"
    assert labels(dra, PLUGIN_NODE)[vocab.GPU_TYPE_LABEL] == "nvidia"


def test_the_move_back_evicts_the_claim_pods_after_acknowledgement(dra):
    checks = get("L").prechecks(TwinGateway(), DRA_NODE, {"sharing": "none"})
    [ack] = [c for c in checks if c.level == "ack" and c.ack == "evictions_acknowledged"]
    assert ack.ack_count >= 4  # train-0, infer-0..2 hold claims (dcgm's admin claim too)
    run = run_now("L", DRA_NODE, {"sharing": "none", "evictions_acknowledged": ack.ack_count})
    assert run.status == "succeeded", run.message
    assert slices(dra, DRA_NODE) == []
    assert dra.get_node(DRA_NODE)["status"]["allocatable"][vocab.GPU] == "2"


def test_a_failure_says_why_resumes_and_restore_puts_the_labels_back(dra):
    from brickadmin.cluster.models import TwinHardware

    hw = TwinHardware.objects.get(node=PLUGIN_NODE)
    gpus = hw.gpus
    hw.gpus = []  # the DRA plugin finds no GPU: it publishes nothing
    hw.save()
    run = run_now("K", PLUGIN_NODE, {"capacity_acknowledged": 99})
    assert run.status == "failed"
    assert "DRA kubelet plugin" in run.message and vocab.DRA_DRIVER_DEPLOY_LABEL in run.message
    assert dra.get_node(PLUGIN_NODE)["spec"].get("unschedulable")  # left cordoned, said so

    hw.gpus = gpus
    hw.save()
    dra.label_node(PLUGIN_NODE, {vocab.DRA_DRIVER_DEPLOY_LABEL: None})  # the plugin restarts and finds them
    dra.label_node(PLUGIN_NODE, {vocab.DRA_DRIVER_DEPLOY_LABEL: "true"})
    resumed = service.resume_run(run, actor_name="root", dispatch=False)
    execute_run(resumed.pk)
    resumed.refresh_from_db()
    assert resumed.status == "succeeded", resumed.message

    # Back to the device plugin fails (it finds no GPU): Restore puts the node as it was before that run
    hw.gpus = []
    hw.save()
    back = run_now("L", PLUGIN_NODE, {"sharing": "none", "capacity_acknowledged": 99})
    assert back.status == "failed" and vocab.GPU in back.message
    assert labels(dra, PLUGIN_NODE)[vocab.GPU_TYPE_LABEL] == "nvidia"
    restore = service.start_restore(back, TwinGateway(), actor_name="root", dispatch=False)
    execute_run(restore.pk)
    restore.refresh_from_db()
    assert restore.status == "succeeded", restore.message
    now = labels(dra, PLUGIN_NODE)
    assert now[vocab.DRA_DRIVER_DEPLOY_LABEL] == "true" and vocab.GPU_TYPE_LABEL not in now
    assert not dra.get_node(PLUGIN_NODE)["spec"].get("unschedulable")


def test_the_levers_are_for_admins_only(dra, alice_client):
    for code in ("G", "K", "L"):
        assert alice_client.get(reverse("wizard_pick", args=[code])).status_code == 403
        assert alice_client.post(reverse("wizard_start", args=[code]), {"node": DRA_NODE}).status_code == 403
    assert alice_client.get(reverse("fix_plan", args=["X"]) + f"?node={DRA_NODE}&device=gpu-1").status_code == 403
