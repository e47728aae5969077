"""Every KubeGateway operation against the lab's real API server.

Each test runs twice: as the lab admin, and as the chart's ServiceAccount with only the
roles and admission policies deploy/chart grants (so they are proven to cover every
operation; what they refuse: test_least_privilege.py).
Assertions read the cluster state back, never the calls made.
"""

from __future__ import annotations

import copy
import re
import threading
import time

import pytest

from brickadmin.cluster.base import (
    ClusterUnreachable,
    Conflict,
    DrainResult,
    Forbidden,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)
from brickadmin.cluster.kube import KubeGateway
from workspaces.labels import namespace_labels

from .conftest import make_namespace, make_node, make_pod, wait_until

pytestmark = pytest.mark.lab

NS = "lab-gw-test"
WORKSPACE_NS = "lab-gw-workspace"  # Jobs go only into Workspace namespaces (the chart's policy)


@pytest.fixture(scope="module")
def seeded(lab):
    lab.load("seed-example")
    make_namespace(lab, NS)
    return lab


@pytest.fixture(params=["admin", "serviceaccount"])
def gw(request, seeded, rbac):
    if request.param == "admin":
        g = copy.copy(seeded.admin)
    else:
        g = KubeGateway(seeded.kubeconfig, token=rbac["token"])
    g.tag = request.param[:2]  # keeps the objects of the two runs apart
    return g


def names(objs):
    return sorted(o["metadata"]["name"] for o in objs)


# --- reads -----------------------------------------------------------------------------


def test_nodes_list_get_and_label_selector(gw):
    assert {"dev-a1-ws02", "dev-a1-ws04"} <= set(names(gw.list_nodes()))
    assert names(gw.list_nodes(label_selector="brick.cloud/gpu.sharing=none")) == ["dev-a1-ws04"]
    node = gw.get_node("dev-a1-ws04")
    assert node["kind"] == "Node" and node["apiVersion"] == "v1"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"  # camelCase API shape, strings
    with pytest.raises(NotFound) as e:
        gw.get_node("no-such-node")
    assert e.value.status == 404 and not e.value.transient


def test_list_items_are_api_shaped_and_paginated(seeded, gw):
    everything = gw.list_pods()
    small_pages = copy.copy(gw)
    small_pages.page_size = 1
    assert names(small_pages.list_pods()) == names(everything)
    assert len(everything) >= 2
    pod = everything[0]
    assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    assert {"metadata", "spec", "status"} <= set(pod)


def test_pods_by_node_field_selector_and_labels(gw):
    pods = gw.list_pods(namespace="brick-nvidia", field_selector="spec.nodeName=dev-a1-ws04")
    assert len(pods) == 1
    assert pods[0]["metadata"]["labels"]["app.kubernetes.io/component"] == "default"
    ts = gw.list_pods(
        namespace="brick-nvidia",
        label_selector="app.kubernetes.io/component=timeslicing",
        field_selector="spec.nodeName=dev-a1-ws02",
    )
    assert len(ts) == 1 and ts[0]["spec"]["nodeName"] == "dev-a1-ws02"
    assert (
        gw.list_pods(
            namespace="brick-nvidia",
            label_selector="app.kubernetes.io/component=timeslicing",
            field_selector="spec.nodeName=dev-a1-ws04",
        )
        == []
    )


