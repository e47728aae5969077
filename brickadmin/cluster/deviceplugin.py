"""What the NVIDIA device plugin and kubelet do with a node's GPUs: pure functions.

This is the one place that *pretends* to be hardware. Both the twin (twin.py) and the
lab's GPU node simulator (lab/gpusim) call these functions, so the simulated cluster
and the real control plane react identically.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from .pluginconfig import plugin_config_errors
from .vocabulary import (
    COMPONENT_LABEL,
    GPU,
    GPU_COMPUTE_MAJOR_LABEL,
    GPU_COMPUTE_MINOR_LABEL,
    GPU_SHARED,
    MIG_PREFIX,
    MPS_CONTROL_COMPONENT,
    NVIDIA_PREFIX,
    PLUGIN_NAMESPACE,
    SHARING_STRATEGY_MPS,
    KubeObject,
    active_sharing_strategy,
    gpu_model_name,
    labels_match,
    mps_replicas_error,
    parse_plugin_config,
    quantity,
    time_slicing,
    time_slicing_replicas,
    tolerates,
)
from .vocabulary import PLUGIN_CONFIG_KEY as CONFIG_KEY

# The vocabulary is here too: the twin and lab/ read the plugin's names from this module.
__all__ = [
    "COMPONENT_LABEL",
    "CONFIG_KEY",
    "MPS_OF_MIG_REFUSED",
    "GPU",
    "GPU_SHARED",
    "MIG_PREFIX",
    "NVIDIA_PREFIX",
    "PLUGIN_NAMESPACE",
    "PluginRefused",
    "advertised_resources",
    "compute_capability",
    "config_map_name",
    "daemonset_for_node",
    "device_map",
    "gfd_labels",
    "is_mps_control_daemon",
    "kubelet_status",
    "labels_match",
    "matches_selector",
    "mps_start_error",
    "parse_config",
    "parse_plugin_config",
    "plugin_start_error",
    "pod_gpu_requests",
    "quantity",
    "sharing_strategy",
    "simulated_utilisation",
    "time_slicing",
    "time_slicing_replicas",
    "tolerates",
]


def pod_gpu_requests(pod: KubeObject) -> dict[str, int]:
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


class PluginRefused(ValueError):
    """The plugin exits at start with this reason (kubelet then keeps no device of it)."""


def _mig_enabled(gpu: KubeObject) -> bool:
    # A GPU in MIG mode may hold no instance yet (``mig: []`` with ``migEnabled``).
    return bool(gpu.get("migEnabled", bool(gpu.get("mig"))))


def _replicated(cfg: KubeObject) -> KubeObject:
    """The replicated-resources section the plugin uses: ``sharing.mps`` when present, else
    ``sharing.timeSlicing`` (api/config/v1/sharing.go: ReplicatedResources)."""
    sharing = cfg.get("sharing") or {}
    return (sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing")) or {}


def sharing_strategy(config: str | KubeObject | None) -> str:
    """GFD's ``nvidia.com/gpu.sharing-strategy`` for a config: mps, time-slicing or none
    (a section counts only when one of its resources has more than one replica)."""
    return active_sharing_strategy(parse_config(config))


# CUDA compute capability by GPU family, from NVIDIA's "CUDA GPU Compute Capability" table
# (developer.nvidia.com/cuda-gpus). A node's GFD labels say it where GFD runs
# (nvidia.com/gpu.compute.major/.minor); this is for a GPU known only by its model name.
COMPUTE_CAPABILITY: dict[str, str] = {
    "P100": "6.0",
    "P40": "6.1",
    "P4": "6.1",
    "V100": "7.0",
    "V100S": "7.0",
    "T4": "7.5",
    "A100": "8.0",
    "A800": "8.0",
    "A30": "8.0",
    "A40": "8.6",
    "A10": "8.6",
    "A16": "8.6",
    "A2": "8.6",
    "L4": "8.9",
    "L40": "8.9",
    "L40S": "8.9",
    "L20": "8.9",
    "H100": "9.0",
    "H800": "9.0",
    "H200": "9.0",
    "H20": "9.0",
    "GH200": "9.0",
    "B200": "10.0",
    "GB200": "10.0",
    "B300": "10.3",
    "GB300": "10.3",
}
_BLACKWELL_WORKSTATION = "12.0"  # RTX PRO 6000 Blackwell (Server Edition too)


def compute_capability(gpu: KubeObject | None = None, labels: dict[str, str] | None = None) -> str:
    """A GPU's compute capability ("8.0"): what GFD labelled the node with, else the GPU's
    own ``computeCapability``, else its model's family in COMPUTE_CAPABILITY; "" when
    nothing says it."""
    labels = labels or {}
    major, minor = labels.get(GPU_COMPUTE_MAJOR_LABEL), labels.get(GPU_COMPUTE_MINOR_LABEL)
    if major and minor is not None:
        return f"{major}.{minor}"
    gpu = gpu or {}
    if gpu.get("computeCapability"):
        return str(gpu["computeCapability"])
    words = gpu_model_name(str(gpu.get("model") or "")).upper().split()
    if "RTX" in words and "BLACKWELL" in words:
        return _BLACKWELL_WORKSTATION
    for word in words:
        if word in COMPUTE_CAPABILITY:
            return COMPUTE_CAPABILITY[word]
    return ""


# internal/plugin/mps.go getMPSOptions
MPS_OF_MIG_REFUSED = "failed to create plugin: sharing using MPS is not supported for MIG devices"


def mps_start_error(
    gpus: list[KubeObject], config: str | KubeObject | None, labels: dict[str, str] | None = None
) -> str:
    """Why the plugin serves nothing when it shares by MPS on these GPUs ("" when it does, or
    when it does not share by MPS). internal/plugin/mps.go getMPSOptions: MPS is refused when a
    resource holds MIG devices (the plugin exits); cmd/mps-control-daemon/mps/manager.go: the
    MPS control daemon refuses more replicas than one MPS server takes per GPU (48 from
    compute capability 7.5, 16 before), and the plugin waits for that daemon. A GPU whose
    compute capability nothing says is not judged."""
    cfg = parse_config(config)
    if sharing_strategy(cfg) != SHARING_STRATEGY_MPS:
        return ""
    try:
        devices = device_map(gpus, cfg)
    except PluginRefused:
        return ""  # refused before MPS is looked at (plugin_start_error says why)
    if any(":" in d for ids in devices.values() for d in ids):
        return MPS_OF_MIG_REFUSED
    for res in _replicated(cfg).get("resources") or []:
        replicas = _int(res.get("replicas"))
        for index in devices.get(_resource_name(res.get("name")), []) if replicas > 1 else []:
            capability = compute_capability(gpus[int(index)], labels)
            error = mps_replicas_error(capability, replicas) if capability else ""
            if error:
                return f"invalid MPS configuration: {error}"
    return ""


def _resource_name(name: Any) -> str:
    """resources.go NewResourceName: a name without the ``nvidia.com/`` prefix gets it."""
    text = str(name or "")
    return text if text.startswith(NVIDIA_PREFIX) else NVIDIA_PREFIX + text


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def device_map(gpus: list[KubeObject], config: str | KubeObject | None) -> dict[str, list[str]]:
    """Resource name -> the device IDs the plugin serves under it, before replication.

    As internal/rm/device_map.go builds it: under ``migStrategy`` none every GPU is whole;
    under mixed, MIG-enabled GPUs give ``nvidia.com/mig-<profile>`` per instance and the
    others ``nvidia.com/gpu``; under single, every MIG instance is ``nvidia.com/gpu``, and
    the plugin refuses a node whose GPUs are not all partitioned alike.
    Raises PluginRefused with the plugin's reason."""
    cfg = parse_config(config)
    strategy = (cfg.get("flags") or {}).get("migStrategy") or "none"
    if strategy not in ("none", "single", "mixed"):
        raise PluginRefused(f"unknown MIG strategy: {strategy}")
    out: dict[str, list[str]] = {}
    for i, g in enumerate(gpus):
        if strategy != "none" and _mig_enabled(g):
            continue
        out.setdefault(GPU, []).append(str(i))
    if strategy == "none":
        return out
    if strategy == "single":
        for i, g in enumerate(gpus):
            if _mig_enabled(g) and not g.get("mig"):
                raise PluginRefused(f"invalid MIG configuration: device {i} has no MIG devices configured")
        if len({p for g in gpus if _mig_enabled(g) for p in g.get("mig") or []}) > 1:
            raise PluginRefused("invalid MIG configuration: more than one MIG device type present on node")
        if out and any(_mig_enabled(g) for g in gpus):
            raise PluginRefused("all devices on the node must be configured with the same migEnabled value")
    for i, g in enumerate(gpus):
        if not _mig_enabled(g):
            continue
        for j, profile in enumerate(g.get("mig") or []):
            name = GPU if strategy == "single" else f"{MIG_PREFIX}{profile}"
            out.setdefault(name, []).append(f"{i}:{j}")
    return out


