"""What the NVIDIA device plugin and kubelet do with a node's GPUs: pure functions.

This is the one place that *pretends* to be hardware. Both the twin (twin.py) and the
lab's GPU node simulator (lab/gpusim) call these functions, so the simulated cluster
and the real control plane react identically.
"""
from __future__ import annotations

import hashlib
import math

from .vocabulary import (  # noqa: F401  (re-exported: the twin and lab/ read them here too)
    COMPONENT_LABEL,
    GPU,
    GPU_SHARED,
    MIG_PREFIX,
    NVIDIA_PREFIX,
    PLUGIN_NAMESPACE,
    labels_match,
    parse_plugin_config,
    quantity,
    time_slicing,
    time_slicing_replicas,
    tolerates,
)
from .vocabulary import PLUGIN_CONFIG_KEY as CONFIG_KEY  # noqa: F401


def pod_gpu_requests(pod: dict) -> dict[str, int]:
    """nvidia.com/* requests of a pod's containers (extended resources: requests = limits)."""
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        amounts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, value in amounts.items():
            if name.startswith(NVIDIA_PREFIX):
                out[name] = out.get(name, 0) + quantity(value)
    return out


parse_config = parse_plugin_config


def advertised_resources(gpus: list[dict], config: str | dict | None) -> dict[str, int]:
    """Resources the plugin registers with kubelet for these physical GPUs.

    ``gpus``: [{"uuid", "model", "mig": [profile, ...]}]. A GPU with MIG instances
    is advertised as ``nvidia.com/mig-<profile>`` (migStrategy mixed); whole GPUs as
    ``nvidia.com/gpu``, times ``replicas`` under time-slicing, renamed to
    ``nvidia.com/gpu.shared`` when ``renameByDefault`` is true.
    """
    cfg = parse_config(config)
    mig_strategy = (cfg.get("flags") or {}).get("migStrategy", "none")
    whole = [g for g in gpus if not g.get("mig") or mig_strategy == "none"]
    out: dict[str, int] = {}
    if mig_strategy != "none":
        for g in gpus:
            for profile in g.get("mig") or []:
                key = f"{MIG_PREFIX}{profile}"
                out[key] = out.get(key, 0) + 1
    replicas = time_slicing_replicas(cfg)
    rename = replicas is not None and bool(time_slicing(cfg).get("renameByDefault", False))
    replicas = 1 if replicas is None else replicas
    if whole:
        name = GPU_SHARED if (rename and replicas > 1) else GPU
        out[name] = out.get(name, 0) + len(whole) * replicas
    return out


def kubelet_status(status: dict, advertised: dict[str, int] | None) -> dict:
    """Node ``status`` after kubelet syncs with a plugin advertising ``advertised``.

    ``None`` means no plugin is registered (pod gone or not started). Like kubelet,
    a resource no longer served is never dropped from capacity; its allocatable
    falls to 0 until a status patch removes it.
    """
    capacity = dict(status.get("capacity") or {})
    allocatable = dict(status.get("allocatable") or {})
    advertised = advertised or {}
    for name in list(capacity):
        if name.startswith(NVIDIA_PREFIX) and name not in advertised:
            allocatable[name] = "0"
    for name, count in advertised.items():
        capacity[name] = str(count)
        allocatable[name] = str(count)
    return {**status, "capacity": capacity, "allocatable": allocatable}


matches_selector = labels_match  # nodeSelector-style equality


def daemonset_for_node(node: dict, daemonsets: list[dict]) -> dict | None:
    """The brick-nvidia DaemonSet whose nodeSelector matches the node's labels."""
    labels = node["metadata"].get("labels") or {}
    for ds in daemonsets:
        spec = ds["spec"]["template"]["spec"]
        if matches_selector(labels, spec.get("nodeSelector")):
            return ds
    return None


def config_map_name(daemonset: dict) -> str | None:
    for vol in daemonset["spec"]["template"]["spec"].get("volumes") or []:
        if "configMap" in vol:
            return vol["configMap"]["name"]
    return None


def simulated_utilisation(seed: str, t: float) -> int:
    """A GPU utilisation (%) that a workload named ``seed`` shows at unix time ``t``, for
    the simulated DCGM exporter (lab/gpusim.py). Deterministic: each workload has its own
    level, a slow wave (20–90 min) and a daily swing, plus a little per-minute jitter, so
    a range query over an hour, a day or a week shows something that moves, and two runs
    agree. 1–100 (a pod holding a GPU is never shown as exactly idle)."""
    h = hashlib.sha256(seed.encode()).digest()
    base = 20 + h[0] % 55
    period = 1200 + (h[1] * 256 + h[2]) % 4200
    phase = h[3] / 255 * 2 * math.pi
    amplitude = 8 + h[4] % 22
    minute = int(t // 60)
    jitter = hashlib.sha256(f"{seed}:{minute}".encode()).digest()[0] % 9 - 4
    value = (base + amplitude * math.sin(2 * math.pi * t / period + phase)
             + 10 * math.sin(2 * math.pi * t / 86400 + phase) + jitter)
    return int(min(100, max(1, round(value))))
