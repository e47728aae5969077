"""NVIDIA's GPU DRA driver's objects as the API server returns them (JSON dicts): the
ResourceSlices its kubelet plugin publishes for whole GPUs, static MIG, dynamic MIG and
consumable shares, and ResourceClaims allocated from them; ``to_yaml_list`` prints them the
way `kubectl get ... -o yaml` does. tests/foundation/test_dra.py counts these objects.

Device shape follows kubernetes-sigs/dra-driver-nvidia-gpu @ 95932046 (v0.5.0-dev):
cmd/gpu-kubelet-plugin/deviceinfo.go (GpuInfo.Attributes/GetDevice),
mig.go (CommonAttributesMig, CommonCapacitiesMig, ToCanonicalName),
partitions.go (PartGetDevice, PartSharedCounterSets, memory-slice-N counters),
consumable_shares.go, driver.go (pool = node name, one slice for the legacy path;
1 counter slice + 1 device slice per GPU on k8s >= 1.35 with DynamicMIG).
MIG profile numbers are from `nvidia-smi mig -lgip` style tables and are
illustrative; UUIDs, timestamps, uids are made up.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

JSON = dict[str, Any]
DRIVER = "gpu.nvidia.com"

# name, GI profile id, placements(start,size), memMiB, SMs, CE, DEC, ENC, JPEG, OFA
A100_80GB_PROFILES: list[tuple[str, int, list[tuple[int, int]], int, int, int, int, int, int, int]] = [
    ("1g.10gb", 19, [(i, 1) for i in range(7)], 9728, 14, 1, 0, 0, 0, 0),
    ("1g.20gb", 15, [(0, 2), (2, 2), (4, 2), (6, 2)], 19968, 14, 1, 1, 0, 0, 0),
    ("2g.20gb", 14, [(0, 2), (2, 2), (4, 2)], 19968, 28, 2, 1, 0, 0, 0),
    ("3g.40gb", 9, [(0, 4), (4, 4)], 40192, 42, 3, 2, 0, 0, 0),
    ("4g.40gb", 5, [(0, 4)], 40192, 56, 4, 2, 0, 0, 0),
    ("7g.80gb", 0, [(0, 8)], 80896, 98, 7, 5, 0, 1, 1),
]
H100_80GB_PROFILES: list[tuple[str, int, list[tuple[int, int]], int, int, int, int, int, int, int]] = [
    ("1g.10gb", 19, [(i, 1) for i in range(7)], 9984, 16, 1, 1, 0, 1, 0),
    ("1g.20gb", 15, [(0, 2), (2, 2), (4, 2), (6, 2)], 20096, 26, 1, 1, 0, 1, 0),
    ("2g.20gb", 14, [(0, 2), (2, 2), (4, 2)], 20096, 32, 2, 2, 0, 2, 0),
    ("3g.40gb", 9, [(0, 4), (4, 4)], 40320, 60, 3, 3, 0, 3, 0),
    ("4g.40gb", 5, [(0, 4)], 40320, 64, 4, 4, 0, 4, 0),
    ("7g.80gb", 0, [(0, 8)], 80896, 132, 8, 7, 0, 7, 1),
]


def s(v: str) -> JSON:
    return {"string": v}


def ver(v: str) -> JSON:
    return {"version": v}


def mib(n: int) -> str:
    return f"{n // 1024}Gi" if n % 1024 == 0 else f"{n}Mi"


def gpu_common(product: str, arch: str, cc: str, bdf: str, root: str) -> JSON:
    return {
        "addressingMode": s("None"),
        "architecture": s(arch),
        "brand": s("Nvidia"),
        "cudaComputeCapability": ver(cc),
        "cudaDriverVersion": ver("13.0.0"),
        "driverVersion": ver("580.95.5"),
        "productName": s(product),
        "resource.kubernetes.io/pciBusID": s(bdf),
        "resource.kubernetes.io/pcieRoot": s(root),
    }


def whole_gpu(
    minor: int,
    uuid: str,
    product: str = "NVIDIA A100-SXM4-80GB",
    arch: str = "Ampere",
    cc: str = "8.0.0",
    mem: str = "80Gi",
) -> JSON:
    bdf = f"0000:{0x07 + 0x40 * minor:02x}:00.0"
    attrs = gpu_common(product, arch, cc, bdf, f"pci0000:{0x00 + 0x40 * minor:02x}")
    attrs.update({"type": s("gpu"), "uuid": s(uuid)})
    return {"name": f"gpu-{minor}", "attributes": attrs, "capacity": {"memory": {"value": mem}}}


def vfio_gpu(minor: int, product: str = "NVIDIA A100-SXM4-80GB") -> JSON:
    """gpu-vfio-<minor> as NVIDIA's driver publishes it with PassthroughSupport (nvlib.go
    getVfioDeviceInfo, deviceinfo.go VfioDeviceInfo.GetDevice): the same PCI bus ID as the GPU's
    gpu-<minor>, and a uuid of its own made from that address, not the GPU's."""
    bdf = f"0000:{0x07 + 0x40 * minor:02x}:00.0"
    return {
        "name": f"gpu-vfio-{minor}",
        "attributes": {
            "type": s("vfio"),
            "uuid": s(str(uuid.uuid5(uuid.NAMESPACE_DNS, bdf))),
            "deviceID": s("0x20b2"),
            "vendorID": s("0x10de"),
            "productName": s(product),
            "iommuFDEnabled": {"bool": False},
            "resource.kubernetes.io/pciBusID": s(bdf),
            "resource.kubernetes.io/pcieRoot": s(f"pci0000:{0x00 + 0x40 * minor:02x}"),
        },
        "capacity": {"addressableMemory": {"value": "128Gi"}},
    }


