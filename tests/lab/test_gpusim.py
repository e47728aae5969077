"""The GPU node simulator (lab/gpusim.py) on the lab: device plugin + kubelet behaviour
driven by real DaemonSet pods, and the DCGM-format metrics scraped by Prometheus."""

from __future__ import annotations

import re

import pytest

from .conftest import make_namespace, make_pod, wait_until

pytestmark = pytest.mark.lab

PLUGIN_NS = "brick-nvidia"
TS_CM = "nvidia-device-plugin-config-timeslicing"


@pytest.fixture(scope="module")
def seeded(lab):
    lab.load("seed-example")
    return lab


def plugin_pods(lab, node, component=None):
    sel = f"app.kubernetes.io/component={component}" if component else "app.kubernetes.io/name=nvidia-device-plugin"
    return [
        p
        for p in lab.admin.list_pods(PLUGIN_NS, label_selector=sel, field_selector=f"spec.nodeName={node}")
        if not p["metadata"].get("deletionTimestamp")
    ]


def running_plugin(lab, node, component):
    pods = plugin_pods(lab, node)
    return (
        len(pods) == 1
        and pods[0]["metadata"]["labels"]["app.kubernetes.io/component"] == component
        and pods[0]["status"].get("phase") == "Running"
    )


def set_replicas(lab, n):
    cm = lab.admin.get_configmap(PLUGIN_NS, TS_CM)
    text = re.sub(r"replicas: \d+", f"replicas: {n}", cm["data"]["config.yaml"])
    lab.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": TS_CM, "namespace": PLUGIN_NS},
            "data": {"config.yaml": text},
        },
        field_manager="lab-tests",
    )


def restart_and_wait(lab, ds):
    lab.admin.rollout_restart_daemonset(PLUGIN_NS, ds)
    wait_until(lambda: lab.admin.daemonset_rollout_status(PLUGIN_NS, ds).done, 60, f"{ds} rollout")


def test_plugin_pods_set_capacity_from_physical_gpus_and_config(seeded):
    assert seeded.nvidia("dev-a1-ws04") == {"nvidia.com/gpu": "1"}
    assert seeded.nvidia("dev-a1-ws04", "capacity") == {"nvidia.com/gpu": "1"}
    # time-slicing, replicas 2, renameByDefault: one A30 is two nvidia.com/gpu.shared
    assert seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "2"}
    assert running_plugin(seeded, "dev-a1-ws02", "timeslicing")


def test_relabel_moves_the_plugin_and_leaves_the_old_resource_stale(seeded):
    gw = seeded.admin
    gw.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "timeslicing"})
    wait_until(lambda: running_plugin(seeded, "dev-a1-ws04", "timeslicing"), 60, "the time-slicing plugin on ws04")
    wait_until(lambda: seeded.nvidia("dev-a1-ws04").get("nvidia.com/gpu.shared") == "2", 30, "gpu.shared 2")
    seeded.gpusim_syncs(4)
    # like kubelet: the resource no longer served stays in capacity, allocatable 0
    assert seeded.nvidia("dev-a1-ws04", "capacity") == {"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "2"}
    assert seeded.nvidia("dev-a1-ws04") == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "2"}
    # ... until a status patch removes it; then it stays gone
    gw.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu"])
    seeded.gpusim_syncs(4)
    assert seeded.nvidia("dev-a1-ws04", "capacity") == {"nvidia.com/gpu.shared": "2"}
    assert seeded.nvidia("dev-a1-ws04") == {"nvidia.com/gpu.shared": "2"}
    # a status patch of a resource the plugin still serves: kubelet puts it back
    gw.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu.shared"])
    wait_until(lambda: seeded.nvidia("dev-a1-ws04") == {"nvidia.com/gpu.shared": "2"}, 30, "gpu.shared back")
    # and back to exclusive
    gw.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "none"})
    wait_until(lambda: running_plugin(seeded, "dev-a1-ws04", "default"), 60, "the default plugin on ws04")
    wait_until(
        lambda: seeded.nvidia("dev-a1-ws04") == {"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "0"},
        30,
        "exclusive again, gpu.shared stale",
    )
    gw.remove_node_status_resources("dev-a1-ws04", ["nvidia.com/gpu.shared"])
    wait_until(lambda: seeded.nvidia("dev-a1-ws04", "capacity") == {"nvidia.com/gpu": "1"}, 30, "clean")


def test_configmap_edit_changes_nothing_until_a_rollout_restart(seeded):
    set_replicas(seeded, 4)
    seeded.gpusim_syncs(6)
    assert seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "2"}  # the plugin read its config at start
    old_uid = plugin_pods(seeded, "dev-a1-ws02")[0]["metadata"]["uid"]
    restart_and_wait(seeded, "nvidia-device-plugin-timeslicing")
    assert plugin_pods(seeded, "dev-a1-ws02")[0]["metadata"]["uid"] != old_uid
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "4"}, 30, "gpu.shared 4")
    set_replicas(seeded, 2)
    restart_and_wait(seeded, "nvidia-device-plugin-timeslicing")
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "2"}, 30, "gpu.shared 2 again")