def test_daemonsets_configmaps_quotas_namespaces(gw):
    assert names(gw.list_daemonsets("brick-nvidia")) == [
        "nvidia-device-plugin-default",
        "nvidia-device-plugin-mps",
        "nvidia-device-plugin-mps-control-daemon",
        "nvidia-device-plugin-timeslicing",
    ]
    assert names(gw.list_daemonsets(label_selector="app.kubernetes.io/component=default")) == [
        "nvidia-device-plugin-default"
    ]
    ds = gw.get_daemonset("brick-nvidia", "nvidia-device-plugin-timeslicing")
    assert ds["spec"]["template"]["spec"]["nodeSelector"]["brick.cloud/gpu.sharing"] == "timeslicing"
    cms = gw.list_configmaps("brick-nvidia", label_selector="app.kubernetes.io/name=nvidia-device-plugin")
    assert names(cms) == [
        "nvidia-device-plugin-config-default",
        "nvidia-device-plugin-config-mps",
        "nvidia-device-plugin-config-timeslicing",
    ]
    cm = gw.get_configmap("brick-nvidia", "nvidia-device-plugin-config-timeslicing")
    assert "replicas: 2" in cm["data"]["config.yaml"]
    with pytest.raises(NotFound):
        gw.get_configmap("brick-nvidia", "nope")
    hard = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in gw.list_resource_quotas()}
    assert hard["ws-exclusive"]["requests.nvidia.com/gpu"] == "1"
    assert hard["ws-shared"]["requests.nvidia.com/gpu.shared"] == "1"
    assert names(gw.list_resource_quotas("ws-shared")) == ["workspace-quota"]
    assert names(gw.list_namespaces(label_selector="brick.cloud/workspace=true")) == ["ws-exclusive", "ws-shared"]
    assert gw.gpu_devices() is None


def test_pdbs_and_jobs_lists(seeded, gw):
    seeded.admin.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "list-me", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "list-me"}}},
        },
        field_manager="lab-tests",
    )
    assert "list-me" in names(gw.list_pod_disruption_budgets(NS))
    assert "list-me" in names(gw.list_pod_disruption_budgets())
    assert isinstance(gw.list_jobs(), list)


# --- node writes -----------------------------------------------------------------------


def test_cordon_and_uncordon(seeded, gw):
    make_node(seeded, f"gw-cordon-{gw.tag}")
    gw.cordon(f"gw-cordon-{gw.tag}")
    assert seeded.admin.get_node(f"gw-cordon-{gw.tag}")["spec"]["unschedulable"] is True
    gw.cordon(f"gw-cordon-{gw.tag}")  # idempotent
    gw.uncordon(f"gw-cordon-{gw.tag}")
    assert "unschedulable" not in seeded.admin.get_node(f"gw-cordon-{gw.tag}")["spec"]
    gw.uncordon(f"gw-cordon-{gw.tag}")
    with pytest.raises(NotFound):
        gw.cordon("no-such-node")


