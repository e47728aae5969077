"""What NVIDIA's GPU DRA kubelet plugin publishes for a node: its ResourceSlices.

Pure functions shared by the lab's GPU simulator (lab/gpusim.py) and the twin, as
deviceplugin.py is for the device plugin. The driver (kubernetes-sigs/dra-driver-nvidia-gpu,
cmd/gpu-kubelet-plugin/driver.go and the kubeletplugin resourceslice helper) publishes one
pool per node, named after the node, with ``spec.nodeName`` set, the slices owned by the
Node, and ``pool.generation`` raised on every republish.

Where counters (dynamic MIG) are published depends on the API server: from 1.35 one slice
holds the counter sets and each GPU's devices are in slices of their own; before 1.35 a
device may only consume a counter set of its own slice, so each GPU's counter set and
devices share one slice (driver.go generateCombinedResourceSlices).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from .dra import DRIVER_NAME

JSON = dict[str, Any]

DRA_API_VERSION = "resource.k8s.io/v1"
PLUGIN_NODE_LABEL = "nvidia.com/dra-kubelet-plugin"  # the nodes NVIDIA's chart runs its kubelet plugin on
SPLIT_COUNTERS_FROM_MINOR = 35  # Kubernetes 1.35: counters and devices in separate slices


def _spec(s: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = s.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _counter_sets_of(device: Mapping[str, Any]) -> set[str]:
    return {str(c.get("counterSet")) for c in device.get("consumesCounters") or []}


def slices_for_server(slices: Sequence[JSON], server_minor: int) -> list[JSON]:
    """The same pools in the form an API server of this minor version accepts.

    Before 1.35 a pool whose counter sets sit in slices of their own becomes one slice per
    counter set holding that set and the devices consuming it (and one slice for the devices
    that consume none), ``resourceSliceCount`` recounted. Pools without counters, and every
    pool on 1.35 or later, are returned unchanged."""
    out = [copy.deepcopy(dict(s)) for s in slices]
    if server_minor >= SPLIT_COUNTERS_FROM_MINOR:
        return out
    pools: dict[tuple[str, str], list[JSON]] = {}
    for s in out:
        pool = _spec(s).get("pool") or {}
        pools.setdefault((str(_spec(s).get("driver", "")), str(pool.get("name", ""))), []).append(s)
    result: list[JSON] = []
    for group in pools.values():
        counters = [cs for s in group for cs in _spec(s).get("sharedCounters") or []]
        split = any(_spec(s).get("sharedCounters") and not _spec(s).get("devices") for s in group)
        if not counters or not split:
            result.extend(group)
            continue
        devices = [d for s in group for d in _spec(s).get("devices") or []]
        template = next(s for s in group if _spec(s).get("devices")) if devices else group[0]
        parts: list[tuple[list[JSON], list[JSON]]] = [
            ([cs], [d for d in devices if _counter_sets_of(d) == {str(cs.get("name"))}]) for cs in counters
        ]
        placed = {id(d) for _, ds in parts for d in ds}
        rest = [d for d in devices if id(d) not in placed]
        if rest:
            parts.append(([], rest))
        for i, (sets, devs) in enumerate(parts):
            s = copy.deepcopy(template)
            s["metadata"] = {k: v for k, v in (template.get("metadata") or {}).items() if k != "resourceVersion"}
            s["metadata"]["name"] = f"{template['metadata']['name']}-{i}"
            spec = s["spec"]
            spec.pop("sharedCounters", None)
            spec.pop("devices", None)
            if sets:
                spec["sharedCounters"] = sets
            if devs:
                spec["devices"] = devs
            spec["pool"] = {**spec["pool"], "resourceSliceCount": len(parts)}
            result.append(s)
    return result


def hardware_slices(node: str, gpus: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The slices the driver's legacy path (no DynamicMIG, no shares) publishes for a node's
    GPUs (nvlib.go GetPerGpuAllocatableDevices): a GPU with MIG off as ``gpu-<minor>``, a GPU
    with MIG devices as those devices (the GPU itself not beside them), one slice."""
    devices: list[JSON] = []
    for minor, gpu in enumerate(gpus):
        model = str(gpu.get("model") or "")
        base: JSON = {"productName": {"string": model}, "brand": {"string": "Nvidia"}}
        migs = list(gpu.get("mig") or [])
        if not migs:
            attrs = {**base, "type": {"string": "gpu"}, "uuid": {"string": str(gpu.get("uuid", ""))}}
            memory = f"{int(gpu.get('memoryMiB') or 0)}Mi"
            devices.append({"name": f"gpu-{minor}", "attributes": attrs, "capacity": {"memory": {"value": memory}}})
            continue
        for i, profile in enumerate(migs):
            attrs = {
                **base,
                "type": {"string": "mig"},
                "profile": {"string": str(profile)},
                "parentUUID": {"string": str(gpu.get("uuid", ""))},
                "uuid": {"string": f"MIG-{str(gpu.get('uuid', '')).removeprefix('GPU-')[:-4]}{minor:02x}{i:02x}"},
            }
            devices.append({"name": f"gpu-{minor}-mig-{str(profile).replace('.', '')}-{i}", "attributes": attrs})
    if not devices:
        return []
    return [
        {
            "apiVersion": DRA_API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER_NAME}-0"},
            "spec": {
                "driver": DRIVER_NAME,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    ]


def published(node: str, node_uid: str, slices: Sequence[JSON], generation: int) -> list[JSON]:
    """The slices as the plugin writes them for ``node``: its pool at ``generation``, owned by
    the Node (so they go with it), without what the API server sets."""
    out: list[JSON] = []
    for s in slices:
        spec = copy.deepcopy(dict(_spec(s)))
        spec["driver"] = spec.get("driver") or DRIVER_NAME
        spec["nodeName"] = node
        spec["pool"] = {**(spec.get("pool") or {}), "name": node, "generation": generation}
        name = str((s.get("metadata") or {}).get("name") or f"{node}-{DRIVER_NAME}-{len(out)}")
        owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        out.append(
            {
                "apiVersion": DRA_API_VERSION,
                "kind": "ResourceSlice",
                "metadata": {"name": name, "ownerReferences": [owner]},
                "spec": spec,
            }
        )
    return out


def content(slices: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """What a republish would change: the slices' specs without the pool's generation, in
    name order (to compare what is published with what should be)."""
    out: list[JSON] = []
    for s in sorted(slices, key=lambda s: str((s.get("metadata") or {}).get("name") or "")):
        spec = copy.deepcopy(dict(_spec(s)))
        spec["pool"] = {k: v for k, v in (spec.get("pool") or {}).items() if k != "generation"}
        out.append({"name": (s.get("metadata") or {}).get("name"), "spec": spec})
    return out
