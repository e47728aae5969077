"""The ledger on plain in-memory snapshots: no database, no twin."""

from gpus.choices import GpuMode, GpuType
from gpus.numbers import ledger
from gpus.view.reading import ledger_of

from .inmemory import GPU, SHARED, gpu_pod, node, plugin_pod, quota, snapshot


def test_exclusive_and_timeslicing_nodes_count_logical_requested_and_allocated():
    snap = snapshot(
        [node("ex-1", physical=2), node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8)})],
        gpu_pods=[
            gpu_pod("ws-a", "train", "ex-1"),
            gpu_pod("ws-b", "nb", "ts-1", SHARED, 1),
            gpu_pod("ws-b", "done", "ts-1", SHARED, 1, phase="Succeeded"),
        ],
        quotas=[quota("ws-a", {GPU: 1}), quota("ws-b", {SHARED: 3})],
    )
    led = ledger.compute(snap)
    ex, ts = led.node("ex-1"), led.node("ts-1")
    assert (ex.mode, ex.logical, ex.requested, ex.physical) == ("exclusive", 2, 1, 2)
    assert (ts.mode, ts.logical, ts.requested, ts.replicas, ts.configured_replicas) == ("timeslicing", 8, 1, 4, 4)
    assert [(r.resource, r.logical, r.allocated, r.available) for r in led.by_resource] == [
        (GPU, 2, 1, 1),
        (SHARED, 8, 3, 5),
    ]
    assert (led.logical, led.requested) == (10, 2)


def test_stale_resources_are_reported_not_counted():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8), GPU: (2, 0)})])
    n = ledger.compute(snap).node("ts-1")
    assert [(r.resource, r.stale_severity) for r in n.stale] == [(GPU, "capacity")]
    assert n.logical == 8


def test_node_carries_its_taints_and_pods_with_their_phase():
    taints = [
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
    ]
    snap = snapshot(
        [node("ex-1", taints=taints)],
        gpu_pods=[
            gpu_pod("ws-a", "train", "ex-1", amount=2),
            gpu_pod("ws-a", "old", "ex-1", phase="Failed"),
            gpu_pod("ws-a", "elsewhere", "other-node"),
        ],
        plugin_pods=[plugin_pod("ex-1", phase="Pending")],
    )
    n = ledger.compute(snap).node("ex-1")
    assert [(t.key, t.value, t.effect) for t in n.taints] == [
        ("dedicated", "ml", "NoSchedule"),
        ("nvidia.com/gpu", "", "NoSchedule"),
    ]
    assert [str(t) for t in n.taints] == ["dedicated=ml:NoSchedule", "nvidia.com/gpu:NoSchedule"]
    assert n.tainted  # "dedicated" is one a plugin DaemonSet may not tolerate
    assert [(p.namespace, p.name, p.phase, p.gpu_requests) for p in n.pods] == [
        ("ws-a", "train", "Running", {GPU: 2}),
        ("ws-a", "old", "Failed", {GPU: 1}),
    ]
    assert n.pods[0].requests_text == "nvidia.com/gpu: 2"
    assert [(p.name, p.phase, p.running, p.component) for p in n.plugin_pods] == [
        ("nvidia-device-plugin-default-ex-1", "Pending", False, "device-plugin-default")
    ]
    assert n.plugin_state == "pending"
    assert n.requested == 2  # the Failed pod holds nothing


def test_cordoned_unlabelled_and_non_gpu_nodes():
    snap = snapshot([node("ex-1", unschedulable=True), node("typo-1", sharing="timesliced"), node("cpu-1", gpu=False)])
    led = ledger.compute(snap)
    assert [n.name for n in led.nodes] == ["ex-1", "typo-1"]
    assert led.node("ex-1").cordoned and led.cordoned_nodes == [led.node("ex-1")]
    assert led.node("typo-1").mode == GpuMode.UNLABELLED
    assert led.node("cpu-1") is None and ledger.has_node(snap, "cpu-1") and not ledger.has_node(snap, "nope")


def test_replicas_the_plugin_advertises_versus_the_config():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=4, resources={SHARED: (8, 8)})], replicas=4)
    n = ledger.compute(snap).node("ts-1")
    assert (n.replicas, n.configured_replicas) == (2, 4)


def test_the_ledger_is_memoised_per_snapshot_not_stored_on_it():
    snap = snapshot([node("ex-1")])
    first = ledger_of(snap)
    assert ledger_of(snap) is first
    assert not hasattr(snap, "ledger")
    other = snapshot([node("ex-1")])
    assert ledger_of(other) is not first


