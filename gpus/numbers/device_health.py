"""What the kubelet says of the devices a pod holds, and whether mig-manager runs beside DRA's
dynamic MIG: pure functions over Kubernetes objects, no Django.

Device health (KEP-4680, feature gate ResourceHealthStatus): the kubelet writes, per container
and init container, ``status.containerStatuses[].allocatedResourcesStatus``, a list of
``{name, resources: [{resourceID, health}]}`` (k8s.io/api core/v1 types.go, ResourceStatus and
ResourceHealth). ``name`` is ``claim:<claim>/<request>`` for a DRA claim (``<claim>`` the
pod's own name for it in spec.resourceClaims) and the resource name (``nvidia.com/gpu``) for a
device plugin's resource. ``resourceID`` is ``<driver>/<pool>/<device>`` for DRA (a pool name
may itself hold slashes: the driver is the first segment, the device the last) and the device
plugin's device ID otherwise (NVIDIA's: the GPU's or MIG device's UUID, ``<uuid>::<n>`` for a
time-slicing replica). ``health`` is Healthy, Unhealthy or Unknown (the plugin unregistered or
not reporting).

mig-manager (the GPU Operator's operand that applies ``nvidia.com/mig.config``) runs on a node
when its pod is there, or when the operator's deploy label ``nvidia.com/gpu.deploy.mig-manager``
is set to anything but "false" (its DaemonSet selects "true"), or when a MIG layout is asked of
it (``nvidia.com/mig.config``) and the deploy label does not say "false". On a node whose GPUs
NVIDIA's DRA driver partitions when claimed (dynamic MIG), both would change the MIG layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from brickadmin.cluster.projection import reports_device_health
from brickadmin.cluster.vocabulary import MIG_CONFIG_LABEL, MIG_MANAGER_DEPLOY_LABEL, KubeObject

HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
CLAIM_PREFIX = "claim:"  # allocatedResourcesStatus' name of a DRA claim's request


@dataclass(frozen=True, slots=True)
class HeldDevice:
    """One device a pod's container holds, with the health the kubelet reports for it."""

    namespace: str
    pod: str
    node: str
    container: str
    resource: str  # claim:<claim>/<request> (DRA) or the device plugin's resource name
    resource_id: str
    health: str
    driver: str = ""  # DRA: the device's driver, pool and name, from the resourceID
    pool: str = ""
    device: str = ""

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def is_dra(self) -> bool:
        return self.resource.startswith(CLAIM_PREFIX)

    @property
    def claim(self) -> str:
        """The pod's name for the claim (DRA), else ''."""
        if not self.is_dra:
            return ""
        return self.resource[len(CLAIM_PREFIX) :].split("/", 1)[0]

    @property
    def gpu(self) -> str:
        """The device plugin's device ID without a time-slicing replica's ``::<n>``: the GPU."""
        return self.resource_id.split("::", 1)[0]


def dra_resource_id(resource_id: str) -> tuple[str, str, str] | None:
    """``<driver>/<pool>/<device>`` taken apart, or None when it is not one."""
    driver, _sep, rest = resource_id.partition("/")
    pool, _sep, device = rest.rpartition("/")
    if not driver or not pool or not device:
        return None
    return driver, pool, device


def _statuses(pod: KubeObject) -> Iterator[KubeObject]:
    status = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            if isinstance(cs, dict):
                yield cs


def held_devices(pod: KubeObject) -> list[HeldDevice]:
    """Every device the kubelet reports the health of in the pod's container statuses (init
    containers too), in the order it lists them; a device two containers report is listed once."""
    if not any(cs.get("allocatedResourcesStatus") for cs in _statuses(pod)):
        return []  # most pods: no health reported (the checks walk every pod holding a device)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    ns, name, node = str(meta.get("namespace", "")), str(meta.get("name", "")), str(spec.get("nodeName") or "")
    out: list[HeldDevice] = []
    seen: set[tuple[str, str]] = set()
    for cs in _statuses(pod):
        for entry in cs.get("allocatedResourcesStatus") or []:
            resource = str((entry or {}).get("name", ""))
            for r in (entry or {}).get("resources") or []:
                rid = str((r or {}).get("resourceID", ""))
                if not rid or (resource, rid) in seen:
                    continue
                seen.add((resource, rid))
                health = str((r or {}).get("health") or UNKNOWN)
                parts = dra_resource_id(rid) if resource.startswith(CLAIM_PREFIX) else None
                driver, pool, device = parts or ("", "", "")
                out.append(
                    HeldDevice(ns, name, node, str(cs.get("name", "")), resource, rid, health, driver, pool, device)
                )
    return out


def running_pods(*pod_lists: Iterable[KubeObject]) -> list[KubeObject]:
    """The Running pods of the lists, each once (a pod both requesting nvidia.com/* and using claims
    is in two of the snapshot's lists)."""
    out: list[KubeObject] = []
    seen: set[tuple[str, str]] = set()
    for pods in pod_lists:
        for p in pods:
            meta = p.get("metadata") or {}
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            if key in seen or (p.get("status") or {}).get("phase") != "Running":
                continue
            seen.add(key)
            out.append(p)
    return out


def pods_reporting_health(snapshot: object) -> list[KubeObject]:
    """The Running GPU and claim pods whose devices' health the kubelet reports, each once: the
    watcher's list of them when the snapshot has one, else picked from its GPU and claim pods."""
    listed = getattr(snapshot, "health_pods", None)
    if listed is not None:
        return running_pods(listed)
    gpu_pods, claim_pods = getattr(snapshot, "gpu_pods", None) or [], getattr(snapshot, "claim_pods", None) or []
    return [p for p in running_pods(gpu_pods, claim_pods) if reports_device_health(p)]


def devices_by_health(pods: Iterable[KubeObject], health: str) -> list[HeldDevice]:
    """The devices of ``health`` that the pods hold, by node, pod and device."""
    found = [d for p in pods for d in held_devices(p) if d.health == health]
    return sorted(found, key=lambda d: (d.node, d.namespace, d.pod, d.resource_id))


# --- mig-manager beside dynamic MIG -----------------------------------------------------


def mig_manager_signs(labels: dict[str, str], mig_manager_pods: Sequence[KubeObject]) -> list[str]:
    """Why mig-manager runs (or is asked to run) on a node, from its labels and the mig-manager pods
    on it: each sign as ``what=value`` or ``pod <ns>/<name>``; [] when none. A pod of it on the node
    is a sign whatever the labels say (it has not left yet)."""
    signs = [
        f"pod {(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}"
        for p in mig_manager_pods
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    deploy = labels.get(MIG_MANAGER_DEPLOY_LABEL)
    if deploy is not None and deploy != "false":
        signs.append(f"{MIG_MANAGER_DEPLOY_LABEL}={deploy}")
    if labels.get(MIG_CONFIG_LABEL) and deploy != "false":
        signs.append(f"{MIG_CONFIG_LABEL}={labels[MIG_CONFIG_LABEL]}")
    return signs
