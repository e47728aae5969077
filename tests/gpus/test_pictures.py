"""The pictures (gpus/pictures.py, gpus/gpumap.py): pure geometry, then the pages that show them."""

import re

import pytest
from django.urls import reverse

from gpus.numbers import gpumap, ledger, pictures
from gpus.numbers.ledger import node_from_dict, node_to_dict


def _rects(svg, kind):
    return [
        (float(x), float(w)) for x, w in re.findall(rf'data-kind="{kind}" x="([\d.]+)%" y="4" width="([\d.]+)%"', svg)
    ]


# --- the capacity bar -------------------------------------------------------------------


def test_bar_widths_are_proportional_and_add_up_to_the_total():
    svg = str(pictures.capacity_bar("nvidia.com/gpu", total=8, allocated=6, requested=2))
    ((rx, rw),) = _rects(svg, "requested")
    ((ax, aw),) = _rects(svg, "allocated")
    ((fx, fw),) = _rects(svg, "free")
    assert (rx, rw) == (0, 25.0) and (ax, aw) == (25.0, 50.0) and (fx, fw) == (75.0, 25.0)
    assert not _rects(svg, "over") and "pic-marker" not in svg
    assert 'role="img"' in svg and "<title>" in svg
    assert "Total 8, allocated to Workspaces 6, requested by pods 2, free 2." in svg


def test_overcommit_is_a_segment_beyond_the_total_marker_and_is_said():
    segments, marker, over = pictures.capacity_segments(total=4, allocated=6, requested=1)
    assert over == 2 and marker == pytest.approx(100 * 4 / 6, abs=0.01)
    kinds = [(s.kind, s.value) for s in segments]
    assert kinds == [("requested", 1), ("allocated", 5), ("over", 2)]
    over_seg = segments[-1]
    assert over_seg.x == pytest.approx(marker, abs=0.01) and over_seg.x + over_seg.width == pytest.approx(100, abs=0.01)
    svg = str(pictures.capacity_bar("nvidia.com/gpu.shared", 4, 6, 1))
    assert 'data-kind="over"' in svg and "pic-marker" in svg
    assert "2 beyond the Total (overcommitted)." in svg


def test_pods_beyond_quota_and_empty_types_draw_without_dividing_by_zero():
    segments, _marker, over = pictures.capacity_segments(total=2, allocated=0, requested=3)  # Jobs: outside quotas
    assert [(s.kind, s.value) for s in segments] == [("requested", 3), ("over", 1)] and over == 1
    segments, marker, over = pictures.capacity_segments(0, 0, 0)
    assert segments == [] and over == 0


def test_text_is_escaped():
    svg = str(pictures.capacity_bar('<script>"x"</script>', 1, 0, 0))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    tile = str(
        pictures.gpu_tile("GPU 0", [{"label": "1/2", "state": "in_use", "pod": "ns/<b>", "state_text": "in use"}])
    )
    assert "<b>" not in tile and "ns/&lt;b&gt;" in tile


# --- the GPU map ---------------------------------------------------------------------------


def _node(mode="timeslicing", replicas=2, devices=2, pods=(), cordoned=False, mig=None, stale=False, source="twin"):
    raw_devices = [{"uuid": f"GPU-{i}", "model": "NVIDIA A30", **({"mig": mig} if mig else {})} for i in range(devices)]
    resources = []
    if mode == "timeslicing":
        resources.append(["nvidia.com/gpu.shared", "shared", devices * replicas, devices * replicas, 0, False])
        if stale:
            resources.append(["nvidia.com/gpu", "exclusive", devices, 1, 0, True])
    elif mig:
        for p in sorted(set(mig)):
            resources.append(
                [f"nvidia.com/mig-{p}", f"mig-{p}", devices * mig.count(p), devices * mig.count(p), 0, False]
            )
    else:
        resources.append(["nvidia.com/gpu", "exclusive", devices, devices, 0, False])
    d = {
        "name": "n1",
        "model": "NVIDIA A30",
        "convention": "brick",
        "mode": mode,
        "sharing_label": "",
        "replicas": replicas,
        "configured_replicas": replicas,
        "ready": True,
        "cordoned": cordoned,
        "tainted": False,
        "plugin_state": "running",
        "resources": resources,
        "raw_devices": raw_devices,
        "in_use": [],
        "physical": devices,
        "physical_used": 0,
        "physical_source": source,
        "labels": {},
        "raw_taints": [],
        "raw_pods": list(pods),
        "raw_plugin_pods": [],
    }
    return node_from_dict(d)


def _pod(name, resource, n=1, phase="Running", ns="ws", created="2026-01-01T00:00:00Z"):
    return {
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {resource: str(n)}}}]},
        "status": {"phase": phase},
    }