def test_a_config_the_plugin_refuses_registers_nothing_and_crash_loops(seeded):
    cm = seeded.admin.get_configmap(PLUGIN_NS, TS_CM)
    good = cm["data"]["config.yaml"]
    refused = good.replace("replicas: 2", 'replicas: 2\n      devices: ["GPU-UUID"]')
    assert refused != good

    def put(text):
        seeded.admin.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": TS_CM, "namespace": PLUGIN_NS},
                "data": {"config.yaml": text},
            },
            field_manager="lab-tests",
        )

    put(refused)
    old_uid = plugin_pods(seeded, "dev-a1-ws02")[0]["metadata"]["uid"]
    seeded.admin.rollout_restart_daemonset(PLUGIN_NS, "nvidia-device-plugin-timeslicing")

    def crash_looping():
        pods = plugin_pods(seeded, "dev-a1-ws02")
        return (
            len(pods) == 1
            and pods[0]["metadata"]["uid"] != old_uid
            and [
                ((c.get("state") or {}).get("waiting") or {}).get("reason")
                for c in pods[0]["status"].get("containerStatuses") or []
            ]
            == ["CrashLoopBackOff"]
        )

    wait_until(crash_looping, 60, "the new plugin pod in CrashLoopBackOff")
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "0"}, 30, "allocatable 0")
    assert seeded.nvidia("dev-a1-ws02", "capacity") == {"nvidia.com/gpu.shared": "2"}  # kubelet keeps capacity
    put(good)
    restart_and_wait(seeded, "nvidia-device-plugin-timeslicing")
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "2"}, 30, "gpu.shared 2 again")


def test_no_plugin_pod_means_allocatable_zero(seeded):
    gw = seeded.admin
    gw.label_node("dev-a1-ws02", {"brick.cloud/gpu.sharing": "time-slicing"})  # a label typo: no DaemonSet matches
    wait_until(lambda: not plugin_pods(seeded, "dev-a1-ws02"), 60, "the plugin pod to go")
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "0"}, 30, "allocatable 0")
    assert seeded.nvidia("dev-a1-ws02", "capacity") == {"nvidia.com/gpu.shared": "2"}
    gw.label_node("dev-a1-ws02", {"brick.cloud/gpu.sharing": "timeslicing"})
    wait_until(lambda: seeded.nvidia("dev-a1-ws02") == {"nvidia.com/gpu.shared": "2"}, 60, "back to 2")


