"""What counting GPUs published through DRA costs at fleet scale, on the ledger alone (pure):
5,000 nodes of 8 whole GPUs each published by NVIDIA's DRA driver (40,000 devices) and 150,000
ResourceClaims (every device taken by several claims through consumable shares, or one each),
against the same fleet on the device plugin (nvidia.com/gpu in capacity, 150,000 GPU pods).

Prints: the objects' memory (tracemalloc), a full ledger (first publication) and a ledger after
one claim changed (the watcher's publish with its memo), each the median of --repeat runs.

    .venv/bin/python bench/dra_ledger.py [--nodes 5000] [--gpus 8] [--claims 150000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brickadmin.cluster.snapshot import Snapshot  # noqa: E402
from gpus.numbers import ledger  # noqa: E402
from tests import dra_objects as ex  # noqa: E402


def node(name: str, capacity: dict[str, str] | None = None) -> dict:
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": dict(capacity or {}),
            "allocatable": dict(capacity or {}),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def dra_fleet(nodes: int, gpus: int, claims: int) -> tuple[list[dict], list[dict], list[dict]]:
    node_objs, slices, claim_objs = [], [], []
    per_device = max(1, claims // (nodes * gpus))
    for n in range(nodes):
        name = f"dra-{n:05d}"
        node_objs.append(node(name))
        devices = []
        for g in range(gpus):
            dev = ex.whole_gpu(g, f"GPU-{n:05d}-{g:02d}")
            if per_device > 1:
                dev["allowMultipleAllocations"] = True
                dev["capacity"]["shares"] = {"value": str(per_device), "requestPolicy": {"default": "1"}}
            devices.append(dev)
        slices.append(ex.rslice(name, "0", devices))
    i = 0
    for n in range(nodes):
        for g in range(gpus):
            for _k in range(per_device):
                if i >= claims:
                    break
                results = [ex.res("gpu", f"dra-{n:05d}", f"gpu-{g}")]
                claim_objs.append(
                    ex.claim(
                        f"c-{i}", f"ws-{n % 200}", [ex.exact("gpu", "gpu.nvidia.com")], results, [f"p-{i}"], "", str(i)
                    )
                )
                i += 1
    return node_objs, slices, claim_objs


def plugin_fleet(nodes: int, gpus: int, pods: int) -> tuple[list[dict], list[dict]]:
    node_objs = [
        node(f"gpu-{n:05d}", {"nvidia.com/gpu": str(gpus * max(1, pods // (nodes * gpus)))}) for n in range(nodes)
    ]
    pod_objs = [
        {
            "metadata": {"name": f"p-{i}", "namespace": f"ws-{i % 200}", "uid": str(i)},
            "spec": {
                "nodeName": f"gpu-{i % nodes:05d}",
                "containers": [
                    {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
            "status": {"phase": "Running"},
        }
        for i in range(pods)
    ]
    return node_objs, pod_objs


def measured(build):
    tracemalloc.start()
    objs = build()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return objs, size


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--claims", type=int, default=150_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    (dra_nodes, slices, claims), dra_bytes = measured(lambda: dra_fleet(a.nodes, a.gpus, a.claims))
    (dp_nodes, pods), dp_bytes = measured(lambda: plugin_fleet(a.nodes, a.gpus, a.claims))
    dra_snap = Snapshot(nodes=dra_nodes, gpu_pods=[], quotas=[], resource_slices=slices, resource_claims=claims)
    dp_snap = Snapshot(nodes=dp_nodes, gpu_pods=pods, quotas=[])

    def incremental(snap: Snapshot, change) -> float:
        memo: dict = {}
        ledger.compute(snap, memo)
        return timed(lambda: ledger.compute(change(snap), memo), a.repeat)

    def one_claim_more(snap: Snapshot) -> Snapshot:
        extra = copy.deepcopy(snap.resource_claims[0])
        extra["metadata"]["name"] += "-new"
        return Snapshot(
            nodes=snap.nodes,
            gpu_pods=[],
            quotas=[],
            resource_slices=snap.resource_slices,
            resource_claims=[*snap.resource_claims, extra],
        )

    def one_pod_more(snap: Snapshot) -> Snapshot:
        extra = copy.deepcopy(snap.gpu_pods[0])
        extra["metadata"]["name"] += "-new"
        return Snapshot(nodes=snap.nodes, gpu_pods=[*snap.gpu_pods, extra], quotas=[])

    led = ledger.compute(dra_snap)
    print(
        f"DRA fleet: {a.nodes} nodes, {len(slices)} slices, {sum(len(s['spec']['devices']) for s in slices)} devices, "
        f"{len(claims)} claims; ledger: {led.physical} physical, {led.logical} logical, {led.requested} held"
    )
    print(
        f"objects in memory: DRA {dra_bytes / 2**20:.0f} MiB, device plugin {dp_bytes / 2**20:.0f} MiB "
        f"(ratio {dra_bytes / dp_bytes:.2f})"
    )
    print(
        f"full ledger: DRA {timed(lambda: ledger.compute(dra_snap), a.repeat):.2f} s, "
        f"device plugin {timed(lambda: ledger.compute(dp_snap), a.repeat):.2f} s (median of {a.repeat})"
    )
    print(
        f"after one change (memo): DRA {incremental(dra_snap, one_claim_more):.2f} s, "
        f"device plugin {incremental(dp_snap, one_pod_more):.2f} s"
    )


if __name__ == "__main__":
    main()