def test_label_node_sets_overwrites_and_removes(seeded, gw):
    make_node(seeded, f"gw-label-{gw.tag}", labels={"brick.cloud/gpu.sharing": "none", "keep": "me"})
    out = gw.label_node(f"gw-label-{gw.tag}", {"brick.cloud/gpu.sharing": "timeslicing", "added": "x"})
    assert out["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
    gw.label_node(f"gw-label-{gw.tag}", {"added": None, "never-there": None})
    labels = seeded.admin.get_node(f"gw-label-{gw.tag}")["metadata"]["labels"]
    assert labels["brick.cloud/gpu.sharing"] == "timeslicing" and labels["keep"] == "me"
    assert "added" not in labels


def test_remove_node_status_resources(seeded, gw):
    make_node(seeded, f"gw-status-{gw.tag}")
    seeded.admin._request(
        "PATCH",
        f"/api/v1/nodes/gw-status-{gw.tag}/status",
        content_type="application/merge-patch+json",
        body={
            "status": {
                "capacity": {"example.com/stale": "4", "example.com/keep": "1"},
                "allocatable": {"example.com/stale": "0", "example.com/keep": "1"},
            }
        },
    )
    gw.remove_node_status_resources(f"gw-status-{gw.tag}", ["example.com/stale"])
    st = seeded.admin.get_node(f"gw-status-{gw.tag}")["status"]
    assert "example.com/stale" not in st["capacity"] and "example.com/stale" not in st["allocatable"]
    assert st["capacity"]["example.com/keep"] == "1" and st["capacity"]["cpu"] == "32"
    # removing what is already gone is a no-op, not an error
    gw.remove_node_status_resources(f"gw-status-{gw.tag}", ["example.com/stale", "example.com/never"])
    assert seeded.admin.get_node(f"gw-status-{gw.tag}")["status"]["capacity"]["example.com/keep"] == "1"


# --- drain -----------------------------------------------------------------------------


def _drain_node(seeded, name):
    """A node with a device-plugin DaemonSet pod (BRICK labels) and a fresh namespace."""
    make_node(
        seeded,
        name,
        labels={"brick.cloud/gpu.type": "nvidia", "brick.cloud/gpu.sharing": "none"},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )
    wait_until(
        lambda: seeded.admin.list_pods("brick-nvidia", field_selector=f"spec.nodeName={name}"),
        60,
        "the DaemonSet pod on the node",
    )
    return name


def test_drain_evicts_skips_daemonset_pods_and_waits(seeded, gw):
    node = _drain_node(seeded, f"gw-drain-1-{gw.tag}")
    make_pod(seeded, NS, f"plain-1-{gw.tag}", node)
    make_pod(seeded, NS, f"scratch-1-{gw.tag}", node, emptydir=True)
    result = gw.drain(node, delete_emptydir_data=True, timeout_seconds=60)
    assert isinstance(result, DrainResult)
    assert sorted(result.evicted) == [f"{NS}/plain-1-{gw.tag}", f"{NS}/scratch-1-{gw.tag}"]
    assert len(result.skipped) == 1 and result.skipped[0].startswith("brick-nvidia/nvidia-device-plugin-default")
    assert result.blocked == {} and result.done
    # outcome: the node is cordoned, the pods are gone, the DaemonSet pod stays
    assert seeded.admin.get_node(node)["spec"]["unschedulable"] is True
    left = seeded.admin.list_pods(field_selector=f"spec.nodeName={node}")
    assert [p["metadata"]["namespace"] for p in left] == ["brick-nvidia"]


def test_drain_leaves_emptydir_pods_unless_allowed(seeded, gw):
    node = _drain_node(seeded, f"gw-drain-2-{gw.tag}")
    make_pod(seeded, NS, f"scratch-2-{gw.tag}", node, emptydir=True)
    make_pod(seeded, NS, f"plain-2-{gw.tag}", node)
    result = gw.drain(node, delete_emptydir_data=False, timeout_seconds=10)
    assert not result.done
    # as kubectl drain: the pod it may not delete stops the drain before any eviction
    assert result.blocked == {
        f"{NS}/scratch-2-{gw.tag}": "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
    }
    assert result.evicted == []
    for name in (f"scratch-2-{gw.tag}", f"plain-2-{gw.tag}"):
        assert seeded.admin.get_pod(NS, name)["metadata"].get("deletionTimestamp") is None
    result = gw.drain(node, delete_emptydir_data=True, timeout_seconds=30)
    assert result.done and sorted(result.evicted) == [f"{NS}/plain-2-{gw.tag}", f"{NS}/scratch-2-{gw.tag}"]
    with pytest.raises(NotFound):
        seeded.admin.get_pod(NS, f"scratch-2-{gw.tag}")


def _pdb(seeded, name, app):
    seeded.admin.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
        },
        field_manager="lab-tests",
    )
    # eviction reads the PDB's status, which the disruption controller fills in
    wait_until(
        lambda: (
            seeded.admin._request("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/{name}").get("status")
            or {}
        ).get("observedGeneration"),
        30,
        "PDB status",
    )


def test_drain_pdb_refusal_is_retried_until_timeout(seeded, gw):
    node = _drain_node(seeded, f"gw-drain-3-{gw.tag}")
    make_pod(seeded, NS, f"guarded-3-{gw.tag}", node, labels={"app": f"guarded-3-{gw.tag}"})
    _pdb(seeded, f"guard-3-{gw.tag}", f"guarded-3-{gw.tag}")
    t0 = time.monotonic()
    result = gw.drain(node, timeout_seconds=4)
    assert time.monotonic() - t0 >= 3.5  # kept retrying until the timeout
    assert not result.done and result.evicted == []
    assert "disruption budget" in result.blocked[f"{NS}/guarded-3-{gw.tag}"]
    assert seeded.admin.get_pod(NS, f"guarded-3-{gw.tag}")["status"]["phase"] == "Running"


def test_drain_succeeds_once_the_pdb_allows(seeded, gw):
    node = _drain_node(seeded, f"gw-drain-4-{gw.tag}")
    make_pod(seeded, NS, f"guarded-4-{gw.tag}", node, labels={"app": f"guarded-4-{gw.tag}"})
    _pdb(seeded, f"guard-4-{gw.tag}", f"guarded-4-{gw.tag}")
    threading.Timer(3, lambda: seeded.admin.delete("policy/v1", "PodDisruptionBudget", f"guard-4-{gw.tag}", NS)).start()
    result = gw.drain(node, timeout_seconds=40)
    assert result.done and result.evicted == [f"{NS}/guarded-4-{gw.tag}"] and result.blocked == {}
    with pytest.raises(NotFound):
        seeded.admin.get_pod(NS, f"guarded-4-{gw.tag}")


