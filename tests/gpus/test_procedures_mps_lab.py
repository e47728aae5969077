"""The conversions to and from MPS end to end on the lab: a real API server, the DaemonSet
controller and scheduler, KWOK running the pods, gpusim playing the MPS device plugin and the
kubelet. E (exclusive → MPS) then H (MPS → exclusive) on seed-example's exclusive node, I
(time-slicing → MPS) then J (MPS → time-slicing) on its time-slicing node: after each, what
the node's labels, the plugin pods on it and its status end up as."""

import pytest
import yaml

from brickadmin.cluster import vocabulary as vocab
from tests.gpus import test_procedures_lab as procedures_lab
from tests.lab.conftest import wait_until

pytestmark = [pytest.mark.lab]

GPU, SHARED = vocab.GPU, vocab.GPU_SHARED
MPS_DAEMON = vocab.MPS_CONTROL_COMPONENT

# the lab, seed-example loaded, and the engine as A, B and C use them on the lab
lab, on_lab = procedures_lab.lab, procedures_lab.on_lab
run, prometheus_step = procedures_lab.run, procedures_lab.prometheus_step


def plugin_pods(lab, node):
    """{component: phase} of the brick-nvidia pods on the node, leaving ones being deleted."""
    pods = lab.admin.list_pods(namespace=vocab.PLUGIN_NAMESPACE, field_selector=f"spec.nodeName={node}")
    return {
        p["metadata"]["labels"][vocab.COMPONENT_LABEL]: p["status"].get("phase")
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
    }


def all_plugin_pods(lab, node):
    """The component of every brick-nvidia pod on the node, those being deleted too."""
    pods = lab.admin.list_pods(namespace=vocab.PLUGIN_NAMESPACE, field_selector=f"spec.nodeName={node}")
    return sorted(p["metadata"]["labels"][vocab.COMPONENT_LABEL] for p in pods)


def mps_replicas(lab):
    cm = lab.admin.get_configmap(vocab.PLUGIN_NAMESPACE, "nvidia-device-plugin-config-mps")
    config = yaml.safe_load(cm["data"][vocab.PLUGIN_CONFIG_KEY])
    (resource,) = config["sharing"]["mps"]["resources"]
    assert resource["name"] == GPU
    return int(resource["replicas"])


def gpus_of(lab, node):
    return len(lab.gpusim("/hardware")[node])


def assert_on_mps(lab, r, node, stale):
    assert r.status == "succeeded", r.message
    raw = lab.admin.get_node(node)
    labels = raw["metadata"]["labels"]
    assert labels[vocab.SHARING_LABEL] == "mps" and labels[vocab.MPS_CAPABLE_LABEL] == "true"
    assert not raw["spec"].get("unschedulable")
    assert plugin_pods(lab, node) == {"mps": "Running", MPS_DAEMON: "Running"}
    # the plugin pod gpusim plays read the MPS ConfigMap when it started
    (read,) = [p for p in lab.gpusim()["pluginPods"].values() if p["node"] == node]
    assert read["configMap"] == "nvidia-device-plugin-config-mps" and "mps:" in read["config"]
    shared = str(gpus_of(lab, node) * mps_replicas(lab))
    assert lab.nvidia(node) == {SHARED: shared}
    assert lab.nvidia(node, "capacity") == {SHARED: shared}  # the stale resource is gone from both
    assert stale not in raw["status"]["capacity"]
    out = prometheus_step(r).output
    assert f'resource="nvidia_com_gpu_shared"}} {shared}' in out and "fell back" not in out


def assert_left_mps(lab, r, node, sharing, component, resource, count):
    assert r.status == "succeeded", r.message
    raw = lab.admin.get_node(node)
    labels = raw["metadata"]["labels"]
    assert labels[vocab.SHARING_LABEL] == sharing and vocab.MPS_CAPABLE_LABEL not in labels
    assert not raw["spec"].get("unschedulable")
    assert lab.nvidia(node) == {resource: str(count)}
    assert lab.nvidia(node, "capacity") == {resource: str(count)}
    # the DaemonSet controller deletes the MPS pods once the node stops matching; KWOK ends them
    wait_until(lambda: all_plugin_pods(lab, node) == [component], 60, f"only the {component} plugin on {node}")
    assert plugin_pods(lab, node) == {component: "Running"}


