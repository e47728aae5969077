"""Every way NVIDIA's device plugin shares GPUs, loaded through the scenario loader (scenario
"sharing", written by scenarios/build.py from deviceplugin.py): the logical and physical counts
the ledger, the Dashboard and the Nodes page show, with and without per-device data."""

import dataclasses
import re

import pytest
from django.urls import reverse

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger

A30, A100, H100 = "NVIDIA A30", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3"

# node -> (mode, sharing strategy, logical, physical) as NVIDIA's plugin serves it
NODES = {
    "gpu-exclusive": ("exclusive", "none", 2, 2),
    "gpu-ts": ("timeslicing", "time-slicing", 8, 2),  # 2 x 4 replicas, nvidia.com/gpu (-SHARED)
    "gpu-ts-renamed": ("timeslicing", "time-slicing", 6, 2),  # 2 x 3, nvidia.com/gpu.shared
    "gpu-mps": ("mps", "mps", 8, 2),  # 2 x 4 MPS replicas: MPS is a mode of its own
    "gpu-mps-renamed": ("mps", "mps", 2, 1),
    "gpu-mig-single": ("mig-single", "none", 14, 2),  # 2 x 7 x 1g.10gb as nvidia.com/gpu
    "gpu-mig-mixed": ("mig", "none", 3, 2),  # 2 x 3g.40gb on one GPU, the other whole
    "gpu-mixed-ts": ("mig", "time-slicing", 28, 2),  # 14 x mig-1g.10gb x 2 replicas
    "gpu-mixed-ts-renamed": ("mig", "time-slicing", 9, 1),  # 3 x mig-2g.20gb.shared x 3
    "gpu-single-ts": ("mig-single", "time-slicing", 8, 2),  # 4 x 3g.40gb x 2, "-MIG-3g.40gb-SHARED"
    "gpu-single-mps": ("exclusive", "none", 0, 1),  # MPS of MIG devices (MIG single): refused
    "gpu-refused": ("exclusive", "none", 0, 2),  # replicas 0: the plugin refuses, registers nothing
    "gpu-mps-mixed": ("exclusive", "none", 0, 1),  # MPS with MIG mixed: refused
    "gpu-mps-49": ("exclusive", "none", 0, 1),  # 49 MPS clients of a GPU that takes 48: refused
}

REFUSED = ("gpu-refused", "gpu-mps-mixed", "gpu-single-mps", "gpu-mps-49")

# Dashboard rows (a refused node's GPUs are in none): (label, gpu type, sharing strategy, logical, requested, physical).
# A renamed resource (renameByDefault) is a row of its own after the plain one's: a quota of one is not of the other.
ROWS = [
    ("NVIDIA A100 80GB PCIe", "exclusive", "none", 1, 0, 1),
    ("NVIDIA A100 80GB PCIe (MPS)", "shared", "mps", 8, 1, 2),  # gpu-mps: nvidia.com/gpu
    ("NVIDIA A100 80GB PCIe (MPS)", "shared", "mps", 2, 0, 1),  # gpu-mps-renamed: nvidia.com/gpu.shared
    ("NVIDIA A100 80GB PCIe MIG 1g.10gb", "mig-1g.10gb", "none", 14, 0, 2),
    ("NVIDIA A100 80GB PCIe MIG 1g.10gb (Shared)", "mig-1g.10gb", "time-slicing", 28, 2, 2),
    ("NVIDIA A100 80GB PCIe MIG 2g.20gb (Shared)", "mig-2g.20gb", "time-slicing", 9, 0, 1),
    ("NVIDIA A100 80GB PCIe MIG 3g.40gb", "mig-3g.40gb", "none", 2, 0, 1),
    ("NVIDIA A30", "exclusive", "none", 2, 0, 2),
    ("NVIDIA A30 (Shared)", "shared", "time-slicing", 8, 0, 2),  # gpu-ts: nvidia.com/gpu
    ("NVIDIA A30 (Shared)", "shared", "time-slicing", 6, 0, 2),  # gpu-ts-renamed: nvidia.com/gpu.shared
    ("NVIDIA H100 80GB HBM3 MIG 3g.40gb (Shared)", "mig-3g.40gb", "time-slicing", 8, 0, 2),
]


@pytest.fixture
def sharing(load_scenario):
    return load_scenario("sharing")


def _text(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.decode())).strip()


@pytest.mark.parametrize("per_device", [True, False], ids=["devices", "labels-only"])
def test_every_sharing_layout_is_counted_as_nvidia_serves_it(sharing, per_device):
    snap = take_snapshot(sharing, use_prometheus=False)
    if not per_device:  # no DCGM and no twin hardware: counts from labels and node status alone
        snap = dataclasses.replace(snap, devices={}, device_source="labels")
    led = ledger.compute(snap)
    expected = dict(NODES)
    if not per_device:  # a refused config: nothing registered, nothing labelled, so no GPU is known
        for name in REFUSED:
            expected[name] = (*NODES[name][:3], 0)
    got = {n.name: (n.mode, n.sharing_strategy, n.logical, n.physical) for n in led.nodes}
    assert got == expected
    assert [(r.label, r.gpu_type, r.sharing_strategy, r.logical, r.requested, r.physical) for r in led.by_type] == ROWS
    assert led.physical == sum(p for _m, _s, _l, p in expected.values())