# --- generic writes --------------------------------------------------------------------


def test_server_side_apply_with_field_manager(seeded, gw):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa-test", "namespace": "brick-nvidia", "labels": {"a": "1"}},
        "data": {"config.yaml": "version: v1\n"},
    }
    seeded.admin.delete("v1", "ConfigMap", "ssa-test", "brick-nvidia")
    out = gw.apply(cm, field_manager="brickadmin-test")
    assert out["data"]["config.yaml"] == "version: v1\n"
    cm["data"]["config.yaml"] = "version: v1\nflags: {migStrategy: mixed}\n"
    gw.apply(cm, field_manager="brickadmin-test")
    live = seeded.admin.get_configmap("brick-nvidia", "ssa-test")
    assert "migStrategy" in live["data"]["config.yaml"]
    managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]}
    assert ("brickadmin-test", "Apply") in managers
    # a DaemonSet's selector is immutable: the API server says 422 (permanent)
    ds = seeded.admin.get_daemonset("brick-nvidia", "nvidia-device-plugin-default")
    bad = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": ds["metadata"]["name"], "namespace": "brick-nvidia"},
        "spec": {
            **{k: v for k, v in ds["spec"].items() if k in ("template", "updateStrategy")},
            "selector": {"matchLabels": {"app.kubernetes.io/name": "other"}},
        },
    }
    with pytest.raises(PermanentClusterError) as e:
        gw.apply(bad, field_manager="brickadmin-test")
    assert e.value.status == 422 and not e.value.transient


def _ds(name, component, selector_extra=None):
    labels = {"app.kubernetes.io/name": "sel-test", "app.kubernetes.io/component": component}
    sel = {**labels, **(selector_extra or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "brick-nvidia"},
        "spec": {
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": {
                    "nodeSelector": {"brick.cloud/never": "true"},
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            },
        },
    }


def test_daemonset_delete_and_recreate_with_a_new_selector(seeded, gw):
    """The manifest flow for an immutable selector: delete, then apply again (and delete is idempotent)."""
    name = f"sel-test-{gw.tag}"
    seeded.admin.delete("apps/v1", "DaemonSet", name, "brick-nvidia")
    wait_until(
        lambda: not [d for d in seeded.admin.list_daemonsets("brick-nvidia") if d["metadata"]["name"] == name],
        30,
        "old DaemonSet gone",
    )
    gw.apply(_ds(name, "a"), field_manager="brickadmin-test")
    with pytest.raises(PermanentClusterError):
        gw.apply(_ds(name, "a", {"extra": "x"}), field_manager="brickadmin-test")
    gw.delete("apps/v1", "DaemonSet", name, "brick-nvidia")
    wait_until(
        lambda: not [d for d in seeded.admin.list_daemonsets("brick-nvidia") if d["metadata"]["name"] == name],
        30,
        "DaemonSet deleted",
    )
    gw.delete("apps/v1", "DaemonSet", name, "brick-nvidia")  # already gone: no error
    gw.apply(_ds(name, "a", {"extra": "x"}), field_manager="brickadmin-test")
    live = seeded.admin.get_daemonset("brick-nvidia", name)
    assert live["spec"]["selector"]["matchLabels"]["extra"] == "x"
    seeded.admin.delete("apps/v1", "DaemonSet", name, "brick-nvidia")