def plugin_start_error(gpus: list[KubeObject], config: str | KubeObject | None) -> str:
    """Why the plugin would exit at start on these GPUs with this config ("" when it starts)."""
    try:
        device_map(gpus, config)
    except PluginRefused as e:
        return str(e)
    return mps_start_error(gpus, config)


def advertised_resources(gpus: list[KubeObject], config: str | KubeObject | None) -> dict[str, int]:
    """Resources the plugin registers with kubelet for these physical GPUs.

    ``gpus``: [{"uuid", "model", "mig": [profile, ...], "migEnabled"?}]. The device map
    (``device_map``) is replicated as internal/rm/device_map.go does: every device of a
    resource named in the sharing section (the plugin ignores ``devices`` and ``rename`` and
    replicates all: api/config/v1 DisableResourceNamingInConfig) becomes ``replicas``
    devices, under ``<name>.shared`` when ``renameByDefault`` is true. A plugin that
    refuses to start registers nothing ({}).
    """
    # A config the plugin refuses: it exits before registering and its pod crash-loops.
    # Kubelet then keeps the old capacity with allocatable 0, as with no plugin at all.
    if plugin_config_errors(config):
        return {}
    cfg = parse_config(config)
    try:
        devices = device_map(gpus, cfg)
    except PluginRefused:
        return {}
    if mps_start_error(gpus, cfg):
        return {}
    section = _replicated(cfg)
    rename = bool(section.get("renameByDefault", False))
    out: dict[str, int] = {name: len(ids) for name, ids in devices.items()}
    for res in section.get("resources") or []:
        name, replicas = _resource_name(res.get("name")), _int(res.get("replicas"))
        if name not in devices or replicas < 2:  # the plugin refuses fewer than 2 at load
            continue
        count = out.pop(name)
        shared = f"{name}.shared" if rename else name
        out[shared] = out.get(shared, 0) + count * replicas
    return out