def mig_name(minor: int, profile: str, pid: int, start: int) -> str:
    return f"gpu-{minor}-mig-{profile.replace('.', '')}-{pid}-{start}"


def mig_caps(p: tuple[str, int, list[tuple[int, int]], int, int, int, int, int, int, int]) -> JSON:
    _, _, _, mem, sm, ce, dec, enc, jpg, ofa = p
    return {
        "copyEngines": {"value": str(ce)},
        "decoders": {"value": str(dec)},
        "encoders": {"value": str(enc)},
        "jpegEngines": {"value": str(jpg)},
        "memory": {"value": mib(mem)},
        "multiprocessors": {"value": str(sm)},
        "ofaEngines": {"value": str(ofa)},
    }


def static_mig(
    minor: int,
    parent_uuid: str,
    uuid: str,
    profile: str,
    start: int,
    table: list[tuple[str, int, list[tuple[int, int]], int, int, int, int, int, int, int]] = A100_80GB_PROFILES,
    product: str = "NVIDIA A100-SXM4-80GB",
) -> JSON:
    p = next(x for x in table if x[0] == profile)
    size = dict(p[2])[start]
    bdf = f"0000:{0x07 + 0x40 * minor:02x}:00.0"
    attrs = gpu_common(product, "Ampere", "8.0.0", bdf, f"pci0000:{0x40 * minor:02x}")
    attrs.update({"type": s("mig"), "parentUUID": s(parent_uuid), "profile": s(profile), "uuid": s(uuid)})
    caps = mig_caps(p)
    for i in range(start, start + size):
        caps[f"memorySlice{i}"] = {"value": "1"}
    return {"name": mig_name(minor, profile, p[1], start), "attributes": attrs, "capacity": caps}


def counters_of(caps: JSON) -> JSON:
    ren = {"copyEngines": "copy-engines", "jpegEngines": "jpeg-engines", "ofaEngines": "ofa-engines"}
    return {ren.get(k, k): {"value": v["value"]} for k, v in caps.items()}


def meta(name: str, node: str, rv: str, uid: str, gen_name: str | None = None, generation: int = 1) -> JSON:
    m: JSON = {
        "creationTimestamp": "2026-08-10T09:00:00Z",
        "generation": generation,
        "name": name,
        "resourceVersion": rv,
        "uid": uid,
    }
    if gen_name is not None:
        m["generateName"] = gen_name
        m["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "controller": True,
                "kind": "Node",
                "name": node,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, "node." + node)),
            }
        ]
    return m


def rslice(
    node: str,
    suffix: str,
    devices: list[JSON] | None,
    pool_gen: int = 1,
    count: int = 1,
    shared: list[JSON] | None = None,
    rv: str = "1000",
) -> JSON:
    spec: JSON = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"generation": pool_gen, "name": node, "resourceSliceCount": count},
    }
    if devices is not None:
        spec["devices"] = sorted(devices, key=lambda d: str(d["name"]))
    if shared is not None:
        spec["sharedCounters"] = shared
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": meta(
            f"{node}-{DRIVER}-{suffix}",
            node,
            rv,
            str(uuid.uuid5(uuid.NAMESPACE_DNS, f"slice.{node}.{suffix}")),
            gen_name=f"{node}-{DRIVER}-",
        ),
        "spec": spec,
    }