def test_workspace_flow_apply_quota_limitrange_then_delete_namespace(seeded, gw):
    ns = f"gw-ws-{gw.tag}-{int(time.time() * 1000) % 100000}"
    gw.create_namespace(ns, namespace_labels("alice"))  # as the product makes one: the chart refuses others
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "priority", "namespace": ns},
            "spec": {
                "hard": {"pods": "10"},
                "scopeSelector": {
                    "matchExpressions": [
                        {"operator": "In", "scopeName": "PriorityClass", "values": ["brick-user-priority"]}
                    ]
                },
            },
        }
    )
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "defaults", "namespace": ns},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]},
        }
    )
    assert [q["metadata"]["name"] for q in seeded.admin.list_resource_quotas(ns)] == ["priority"]
    assert seeded.admin._request("GET", f"/api/v1/namespaces/{ns}/limitranges/defaults")["spec"]["limits"]
    gw.delete("v1", "Namespace", ns)
    wait_until(
        lambda: not [n for n in seeded.admin.list_namespaces() if n["metadata"]["name"] == ns],
        120,
        "the namespace to be deleted",
    )


def test_delete_is_idempotent(seeded, gw):
    seeded.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "del-me", "namespace": "brick-nvidia"},
            "data": {"x": "y"},
        },
        field_manager="lab-tests",
    )
    seeded.admin.delete("v1", "ConfigMap", "del-me", "brick-nvidia")
    with pytest.raises(NotFound):
        seeded.admin.get_configmap("brick-nvidia", "del-me")
    gw.delete("batch/v1", "Job", "never-was", NS)  # already gone: no error


def test_rollout_restart_and_status(seeded, gw):
    ns, name = "brick-nvidia", "nvidia-device-plugin-default"
    wait_until(lambda: gw.daemonset_rollout_status(ns, name).done, 60, "a settled rollout")
    old = {
        p["metadata"]["uid"] for p in seeded.admin.list_pods(ns, label_selector="app.kubernetes.io/component=default")
    }
    gw.rollout_restart_daemonset(ns, name)
    ann = seeded.admin.get_daemonset(ns, name)["spec"]["template"]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/restartedAt" in ann
    status = wait_until(
        lambda: (lambda s: s if s.done else None)(gw.daemonset_rollout_status(ns, name)), 90, "the restart to roll out"
    )
    assert isinstance(status, RolloutStatus) and status.desired >= 1
    assert status.updated == status.desired == status.available
    assert status.message == f'daemon set "{name}" successfully rolled out'
    new = {
        p["metadata"]["uid"]
        for p in seeded.admin.list_pods(ns, label_selector="app.kubernetes.io/component=default")
        if not p["metadata"].get("deletionTimestamp")
    }
    assert new and not (new & old)  # every plugin pod was replaced


def test_create_namespace_quota_priority_class(seeded, gw):
    ns = f"gw-create-{gw.tag}-{int(time.time() * 1000) % 100000}"
    out = gw.create_namespace(ns, namespace_labels("alice"))
    assert out["metadata"]["name"] == ns
    assert (
        seeded.admin._request("GET", f"/api/v1/namespaces/{ns}")["metadata"]["labels"]["brick.cloud/owner"] == "alice"
    )
    with pytest.raises(Conflict) as e:  # with the labels the product sends (the chart refuses it others)
        gw.create_namespace(ns, namespace_labels("alice"))
    assert e.value.status == 409
    for wrong in ("nvidia.com/gpu", "limits.nvidia.com/gpu"):  # accepted by Kubernetes, but enforce nothing
        with pytest.raises(PermanentClusterError) as e:
            gw.create_resource_quota(ns, "wrong", {wrong: "1"})
        assert e.value.status == 422 and "requests.nvidia.com/gpu" in e.value.message
    assert gw.list_resource_quotas(ns) == []
    gw.create_resource_quota(
        ns,
        "workspace-quota",
        {"requests.nvidia.com/gpu.shared": "2", "requests.nvidia.com/gpu": 1, "requests.cpu": "4"},
    )
    (q,) = seeded.admin.list_resource_quotas(ns)
    assert q["spec"]["hard"] == {
        "requests.nvidia.com/gpu.shared": "2",
        "requests.nvidia.com/gpu": "1",
        "requests.cpu": "4",
    }
    pc = f"brick-test-{int(time.time() * 1000) % 100000}"
    gw.create_priority_class(pc, 1000, "test class")
    live = seeded.admin._request("GET", f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc}")
    assert live["value"] == 1000 and live["preemptionPolicy"] == "PreemptLowerPriority"
    with pytest.raises(Conflict):
        gw.create_priority_class(pc, 1000)
    seeded.admin.delete("scheduling.k8s.io/v1", "PriorityClass", pc)
    seeded.admin.delete("v1", "Namespace", ns)