def test_tile_count_is_physical_gpus_and_slots_are_replicas():
    node = _node(replicas=4, devices=3)
    m = gpumap.node_map(node)
    assert len(m.tiles) == 3 and m.slots == 3 * 4
    assert [s.label for s in m.tiles[0].slots] == ["1/4", "2/4", "3/4", "4/4"]
    assert node_to_dict(node)  # a plain NodeLedger, as the view stores it


def test_each_slot_names_its_pod_and_state():
    pods = [
        _pod("a", "nvidia.com/gpu.shared", created="2026-01-01T00:00:01Z"),
        _pod("b", "nvidia.com/gpu.shared", created="2026-01-01T00:00:02Z"),
        _pod("c", "nvidia.com/gpu.shared", phase="Pending", created="2026-01-01T00:00:03Z"),
        _pod("done", "nvidia.com/gpu.shared", phase="Succeeded"),
    ]
    m = gpumap.node_map(_node(replicas=2, devices=2, pods=pods))
    assert [(s.pod, s.state) for t in m.tiles for s in t.slots] == [
        ("ws/a", "in_use"),
        ("ws/b", "in_use"),
        ("ws/c", "requested"),
        ("", "free"),
    ]
    tiles = [str(pictures.gpu_tile(t.title, [s.as_dict() for s in t.slots])) for t in m.tiles]
    assert tiles[0].count('class="pic-slot ') == 2 and 'data-pod="ws/a"' in tiles[0] and ">ws/a<" in tiles[0]
    assert 'data-state="requested"' in tiles[1] and "ws/c" in tiles[1]
    assert all('role="img"' in t and "<title>" in t for t in tiles)


def test_mig_instances_are_slots_and_pods_take_their_profile():
    node = _node(
        mode="mig",
        replicas=1,
        devices=2,
        mig=["1g.24gb", "1g.24gb", "2g.48gb"],
        pods=[_pod("llm", "nvidia.com/mig-2g.48gb"), _pod("small", "nvidia.com/mig-1g.24gb", n=3)],
    )
    m = gpumap.node_map(node)
    assert len(m.tiles) == 2 and m.slots == 6
    assert [(s.label, s.pod) for s in m.tiles[0].slots] == [
        ("1g.24gb", "ws/small"),
        ("1g.24gb", "ws/small"),
        ("2g.48gb", "ws/llm"),
    ]
    assert [s.pod for s in m.tiles[1].slots] == ["ws/small", "", ""]


def test_replicated_renamed_mig_instances_are_a_slot_per_replica_and_pods_take_them():
    # MIG mixed, time-sliced x2 with renameByDefault: nvidia.com/mig-1g.24gb.shared
    node = _node(mode="mig", replicas=1, devices=1, mig=["1g.24gb", "1g.24gb"])
    node.resources = {
        "nvidia.com/mig-1g.24gb.shared": ledger.ResourceLine(
            "nvidia.com/mig-1g.24gb.shared", "mig-1g.24gb", 4, 4, 3, replicas=2, sharing_strategy="time-slicing"
        )
    }
    node.raw_pods = [_pod("a", "nvidia.com/mig-1g.24gb.shared", n=3)]
    m = gpumap.node_map(node)
    assert [(s.label, s.pod) for s in m.tiles[0].slots] == [
        ("1/2 1g.24gb", "ws/a"),
        ("2/2 1g.24gb", "ws/a"),
        ("1/2 1g.24gb", "ws/a"),
        ("2/2 1g.24gb", ""),
    ]
    assert m.unplaced == []


def test_cordoned_stale_and_measured_placement():
    node = _node(mode="exclusive", replicas=1, devices=2, cordoned=True, pods=[_pod("t", "nvidia.com/gpu")])
    assert [s.state for t in gpumap.node_map(node).tiles for s in t.slots] == ["in_use", "cordoned"]
    node = _node(replicas=2, devices=1, stale=True, pods=[_pod("old", "nvidia.com/gpu")])
    assert [(s.pod, s.state) for s in gpumap.node_map(node).tiles[0].slots] == [("ws/old", "stale"), ("", "free")]
    # DCGM names the device: the pod goes there, not to the first free GPU
    node = _node(mode="exclusive", replicas=1, devices=2, source="dcgm", pods=[_pod("t", "nvidia.com/gpu")])
    node.raw_devices[1]["pods"] = ["ws/t"]
    assert [s.pod for t in gpumap.node_map(node).tiles for s in t.slots] == ["", "ws/t"]
    # more than the node can give is said, not hidden
    node = _node(mode="exclusive", replicas=1, devices=1, pods=[_pod("t", "nvidia.com/gpu", n=2)])
    assert gpumap.node_map(node).unplaced == [("ws/t", "nvidia.com/gpu")]