# ---- 1. two whole A100 80GB --------------------------------------------------
GPU_A = "GPU-4a9c7e12-8d3b-41f6-b2a0-9e5d1c3f7a01"
GPU_B = "GPU-4a9c7e12-8d3b-41f6-b2a0-9e5d1c3f7a02"


def whole_gpu_node() -> list[JSON]:
    return [rslice("node-a100", "x7k2p", [whole_gpu(0, GPU_A), whole_gpu(1, GPU_B)])]


# ---- 2. static MIG: gpu-0 = 7 x 1g.10gb, gpu-1 = 2g.20gb@0 + 1g.10gb@2,3 + 3g.40gb@4
GPU_M0 = "GPU-9b1f2c3d-0e4a-4b5c-8d6e-7f8091a2b300"
GPU_M1 = "GPU-9b1f2c3d-0e4a-4b5c-8d6e-7f8091a2b301"


def static_mig_node() -> list[JSON]:
    devs = [static_mig(0, GPU_M0, f"MIG-0c4d5e6f-7a8b-5c9d-ae0f-1a2b3c4d5e{i:02d}", "1g.10gb", i) for i in range(7)]
    devs += [
        static_mig(1, GPU_M1, "MIG-1d5e6f70-8b9c-5dae-bf10-2b3c4d5e6f00", "2g.20gb", 0),
        static_mig(1, GPU_M1, "MIG-1d5e6f70-8b9c-5dae-bf10-2b3c4d5e6f02", "1g.10gb", 2),
        static_mig(1, GPU_M1, "MIG-1d5e6f70-8b9c-5dae-bf10-2b3c4d5e6f03", "1g.10gb", 3),
        static_mig(1, GPU_M1, "MIG-1d5e6f70-8b9c-5dae-bf10-2b3c4d5e6f04", "3g.40gb", 4),
    ]
    return [rslice("node-a100-mig", "m3q8z", devs)]


# ---- 3. dynamic MIG (k8s >= 1.35 split model): 1 counter slice + 1 device slice per GPU
GPU_H0 = "GPU-2c8e4a6b-1d3f-4e5a-9b7c-0d2e4f6a8c00"


def dynamic_mig_node() -> list[JSON]:
    node, minor = "node-h100-dynmig", 0
    table = H100_80GB_PROFILES
    cset = f"gpu-{minor}-counter-set"
    maxcaps: JSON = {}
    for p in table:  # setMax over all profiles -> full-GPU capacity
        for k, v in mig_caps(p).items():
            from decimal import Decimal

            def q(x: str) -> Decimal:
                return (
                    Decimal(x[:-2]) * (1024**3 if x.endswith("Gi") else 1024**2)
                    if x.endswith(("Gi", "Mi"))
                    else Decimal(x)
                )

            if k not in maxcaps or q(v["value"]) > q(maxcaps[k]["value"]):
                maxcaps[k] = v
    slices_n = max(sz for p in table for _, sz in p[2])
    full_counters = counters_of(maxcaps)
    for i in range(slices_n):
        full_counters[f"memory-slice-{i}"] = {"value": "1"}
    bdf, root = "0000:19:00.0", "pci0000:00"
    full = {
        "name": f"gpu-{minor}",
        "attributes": {
            **gpu_common("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", bdf, root),
            "type": s("gpu"),
            "uuid": s(GPU_H0),
        },
        "capacity": maxcaps,
        "consumesCounters": [{"counterSet": cset, "counters": full_counters}],
    }
    devs = [full]
    for p in table:
        for start, size in p[2]:
            c = counters_of(mig_caps(p))
            for i in range(start, start + size):
                c[f"memory-slice-{i}"] = {"value": "1"}
            attrs = {
                **gpu_common("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", bdf, root),
                "type": s("mig"),
                "parentUUID": s(GPU_H0),
                "profile": s(p[0]),
            }
            devs.append(
                {
                    "name": mig_name(minor, p[0], p[1], start),
                    "attributes": attrs,
                    "capacity": mig_caps(p),
                    "consumesCounters": [{"counterSet": cset, "counters": c}],
                }
            )
    return [
        rslice(node, "c0unt", None, count=2, shared=[{"name": cset, "counters": full_counters}], rv="2000"),
        rslice(node, "d3v1c", devs, count=2, rv="2001"),
    ]


