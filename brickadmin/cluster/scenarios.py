"""Scenario files: a cluster as Kubernetes objects plus each node's physical GPUs.

Format (YAML)::

    description: text
    hardware:                 # node name -> physical GPUs (what DCGM would see)
      node-a:
        - {uuid: GPU-..., model: NVIDIA A30, memoryMiB: 24576}
        - {uuid: GPU-..., model: ..., mig: [1g.24gb, 1g.24gb]}   # MIG instances on that GPU
      node-b:                 # or, with the config its running plugin read at start
        gpus: [...]           # (differs from the ConfigMap when a rollout restart was skipped)
        pluginConfig: |
          version: v1 ...
    objects:                  # as `kubectl get -o yaml` shows them
      - {apiVersion: v1, kind: Node, metadata: {...}, spec: {...}, status: {...}}

Validation names the object and the field, and nothing loads when anything is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from . import vocabulary as vocab
from .base import DRA_KINDS

BASE_DIR = Path(__file__).resolve().parents[2]
SCENARIO_DIR = BASE_DIR / "scenarios"
MIG_PROFILE = re.compile(r"^\d+g\.\d+gb(\+me)?$")
NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
KNOWN_KINDS = {
    "Node",
    "Pod",
    "Namespace",
    "ConfigMap",
    "ResourceQuota",
    "DaemonSet",
    "PodDisruptionBudget",
    "Job",
    "PriorityClass",
    "ServiceAccount",
    "LimitRange",
    "ClusterPolicy",  # the GPU Operator's (nvidia.com/v1): names mig-manager's layouts ConfigMap
    *DRA_KINDS,  # Dynamic Resource Allocation (resource.k8s.io): ResourceSlice, ResourceClaim, ...
}
NAMESPACED_DRA_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
SLICE_NODE_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


class ScenarioError(ValueError):
    pass


def scenario_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not candidate.exists():
        known = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.yaml")))
        raise ScenarioError(f'No scenario "{name_or_path}". Known scenarios: {known}')
    return candidate


def read(name_or_path: str) -> tuple[list[dict], dict[str, list[dict]], dict[str, str]]:
    """(objects, hardware gpus per node, plugin config per node) — validated."""
    path = scenario_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path.name}: not valid YAML: {exc}") from exc
    return parse(data, source=path.name)


def parse(data, source: str = "scenario"):
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping with 'objects' and 'hardware'")
    objects = data.get("objects")
    if not isinstance(objects, list):
        raise ScenarioError(f"{source}: 'objects' must be a list of Kubernetes objects")
    seen = set()
    for i, obj in enumerate(objects):
        _validate_object(obj, f"{source}: objects[{i}]", seen)
    hardware_in = data.get("hardware") or {}
    if not isinstance(hardware_in, dict):
        raise ScenarioError(f"{source}: 'hardware' must map node names to lists of GPUs")
    node_names = {o["metadata"]["name"] for o in objects if o["kind"] == "Node"}
    hardware, plugin_configs = {}, {}
    for node, entry in hardware_in.items():
        where = f"{source}: hardware[{node}]"
        if node not in node_names:
            raise ScenarioError(f"{where}: no Node named {node!r} among the objects")
        gpus = entry.get("gpus") if isinstance(entry, dict) else entry
        if isinstance(entry, dict) and entry.get("pluginConfig") is not None:
            if not isinstance(entry["pluginConfig"], str):
                raise ScenarioError(f"{where}.pluginConfig: must be the plugin's config.yaml as text")
            plugin_configs[node] = entry["pluginConfig"]
        if not isinstance(gpus, list):
            raise ScenarioError(f"{where}: must be a list of GPUs")
        for j, gpu in enumerate(gpus):
            gwhere = f"{where}[{j}]"
            if not isinstance(gpu, dict):
                raise ScenarioError(f"{gwhere}: must be a mapping with uuid and model")
            for key in ("uuid", "model"):
                if not isinstance(gpu.get(key), str) or not gpu.get(key):
                    raise ScenarioError(f"{gwhere}.{key}: required text field is missing")
            for k, profile in enumerate(gpu.get("mig") or []):
                if not isinstance(profile, str) or not MIG_PROFILE.match(profile):
                    raise ScenarioError(f"{gwhere}.mig[{k}]: {profile!r} is not a MIG profile like 1g.24gb")
        hardware[node] = gpus
    return objects, hardware, plugin_configs


def _whole_quantity(value) -> bool:
    """An extended resource's amount as the API server accepts it: a quantity ("4", "1k")
    that is a whole number, not negative."""
    try:
        amount = vocab.parse_quantity(str(value))
    except ValueError:
        return False
    return amount >= 0 and amount == amount.to_integral_value()


def _validate_object(obj, where, seen):
    if not isinstance(obj, dict):
        raise ScenarioError(f"{where}: must be a mapping (a Kubernetes object)")
    kind = obj.get("kind")
    if kind not in KNOWN_KINDS:
        raise ScenarioError(f"{where}.kind: {kind!r} is not one of {', '.join(sorted(KNOWN_KINDS))}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise ScenarioError(f"{where} ({kind}): metadata.name is required")
    name = meta["name"]
    label = f"{where} ({kind} {name})"
    if not NAME.match(name) or len(name) > 253:
        raise ScenarioError(f"{label}: metadata.name: {name!r} is not a valid Kubernetes name")
    key = (kind, meta.get("namespace", ""), name)
    if key in seen:
        raise ScenarioError(f"{label}: metadata.name: duplicate {kind} {name!r}")
    seen.add(key)
    for field in ("labels", "annotations"):
        if field in meta and not isinstance(meta[field], dict):
            raise ScenarioError(f"{label}: metadata.{field} must be a mapping")
        for k, v in (meta.get(field) or {}).items():
            if not isinstance(v, str):
                raise ScenarioError(f"{label}: metadata.{field}[{k}]: {v!r} must be a string (quote it)")
    if kind == "Node":
        status = obj.get("status") or {}
        for section in ("capacity", "allocatable"):
            for res, value in (status.get(section) or {}).items():
                if res.startswith(vocab.NVIDIA_PREFIX) and not _whole_quantity(value):
                    raise ScenarioError(f"{label}: status.{section}[{res}]: {value!r} is not a whole number")
    if kind == "Pod":
        spec = obj.get("spec") or {}
        if not isinstance(spec.get("containers"), list) or not spec["containers"]:
            raise ScenarioError(f"{label}: spec.containers must be a non-empty list")
        for i, c in enumerate(spec["containers"]):
            for section in ("requests", "limits"):
                for res, value in ((c.get("resources") or {}).get(section) or {}).items():
                    if res.startswith(vocab.NVIDIA_PREFIX) and not _whole_quantity(value):
                        raise ScenarioError(
                            f"{label}: spec.containers[{i}].resources.{section}[{res}]: {value!r} is not a whole number"
                        )
    if kind in DRA_KINDS:
        _validate_dra(obj, kind, meta, label)
    if kind == "ResourceQuota":
        hard = (obj.get("spec") or {}).get("hard")
        if not isinstance(hard, dict):
            raise ScenarioError(f"{label}: spec.hard must be a mapping")
        for res, value in hard.items():
            try:
                vocab.parse_quantity(str(value))
            except ValueError as e:
                raise ScenarioError(f"{label}: spec.hard[{res}]: {value!r} is not a quantity: {e}") from e
            if res.startswith(vocab.NVIDIA_PREFIX) or res.startswith(vocab.QUOTA_LIMITS_PREFIX + vocab.NVIDIA_PREFIX):
                raise ScenarioError(
                    f"{label}: spec.hard[{res}]: extended resources are quota'd as "
                    f"requests.{res.split(vocab.NVIDIA_PREFIX)[0]}{vocab.NVIDIA_PREFIX}…"
                )


def _validate_dra(obj, kind, meta, label):
    """The essentials the API server holds a DRA object to, so a scenario cannot hold one it refuses."""
    if kind in NAMESPACED_DRA_KINDS and not (isinstance(meta.get("namespace"), str) and meta["namespace"]):
        raise ScenarioError(f"{label}: metadata.namespace is required ({kind} is namespaced)")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ScenarioError(f"{label}: spec must be a mapping")
    if kind == "ResourceSlice":
        if not isinstance(spec.get("driver"), str) or not spec["driver"]:
            raise ScenarioError(f"{label}: spec.driver is required (the DRA driver's name, e.g. gpu.nvidia.com)")
        pool = spec.get("pool")
        if not isinstance(pool, dict):
            raise ScenarioError(f"{label}: spec.pool is required (name, generation, resourceSliceCount)")
        if not isinstance(pool.get("name"), str) or not pool["name"]:
            raise ScenarioError(f"{label}: spec.pool.name is required")
        for field, least in (("generation", 0), ("resourceSliceCount", 1)):
            value = pool.get(field)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ScenarioError(f"{label}: spec.pool.{field}: {value!r} must be a whole number of at least {least}")
        chosen = [f for f in SLICE_NODE_FIELDS if spec.get(f) not in (None, False, "")]
        if len(chosen) != 1:
            said = ", ".join(chosen) if chosen else "none"
            raise ScenarioError(
                f"{label}: spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection "
                f"must be set (set: {said})"
            )
        devices = spec.get("devices", [])
        if not isinstance(devices, list):
            raise ScenarioError(f"{label}: spec.devices must be a list")
        for i, d in enumerate(devices):
            if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
                raise ScenarioError(f"{label}: spec.devices[{i}].name is required")
    if kind == "ResourceClaim" and not isinstance((spec.get("devices") or {}).get("requests", []), list):
        raise ScenarioError(f"{label}: spec.devices.requests must be a list")
    if kind == "ResourceClaimTemplate" and not isinstance(spec.get("spec"), dict):
        raise ScenarioError(f"{label}: spec.spec is required (the claim's spec)")
    if kind == "DeviceTaintRule":
        effect = (spec.get("taint") or {}).get("effect")
        if effect not in ("NoSchedule", "NoExecute", "None"):
            raise ScenarioError(f"{label}: spec.taint.effect: {effect!r} is not NoSchedule, NoExecute or None")


# --- builders (the demo and benchmark generators use these) -----------------


def node(
    name: str,
    *,
    model: str | None = None,
    sharing: str | None = None,
    gpu_count: int = 0,
    labels: dict | None = None,
    taints: list | None = None,
    cpu: str = "64",
    memory: str = "512Gi",
    extra_status: dict | None = None,
    unschedulable: bool = False,
) -> dict:
    lab = {vocab.HOSTNAME_LABEL: name, vocab.OS_LABEL: "linux", vocab.NODE_ROLE_PREFIX + "worker": ""}
    if sharing is not None:
        lab.update({vocab.GPU_TYPE_LABEL: "nvidia", vocab.SHARING_LABEL: sharing})
    if model:
        lab[vocab.GPU_PRODUCT_LABEL] = model.replace(" ", "-")
        lab[vocab.GPU_COUNT_LABEL] = str(gpu_count)
    lab.update(labels or {})
    base = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "860321675478"}
    status = {
        "capacity": dict(base),
        "allocatable": dict(base),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        "nodeInfo": {"kubeletVersion": "v1.34.1", "architecture": "amd64", "operatingSystem": "linux"},
    }
    for section, values in (extra_status or {}).items():
        status[section].update(values)
    spec = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": lab},
        "spec": spec,
        "status": status,
    }


def gpus(node_name: str, model: str, count: int, memory_mib: int, mig: list[list[str]] | None = None) -> list[dict]:
    out = []
    for i in range(count):
        g = {"uuid": f"GPU-{_uuid_for(node_name, i)}", "model": model, "memoryMiB": memory_mib}
        if mig and i < len(mig) and mig[i]:
            g["mig"] = list(mig[i])
        out.append(g)
    return out


def _uuid_for(node_name: str, index: int) -> str:
    import hashlib

    h = hashlib.md5(f"{node_name}/{index}".encode()).hexdigest()  # noqa: S324 (an id, not security)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def namespace(name: str, owner: str | None = None) -> dict:
    labels = {"kubernetes.io/metadata.name": name}
    if owner:
        labels.update({vocab.WORKSPACE_LABEL: "true", vocab.OWNER_LABEL: owner})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def quota(ns: str, hard: dict[str, str | int]) -> dict:
    hard = {k: str(v) for k, v in hard.items()}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "workspace-quota", "namespace": ns},
        "spec": {"hard": hard},
    }


def gpu_pod(
    ns: str,
    name: str,
    node_name: str,
    resource: str,
    count: int = 1,
    *,
    labels: dict | None = None,
    phase: str = "Running",
    emptydir: bool = False,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
) -> dict:
    spec = {
        "nodeName": node_name,
        "restartPolicy": "Always",
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": {"limits": {resource: str(count)}, "requests": {resource: str(count)}},
            }
        ],
    }
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
        "spec": spec,
        "status": {"phase": phase},
    }


def device_plugin_manifest(replicas: int = 2) -> list[dict]:
    """The managed brick-nvidia-device-plugin.yaml, with the given replicas."""
    path = BASE_DIR / "gpus" / "manifests" / "brick-nvidia-device-plugin.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("timeslicing"):
            d["data"][vocab.PLUGIN_CONFIG_KEY] = d["data"][vocab.PLUGIN_CONFIG_KEY].replace(
                "replicas: 2", f"replicas: {replicas}"
            )
    return [namespace(vocab.PLUGIN_NAMESPACE)] + docs