def test_korean_state_words_are_shortened_to_fit_the_tile():
    long = "오래된 리소스로 점유됨 오래된 리소스로 점유됨"
    tile = str(pictures.gpu_tile("GPU 0", [{"label": "1/2", "state": "stale", "pod": "", "state_text": long}]))
    shown = re.search(r'class="pic-slot-text"[^>]*>([^<]*)<', tile).group(1)
    assert shown.endswith("…") and sum(2 if ord(c) > 0x1100 else 1 for c in shown) * pictures.CHAR_WIDTH <= 140
    assert long in tile  # whole in the title


# --- the line chart -------------------------------------------------------------------------


def test_line_chart_draws_every_point_and_leaves_gaps_open():
    pts = [(0, 10.0), (30, 50.0), (60, 100.0), (150, 20.0), (180, 0.0)]
    runs = pictures.line_segments(pts, start=0, end=180, step=30)
    assert [len(r) for r in runs] == [3, 2]  # the gap 60 -> 150 is not bridged
    assert runs[0][0] == (0.0, 144.0) and runs[0][2] == (200.0, 0.0) and runs[1][-1] == (600.0, 160.0)
    svg = str(pictures.line_chart(pts, 0, 180, 30, "util"))
    assert 'data-points="5"' in svg and svg.count('class="pic-line"') == 2 and 'role="img"' in svg


def test_no_points_draw_no_line():
    svg = str(pictures.line_chart([], 0, 100, 10, "util"))
    assert "pic-line" not in svg and 'data-points="0"' in svg


# --- the pages ----------------------------------------------------------------------------


@pytest.fixture
def demo(load_scenario):
    return load_scenario("demo")


def test_dashboard_and_availability_show_a_bar_per_gpu_type_with_its_table(demo, alice_client):
    for name in ("dashboard", "availability"):
        html = alice_client.get(reverse(name)).content.decode()
        bars = re.findall(r'<svg class="pic pic-bar" role="img" aria-label="([^"]+)"', html)
        assert len(bars) >= 3, name
        assert any(b.startswith("nvidia.com/gpu:") for b in bars)
        assert "These bars as a table" in html and 'data-testid="capacity-pictures"' in html
        # the utilisation chart is loaded later, by htmx, never inline
        assert 'hx-trigger="load"' in html and "/charts/utilisation/" in html


def test_overcommitted_type_is_drawn_beyond_the_total(load_scenario, alice_client):
    load_scenario("seed-example")
    from brickadmin.cluster.gateway import get_gateway

    gw = get_gateway()
    gw._save(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "extra", "namespace": "ws-shared"},
            "spec": {"hard": {"requests.nvidia.com/gpu.shared": "3"}},
        }
    )
    html = alice_client.get(reverse("availability")).content.decode()
    fig = re.search(
        r'<figure class="pic-figure pic-capacity" data-resource="nvidia.com/gpu.shared">.*?</figure>', html, re.S
    ).group(0)
    assert 'data-kind="over"' in fig and "Overcommitted: 2 beyond the Total" in fig


def test_node_detail_shows_the_gpu_map_with_its_pods(demo, admin_client):
    html = admin_client.get(reverse("node_detail", args=["gpu-a100-04"])).content.decode()
    assert 'data-testid="gpu-map"' in html
    tiles = re.findall(
        r'<svg class="pic pic-tile" role="img" aria-label="[^"]*" viewBox="[^"]*" data-slots="(\d+)"', html
    )
    assert len(tiles) == 4  # the node's physical GPUs
    assert 'data-pod="ws-notebooks/jupyter-frank"' in html
    assert "The GPU map as a table" in html
    assert 'hx-get="/charts/utilisation/node/?' in html


@pytest.mark.parametrize("scenario", ["seed-example", "qks", "demo"])
def test_every_gpu_node_of_every_scenario_has_a_tile_per_physical_gpu(load_scenario, scenario):
    from gpus.view.reading import read_cluster

    load_scenario(scenario)
    for node in read_cluster().ledger.nodes:
        m = gpumap.node_map(node)
        assert len(m.tiles) == node.physical, node.name
        per_gpu = [len(t.slots) for t in m.tiles if t.kind != "mig"]
        replicated = node.mode in ("timeslicing", "mps")  # a slot per replica, time-sliced or MPS client
        assert all(n == (node.replicas if replicated else 1) for n in per_gpu), node.name
        held = {s.pod for t in m.tiles for s in t.slots if s.pod}
        running = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in node.raw_pods
            if (p.get("status") or {}).get("phase") == "Running"
        }
        assert running <= held | {who for who, _res in m.unplaced}, node.name