def test_dcgm_metrics_name_gpus_and_the_pods_using_them(seeded):
    text = seeded.gpusim("/metrics")
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"):
        assert re.search(
            metric + r'\{gpu="0",UUID="GPU-f65bd7d6-a2f4-1a04-c6ca-ea13eba1eb58",device="nvidia0",'
            r'modelName="NVIDIA A30",Hostname="dev-a1-ws04"[,}]',
            text,
        ), metric
    make_namespace(seeded, "lab-dcgm")
    make_pod(seeded, "lab-dcgm", "trainer", "dev-a1-ws04", gpu={"nvidia.com/gpu": "1"})
    wait_until(
        lambda: 'pod="trainer",namespace="lab-dcgm",container="main"' in seeded.gpusim("/metrics"),
        30,
        "the pod label on the GPU's series",
    )
    rows = wait_until(
        lambda: seeded.prom('DCGM_FI_DEV_GPU_UTIL{pod="trainer",namespace="lab-dcgm"}'),
        30,
        "Prometheus to scrape the pod's GPU series",
    )
    assert rows[0]["metric"]["UUID"] == "GPU-f65bd7d6-a2f4-1a04-c6ca-ea13eba1eb58"
    assert rows[0]["metric"]["Hostname"] == "dev-a1-ws04" and float(rows[0]["value"][1]) > 0
    seeded.admin.delete("v1", "Namespace", "lab-dcgm")


def test_kube_state_metrics_exposes_gpu_node_labels_and_allocatable(seeded):
    rows = wait_until(
        lambda: seeded.prom('kube_node_labels{node="dev-a1-ws02",label_brick_cloud_gpu_sharing="timeslicing"}'),
        30,
        "kube_node_labels with the allowlisted BRICK labels",
    )
    assert rows[0]["metric"]["label_nvidia_com_gpu_product"] == "NVIDIA-A30"

    def allocatable():
        rows = seeded.prom('kube_node_status_allocatable{node="dev-a1-ws02",resource=~"nvidia_com.+"}')
        return {r["metric"]["resource"]: r["value"][1] for r in rows}

    # KSM watches the node and Prometheus scrapes every 2 s: the value follows within seconds
    wait_until(lambda: allocatable() == {"nvidia_com_gpu_shared": "2"}, 30, "allocatable nvidia resources")


def test_the_simulator_pages_its_lists_and_sees_every_pod(seeded):
    """gpusim lists in pages (one unpaginated list of 60,000 pods outlasted its client's
    timeout, and then no node got its GPUs): a page size far below the pod count still
    returns every pod, once."""
    import gpusim  # lab/gpusim.py (tests/lab/conftest.py puts lab/ on sys.path)

    ns = "brick-gpusim-paging"
    make_namespace(seeded, ns)
    for i in range(5):
        make_pod(seeded, ns, f"page-{i}", None, wait_running=False)
    api = gpusim.Api(seeded.kubeconfig)
    everyone = sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in seeded.admin.list_pods())
    assert len(everyone) >= 7
    paged = sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in api.items("/api/v1/pods", page_size=2))
    assert paged == everyone
    mine = api.items("/api/v1/pods", keep=lambda p: p["metadata"]["namespace"] == ns, page_size=3)
    assert sorted(p["metadata"]["name"] for p in mine) == [f"page-{i}" for i in range(5)]
    seeded.admin.delete("v1", "Namespace", ns)


def test_a_scenarios_plugin_pod_stays_on_its_node_under_the_labs_daemonset(lab):
    """The `waiting` scenario names its plugin pod's DaemonSet with an empty uid, on a node
    whose taint the DaemonSet does not tolerate: the loader gives the pod the lab's owner and
    its current revision, so the API server takes it and the DaemonSet controller keeps it."""
    try:
        lab.load("waiting")
        pods = plugin_pods(lab, "gpu-h100-01")
        assert [p["metadata"]["name"] for p in pods] == ["nvidia-device-plugin-default-gpu-h100-01"]
        ds = lab.admin._request("GET", "/apis/apps/v1/namespaces/brick-nvidia/daemonsets/nvidia-device-plugin-default")
        assert pods[0]["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
        assert pods[0]["status"]["phase"] == "Running"
    finally:
        lab.load("seed-example")  # the module's other tests read the seed
