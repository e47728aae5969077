"""One vocabulary for Kubernetes facts: names, and the small rules every layer shares.

The twin, the real gateway, the procedures' steps, the ledger, the manifest code and the
lab all read label/resource/annotation names and these rules from here, so they cannot
drift apart. Pure: no Django, and only the standard library at import time, because
lab/lab.py loads this file on its own (PyYAML is imported by the one function needing it).
"""
from __future__ import annotations

import re

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

# --- GPU Operator / GPU Feature Discovery labels ------------------------------------
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
GFD_GPU_LABEL_PREFIX = "nvidia.com/gpu."
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # mig-manager writes pending | success | failed
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"  # "true": the operator runs mig-manager there
GPU_OPERATOR_NAMESPACE = "gpu-operator"  # the GPU Operator's Helm default
MIG_PARTED_CONFIGMAP = "default-mig-parted-config"  # mig-manager's named MIG layouts (mig-parted format)
MIG_PARTED_CONFIG_KEY = "config.yaml"

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


SHARING_VALUES = ("none", "timeslicing")  # the only values of SHARING_LABEL a plugin serves


def intended_sharing(value: str) -> str:
    """The sharing label value a typo most likely meant: "timeslicing" when it speaks of
    time or slicing ("time-slicing", "TimeSliced", "timeslice"), else "none"."""
    letters = "".join(c for c in (value or "").lower() if c.isalnum())
    return "timeslicing" if "time" in letters or "slic" in letters or "shar" in letters else "none"


def is_stale_resource(sharing: str, resource: str) -> bool:
    """On a BRICK node, the other mode's resource that kubelet leaves in node status after a
    conversion: nvidia.com/gpu on a time-slicing node, nvidia.com/gpu.shared on any other."""
    return (sharing == "timeslicing" and resource == GPU) or (sharing != "timeslicing" and resource == GPU_SHARED)


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
        name = name[:-len(GPU_PRODUCT_SHARED_SUFFIX)]
    model, sep, profile = name.rpartition(GPU_PRODUCT_MIG_INFIX)
    if not sep:
        return name, "", shared
    return model, profile, shared


def gpu_model_name(name: str) -> str:
    """One name per GPU model, whichever source named it: DCGM's ``modelName`` ("NVIDIA
    A100-SXM4-40GB") and GFD's ``nvidia.com/gpu.product`` label, which has no spaces
    ("NVIDIA-A100-SXM4-40GB", "...-SHARED" on a time-sliced node, "...-MIG-1g.5gb" under
    MIG strategy single), all give "NVIDIA A100 SXM4 40GB". Everything that groups by model
    uses this."""
    model, _profile, _shared = split_gpu_product(name)
    return " ".join(model.replace("-", " ").replace("_", " ").split())


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


def quantity(value) -> int:
    """Extended resources are integers; tolerate '2', 2, and junk as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


# --- pods ------------------------------------------------------------------------

def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_mirror(pod: dict) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def daemonset_controlled(pod: dict) -> bool:
    """Only the *controller* owner counts, as in kubectl drain: a DaemonSet that merely
    appears among the owners would not recreate the pod."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)


SKIP_MIRROR, SKIP_DAEMONSET, EVICT = "skip-mirror", "skip-daemonset", "evict"


def drain_decision(pod: dict) -> str:
    """What ``kubectl drain --ignore-daemonsets --force`` does with a pod on the node.

    Terminal pods are left to the caller: the real gateway deletes them too (their
    eviction needs no budget), the twin and the steps treat them as already gone."""
    if is_mirror(pod):
        return SKIP_MIRROR
    if daemonset_controlled(pod):
        return SKIP_DAEMONSET
    return EVICT