def test_choices_carry_label_and_colour_and_compare_as_strings():
    assert GpuMode.TIMESLICING == "timeslicing" and GpuMode.of("timeslicing") is GpuMode.TIMESLICING
    assert GpuMode.of("bogus") is None
    assert str(GpuMode.UNLABELLED.label) == "Unrecognised labels" and GpuMode.MIG.colour == "mode-mig"
    assert GpuType.of("mig-1g.5gb") is GpuType.MIG and GpuType.label_of("mig-1g.5gb") == "MIG 1g.5gb"
    assert GpuType.label_of("shared") == "Shared (time-slicing)" and GpuType.SHARED.colour
    assert ledger.gpu_type_of(SHARED) == GpuType.SHARED


def test_one_gpu_model_is_one_dashboard_row_whichever_source_named_it():
    """DCGM's modelName and GFD's gpu.product label name the same A100."""
    from brickadmin.cluster.vocabulary import gpu_model_name

    assert (
        gpu_model_name("NVIDIA A100-SXM4-40GB")
        == gpu_model_name("NVIDIA-A100-SXM4-40GB")
        == gpu_model_name("NVIDIA-A100-SXM4-40GB-SHARED")
        == "NVIDIA A100 SXM4 40GB"
    )
    assert gpu_model_name("NVIDIA A30") == "NVIDIA A30"
    labelled = node("by-label", physical=2)
    labelled["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB"
    by_dcgm = node("by-dcgm", physical=2)
    snap = snapshot([labelled, by_dcgm])
    snap.devices = {"by-dcgm": [{"uuid": f"GPU-{i}", "model": "NVIDIA A100-SXM4-40GB"} for i in range(2)]}
    snap.device_source = "dcgm"
    led = ledger.compute(snap)
    assert led.node("by-label").model == led.node("by-dcgm").model == "NVIDIA A100 SXM4 40GB"
    rows = [(r.label, r.logical, r.physical, r.nodes) for r in led.by_type]
    assert rows == [("NVIDIA A100 SXM4 40GB", 4, 4, 2)]


def test_a_kept_memo_recomputes_only_what_changed_and_equals_a_fresh_ledger():
    """The watcher's publish keeps a memo between generations: a node whose pods changed
    gets a new line, the others keep theirs, and the ledger is the one computed afresh."""
    nodes = [
        node("ex-1", physical=2),
        node("ex-2", physical=2),
        node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8)}),
    ]
    pods = [gpu_pod("ws-a", "train", "ex-1"), gpu_pod("ws-b", "nb", "ts-1", SHARED, 1)]
    memo = {}
    first = ledger.compute(snapshot(nodes, gpu_pods=pods), memo=memo)
    second = ledger.compute(snapshot(nodes, gpu_pods=pods + [gpu_pod("ws-a", "more", "ex-2")]), memo=memo)
    assert second.node("ex-1") is first.node("ex-1") and second.node("ts-1") is first.node("ts-1")
    assert second.node("ex-2") is not first.node("ex-2") and second.node("ex-2").requested == 1
    fresh = ledger.compute(snapshot(nodes, gpu_pods=pods + [gpu_pod("ws-a", "more", "ex-2")]))
    assert [ledger.node_to_dict(n) for n in second.nodes] == [ledger.node_to_dict(n) for n in fresh.nodes]
    assert (second.by_type, second.by_resource) == (fresh.by_type, fresh.by_resource)
    # a node that changed itself (cordoned) and a pod finishing are both new lines
    cordoned = [node("ex-1", physical=2, unschedulable=True), nodes[1], nodes[2]]
    done = [gpu_pod("ws-a", "train", "ex-1"), gpu_pod("ws-b", "nb", "ts-1", SHARED, 1, phase="Succeeded")]
    third = ledger.compute(snapshot(cordoned, gpu_pods=done), memo=memo)
    assert third.node("ex-1").cordoned and third.node("ts-1").requested == 0
    assert set(memo) == {"ex-1", "ex-2", "ts-1"}


