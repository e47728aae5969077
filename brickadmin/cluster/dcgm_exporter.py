"""A simulated dcgm-exporter page: pure functions, no Django, no I/O.

The lab's GPU simulator (lab/gpusim.py), the demo's simulated cluster (the twin,
``TwinGateway.exporter_page``) and the Prometheus benchmark serve the same DCGM_FI_DEV_*
series from the same functions: one series per GPU (or MIG instance), repeated per pod
using it with the pod's namespace/pod/container labels, as dcgm-exporter does, and
utilisation figures that move over time (``deviceplugin.simulated_utilisation``).
"""

from __future__ import annotations

import hashlib

from . import deviceplugin as dp
from .vocabulary import MIG_PREFIX

FAMILIES = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
}


def stable(n: str, lo: int, hi: int) -> int:
    """A number in [lo, hi] fixed by the text ``n`` (the same on every scrape)."""
    return lo + int(hashlib.sha256(n.encode()).hexdigest()[:8], 16) % (hi - lo + 1)


def held_devices(
    hardware: dict[str, list[dict]], pods: list[dict], advertised: dict[str, dict[str, int]]
) -> dict[tuple[str, str], list[tuple[dict, str]]]:
    """(node, device key) -> [(pod, container)] for the Running pods holding GPUs.

    ``hardware``: {node: [{uuid, model, memoryMiB, mig}]}; ``advertised``: {node: {resource:
    count}} the device plugin serves (time-slicing replicas are read from it). Device keys:
    "gpu:<index>" for whole GPUs (exclusive or time-sliced slots), "mig:<index>:<n>" for MIG
    instances. Pods are placed in creation order."""
    out: dict[tuple[str, str], list[tuple[dict, str]]] = {}
    by_node: dict[str, list[dict]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if (
            node in hardware
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ):
            by_node.setdefault(node, []).append(p)
    for node, plist in by_node.items():
        gpus = hardware[node]
        whole = [i for i, g in enumerate(gpus) if not g.get("mig")]
        migs = [(i, n, prof) for i, g in enumerate(gpus) for n, prof in enumerate(g.get("mig") or [])]
        adv = advertised.get(node) or {}
        n_whole_units = sum(v for k, v in adv.items() if k in (dp.GPU, dp.GPU_SHARED))
        replicas = max(1, n_whole_units // len(whole)) if whole else 1
        next_slot = next_mig_slot = 0
        used_mig: set[tuple[int, int]] = set()
        plist.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        for p in plist:
            for c in p["spec"].get("containers") or []:
                req = {
                    **((c.get("resources") or {}).get("limits") or {}),
                    **((c.get("resources") or {}).get("requests") or {}),
                }
                for res, qty in req.items():
                    if not res.startswith(dp.NVIDIA_PREFIX):
                        continue
                    try:
                        count = dp.quantity(qty)  # the API server writes 1000 as "1k"
                    except ValueError:
                        continue
                    if res in (dp.GPU, dp.GPU_SHARED) and whole:
                        for _ in range(count):
                            idx = whole[(next_slot // replicas) % len(whole)]
                            next_slot += 1
                            out.setdefault((node, f"gpu:{idx}"), []).append((p, c["name"]))
                    elif res in (dp.GPU, dp.GPU_SHARED) and migs:
                        # MIG strategy single: every nvidia.com/gpu is a MIG instance
                        for _ in range(count):
                            i, n, _prof = migs[next_mig_slot % len(migs)]
                            next_mig_slot += 1
                            out.setdefault((node, f"mig:{i}:{n}"), []).append((p, c["name"]))
                    elif res.startswith(MIG_PREFIX):
                        prof = res[len(MIG_PREFIX) :]
                        for _ in range(count):
                            free = next(((i, n) for i, n, pr in migs if pr == prof and (i, n) not in used_mig), None)
                            if free is None:
                                break
                            used_mig.add(free)
                            out.setdefault((node, f"mig:{free[0]}:{free[1]}"), []).append((p, c["name"]))
    return out


def page(hardware: dict[str, list[dict]], held: dict[tuple[str, str], list[tuple[dict, str]]], now: float) -> str:
    """The exporter's page at unix time ``now`` (Prometheus text format)."""
    lines: dict[str, list[str]] = {k: [] for k in FAMILIES}

    def emit(base: dict, holders: list[tuple[dict, str]], mem: int, seed: str) -> None:
        rows = (
            [(base, None)]
            if not holders
            else [
                ({**base, "pod": p["metadata"]["name"], "namespace": p["metadata"]["namespace"], "container": c}, p)
                for p, c in holders
            ]
        )
        # Each pod's workload has its own utilisation over time; a time-sliced GPU
        # shows the sum of its pods' (capped), repeated on each pod's series, as
        # dcgm-exporter reports the device's figure once per pod using it.
        device_util = min(
            100,
            sum(
                dp.simulated_utilisation(f"{p['metadata']['namespace']}/{p['metadata']['name']}", now)
                for p, _c in holders
            ),
        )
        for labels, pod in rows:
            busy = pod is not None
            util = device_util if busy else 0
            used = int(mem * stable(seed + "m", 30, 80) / 100) if busy else 0
            values = {
                "DCGM_FI_DEV_GPU_UTIL": util,
                "DCGM_FI_DEV_MEM_COPY_UTIL": util // 2,
                "DCGM_FI_DEV_FB_USED": used,
                "DCGM_FI_DEV_FB_FREE": mem - used,
                "DCGM_FI_DEV_GPU_TEMP": 34 + util // 3,
                "DCGM_FI_DEV_POWER_USAGE": 30 + util * 2,
            }
            lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
            for k, v in values.items():
                lines[k].append(f"{k}{{{lab}}} {v}")

    for node in sorted(hardware):
        for i, g in enumerate(hardware[node]):
            base = {
                "gpu": str(i),
                "UUID": g.get("uuid", f"GPU-{node}-{i}"),
                "device": f"nvidia{i}",
                "modelName": g.get("model", "NVIDIA GPU"),
                "Hostname": node,
            }
            mem = int(g.get("memoryMiB") or 0)
            if g.get("mig"):
                profiles = g["mig"]
                slices = sum(int(str(p).split("g", 1)[0]) for p in profiles) or 1
                for n, prof in enumerate(profiles):
                    share = int(str(prof).split("g", 1)[0])
                    emit(
                        {**base, "GPU_I_PROFILE": prof, "GPU_I_ID": str(n)},
                        held.get((node, f"mig:{i}:{n}"), []),
                        mem * share // slices,
                        f"{node}{i}{n}",
                    )
            else:
                emit(base, held.get((node, f"gpu:{i}"), []), mem, f"{node}{i}")
    out = []
    for k, (typ, help_) in FAMILIES.items():
        out.append(f"# HELP {k} {help_}")
        out.append(f"# TYPE {k} {typ}")
        out.extend(lines[k])
    return "\n".join(out) + "\n"