def test_create_job_runs_on_an_exclusive_node(seeded, gw):
    make_namespace(seeded, WORKSPACE_NS, {"brick.cloud/workspace": "true"})
    name = f"train-{gw.tag}-{int(time.time() * 1000) % 100000}"
    job = {
        "metadata": {"name": name, "labels": {"brick.cloud/job": "true"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": "dev-a1-ws04"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {"name": "train", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                    ],
                }
            },
        },
    }
    out = gw.create_job(WORKSPACE_NS, job)
    assert out["kind"] == "Job" and out["metadata"]["namespace"] == WORKSPACE_NS
    assert name in names(gw.list_jobs(WORKSPACE_NS, label_selector="brick.cloud/job=true"))
    # the Job controller made a pod, the scheduler put it on dev-a1-ws04 (which has nvidia.com/gpu: 1)
    pods = wait_until(
        lambda: seeded.admin.list_pods(WORKSPACE_NS, label_selector=f"job-name={name}"), 30, "the Job's pod"
    )
    wait_until(
        lambda: seeded.admin.list_pods(WORKSPACE_NS, label_selector=f"job-name={name}")[0]["spec"].get("nodeName"),
        30,
        "the Job's pod to be scheduled",
    )
    assert (
        seeded.admin.list_pods(WORKSPACE_NS, label_selector=f"job-name={name}")[0]["spec"]["nodeName"] == "dev-a1-ws04"
    )
    assert pods
    gw.delete("batch/v1", "Job", name, WORKSPACE_NS)
    wait_until(
        lambda: not seeded.admin.list_pods(WORKSPACE_NS, label_selector=f"job-name={name}"), 60, "the Job's pods to go"
    )
    seeded.admin.delete("v1", "Namespace", WORKSPACE_NS)


def test_list_gpu_pods(seeded, gw):
    make_pod(seeded, NS, f"gpu-holder-{gw.tag}", "dev-a1-ws02", gpu={"nvidia.com/gpu.shared": "1"})
    held = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in gw.list_gpu_pods()}
    assert f"{NS}/gpu-holder-{gw.tag}" in held
    assert not any(k.startswith("brick-nvidia/") for k in held)
    seeded.admin.delete("v1", "Pod", f"gpu-holder-{gw.tag}", NS)


# --- errors ----------------------------------------------------------------------------


def test_unreachable_api_server_is_transient(tmp_path, seeded):
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        re.sub(r"server: https://127\.0\.0\.1:\d+", "server: https://127.0.0.1:1", open(seeded.kubeconfig).read())
    )
    gw = KubeGateway(str(kc), request_timeout=3)
    with pytest.raises(ClusterUnreachable) as e:
        gw.list_nodes()
    assert e.value.transient and isinstance(e.value, TransientClusterError)
    assert "did not answer" in e.value.message


def test_bad_token_and_invalid_input_are_permanent(seeded):
    bad = KubeGateway(seeded.kubeconfig, token="not-a-token")
    with pytest.raises(PermanentClusterError) as e:
        bad.list_nodes()
    assert e.value.status == 401 and not e.value.transient
    with pytest.raises(PermanentClusterError) as e:
        seeded.admin.create_resource_quota(NS, "bad", {"requests.nvidia.com/gpu": "-1"})
    assert e.value.status == 422 and e.value.reason == "Invalid"
    with pytest.raises(PermanentClusterError) as e:
        seeded.admin.create_resource_quota(NS, "bad", {"requests.nvidia.com/gpu": "lots"})
    assert e.value.status == 400 and not e.value.transient


def test_serviceaccount_cannot_delete_a_node(seeded, rbac):
    """The chart's role grants nothing on nodes beyond get/list/watch/patch: deleting one is refused."""
    sa = KubeGateway(seeded.kubeconfig, token=rbac["token"])
    with pytest.raises(Forbidden) as e:
        sa.delete("v1", "Node", "dev-a1-ws04")
    assert e.value.status == 403 and not e.value.transient
    assert seeded.admin.get_node("dev-a1-ws04")["metadata"]["name"] == "dev-a1-ws04"
