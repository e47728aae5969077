"""The ledger on the shipped scenarios: the numbers each scenario was built to show, exactly."""

import pytest

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger


def compute(gw):
    return ledger.compute(take_snapshot(gw, use_prometheus=False))


def rows(led):
    return {r.label: (r.logical, r.requested) for r in led.by_type}


def availability(led):
    return {r.resource: (r.logical, r.allocated, r.available) for r in led.by_resource}


def test_seed_example_gives_the_seeds_tables(load_scenario):
    led = compute(load_scenario("seed-example"))
    assert rows(led) == {"NVIDIA A30": (1, 0), "NVIDIA A30 (Shared)": (2, 0)}
    assert availability(led) == {"nvidia.com/gpu": (1, 1, 0), "nvidia.com/gpu.shared": (2, 1, 1)}
    ws02 = led.node("dev-a1-ws02")
    assert (ws02.mode, ws02.physical, ws02.logical, ws02.replicas) == ("timeslicing", 1, 2, 2)
    assert led.physical == 2 and led.physical_used == 0


def test_qks_counts_operator_time_slicing_as_shared(load_scenario):
    led = compute(load_scenario("qks"))
    qcs05, qcs06, qcs07 = led.node("qcs05"), led.node("qcs06"), led.node("qcs07")
    assert qcs05.convention == "operator"
    assert qcs05.mode == "timeslicing"
    assert qcs05.resources["nvidia.com/gpu"].gpu_type == "shared"
    assert (qcs05.logical, qcs05.physical) == (5, 1)
    assert qcs06.mode == "exclusive" and qcs06.resources["nvidia.com/gpu"].gpu_type == "exclusive"
    assert qcs07.mode == "mig"
    assert {r.gpu_type: r.allocatable for r in qcs07.served if r.allocatable} == {"mig-1g.24gb": 4, "mig-4g.96gb": 1}
    assert {r.gpu_type: r.requested for r in qcs07.served if r.requested} == {"mig-1g.24gb": 3, "mig-4g.96gb": 1}
    assert (qcs07.physical, qcs07.physical_used) == (2, 2)
    labels = rows(led)
    model = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert labels[f"{model} (Shared)"] == (5, 0)
    assert labels[f"{model} MIG 1g.24gb"] == (4, 3)
    assert labels[f"{model} MIG 4g.96gb"] == (1, 1)
    # CPU-only nodes are not GPU nodes
    assert led.node("qcs01") is None


def test_demo_reports_cordoned_stale_and_missing_plugins_honestly(load_scenario):
    led = compute(load_scenario("demo"))
    assert len(led.nodes) >= 12
    assert len({n.model for n in led.nodes}) == 3
    # stale nvidia.com/gpu left in capacity on a time-slicing node: flagged, never counted
    a100_04 = led.node("gpu-a100-04")
    stale = a100_04.resources["nvidia.com/gpu"]
    assert stale.stale and stale.stale_severity == "capacity" and stale.capacity == 4
    assert a100_04.logical == a100_04.resources["nvidia.com/gpu.shared"].allocatable == 16
    # cordoned node: still logical (kubelet reports it) but shown as cordoned
    a100_03 = led.node("gpu-a100-03")
    assert a100_03.cordoned and a100_03 in led.cordoned_nodes
    exclusive_a100 = next(r for r in led.by_type if r.label == "NVIDIA A100 80GB PCIe")
    assert exclusive_a100.cordoned_logical == 8
    # a DaemonSet that does not tolerate the node's taint: no plugin, no GPUs exposed
    a100_02 = led.node("gpu-a100-02")
    assert a100_02.plugin_state == "missing" and a100_02.logical == 0 and a100_02.physical == 8
    # the sharing label typo: no DaemonSet selects the node
    h100_05 = led.node("gpu-h100-05")
    assert h100_05.mode == "unlabelled" and h100_05.plugin_state == "missing"
    assert {n.name for n in led.plugin_down_nodes} == {"gpu-a100-02", "gpu-h100-05"}
    # a plugin still running the old replicas (rollout restart skipped)
    a30_04 = led.node("gpu-a30-04")
    assert (a30_04.replicas, a30_04.configured_replicas) == (2, 4)
    # the sums agree with the per-node figures
    assert led.logical == sum(n.logical for n in led.nodes)
    assert led.resource("nvidia.com/gpu.shared").allocated == 28


def test_requested_follows_pods_and_ignores_terminal_ones(load_scenario):
    gw = load_scenario("seed-example")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nb", "namespace": "ws-shared"},
        "spec": {
            "nodeName": "dev-a1-ws02",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}],
        },
        "status": {"phase": "Running"},
    }
    gw._save(pod)
    gw._bump()
    led = compute(gw)
    assert rows(led)["NVIDIA A30 (Shared)"] == (2, 1)
    assert led.node("dev-a1-ws02").physical_used == 1
    pod["status"]["phase"] = "Succeeded"
    gw._save(pod)
    gw._bump()
    assert rows(compute(gw))["NVIDIA A30 (Shared)"] == (2, 0)