def test_replicated_resources_keep_their_replicas_and_strategy(sharing):
    led = ledger.compute(take_snapshot(sharing, use_prometheus=False))
    lines = {
        (n.name, r.resource): (r.gpu_type, r.replicas, r.sharing_strategy)
        for n in led.nodes
        for r in n.served
        if r.capacity
    }
    assert lines[("gpu-mps", "nvidia.com/gpu")] == ("shared", 4, "mps")
    assert lines[("gpu-mps-renamed", "nvidia.com/gpu.shared")] == ("shared", 2, "mps")
    assert lines[("gpu-ts-renamed", "nvidia.com/gpu.shared")] == ("shared", 3, "time-slicing")
    assert lines[("gpu-mixed-ts", "nvidia.com/mig-1g.10gb")] == ("mig-1g.10gb", 2, "time-slicing")
    assert lines[("gpu-mixed-ts-renamed", "nvidia.com/mig-2g.20gb.shared")] == ("mig-2g.20gb", 3, "time-slicing")
    assert lines[("gpu-single-ts", "nvidia.com/gpu")] == ("mig-3g.40gb", 2, "time-slicing")
    for refused in REFUSED:  # a plugin that refuses its config, or MPS on its GPUs, serves nothing
        assert not [line for (node, _r), line in lines.items() if node == refused]
    assert lines[("gpu-mig-mixed", "nvidia.com/gpu")] == ("exclusive", 1, "none")
    # A replica of a time-sliced MIG device is its share of the GPU over the replicas.
    node = led.node("gpu-mixed-ts")
    assert ledger.physical_share(node, "nvidia.com/mig-1g.10gb") == pytest.approx(1 / 7 / 2)
    # Two of its 28 replicas are requested: they fit on one 1g.10gb device, so one GPU is in use.
    assert node.physical_used == 1


def test_the_stored_view_keeps_each_rows_sharing_strategy(sharing):
    from gpus.view import publish as view_publish
    from gpus.view import stored as clusterview

    view_publish.publish(take_snapshot(sharing, use_prometheus=False))
    rows = clusterview.stored_view().ledger.by_type
    assert [(r.label, r.sharing_strategy, r.logical, r.physical) for r in rows] == [
        (label, how, logical, physical) for label, _t, how, logical, _r, physical in ROWS
    ]
    node = clusterview.stored_view().ledger.node("gpu-mps")
    assert (node.mode, node.sharing_strategy, node.shared_replicas) == ("mps", "mps", 4)


def test_dashboard_names_mps_and_shared_mig_rows_with_their_counts(sharing, admin_client):
    html = _text(admin_client.get(reverse("dashboard_models")).content)
    for label, _t, _s, logical, requested, physical in ROWS:
        assert f"{label} {logical} {requested} {physical}" in html, label


def test_nodes_page_names_mps_apart_from_time_slicing(sharing, admin_client):
    html = _text(admin_client.get(reverse("node_list") + "?per_page=50").content)
    for name, shown in [
        ("gpu-mps", "MPS ×4"),
        ("gpu-mps-renamed", "MPS ×2"),
        ("gpu-ts", "Time-slicing ×4"),
        ("gpu-ts-renamed", "Time-slicing ×3"),
        ("gpu-single-ts", "MIG single Time-slicing ×2"),
        ("gpu-mixed-ts", "MIG mixed Time-slicing ×2"),
        ("gpu-mixed-ts-renamed", "MIG mixed Time-slicing ×3"),
    ]:
        assert re.search(rf"\b{name} [A-Za-z0-9 ]*? {shown} ", html), (name, shown)
    detail = _text(admin_client.get(reverse("node_detail", args=["gpu-mps"])).content)
    assert "Mode : MPS" in detail or "Mode: MPS" in detail


def test_availability_and_the_dashboard_say_mps_not_time_slicing(sharing, admin_client):
    led = ledger.compute(take_snapshot(sharing, use_prometheus=False))
    renamed = led.resource("nvidia.com/gpu.shared")  # MPS renamed beside time-slicing renamed
    assert sorted(renamed.mps_on) == [["gpu-mps-renamed", 2, 2]]
    assert renamed.sharing_strategy == "time-slicing"  # 6 of its 8 are time-sliced
    gpu = led.resource("nvidia.com/gpu")
    assert [n for n, _r, _l in gpu.mps_on] == ["gpu-mps"]
    assert [n for n, _r, _l in gpu.time_sliced_on] == ["gpu-ts"]
    html = _text(admin_client.get(reverse("availability")).content)
    assert "Shared by MPS (each replica a share of the GPU's compute and memory) on: gpu-mps (replicas 4: 8)" in html
    assert "Time-sliced (shared, no memory isolation) on: gpu-ts (replicas 4: 8)" in html


def test_jobs_are_refused_on_shared_nodes_with_the_strategy_named(sharing):
    from workspaces import jobs

    led = ledger.compute(take_snapshot(sharing, use_prometheus=False))
    options = {o.name: (o.selectable, str(o.reason)) for o in jobs.job_node_options(led)}
    assert options["gpu-mps"] == (False, "MPS nodes do not support Jobs")
    assert options["gpu-ts"] == (False, "Time-slicing nodes do not support Jobs")
    assert options["gpu-mixed-ts"] == (False, "MIG nodes do not support Jobs")
    assert options["gpu-exclusive"][0] is True