# ---- 4. consumable shares: --consumable-shares=4 on 2 x A100 80GB ------------
GPU_S0 = "GPU-7e3a1b5c-9d2f-4c6e-8a0b-1c2d3e4f5a00"
GPU_S1 = "GPU-7e3a1b5c-9d2f-4c6e-8a0b-1c2d3e4f5a01"


def shares_node() -> list[JSON]:
    def shared(d: JSON) -> JSON:
        d["allowMultipleAllocations"] = True
        d["capacity"] = {
            "memory": {
                "requestPolicy": {"default": "0", "validRange": {"max": "80Gi", "min": "0", "step": "1Mi"}},
                "value": "80Gi",
            },
            "shares": {
                "requestPolicy": {"default": "1", "validRange": {"max": "4", "min": "1", "step": "1"}},
                "value": "4",
            },
        }
        return d

    return [rslice("node-a100-shares", "s4r3d", [shared(whole_gpu(0, GPU_S0)), shared(whole_gpu(1, GPU_S1))])]


# ---- claims -----------------------------------------------------------------
def claim(
    name: str, ns: str, requests: list[JSON], results: list[JSON] | None, pods: list[str], node: str | None, uid: str
) -> JSON:
    c: JSON = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "creationTimestamp": "2026-08-10T09:05:00Z",
            "name": name,
            "namespace": ns,
            "resourceVersion": "3000",
            "uid": uid,
        },
        "spec": {"devices": {"requests": requests}},
        "status": {},
    }
    if results is not None:
        c["status"]["allocation"] = {
            "allocationTimestamp": "2026-08-10T09:05:01Z",
            "devices": {"results": results},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            },
        }
    if pods:
        c["status"]["reservedFor"] = [
            {"name": p, "resource": "pods", "uid": f"a1b2c3d4-0000-4000-8000-{i:012d}"} for i, p in enumerate(pods)
        ]
    return c


def exact(
    name: str,
    cls: str,
    count: int | None = 1,
    mode: str = "ExactCount",
    admin: bool = False,
    capacity: JSON | None = None,
) -> JSON:
    e: JSON = {"allocationMode": mode, "deviceClassName": cls}
    if mode == "ExactCount":
        e["count"] = count
    if admin:
        e["adminAccess"] = True
    if capacity:
        e["capacity"] = {"requests": capacity}
    return {"exactly": e, "name": name}


def res(
    req: str, pool: str, device: str, admin: bool = False, share: str | None = None, consumed: JSON | None = None
) -> JSON:
    r: JSON = {"device": device, "driver": DRIVER, "pool": pool, "request": req}
    if admin:
        r["adminAccess"] = True
    if share:
        r["shareID"] = share
    if consumed:
        r["consumedCapacity"] = consumed
    return r


def vm_claim(uid: str) -> JSON:
    """A KubeVirt VM's claim holding gpu-vfio-0 of node-a100 (class vfio.gpu.nvidia.com)."""
    return claim(
        "vm-0",
        "team-a",
        [exact("gpu", "vfio.gpu.nvidia.com")],
        [res("gpu", "node-a100", "gpu-vfio-0")],
        ["virt-launcher-vm-0"],
        "node-a100",
        uid,
    )