def gfd_labels(gpus: list[KubeObject], config: str | KubeObject | None) -> dict[str, str]:
    """The core labels GPU feature discovery writes for these GPUs and this config
    (internal/lm/resource.go and mig-strategy.go): ``nvidia.com/gpu.count``/``.product``/
    ``.replicas``/``.sharing-strategy``, ``nvidia.com/mig.strategy``, and per MIG resource
    under mixed. Under single, the MIG labeler overrides ``gpu.count`` and ``gpu.product``
    to describe the MIG devices ("<model>-MIG-<profile>"), or marks the node
    "<model>-MIG-INVALID" with count 0 when its GPUs are not partitioned alike. A product is
    suffixed "-SHARED" when its resource is replicated without a rename."""
    if not gpus:
        return {}
    cfg = parse_config(config)
    strategy = (cfg.get("flags") or {}).get("migStrategy") or "none"
    section = _replicated(cfg)
    rename = bool(section.get("renameByDefault", False))
    replicas = {_resource_name(r.get("name")): _int(r.get("replicas")) for r in section.get("resources") or []}
    share = sharing_strategy(cfg)
    model = _sanitise(gpus[0].get("model", ""))

    def base(resource: str, count: int, *parts: str) -> dict[str, str]:
        r = replicas.get(resource, 0)
        product = "-".join(parts) + ("-SHARED" if r > 1 and not rename else "")
        return {
            f"{resource}.product": product,
            f"{resource}.count": str(count),
            f"{resource}.replicas": str(max(r, 1)),
            f"{resource}.sharing-strategy": share if r > 1 else "none",
        }

    labels = base(GPU, len(gpus), model)
    if all(_mig_enabled(g) for g in gpus):
        # newGPULabelers: MIG-enabled GPUs are labelled "without sharing" (replicas 0); only
        # a full GPU of the model overrides that with the config's replicas.
        labels.update(
            {
                f"{GPU}.product": model,
                f"{GPU}.replicas": "0",
                f"{GPU}.sharing-strategy": "none",
            }
        )
    if strategy == "none":
        return labels
    labels["nvidia.com/mig.strategy"] = strategy
    migs = [p for g in gpus if _mig_enabled(g) for p in g.get("mig") or []]
    if strategy == "single":
        if not any(_mig_enabled(g) for g in gpus):
            return labels
        try:
            device_map(gpus, cfg)
        except PluginRefused:
            labels.update(
                {
                    f"{GPU}.product": f"{model}-MIG-INVALID",
                    f"{GPU}.count": "0",
                    f"{GPU}.replicas": "0",
                    f"{GPU}.sharing-strategy": "",
                    f"{GPU}.memory": "0",
                }
            )
            return labels
        profile = migs[0]
        labels.update(base(GPU, len(migs), model, "MIG", profile))
        labels[f"{GPU}.slices.gi"] = profile.split("g.", 1)[0]
        return labels
    for profile in sorted(set(migs)):
        labels.update(base(f"{MIG_PREFIX}{profile}", migs.count(profile), model, "MIG", profile))
    return labels