def test_occupancy_with_a_kept_memo_equals_a_fresh_one_after_changes():
    """The publish keeps the Workspaces' GPU maps and pod lines between generations: after
    a pod starts, another finishes and a third arrives, every Workspace's figures and pod
    lines equal those computed afresh, and an untouched pod's line is the one kept."""
    import dataclasses

    from gpus.numbers import occupancy

    nodes = [
        node("ex-1", physical=2),
        node("ex-2", physical=2),
        node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8)}),
    ]
    quotas = [quota("ws-a", {GPU: 3}), quota("ws-b", {SHARED: 4})]
    first_pods = [
        gpu_pod("ws-a", "train", "ex-1"),
        gpu_pod("ws-a", "wait", "ex-2", phase="Pending"),
        gpu_pod("ws-b", "nb", "ts-1", SHARED, 1),
        gpu_pod("ws-b", "nb2", "ts-1", SHARED, 1),
    ]
    later_pods = [
        first_pods[0],
        gpu_pod("ws-a", "wait", "ex-2"),  # started
        first_pods[2],
        gpu_pod("ws-b", "nb2", "ts-1", SHARED, 1, phase="Succeeded"),  # finished
        gpu_pod("ws-b", "nb3", "ts-1", SHARED, 1),
    ]  # new
    lmemo, omemo = {}, {}

    def run(pods, memo):
        snap = snapshot(nodes, gpu_pods=pods, quotas=quotas)
        return occupancy.compute(snap, ledger.compute(snap, memo=lmemo if memo else None), memo=omemo if memo else None)

    run(first_pods, True)
    kept_line = omemo["namespaces"]["ws-a"][2]["ws-a/train"][2]
    with_memo, fresh = run(later_pods, True), run(later_pods, False)
    assert {k: dataclasses.asdict(v) for k, v in with_memo.items()} == {
        k: dataclasses.asdict(v) for k, v in fresh.items()
    }
    assert with_memo["ws-a"].requested == 2 and [p["name"] for p in with_memo["ws-b"].pods] == ["nb", "nb3"]
    assert omemo["namespaces"]["ws-a"][2]["ws-a/train"][2] is kept_line


def test_occupancy_keeps_an_untouched_workspace_and_redoes_one_whose_readings_changed():
    """Between generations, a Workspace none of whose parts changed is the last
    generation's line (the publish then skips its row), even when the node under its pod
    got a new label; one whose DCGM readings changed is computed again, and every line
    equals a fresh computation."""
    import dataclasses

    from gpus.numbers import occupancy

    nodes = [node("ex-1", physical=2), node("ex-2", physical=2)]
    quotas = [quota("ws-a", {GPU: 1}), quota("ws-b", {GPU: 1})]
    pods = [gpu_pod("ws-a", "train", "ex-1"), gpu_pod("ws-b", "nb", "ex-2")]
    lmemo, omemo = {}, {}

    def run(nodes, usage, memo=True):
        snap = snapshot(nodes, gpu_pods=pods, quotas=quotas)
        snap.usage = usage
        return occupancy.compute(snap, ledger.compute(snap, memo=lmemo if memo else None), memo=omemo if memo else None)

    first = run(nodes, {"ws-a/train": {"GPU-0": [10.0, 100.0]}, "ws-b/nb": {"GPU-0": [10.0, 100.0]}})
    relabelled = [node("ex-1", physical=2, labels={"example.com/rack": "r2"}), nodes[1]]
    usage = {"ws-a/train": {"GPU-0": [10.0, 100.0]}, "ws-b/nb": {"GPU-0": [90.0, 100.0]}}  # ws-b's GPU got busy
    second = run(relabelled, usage)
    assert second["ws-a"] is first["ws-a"]
    assert second["ws-b"] is not first["ws-b"] and second["ws-b"].utilisation == 90.0
    fresh = run(relabelled, usage, memo=False)
    assert {k: dataclasses.asdict(v) for k, v in second.items()} == {k: dataclasses.asdict(v) for k, v in fresh.items()}
    assert fresh["ws-a"].requested == fresh["ws-b"].requested == 1 and fresh["ws-a"].physical == 1


def test_quantities_in_canonical_form_count_in_full():
    # The API server writes 1000 back as "1k": capacity, pod requests and quotas alike.
    typed = node("ex-1", physical=2)
    typed["metadata"]["labels"]["nvidia.com/gpu.count"] = "two"
    snap = snapshot(
        [node("ts-1", sharing="timeslicing", physical=250, resources={SHARED: ("1k", "1k")}), typed],
        gpu_pods=[gpu_pod("ws-b", "big", "ts-1", SHARED, "1500m"), gpu_pod("ws-b", "more", "ts-1", SHARED, "0.5k")],
        quotas=[quota("ws-b", {SHARED: "1k"}), quota("ws-a", {GPU: "2000m"})],
    )
    led = ledger.compute(snap)
    ts = led.node("ts-1")
    assert (ts.logical, ts.requested, ts.physical, ts.replicas) == (1000, 502, 250, 4)
    assert [(r.resource, r.logical, r.allocated) for r in led.by_resource] == [(GPU, 2, 2), (SHARED, 1000, 1000)]
    # a count label that is no number is not trusted: the count comes from allocatable
    assert (led.node("ex-1").physical, led.node("ex-1").physical_source) == (2, "derived")
