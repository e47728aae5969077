"""A DRA node and claims whose selectors use CEL beyond equality, for the twin's tests and
the twin-versus-lab comparison: the same objects go to both, and the scheduler and the twin
must allocate the same devices.

One node, ``dra-cel-01``, publishes five GPUs: an A100 80GB first, then an A100 40GB, an H100
and two L4s (capacity ``memory``). In namespace ``dra-cel``, pinned to the node:
- ``h100-or-l4``: two GPUs whose productName is the H100's or an L4's (``||``): the H100 and
  the first L4, in the slice's order;
- ``backtrack``: request ``any`` takes a GPU of 40Gi or more, request ``a100-80`` an A100
  of 80Gi (``quantity().compareTo``, ``startsWith``). First fit gives the A100 80GB to ``any``
  and leaves ``a100-80`` nothing; the scheduler goes back and gives ``any`` the A100 40GB;
- ``too-big``: a GPU of more than 100Gi, which no node has: unschedulable;
- ``cel-error``: a selector reading an attribute the driver does not publish: the
  scheduler's CEL runtime error, found on the second L4, which stays free (the scheduler
  evaluates selectors only on devices it could take);
- ``no-class``: a claim naming a DeviceClass that does not exist (``gpus.nvidia.com``): the
  scheduler's PreFilter leaves the pod unschedulable until the class appears.
"""

from __future__ import annotations

NODE = "dra-cel-01"
NAMESPACE = "dra-cel"
DRIVER = "gpu.nvidia.com"
GPUS = [
    ("gpu-0", "NVIDIA A100-SXM4-80GB", "80Gi"),
    ("gpu-1", "NVIDIA A100-SXM4-40GB", "40Gi"),
    ("gpu-2", "NVIDIA H100 80GB HBM3", "80Gi"),
    ("gpu-3", "NVIDIA L4", "24Gi"),
    ("gpu-4", "NVIDIA L4", "24Gi"),
]
MEMORY = f"device.capacity['{DRIVER}'].memory"
PRODUCT = f"device.attributes['{DRIVER}'].productName"

# pod -> {request: selector}; each pod holds one claim of the same name
CLAIMS: dict[str, list[tuple[str, int, str]]] = {
    "h100-or-l4": [("gpus", 2, f"{PRODUCT} == 'NVIDIA H100 80GB HBM3' || {PRODUCT} == 'NVIDIA L4'")],
    "backtrack": [
        ("any", 1, f"{MEMORY}.compareTo(quantity('40Gi')) >= 0"),
        ("a100-80", 1, f"{MEMORY}.compareTo(quantity('80Gi')) >= 0 && {PRODUCT}.startsWith('NVIDIA A100')"),
    ],
    "too-big": [("gpu", 1, f"{MEMORY}.isGreaterThan(quantity('100Gi'))")],
    "cel-error": [("gpu", 1, f"device.attributes['{DRIVER}'].nvlinkDomain == 'a'")],
    "no-class": [("gpu", 1, "true")],
}
# what the scheduler gives each claim: request -> devices; None: the pod waits
EXPECTED: dict[str, dict[str, list[str]] | None] = {
    "h100-or-l4": {"gpus": ["gpu-2", "gpu-3"]},
    "backtrack": {"any": ["gpu-1"], "a100-80": ["gpu-0"]},
    "too-big": None,
    "cel-error": None,
    "no-class": None,
}


def node() -> dict:
    labels = {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": labels},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def resource_slice() -> dict:
    devices = [
        {
            "name": name,
            "attributes": {"type": {"string": "gpu"}, "productName": {"string": product}},
            "capacity": {"memory": {"value": memory}},
        }
        for name, product, memory in GPUS
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{NODE}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str) -> dict:
    requests = [
        {
            "name": req,
            "exactly": {
                "deviceClassName": "gpus.nvidia.com" if name == "no-class" else DRIVER,
                "allocationMode": "ExactCount",
                "count": count,
                "selectors": [{"cel": {"expression": expr}}],
            },
        }
        for req, count, expr in CLAIMS[name]
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": requests}},
    }


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        },
    }


def objects() -> list[dict]:
    """In creation order: the node, its slice, the namespace, the claims, then their pods."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    return [node(), resource_slice(), ns, *(claim(n) for n in CLAIMS), *(pod(n) for n in CLAIMS)]


def outcome(claims: list[dict], pods: list[dict]) -> dict[str, object]:
    """Per pod: its node and its claim's devices per request, or why it waits (the
    PodScheduled condition's reason, and for an error, the error)."""
    by_name = {c["metadata"]["name"]: c for c in claims if c["metadata"].get("namespace") == NAMESPACE}
    out: dict[str, object] = {}
    for p in pods:
        name = p["metadata"]["name"]
        if p["metadata"].get("namespace") != NAMESPACE:
            continue
        results = ((by_name[name].get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")
        if results:
            got: dict[str, list[str]] = {}
            for r in results:
                got.setdefault(r["request"], []).append(r["device"])
            out[name] = {"node": p["spec"].get("nodeName"), "devices": {k: sorted(v) for k, v in got.items()}}
        else:
            cond = next((c for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), {})
            message = cond.get("message", "")
            if "CEL runtime error" in message:
                error: str | None = message[message.index("CEL runtime error") :]
            elif "does not exist" in message:
                error = message[message.index("request ") : message.index("does not exist") + len("does not exist")]
            else:
                error = None
            out[name] = {"waits": cond.get("reason"), "error": error}
    return out