_NOT_IN_PRODUCT = re.compile(r"[^A-Za-z0-9_. -]")


def _sanitise(name: str) -> str:
    """GFD's product name (internal/lm/resource.go: sanitise): characters other than letters,
    digits, '-', '_', '.' and space dropped, then runs of spaces become one dash."""
    return "-".join(_NOT_IN_PRODUCT.sub("", name).split())


def kubelet_status(status: KubeObject, advertised: dict[str, int] | None) -> KubeObject:
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


def kubelet_status_registered(status: KubeObject, advertised: dict[str, int] | None) -> KubeObject:
    """Node ``status`` after a kubelet sync in which its device plugin did not change (or the
    first sync of a node whose status was written as it is, e.g. loaded from a scenario):
    kubelet writes what its device manager has registered where the status lacks it (a status
    patch removed it) and leaves every other resource as it finds it, a stale one in both
    capacity and allocatable too. Only a plugin that stops serving a resource changes it
    (``kubelet_status``)."""
    capacity = dict(status.get("capacity") or {})
    allocatable = dict(status.get("allocatable") or {})
    for name, count in (advertised or {}).items():
        capacity.setdefault(name, str(count))
        allocatable.setdefault(name, str(count))
    return {**status, "capacity": capacity, "allocatable": allocatable}


matches_selector = labels_match  # nodeSelector-style equality


def daemonset_for_node(node: KubeObject, daemonsets: list[KubeObject]) -> KubeObject | None:
    """The brick-nvidia plugin DaemonSet whose nodeSelector matches the node's labels (never
    NVIDIA's MPS control daemon, which runs beside the MPS plugin and serves no resource)."""
    labels = node["metadata"].get("labels") or {}
    for ds in daemonsets:
        if is_mps_control_daemon(ds):
            continue
        spec = ds["spec"]["template"]["spec"]
        if matches_selector(labels, spec.get("nodeSelector")):
            return ds
    return None


def is_mps_control_daemon(obj: KubeObject) -> bool:
    """NVIDIA's MPS control daemon: its DaemonSet, or a pod of it."""
    return (obj["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == MPS_CONTROL_COMPONENT


def config_map_name(daemonset: KubeObject) -> str | None:
    for vol in daemonset["spec"]["template"]["spec"].get("volumes") or []:
        if "configMap" in vol:
            name: str = vol["configMap"]["name"]
            return name
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
    value = (
        base
        + amplitude * math.sin(2 * math.pi * t / period + phase)
        + 10 * math.sin(2 * math.pi * t / 86400 + phase)
        + jitter
    )
    return int(min(100, max(1, round(value))))