def claims() -> list[JSON]:
    return [
        # one whole GPU, one pod
        claim(
            "train-gpu",
            "team-a",
            [exact("gpu", "gpu.nvidia.com")],
            [res("gpu", "node-a100", "gpu-0")],
            ["train-0"],
            "node-a100",
            "c1000000-0000-4000-8000-000000000001",
        ),
        # one claim shared by two pods (counted once)
        claim(
            "shared-gpu",
            "team-a",
            [exact("gpu", "gpu.nvidia.com")],
            [res("gpu", "node-a100", "gpu-1")],
            ["infer-0", "infer-1"],
            "node-a100",
            "c1000000-0000-4000-8000-000000000002",
        ),
        # admin access to gpu-1 (monitoring): not use
        claim(
            "dcgm-admin",
            "gpu-monitoring",
            [exact("gpu", "gpu.nvidia.com", admin=True)],
            [res("gpu", "node-a100", "gpu-1", admin=True)],
            ["dcgm-exporter-x"],
            "node-a100",
            "c1000000-0000-4000-8000-000000000003",
        ),
        # static MIG: two 1g.10gb with firstAvailable fallback
        claim(
            "mig-small",
            "team-b",
            [
                {
                    "firstAvailable": [
                        {
                            "allocationMode": "ExactCount",
                            "count": 2,
                            "deviceClassName": "mig.nvidia.com",
                            "name": "two-small",
                            "selectors": [
                                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}
                            ],
                        },
                        {
                            "allocationMode": "ExactCount",
                            "count": 1,
                            "deviceClassName": "mig.nvidia.com",
                            "name": "one-2g",
                            "selectors": [
                                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}
                            ],
                        },
                    ],
                    "name": "mig",
                }
            ],
            [
                res("mig/two-small", "node-a100-mig", "gpu-0-mig-1g10gb-19-0"),
                res("mig/two-small", "node-a100-mig", "gpu-0-mig-1g10gb-19-1"),
            ],
            ["mig-job-0"],
            "node-a100-mig",
            "c1000000-0000-4000-8000-000000000004",
        ),
        # dynamic MIG: a 3g.40gb partition created on demand
        claim(
            "dyn-3g",
            "team-b",
            [exact("mig", "mig.nvidia.com")],
            [res("mig", "node-h100-dynmig", "gpu-0-mig-3g40gb-9-0")],
            ["dyn-0"],
            "node-h100-dynmig",
            "c1000000-0000-4000-8000-000000000005",
        ),
        # consumable shares: two claims on the same GPU
        claim(
            "share-1",
            "team-c",
            [exact("gpu", "gpu.nvidia.com")],
            [
                res(
                    "gpu",
                    "node-a100-shares",
                    "gpu-0",
                    share="5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a51",
                    consumed={"memory": "0", "shares": "1"},
                )
            ],
            ["share-pod-1"],
            "node-a100-shares",
            "c1000000-0000-4000-8000-000000000006",
        ),
        claim(
            "share-2",
            "team-c",
            [exact("gpu", "gpu.nvidia.com", capacity={"shares": "2"})],
            [
                res(
                    "gpu",
                    "node-a100-shares",
                    "gpu-0",
                    share="5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a52",
                    consumed={"memory": "0", "shares": "2"},
                )
            ],
            ["share-pod-2"],
            "node-a100-shares",
            "c1000000-0000-4000-8000-000000000007",
        ),
        # pending claim: All mode, not allocated yet
        claim(
            "all-gpus",
            "team-d",
            [exact("gpus", "gpu.nvidia.com", mode="All")],
            None,
            [],
            None,
            "c1000000-0000-4000-8000-000000000008",
        ),
    ]


# ---- YAML emitter (kubectl style) ---------------------------------------------
_PLAIN_BAD = set(":{}[],&*#?|<>=!%@`\"'")


def _scalar(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    t = str(v)
    needs = (
        t == ""
        or t.lower() in ("true", "false", "null", "yes", "no", "on", "off", "~")
        or t[0] in "-?:,[]{}#&*!|>'\"%@` "
        or ": " in t
        or " #" in t
        or t.endswith(":")
        or any(c in t for c in "{}[],#\"'")
        and t[0] in "{["
    )
    try:
        float(t)
        needs = True
    except ValueError:
        pass
    if t[:4].isdigit() and len(t) > 10 and t[4] == "-" and "T" in t:
        needs = True  # timestamps
    if t.startswith("0x"):
        needs = True
    return json.dumps(t) if needs else t


def _emit(v: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(v, dict):
        for k in sorted(v):
            x = v[k]
            if isinstance(x, dict) and x:
                out.append(f"{pad}{k}:")
                _emit(x, indent + 2, out)
            elif isinstance(x, list) and x:
                out.append(f"{pad}{k}:")
                _emit(x, indent, out)
            else:
                out.append(f"{pad}{k}: {'{}' if x == {} else '[]' if x == [] else _scalar(x)}")
    elif isinstance(v, list):
        for item in v:
            if isinstance(item, dict) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                sub[0] = f"{pad}- " + sub[0][indent + 2 :]
                out.extend(sub)
            else:
                out.append(f"{pad}- {_scalar(item)}")


def to_yaml_list(items: list[JSON]) -> str:
    out: list[str] = []
    _emit({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}, 0, out)
    return "\n".join(out) + "\n"
