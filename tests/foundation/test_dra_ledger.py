"""The ledger on GPUs published through DRA (NVIDIA's driver objects, tests/dra_objects.py):
physical GPUs from the devices, logical units per type, what claims hold, beside the device
plugin's nodes in one set of rows."""

import copy

from brickadmin.cluster.snapshot import Snapshot
from gpus.numbers import dra_lines, ledger
from tests import dra_objects as ex

GPU_CLASS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_CLASS = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def node(name, capacity=None, labels=None):
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **(labels or {})}},
        "spec": {},
        "status": {
            "capacity": dict(capacity or {}),
            "allocatable": dict(capacity or {}),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


DRA_NODES = ["node-a100", "node-a100-mig", "node-h100-dynmig", "node-a100-shares"]


def snapshot(slices=None, claims=None, nodes=None, quotas=(), devices=None):
    return Snapshot(
        nodes=nodes or [node(n) for n in DRA_NODES],
        gpu_pods=[],
        quotas=list(quotas),
        resource_slices=ex.whole_gpu_node() + ex.static_mig_node() + ex.dynamic_mig_node() + ex.shares_node()
        if slices is None
        else slices,
        resource_claims=ex.claims() if claims is None else claims,
        devices=devices or {},
    )


def test_a_dra_node_is_counted_from_its_devices_not_shown_as_zero():
    led = ledger.compute(snapshot())
    a100 = led.node("node-a100")
    assert (a100.mode, a100.stack, a100.physical, a100.physical_source) == ("dra", "dra", 2, "dra")
    assert a100.model == "NVIDIA A100 SXM4 80GB"  # one name whichever source gave it (DCGM, GFD, the driver)
    # gpu-0 held by train-gpu; gpu-1 by one claim shared by two pods (once) and an admin-access claim (not use)
    assert (a100.logical, a100.requested, a100.physical_used) == (2, 2, 2)


def test_static_mig_counts_one_per_mig_device_and_each_gpu_once():
    led = ledger.compute(snapshot())
    mig = led.node("node-a100-mig")
    assert mig.physical == 2  # two parents, never a GPU beside its own MIG devices
    assert mig.resources[MIG_CLASS].allocatable == len([d for d in mig.dra.devices if d.kind == "mig"])
    assert mig.resources[MIG_CLASS].requested == 2  # mig-small holds two 1g.10gb devices


def test_dynamic_mig_counts_counter_sets_and_what_fits_now():
    dyn = ledger.compute(snapshot()).node("node-h100-dynmig")
    assert dyn.physical == 1  # one counter set, however many possible partitions it offers
    gpu = dyn.dra.gpus[0]
    assert gpu.mode == dra_lines.DYNAMIC_MIG and gpu.used == 1
    # what fits now, and the partition the claim holds: free is what fits now
    assert dyn.resources[MIG_CLASS].allocatable == max(gpu.by_profile.values()) + gpu.used


def test_a_dynamic_mig_gpu_handed_out_whole_is_a_whole_gpu_of_the_class_it_was_asked_from():
    """Under dynamic MIG a GPU is offered as MIG partitions (mig.nvidia.com) or whole through its
    gpu device (gpu.nvidia.com): a claim on the whole device is counted where it was asked, the
    GPU once, and nothing is left of it to partition."""
    from brickadmin.cluster import dra

    whole = ex.claim(
        "train-whole",
        "team-a",
        [ex.exact("gpu", dra.DEVICE_CLASS_GPU)],
        [ex.res("gpu", "node-h100-dynmig", "gpu-0")],
        ["train-whole-0"],
        "node-h100-dynmig",
        "c0ffee00-0000-4000-8000-00000000a001",
    )
    nodes = [node("node-h100-dynmig")]
    dyn = ledger.compute(snapshot(slices=ex.dynamic_mig_node(), claims=[whole], nodes=nodes)).node("node-h100-dynmig")
    assert (dyn.physical, dyn.physical_used, dyn.logical, dyn.requested) == (1, 1, 1, 1)
    line = dyn.resources[GPU_CLASS]
    assert (line.gpu_type, line.allocatable, line.requested) == ("exclusive", 1, 1)
    assert MIG_CLASS not in dyn.resources
    # and its showback is the whole GPU (it was none: no line of the claim's class on the node)
    from workspaces.showback import claim_gpus

    assert claim_gpus([dyn]) == {"team-a": 1.0}
    idle = ledger.compute(snapshot(slices=ex.dynamic_mig_node(), claims=[], nodes=nodes)).node("node-h100-dynmig")
    assert GPU_CLASS not in idle.resources and idle.resources[MIG_CLASS].gpu_type == "mig-dynamic"


def test_a_gpu_passed_through_to_a_vm_is_on_the_vfio_class_line_before_its_sibling_is_withdrawn():
    """PassthroughSupport: a VM's claim holds gpu-vfio-0 while the slice still lists gpu-0 beside it
    (the driver withdraws it when it publishes again): the GPU is used on the line of the class the
    claim asked, once, and shown back whole."""
    from brickadmin.cluster import dra
    from workspaces.showback import claim_gpus

    slices = ex.whole_gpu_node()
    slices[0]["spec"]["devices"] += [ex.vfio_gpu(0), ex.vfio_gpu(1)]
    vm = ex.vm_claim("c0ffee00-0000-4000-8000-00000000b001")
    a100 = ledger.compute(snapshot(slices=slices, claims=[vm], nodes=[node("node-a100")])).node("node-a100")
    assert (a100.physical, a100.physical_used, a100.logical, a100.requested) == (2, 1, 2, 1)
    vfio = dra_lines.quota_resource(dra.DEVICE_CLASS_VFIO)
    assert (a100.resources[vfio].allocatable, a100.resources[vfio].requested) == (1, 1)
    assert (a100.resources[GPU_CLASS].allocatable, a100.resources[GPU_CLASS].requested) == (1, 0)
    assert claim_gpus([a100]) == {"team-a": 1.0}


def test_consumable_shares_count_the_shares_claims_consumed():
    shares = ledger.compute(snapshot()).node("node-a100-shares")
    line = shares.resources[GPU_CLASS]
    assert (line.gpu_type, line.sharing_strategy) == ("shared", dra_lines.CONSUMABLE_SHARES)
    assert line.allocatable == 8  # 2 GPUs x 4 shares
    assert line.requested == 3  # share-1 consumed 1, share-2 consumed 2


def test_an_incomplete_pool_counts_nothing_and_says_so():
    slices = ex.whole_gpu_node()
    for s in slices:
        s["spec"]["pool"]["resourceSliceCount"] = 2  # one of two slices seen
    led = ledger.compute(snapshot(slices=slices, claims=[], nodes=[node("node-a100")]))
    a100 = led.node("node-a100")
    assert a100.logical == 0 and a100.physical == 0
    assert [(p.seen, p.expected, p.complete) for p in a100.dra.pools] == [(1, 2, False)]


def test_a_newer_generation_seen_in_part_makes_the_pool_incomplete():
    old = ex.whole_gpu_node()
    new = copy.deepcopy(old)
    for s in new:
        s["metadata"]["name"] += "-g2"
        s["spec"]["pool"].update(generation=2, resourceSliceCount=2)
    a100 = ledger.compute(snapshot(slices=old + new, claims=[], nodes=[node("node-a100")])).node("node-a100")
    assert [(p.generation, p.seen, p.expected) for p in a100.dra.pools] == [(2, 1, 2)]
    assert a100.logical == 0


def test_one_row_per_model_and_type_whichever_stack_serves_it():
    plugin = node("gpu-a100-01", {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    nodes = [plugin, node("node-a100")]
    led = ledger.compute(snapshot(slices=ex.whole_gpu_node(), claims=[], nodes=nodes))
    rows = [r for r in led.by_type if r.gpu_type == "exclusive"]
    assert len(rows) == 1, [r.label for r in led.by_type]
    row = rows[0]
    assert (row.logical, row.dra_logical, row.physical, row.dra_physical, row.nodes) == (6, 2, 6, 2, 2)


def test_a_node_with_both_stacks_is_counted_once_physically():
    both = node("node-a100", {"nvidia.com/gpu": "2"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    led = ledger.compute(snapshot(slices=ex.whole_gpu_node(), claims=[], nodes=[both]))
    n = led.node("node-a100")
    assert n.stack == "both"
    assert n.physical == 2
    assert sum(r.physical for r in led.by_type) == 2


def test_dra_quotas_are_allocated_per_device_class():
    quota = {"metadata": {"namespace": "ws-a"}, "spec": {"hard": {GPU_CLASS: "3", "requests.nvidia.com/gpu": "1"}}}
    led = ledger.compute(snapshot(quotas=[quota]))
    assert led.allocated_by_namespace["ws-a"] == {GPU_CLASS: 3, "nvidia.com/gpu": 1}
    assert led.resource(GPU_CLASS).allocated == 3


def test_a_stored_line_reads_back_equal():
    for n in ledger.compute(snapshot()).nodes:
        assert ledger.node_from_dict(ledger.node_to_dict(n)) == n


def test_a_cluster_without_dra_is_counted_as_before():
    plugin = node("gpu-a100-01", {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    led = ledger.compute(Snapshot(nodes=[plugin], gpu_pods=[], quotas=[]))
    n = led.node("gpu-a100-01")
    assert (n.stack, n.dra, n.mode, n.logical) == ("device-plugin", None, "exclusive", 4)


def test_a_dra_unit_stands_for_its_share_of_physical_gpus():
    led = ledger.compute(snapshot())
    assert ledger.physical_share(led.node("node-a100"), GPU_CLASS) == 1.0
    assert ledger.physical_share(led.node("node-a100-shares"), GPU_CLASS) == 2 / 8  # 4 shares per GPU
    mig = led.node("node-a100-mig")
    assert ledger.physical_share(mig, MIG_CLASS) == 2 / mig.resources[MIG_CLASS].allocatable


def test_a_pod_given_nvidia_gpu_from_a_dra_claim_leaves_no_stale_line_and_no_finding():
    """A DeviceClass with extendedResourceName nvidia.com/gpu (KEP-5004): a pod asking nvidia.com/gpu
    on a DRA node, which lists no such resource, gets a claim the scheduler makes for it and the
    mapping in status.extendedResourceClaimStatus. Nothing is left in capacity: no stale line."""
    from gpus.numbers import health

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "er-pod", "namespace": "team-a", "uid": "e0000000-0000-4000-8000-000000000001"},
        "spec": {
            "nodeName": "node-a100",
            "containers": [
                {"name": "cuda", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
        "status": {
            "phase": "Running",
            "extendedResourceClaimStatus": {
                "resourceClaimName": "er-pod-extended-resources-8x2kq",
                "requestMappings": [
                    {"containerName": "cuda", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}
                ],
            },
        },
    }
    claim = ex.claim(
        "er-pod-extended-resources-8x2kq",
        "team-a",
        [ex.exact("container-0-request-0", "gpu.nvidia.com")],
        [ex.res("container-0-request-0", "node-a100", "gpu-0")],
        ["er-pod"],
        "node-a100",
        "e0000000-0000-4000-8000-000000000002",
    )
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    snap = snapshot(slices=ex.whole_gpu_node(), claims=[claim], nodes=[node("node-a100")])
    snap.gpu_pods = [pod]
    led = ledger.compute(snap)
    a100 = led.node("node-a100")
    assert "nvidia.com/gpu" not in a100.resources and not a100.stale
    assert (a100.stack, a100.physical, a100.logical, a100.requested) == ("dra", 2, 2, 1)
    problems = health.problems(health.HealthInputs(led, snap, None))
    assert [p.kind for p in problems if p.subject == "node-a100" and p.kind.startswith("stale")] == []
