"""What NVIDIA's DRA kubelet plugin publishes for a node's GPUs: hardware in, ResourceSlices out.

Pure (standard library only), so the twin and the lab's GPU simulator can both play the plugin
from the same facts. The shapes are the driver's own (kubernetes-sigs/dra-driver-nvidia-gpu,
cmd/gpu-kubelet-plugin, legacy path without DynamicMIG): one pool per node named after it, one
slice holding every device, owned by the Node; whole GPUs ``gpu-<minor>``; with MIG on, only the
GPU's MIG devices ``gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>``
(a GPU with MIG on and no MIG device publishes nothing: stranded).

A GPU is the twin's hardware record: ``{"uuid", "model", "memoryMiB", "mig": [profile, ...]}``.

Where counters (dynamic MIG) are published depends on the API server: from 1.35 one slice
holds the counter sets and each GPU's devices are in slices of their own; before 1.35 a
device may only consume a counter set of its own slice, so each GPU's counter set and
devices share one slice (driver.go generateCombinedResourceSlices): ``slices_for_server``.
"""

from __future__ import annotations

import copy
import hashlib
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .upstream.names import DRA_DRIVER_DEPLOY_LABEL

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.k8s.io/v1"
JSON = dict[str, Any]
# The nodes the driver's kubelet plugin runs on (the GPU Operator's DaemonSet selects on it)
PLUGIN_NODE_LABEL = DRA_DRIVER_DEPLOY_LABEL
SPLIT_COUNTERS_FROM_MINOR = 35  # Kubernetes 1.35: counters and devices in separate slices

# MIG profile -> GPU instance profile id (NVML's GI profile ids, the same on every MIG GPU).
GI_PROFILE_IDS = {
    "1g": 19,
    "1g+me": 20,
    "1g.2x": 15,
    "2g": 14,
    "3g": 9,
    "4g": 5,
    "7g": 0,
}
# memory slices a profile takes (of 8), by its compute slices
SLICES = {"1g": 1, "2g": 2, "3g": 4, "4g": 4, "7g": 8}

_PROFILE_RE = re.compile(r"^(\d)g\.(\d{1,3})gb$")


def _profile_parts(profile: str) -> tuple[str, int] | None:
    """("3g", 40) for "3g.40gb"; None for a profile not of that form."""
    m = _PROFILE_RE.match(profile or "")
    if not m:
        return None
    return f"{m.group(1)}g", int(m.group(2))


def _gi_profile_id(profile: str, memory_mib: int) -> int:
    parts = _profile_parts(profile)
    if parts is None:
        return 0
    compute, gb = parts
    if compute == "1g" and memory_mib and gb * 1024 * 4 > memory_mib:  # 1g.20gb on an 80 GB GPU: twice the memory
        return GI_PROFILE_IDS["1g.2x"]
    return GI_PROFILE_IDS.get(compute, 0)


def _attributes(gpu: dict[str, Any], minor: int, type_: str, **extra: str) -> dict[str, dict[str, str]]:
    attrs = {
        "brand": {"string": "Nvidia"},
        "productName": {"string": str(gpu.get("model") or "")},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{(0x07 + 0x40 * minor) % 256:02x}:00.0"},
        "type": {"string": type_},
    }
    attrs.update({k: {"string": v} for k, v in extra.items() if v})
    return attrs


def _mig_uuid(parent: str, minor: int, name: str) -> str:
    return "MIG-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{parent}.{minor}.{name}"))


def gpu_devices(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The devices the plugin advertises for these GPUs, by minor number (their order)."""
    devices = []
    for minor, gpu in enumerate(gpus):
        memory = int(gpu.get("memoryMiB") or 0)
        migs = list(gpu.get("mig") or [])
        if not migs:
            devices.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": _attributes(gpu, minor, "gpu", uuid=str(gpu.get("uuid") or "")),
                    "capacity": {"memory": {"value": f"{memory}Mi"}},
                }
            )
            continue
        start = 0
        for profile in migs:
            parts = _profile_parts(profile)
            size = SLICES.get(parts[0], 1) if parts else 1
            name = f"gpu-{minor}-mig-{profile.replace('.', '')}-{_gi_profile_id(profile, memory)}-{start}"
            attrs = _attributes(
                gpu,
                minor,
                "mig",
                uuid=_mig_uuid(str(gpu.get("uuid") or ""), minor, name),
                parentUUID=str(gpu.get("uuid") or ""),
                profile=profile,
            )
            capacity = {"memory": {"value": f"{parts[1]}Gi" if parts else "0"}}
            for i in range(start, start + size):
                capacity[f"memorySlice{i}"] = {"value": "1"}
            devices.append({"name": name, "attributes": attrs, "capacity": capacity})
            start += size
    return devices


def slice_name(node: str, generation: int) -> str:
    """``<node>-gpu.nvidia.com-<5 characters>`` (the kubelet helper's generateName), stable per generation."""
    suffix = hashlib.sha256(f"{node}/{generation}".encode()).hexdigest()[:5]
    return f"{node}-{DRIVER}-{suffix}"


def resource_slices(node: str, gpus: list[dict[str, Any]], *, generation: int = 1, node_uid: str = "") -> list[JSON]:
    """The node's pool as the plugin publishes it: [] when it has no device to offer."""
    devices = gpu_devices(gpus)
    if not devices:
        return []
    owner = {"apiVersion": "v1", "controller": True, "kind": "Node", "name": node, "uid": node_uid}
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {
                "name": slice_name(node, generation),
                "generateName": f"{node}-{DRIVER}-",
                "ownerReferences": [owner],
            },
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    ]


def pool_generation(slices: list[dict[str, Any]], node: str) -> int:
    """The newest generation of the node's pool among these slices (0: none)."""
    gens = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if spec.get("driver") == DRIVER and pool.get("name") == node:
            gens.append(int(pool.get("generation") or 0))
    return max(gens, default=0)


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
    """The node's slices from its hardware, before ``published`` gives them their generation and owner."""
    return resource_slices(node, [dict(g) for g in gpus])


def published(node: str, node_uid: str, slices: Sequence[JSON], generation: int) -> list[JSON]:
    """The slices as the plugin writes them for ``node``: its pool at ``generation``, owned by
    the Node (so they go with it), without what the API server sets."""
    out: list[JSON] = []
    for s in slices:
        spec = copy.deepcopy(dict(_spec(s)))
        spec["driver"] = spec.get("driver") or DRIVER
        spec["nodeName"] = node
        spec["pool"] = {**(spec.get("pool") or {}), "name": node, "generation": generation}
        name = str((s.get("metadata") or {}).get("name") or f"{node}-{DRIVER}-{len(out)}")
        owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        out.append(
            {
                "apiVersion": API_VERSION,
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