@pytest.mark.parametrize("allocatable,severity", [("0", "capacity"), ("1", "allocatable")])
def test_stale_severity_from_a_plain_snapshot(allocatable, severity):
    from brickadmin.cluster.snapshot import Snapshot

    node = {
        "metadata": {
            "name": "n1",
            "labels": {"brick.cloud/gpu.type": "nvidia", "brick.cloud/gpu.sharing": "timeslicing"},
        },
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "2"},
            "allocatable": {"nvidia.com/gpu": allocatable, "nvidia.com/gpu.shared": "2"},
        },
    }
    config = {
        "metadata": {"name": "nvidia-device-plugin-config-timeslicing"},
        "data": {
            "config.yaml": (
                "sharing:\n  timeSlicing:\n    renameByDefault: true\n"
                "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
            )
        },
    }
    led = ledger.compute(Snapshot(nodes=[node], gpu_pods=[], quotas=[], plugin_configmaps=[config]))
    n = led.node("n1")
    assert n.resources["nvidia.com/gpu"].stale_severity == severity
    assert n.logical == 2
    assert n.plugin_state == "missing"
    assert n.physical_source == "derived" and n.physical == 1


def test_snapshot_restores_the_garbage_collector(load_scenario):
    import gc

    from brickadmin.cluster.snapshot import _cache, without_gc_pauses

    gw = load_scenario("seed-example")
    assert gc.isenabled()
    _cache.clear()
    take_snapshot(gw, use_prometheus=False)
    assert gc.isenabled()
    with without_gc_pauses():
        with without_gc_pauses():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_dashboard_shows_one_row_per_model_whichever_source_named_it(db, alice_client):
    """On a page: gpu-1's devices are named by DCGM-style modelName, gpu-2's
    only by the gpu.product label; the per-model detail has one A100 row."""
    import re

    from brickadmin.cluster import scenarios as s
    from brickadmin.cluster.twin import TwinGateway

    model = "NVIDIA A100-SXM4-40GB"
    objects = s.device_plugin_manifest(replicas=2) + [
        s.node("gpu-1", model=model, sharing="none", gpu_count=2),
        s.node("gpu-2", model=model, sharing="none", gpu_count=2),
    ]
    assert objects[-1]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    unnamed = [dict(g, model="") for g in s.gpus("gpu-2", model, 2, 40960)]
    TwinGateway().load(objects, {"gpu-1": s.gpus("gpu-1", model, 2, 40960), "gpu-2": unnamed})
    html = alice_client.get("/dashboard/models/").content.decode()
    rows = [re.sub(r"<[^>]+>", " ", r).split() for r in re.findall(r"<tr><td>.*?</tr>", html, re.S)]
    assert [r[:8] for r in rows] == [["NVIDIA", "A100", "SXM4", "40GB", "4", "0", "4", "nvidia.com/gpu"]]


def test_layouts_counts_every_layout_nvidia_documents(load_scenario):
    led = compute(load_scenario("layouts"))
    modes = {n.name: (n.mode, n.logical, n.physical) for n in led.nodes}
    assert modes == {
        "gpu-single-01": ("mig-single", 28, 4),  # 4 A100 x 7 x 1g.10gb, all nvidia.com/gpu
        "gpu-single-02": ("mig-single", 8, 2),  # 2 H100 x 2 x 3g.40gb, time-sliced x2 (-MIG-3g.40gb-SHARED)
        "gpu-single-bad": ("mig-single", 0, 2),  # MIG-INVALID: the plugin refuses, nothing offered
        "gpu-mixed-01": ("mig", 3, 2),  # 2 x mig-3g.40gb and one whole GPU
        "gpu-ts-01": ("timeslicing", 16, 4),  # -SHARED product, plain nvidia.com/gpu
        "gpu-ts-02": ("timeslicing", 8, 2),  # renameByDefault: nvidia.com/gpu.shared
        "gpu-whole-01": ("exclusive", 8, 8),
    }
    a100, h100, a30 = "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA A30"
    assert {(r.label, r.resource): (r.logical, r.requested, r.physical) for r in led.by_type} == {
        (a100, "nvidia.com/gpu"): (1, 0, 1),
        (f"{a100} MIG 1g.10gb", "nvidia.com/gpu"): (28, 2, 4),
        (f"{a100} MIG 3g.40gb", "nvidia.com/mig-3g.40gb"): (2, 1, 1),
        (f"{a30} (Shared)", "nvidia.com/gpu"): (16, 0, 4),
        # renameByDefault: a row of its own, a quota of nvidia.com/gpu.shared is not one of nvidia.com/gpu
        (f"{a30} (Shared)", "nvidia.com/gpu.shared"): (8, 0, 2),
        (h100, "nvidia.com/gpu"): (8, 0, 8),
        # time-sliced MIG devices: replicas, not devices
        (f"{h100} MIG 3g.40gb (Shared)", "nvidia.com/gpu"): (8, 0, 2),
    }
    gpu = led.resource("nvidia.com/gpu")
    assert (gpu.logical, gpu.allocated, gpu.gpu_type) == (61, 6, "mixed")  # 28 + 8 MIG, 1 + 8 whole, 16 shared
    assert sorted(gpu.mig_on) == [["gpu-single-01", "1g.10gb", 28], ["gpu-single-02", "3g.40gb", 8]]
    assert [n for n, _r, _l in gpu.shared_on] == ["gpu-ts-01"]