def uses_emptydir(pod: dict) -> bool:
    return any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def pod_key(pod: dict) -> str:
    md = pod["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}"


# --- label selectors -------------------------------------------------------------

def labels_match(labels: dict, match_labels: dict | None) -> bool:
    """Equality-only selection (nodeSelector, matchLabels); empty selects everything."""
    return all(labels.get(k) == v for k, v in (match_labels or {}).items())


def _expression_matches(labels: dict, expr: dict) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an operator the API server would have refused


def selector_matches(labels: dict, selector: dict | None) -> bool:
    """A LabelSelector (``matchLabels`` + ``matchExpressions``, ANDed). An empty selector
    selects everything; callers decide what a missing (null) selector means."""
    selector = selector or {}
    return labels_match(labels, selector.get("matchLabels")) and all(
        _expression_matches(labels, e) for e in selector.get("matchExpressions") or [])


_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def split_selector_terms(selector: str) -> list[str]:
    """Comma-separated terms of a label or field selector string (commas inside ``(...)`` kept)."""
    parts, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_label_selector(selector: str | None) -> dict:
    """A selector string (``a=b,c!=d,e in (f,g),h,!i``) as a LabelSelector dict."""
    match_labels: dict[str, str] = {}
    exprs: list[dict] = []
    for term in split_selector_terms(selector or ""):
        term = term.strip()
        m = _SET_RE.match(term)
        if m:
            values = [v.strip() for v in m.group(3).split(",")]
            exprs.append({"key": m.group(1), "operator": "In" if m.group(2) == "in" else "NotIn",
                          "values": values})
        elif "!=" in term:
            key, value = term.split("!=", 1)
            exprs.append({"key": key.strip(), "operator": "NotIn", "values": [value.strip()]})
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            key, value = key.strip(), value.strip()
            if key in match_labels and match_labels[key] != value:
                exprs.append({"key": key, "operator": "In", "values": [value]})  # a=x,a=y selects nothing
            else:
                match_labels[key] = value
        elif term.startswith("!"):
            exprs.append({"key": term[1:].strip(), "operator": "DoesNotExist"})
        else:
            exprs.append({"key": term, "operator": "Exists"})
    out: dict = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


def label_selector_matches(labels: dict, selector: str | None) -> bool:
    """A selector string, as ``list --selector`` applies it."""
    return selector_matches(labels, parse_label_selector(selector))


# --- taints and tolerations ------------------------------------------------------

def toleration_matches(taint: dict, tol: dict) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if tol.get("operator") == "Exists":
        return not tol.get("key") or tol["key"] == taint.get("key")
    return tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", "")


# The DaemonSet controller adds these tolerations to every DaemonSet pod by itself, so a
# node under one of these conditions (cordoned, not ready, unreachable, under pressure)
# still gets its device-plugin pod.
DAEMONSET_AUTO_TOLERATED = frozenset({
    UNSCHEDULABLE_TAINT_KEY, "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable"})


def tolerates(taints: list[dict] | None, tolerations: list[dict] | None) -> bool:
    """True when every NoSchedule/NoExecute taint is tolerated (DaemonSet rules)."""
    for taint in taints or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key", "") in DAEMONSET_AUTO_TOLERATED:
            continue
        if not any(toleration_matches(taint, t) for t in tolerations or []):
            return False
    return True


# --- PodDisruptionBudgets ----------------------------------------------------------

def pdb_selects(pdb: dict, pod: dict) -> bool:
    """policy/v1: same namespace and the selector matches; an empty selector selects every
    pod of the namespace, a missing one selects none."""
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return selector_matches((pod.get("metadata") or {}).get("labels") or {}, selector)


def pdbs_for(pod: dict, pdbs: list[dict]) -> list[dict]:
    """The budgets that guard this pod."""
    return [b for b in pdbs if pdb_selects(b, pod)]


def disruptions_allowed(pdb: dict, pods: list[dict]) -> int:
    """What the disruption controller would put in status.disruptionsAllowed, counting
    Running pods the budget selects as healthy (integer minAvailable/maxUnavailable)."""
    healthy = sum(1 for p in pods if pdb_selects(pdb, p) and (p.get("status") or {}).get("phase") == "Running")
    spec = pdb.get("spec") or {}
    if "minAvailable" in spec:
        return healthy - int(spec["minAvailable"])
    return int(spec.get("maxUnavailable", 0))


# --- JSON pointer ------------------------------------------------------------------

def json_pointer_escape(token: str) -> str:
    """RFC 6901: '~' -> '~0', '/' -> '~1' (resource names in status patch paths)."""
    return token.replace("~", "~0").replace("/", "~1")


# --- the device plugin's config -----------------------------------------------------

def parse_plugin_config(config: str | dict | None) -> dict:
    """The plugin's config file (a ConfigMap's ``config.yaml``) as a dict; YAML errors raise."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return config
    import yaml  # here, so the module stays loadable without PyYAML (lab/lab.py)

    return yaml.safe_load(config) or {}


def time_slicing(config: str | dict | None) -> dict:
    """The ``sharing.timeSlicing`` section of a plugin config ({} when absent)."""
    return (parse_plugin_config(config).get("sharing") or {}).get("timeSlicing") or {}


def time_slicing_replicas(config: str | dict | None) -> int | None:
    """Replicas of ``nvidia.com/gpu`` under time-slicing; None when the config names none.
    A value that is not an integer reads as 0 (the callers' checks then refuse it)."""
    for res in time_slicing(config).get("resources") or []:
        if res.get("name") == GPU:
            return quantity(res.get("replicas", 1))
    return None


def configmap_replicas(configmaps: list[dict]) -> int | None:
    """Time-slicing replicas in the BRICK time-slicing ConfigMap among ``configmaps``
    (live objects or manifest documents); None when it or its replicas are missing."""
    for cm in configmaps:
        if cm.get("kind", "ConfigMap") == "ConfigMap" and cm["metadata"]["name"] == TS_CONFIGMAP:
            replicas = time_slicing_replicas((cm.get("data") or {}).get(PLUGIN_CONFIG_KEY) or "")
            if replicas is not None:
                return replicas
    return None
