"""The names Kubernetes, NVIDIA and the product give things, and the small rules on them.

Sources: the GPU Operator's and GPU Feature Discovery's node labels (NVIDIA/gpu-operator,
NVIDIA/k8s-device-plugin docs/gpu-feature-discovery), GFD's product label as
internal/lm/resource.go builds it (sanitise; TestSanitise in tests/foundation/test_gfd_names.py),
Kubernetes' well-known labels, annotations and taints
(k8s.io/api core/v1/well_known_labels.go, well_known_taints.go, annotation_key_constants.go),
kube-state-metrics' label and resource names as it sanitises them, and RFC 6901 (JSON
pointer); the BRICK labels and the brick-nvidia device plugin's names are the product's own.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

from .quantity import quantity

# A Kubernetes object, or a part of one, as the API server returns it: decoded JSON.
KubeObject: TypeAlias = dict[str, Any]


# --- resources -------------------------------------------------------------------
# Names are written out whole, so a grep for one finds its single definition.
NVIDIA_PREFIX = "nvidia.com/"
GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"  # time-slicing with renameByDefault
MIG_PREFIX = "nvidia.com/mig-"  # nvidia.com/mig-<profile> (migStrategy mixed)
QUOTA_LIMITS_PREFIX = "limits."  # quota keys; extended resources only work as requests.<name>
QUOTA_REQUESTS_PREFIX = "requests."

# --- BRICK node and namespace labels ----------------------------------------------
SHARING_LABEL = "brick.cloud/gpu.sharing"  # none | timeslicing: picks the plugin DaemonSet
GPU_TYPE_LABEL = "brick.cloud/gpu.type"  # nodes the brick-nvidia plugin serves
OWNER_LABEL = "brick.cloud/owner"
WORKSPACE_LABEL = "brick.cloud/workspace"
JOB_ID_LABEL = "brick.cloud/job-id"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "brickadmin"  # MANAGED_BY_LABEL's value on what the product creates
# Kubernetes Pod Security admission (pod-security.kubernetes.io/<mode>: privileged|baseline|restricted)
POD_SECURITY_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
POD_SECURITY_WARN_LABEL = "pod-security.kubernetes.io/warn"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")

# --- GPU Operator / GPU Feature Discovery labels ------------------------------------
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
GPU_COMPUTE_MAJOR_LABEL = "nvidia.com/gpu.compute.major"  # GFD: the GPU's CUDA compute capability
GPU_COMPUTE_MINOR_LABEL = "nvidia.com/gpu.compute.minor"
GFD_GPU_LABEL_PREFIX = "nvidia.com/gpu."
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # mig-manager writes pending | success | failed
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"  # "true": the operator runs mig-manager there
GPU_OPERATOR_NAMESPACE = "gpu-operator"  # the GPU Operator's Helm default
# The labels NVIDIA's charts schedule a node's GPU stack by. The GPU Operator runs each operand
# on the nodes labelled nvidia.com/gpu.deploy.<operand>=true (its DaemonSets' nodeSelector): the
# device plugin (ClusterPolicy) and, since the operator ships the DRA driver (GPUCluster,
# manifests/state-dra-driver), its kubelet plugin on nvidia.com/gpu.deploy.dra-driver. Where both
# stacks are installed, the operator's node-labelling controller sets those from the node's
# allocation mode (device-plugin | dra), and removes the DRA kubelet plugin's label last, once no
# pod holds a gpu.nvidia.com claim there. The standalone chart (kubernetes-sigs/
# dra-driver-nvidia-gpu) selects GPU nodes by nvidia.com/gpu.present or NFD's PCI labels, with
# no per-node switch: give it kubeletPlugin.nodeSelector {nvidia.com/gpu.deploy.dra-driver: "true"}.
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DRA_DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dra-driver"
GPU_ALLOCATION_MODE_LABEL = "nvidia.com/gpu-operator.resource-allocation.mode"
GPU_ALLOCATION_MODES = ("device-plugin", "dra")  # its values
MIG_PARTED_CONFIGMAP = "default-mig-parted-config"  # mig-manager's named MIG layouts (mig-parted format)
MIG_PARTED_CONFIG_KEY = "config.yaml"
# The GPU Operator's one cluster-wide config (cluster-scoped, nvidia.com/v1): its
# spec.migManager.config.name names the ConfigMap mig-manager reads the layouts from.
CLUSTER_POLICY_KIND = "ClusterPolicy"
CLUSTER_POLICY_PATH = "/apis/nvidia.com/v1/clusterpolicies"


def mig_parted_configmap(cluster_policies: list[KubeObject] | None = None, configured: str = "") -> str:
    """The ConfigMap (in the GPU Operator's namespace) of mig-manager's layouts, which the node
    label nvidia.com/mig.config picks from: the ClusterPolicy's spec.migManager.config.name when
    a ClusterPolicy sets it (that is what mig-manager reads), else ``configured`` (the product's
    setting, for a cluster whose ClusterPolicy it cannot read), else the operator's default."""
    for policy in sorted(cluster_policies or [], key=lambda p: (p.get("metadata") or {}).get("name") or ""):
        manager = (policy.get("spec") or {}).get("migManager") or {}
        name = (manager.get("config") or {}).get("name") if isinstance(manager, dict) else None
        if isinstance(name, str) and name.strip():
            return name.strip()
    return configured.strip() or MIG_PARTED_CONFIGMAP


# --- Kubernetes well-known names ------------------------------------------------
NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # static pods: kubelet owns them
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"  # kubectl rollout restart

# --- the brick-nvidia device plugin ----------------------------------------------
PLUGIN_NAMESPACE = "brick-nvidia"
PLUGIN_CONFIG_KEY = "config.yaml"  # the key of the plugin's config in its ConfigMap
TS_CONFIGMAP = "nvidia-device-plugin-config-timeslicing"
TS_DAEMONSET = "nvidia-device-plugin-timeslicing"
DEFAULT_DAEMONSET = "nvidia-device-plugin-default"
MPS_CONFIGMAP = "nvidia-device-plugin-config-mps"
MPS_DAEMONSET = "nvidia-device-plugin-mps"
# NVIDIA's MPS control daemon (deployments/helm/nvidia-device-plugin/templates/
# daemonset-mps-control-daemon.yml): one MPS server per GPU, on the nodes GFD labels
# nvidia.com/mps.capable=true. BRICK has no GFD: the MPS conversions set that label.
MPS_CONTROL_DAEMONSET = "nvidia-device-plugin-mps-control-daemon"
MPS_CONTROL_COMPONENT = "mps-control-daemon"
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"


SHARING_VALUES = ("none", "timeslicing", "mps")  # the only values of SHARING_LABEL a plugin serves
REPLICATED_SHARING_VALUES = ("timeslicing", "mps")  # the values whose plugin serves nvidia.com/gpu.shared


def intended_sharing(value: str) -> str:
    """The sharing label value a typo most likely meant: "timeslicing" when it speaks of
    time or slicing ("time-slicing", "TimeSliced", "timeslice"), "mps" when it names MPS
    ("MPS", "mps-sharing"), else "none"."""
    letters = "".join(c for c in (value or "").lower() if c.isalnum())
    if "mps" in letters:
        return "mps"
    return "timeslicing" if "time" in letters or "slic" in letters or "shar" in letters else "none"


def is_stale_resource(sharing: str, resource: str, status: KubeObject | None = None) -> bool:
    """On a BRICK node, the other mode's resource that kubelet leaves in node status after a
    conversion: nvidia.com/gpu on a time-slicing or MPS node, nvidia.com/gpu.shared on any other.
    Given the node's status, also nvidia.com/gpu left at allocatable 0 once every GPU is in
    MIG mode: the plugin (migStrategy mixed) registers no whole GPU then, and kubelet keeps
    the old capacity, as it does after a conversion."""
    replicated = sharing in REPLICATED_SHARING_VALUES
    if (replicated and resource == GPU) or (not replicated and resource == GPU_SHARED):
        return True
    return resource == GPU and status is not None and left_by_mig(status)


def left_by_mig(status: KubeObject) -> bool:
    """nvidia.com/gpu in capacity with nothing allocatable while MIG devices are."""
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    whole_left = quantity(capacity.get(GPU, 0)) > 0 and quantity(allocatable.get(GPU, 0)) == 0
    return whole_left and any(k.startswith(MIG_PREFIX) and quantity(v) > 0 for k, v in allocatable.items())


GPU_PRODUCT_SHARED_SUFFIX = "-SHARED"  # GFD appends it to a product whose resource is replicated, not renamed
GPU_PRODUCT_MIG_INFIX = "-MIG-"  # "<model>-MIG-<profile>": GFD's product of a MIG device
MIG_INVALID = "INVALID"  # "<model>-MIG-INVALID": MIG strategy single on GPUs not partitioned alike


def split_gpu_product(product: str) -> tuple[str, str, bool]:
    """GFD's ``nvidia.com/gpu.product`` (or ``nvidia.com/mig-<p>.product``) taken apart as
    internal/lm/resource.go builds it: (model, MIG profile or "" or "INVALID", shared).
    "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED" -> ("NVIDIA-A100-SXM4-40GB", "1g.5gb", True)."""
    name = (product or "").strip()
    shared = name.upper().endswith(GPU_PRODUCT_SHARED_SUFFIX)
    if shared:
        name = name[: -len(GPU_PRODUCT_SHARED_SUFFIX)]
    model, sep, profile = name.rpartition(GPU_PRODUCT_MIG_INFIX)
    if not sep:
        return name, "", shared
    return model, profile, shared


_GFD_PRODUCT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_. ")


def gfd_sanitise(name: str) -> str:
    """GPU Feature Discovery's ``sanitise`` (NVIDIA/k8s-device-plugin internal/lm/resource.go),
    which makes a model name into its product label: every character other than a letter, a
    digit, '-', '_', '.' or a space dropped, then the words joined by dashes
    ("NVIDIA TITAN X (Pascal)" -> "NVIDIA-TITAN-X-Pascal")."""
    return "-".join("".join(c for c in name if c in _GFD_PRODUCT_CHARS).split())


def gpu_model_name(name: str) -> str:
    """One name per GPU model, whichever source named it: DCGM's ``modelName`` ("NVIDIA
    A100-SXM4-40GB") and GFD's ``nvidia.com/gpu.product`` label, which has no spaces
    ("NVIDIA-A100-SXM4-40GB", "...-SHARED" on a time-sliced node, "...-MIG-1g.5gb" under
    MIG strategy single), all give "NVIDIA A100 SXM4 40GB". The name is read as GFD
    sanitises it, so "NVIDIA TITAN X (Pascal)" and its label "NVIDIA-TITAN-X-Pascal" are one
    model. Everything that groups by model uses this."""
    model, _profile, _shared = split_gpu_product(name)
    return " ".join(gfd_sanitise(model).replace("-", " ").replace("_", " ").split())


def quota_key(resource: str) -> str:
    """The ResourceQuota key that limits an extended resource: ``requests.<name>``."""
    return QUOTA_REQUESTS_PREFIX + resource


def ksm_resource(resource: str) -> str:
    """A resource name as kube-state-metrics labels it: nvidia.com/gpu.shared -> nvidia_com_gpu_shared."""
    return resource.replace("/", "_").replace(".", "_").replace("-", "_")


def ksm_label(label: str) -> str:
    """A node label as kube-state-metrics exposes it on kube_node_labels:
    brick.cloud/gpu.sharing -> label_brick_cloud_gpu_sharing."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


# --- JSON pointer ------------------------------------------------------------------


def json_pointer_escape(token: str) -> str:
    """RFC 6901: '~' -> '~0', '/' -> '~1' (resource names in status patch paths)."""
    return token.replace("~", "~0").replace("/", "~1")