def test_e_then_h_then_i_then_j_on_the_lab(on_lab):
    lab = on_lab
    node = "dev-a1-ws04"  # exclusive, one GPU
    assert lab.nvidia(node) == {GPU: "1"} and plugin_pods(lab, node) == {"default": "Running"}

    e = run(lab, "E", node)
    assert_on_mps(lab, e, node, stale=GPU)

    h = run(lab, "H", node)
    assert_left_mps(lab, h, node, "none", "default", GPU, gpus_of(lab, node))
    assert 'resource="nvidia_com_gpu"} 1' in prometheus_step(h).output

    node = "dev-a1-ws02"  # time-sliced, one GPU × 2 replicas, ws-shared's quota on it
    before = lab.nvidia(node)
    assert before == {SHARED: "2"}
    acks = {"capacity_acknowledged": 9, "evictions_acknowledged": 9}
    i = run(lab, "I", node, acks)
    assert_on_mps(lab, i, node, stale=GPU)

    j = run(lab, "J", node, acks)
    assert_left_mps(lab, j, node, "timeslicing", "timeslicing", SHARED, 2)


def test_a_failed_e_is_restored_and_the_mps_daemon_leaves_on_the_lab(on_lab, monkeypatch):
    """E stops after the relabel (the test refuses its plugin check): the node is left cordoned
    with both MPS labels and the MPS pods on it. Restore (procedure R, from the run's record)
    takes nvidia.com/mps.capable away with the sharing label and uncordons; the DaemonSet
    controller replaces the MPS control daemon and plugin with the default plugin, and the node
    serves its whole GPU again. Restore does not wait for the plugin nor remove what the MPS
    plugin advertised: the kubelet keeps nvidia.com/gpu.shared in capacity, the stale-capacity
    finding names it, and its Fix (procedure S) removes it."""
    from gpus.procedures import service, steps
    from gpus.procedures.base import Check
    from tests.gpus.test_procedures_lab import findings, fix_of, nothing_left

    lab, node = on_lab, "dev-a1-ws04"
    monkeypatch.setattr(steps.PluginPodRunning, "verify", lambda self, ctx: Check(False, "stopped", "by the test"))
    monkeypatch.setenv("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0")  # the refused check fails at once
    stopped = run(lab, "E", node)
    monkeypatch.undo()
    assert stopped.status == "failed"
    raw = lab.admin.get_node(node)
    assert raw["metadata"]["labels"][vocab.MPS_CAPABLE_LABEL] == "true" and raw["spec"].get("unschedulable")
    wait_until(lambda: plugin_pods(lab, node) == {"mps": "Running", MPS_DAEMON: "Running"}, 60, "the MPS pods")
    wait_until(lambda: lab.nvidia(node).get(SHARED) == "3", 60, "the MPS plugin's replicas advertised")

    params = service.restore_params(stopped, lab.admin)
    assert params["labels"] == {
        vocab.GPU_TYPE_LABEL: "nvidia",
        vocab.SHARING_LABEL: "none",
        vocab.MPS_CAPABLE_LABEL: None,
    }
    restored = run(lab, "R", node, params)
    assert restored.status == "succeeded", restored.message
    raw = lab.admin.get_node(node)
    assert raw["metadata"]["labels"][vocab.SHARING_LABEL] == "none"
    assert vocab.MPS_CAPABLE_LABEL not in raw["metadata"]["labels"] and not raw["spec"].get("unschedulable")
    wait_until(lambda: all_plugin_pods(lab, node) == ["default"], 60, f"only the default plugin on {node}")
    wait_until(lambda: lab.nvidia(node) == {GPU: "1", SHARED: "0"}, 60, "the whole GPU served again")
    assert lab.nvidia(node, "capacity") == {GPU: "1", SHARED: "3"}  # the kubelet keeps what MPS advertised

    (problem,) = findings(lab, "stale-capacity", node)
    code, fix_params = fix_of(problem)
    assert (code, fix_params) == ("S", {"stale_resource": SHARED})
    fix = run(lab, code, node, fix_params)
    assert fix.status == "succeeded", fix.message
    assert lab.nvidia(node) == lab.nvidia(node, "capacity") == {GPU: "1"}
    assert findings(lab, "stale-capacity") == []
    nothing_left(lab, code, node, fix_params)
