"""The twin reacts as a cluster does: what the procedures rely on."""

import copy

import pytest
import yaml

from brickadmin.cluster import NotFound, PermanentClusterError

PLUGIN_NS = "brick-nvidia"


def nvidia(gw, node):
    st = gw.get_node(node)["status"]
    pick = lambda d: {k: v for k, v in d.items() if k.startswith("nvidia.com/")}  # noqa: E731
    return pick(st["capacity"]), pick(st["allocatable"])


def plugin_pods(gw, node, component):
    return gw.list_pods(
        namespace=PLUGIN_NS,
        label_selector=f"app.kubernetes.io/component={component}",
        field_selector=f"spec.nodeName={node}",
    )


def test_relabel_moves_the_plugin_and_leaves_the_old_resource_stale(twin):
    assert nvidia(twin, "dev-a1-ws04") == ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})
    assert len(plugin_pods(twin, "dev-a1-ws04", "default")) == 1
    twin.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "timeslicing"})
    assert plugin_pods(twin, "dev-a1-ws04", "default") == []
    assert [p["status"]["phase"] for p in plugin_pods(twin, "dev-a1-ws04", "timeslicing")] == ["Running"]
    # kubelet keeps the vanished resource in capacity; allocatable drops to 0
    assert nvidia(twin, "dev-a1-ws04") == (
        {"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "2"},
        {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "2"},
    )
    # the status patch removes it; removing it again is a no-op
    twin.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu"])
    twin.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu"])
    assert nvidia(twin, "dev-a1-ws04") == ({"nvidia.com/gpu.shared": "2"}, {"nvidia.com/gpu.shared": "2"})


def test_removing_a_served_resource_comes_back_like_kubelet_would(twin):
    twin.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu"])
    assert nvidia(twin, "dev-a1-ws04") == ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})


def test_configmap_edit_needs_a_rollout_restart(twin):
    cm = copy.deepcopy(twin.get_configmap(PLUGIN_NS, "nvidia-device-plugin-config-timeslicing"))
    cm["data"]["config.yaml"] = cm["data"]["config.yaml"].replace("replicas: 2", "replicas: 4")
    twin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": cm["metadata"]["name"], "namespace": PLUGIN_NS},
            "data": cm["data"],
        }
    )
    assert nvidia(twin, "dev-a1-ws02")[1] == {"nvidia.com/gpu.shared": "2"}  # unchanged
    twin.rollout_restart_daemonset(PLUGIN_NS, "nvidia-device-plugin-timeslicing")
    assert nvidia(twin, "dev-a1-ws02")[1] == {"nvidia.com/gpu.shared": "4"}
    status = twin.daemonset_rollout_status(PLUGIN_NS, "nvidia-device-plugin-timeslicing")
    assert status.done and status.desired == 1


def test_daemonset_selector_is_immutable(twin):
    ds = copy.deepcopy(twin.get_daemonset(PLUGIN_NS, "nvidia-device-plugin-default"))
    ds["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    ds.pop("status", None)
    with pytest.raises(PermanentClusterError) as err:
        twin.apply(ds)
    assert err.value.status == 422 and "immutable" in str(err.value)


def test_untolerated_taint_blocks_a_new_plugin_pod_but_keeps_a_running_one(twin):
    node = copy.deepcopy(twin.get_node("dev-a1-ws04"))
    node["spec"]["taints"] = [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}]
    twin._save(node)
    twin._reconcile(nodes=["dev-a1-ws04"])
    assert len(plugin_pods(twin, "dev-a1-ws04", "default")) == 1  # NoSchedule does not evict
    twin.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "timeslicing"})
    assert plugin_pods(twin, "dev-a1-ws04", "timeslicing") == []  # a new pod cannot land
    assert nvidia(twin, "dev-a1-ws04")[1] == {"nvidia.com/gpu": "0"}


def test_drain_honours_pdbs_and_skips_daemonset_pods(load_scenario):
    gw = load_scenario("demo")
    result = gw.drain("gpu-a30-03")
    # the API server's 429 and its cause (the scenario's pod reports no Ready condition: not healthy)
    assert result.blocked == {
        "ws-nlp-lab/tokenizer-svc": "Cannot evict pod as it would violate the pod's disruption budget. "
        "The disruption budget tokenizer-svc-pdb needs 1 healthy pods and has 0 currently"
    }
    assert result.evicted == ["ws-nlp-lab/bert-notebook"]
    assert any(s.startswith("brick-nvidia/") for s in result.skipped)
    assert not result.done
    remaining = {p["metadata"]["name"] for p in gw.list_pods(field_selector="spec.nodeName=gpu-a30-03")}
    assert "tokenizer-svc" in remaining and "bert-notebook" not in remaining


def test_drain_refuses_emptydir_pods_unless_allowed(load_scenario):
    gw = load_scenario("demo")
    before = {p["metadata"]["name"] for p in gw.list_pods(field_selector="spec.nodeName=gpu-h100-04")}
    kept = gw.drain("gpu-h100-04", delete_emptydir_data=False)
    assert set(kept.blocked) == {"ws-notebooks/jupyter-bob", "ws-notebooks/jupyter-erin"}
    # as kubectl drain: nothing is evicted while a pod it may not delete is on the node
    assert kept.evicted == []
    assert {p["metadata"]["name"] for p in gw.list_pods(field_selector="spec.nodeName=gpu-h100-04")} == before
    assert gw.drain("gpu-h100-04").done


def test_cordon_is_idempotent_and_unknown_nodes_are_not_found(twin):
    twin.cordon("dev-a1-ws04")
    twin.cordon("dev-a1-ws04")
    assert twin.get_node("dev-a1-ws04")["spec"]["unschedulable"] is True
    twin.uncordon("dev-a1-ws04")
    assert "unschedulable" not in twin.get_node("dev-a1-ws04")["spec"]
    with pytest.raises(NotFound):
        twin.cordon("no-such-node")


def test_quota_keys_the_api_server_would_not_enforce_are_refused(twin):
    twin.create_namespace("ws-x", {"brick.cloud/workspace": "true"})
    with pytest.raises(PermanentClusterError):
        twin.create_resource_quota("ws-x", "q", {"limits.nvidia.com/gpu": "1"})
    q = twin.create_resource_quota("ws-x", "q", {"requests.nvidia.com/gpu": 1})
    assert q["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}


def test_label_selectors(twin):
    assert [n["metadata"]["name"] for n in twin.list_nodes("brick.cloud/gpu.sharing in (timeslicing)")] == [
        "dev-a1-ws02"
    ]
    assert [n["metadata"]["name"] for n in twin.list_nodes("brick.cloud/gpu.sharing!=timeslicing")] == ["dev-a1-ws04"]
    assert twin.list_nodes("!brick.cloud/gpu.type") == []


def test_the_manifest_in_the_scenarios_is_the_managed_file(twin):
    from brickadmin.cluster.scenarios import BASE_DIR

    docs = list(yaml.safe_load_all((BASE_DIR / "gpus/manifests/brick-nvidia-device-plugin.yaml").read_text()))
    live = twin.get_daemonset(PLUGIN_NS, "nvidia-device-plugin-timeslicing")
    assert live["spec"] == next(d for d in docs if d["metadata"]["name"] == "nvidia-device-plugin-timeslicing")["spec"]
