"""One vocabulary for Kubernetes facts: names, and the small rules every layer shares.

The twin, the real gateway, the procedures' steps, the ledger, the manifest code and the
lab all read label/resource/annotation names and these rules from here, so they cannot
drift apart. Pure: no Django, and only the standard library at import time, because
lab/lab.py loads this file on its own (PyYAML is imported by the one function needing it).
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeAlias, TypeGuard, TypeVar

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
GFD_GPU_LABEL_PREFIX = "nvidia.com/gpu."
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # mig-manager writes pending | success | failed
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"  # "true": the operator runs mig-manager there
GPU_OPERATOR_NAMESPACE = "gpu-operator"  # the GPU Operator's Helm default
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
        name = name[: -len(GPU_PRODUCT_SHARED_SUFFIX)]
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


# --- resource quantities -----------------------------------------------------------
# A port of apimachinery's resource.Quantity parsing and printing
# (k8s.io/apimachinery/pkg/api/resource/quantity.go, suffix.go, amount.go). The API
# server stores every quantity in canonical form: a quota or a capacity of 1000 is read
# back as "1k", 1024 as "1Ki" when written so. Exact arithmetic: decimal.Decimal with
# a context that never rounds; the only rounding is apimachinery's own.

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"

# quantity.go splitREString: only quoted in the error, as apimachinery does.
QUANTITY_FORMAT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_WRONG = f"quantities must match the regular expression '{QUANTITY_FORMAT}'"
QUANTITY_NUMERIC = "unable to parse numeric part of quantity"
QUANTITY_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT64_MAX = (1 << 63) - 1
_NANO = decimal.Decimal("1e-9")
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero],
)


def _split_quantity(text: str) -> tuple[str, str, str, str]:
    """quantity.go parseQuantityString: (value, num, denom, suffix), the sign left in
    value. As upstream, a number may have no digits at all ("Ki", "-", "." read as 0)."""
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        pos += 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return text, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:  # anything else after the suffix
        raise ValueError(QUANTITY_FORMAT_WRONG)
    return value, num, denom, text[suffix_start:]


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    """suffix.go interpret: (base, exponent, format); ValueError for an unknown suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].removeprefix("+").removeprefix("-")
        if digits and len(digits) <= 19 and set(digits) <= _DIGITS:
            exponent = int(suffix[1:])
            if -(1 << 63) <= exponent <= _INT64_MAX:  # strconv.ParseInt(…, 10, 64)
                return 10, (exponent + (1 << 31)) % (1 << 32) - (1 << 31), DECIMAL_EXPONENT  # int32(parsed)
    raise ValueError(QUANTITY_SUFFIX)


def parse_quantity_format(text: str) -> tuple[decimal.Decimal, str]:
    """resource.ParseQuantity: the exact amount and the format it prints back in
    (DecimalSI, BinarySI or DecimalExponent); ValueError with apimachinery's reason.

    As upstream, a non-zero amount is rounded up (away from zero) to a multiple of 1n,
    a binary one is capped at 2^63-1, and a binary amount below 1 prints as DecimalSI."""
    if not isinstance(text, str):
        raise ValueError(f"a quantity is a string, not {type(text).__name__}")  # noqa: TRY004  (bad input, as junk)
    return _parse(text)[:2]


@functools.lru_cache(maxsize=4096)  # a cluster writes few distinct quantities, read on every publication
def _parse(text: str) -> tuple[decimal.Decimal, str, bool]:
    """(amount, format, whether String() gives ``text`` back unchanged): ParseQuantity
    keeps the input as its string when its int64 fast path finds it canonical."""
    if not text:
        raise ValueError(QUANTITY_FORMAT_WRONG)
    if text == "0":
        return decimal.Decimal(0), DECIMAL_SI, True
    value, num, denom, suffix = _split_quantity(text)
    base, exponent, fmt = _interpret_suffix(suffix)
    if not any(c in _DIGITS for c in value):
        # No digits at all ("Ki", "-", "."): upstream's int64 fast path reads 0; its
        # inf.Dec path ("Pi", "e-10") refuses it.
        if not _fast_path(num, denom, exponent, fmt):
            raise ValueError(QUANTITY_NUMERIC)
        return decimal.Decimal(0), fmt, False
    amount = decimal.Decimal(("-" if text[0] == "-" else "") + num + ("." + denom if denom else ""))
    if base == 10:
        amount = amount.scaleb(exponent, _EXACT)
    else:
        amount = _EXACT.multiply(amount, 1 << exponent)
    if _exponent(amount) < -9:
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_EXACT)
    if fmt == BINARY_SI and abs(amount) > _INT64_MAX:
        amount = decimal.Decimal(_INT64_MAX).copy_sign(amount)
    if fmt == BINARY_SI and 0 < abs(amount) < 1:
        fmt = DECIMAL_SI
    if amount == 0:
        amount = decimal.Decimal(0)  # no "-0"
    return amount, fmt, _kept_as_written(num, denom, exponent, fmt)


def _exponent(amount: decimal.Decimal) -> int:
    exponent = amount.as_tuple().exponent
    if not isinstance(exponent, int):  # "n", "N", "F": NaN or infinity, never a quantity
        raise TypeError(f"not a finite amount: {amount}")
    return exponent


def _fast_path(num: str, denom: str, exponent: int, fmt: str) -> bool:
    """Whether ParseQuantity takes its int64 path (few enough digits, nothing below 1n)."""
    if fmt == BINARY_SI:
        return exponent >= 0 and not denom and 15 - len(num) - exponent * 3 // 10 - 1 >= 0
    return 18 - len(num + denom) >= 0 and exponent - len(denom) >= -9


def _kept_as_written(num: str, denom: str, exponent: int, fmt: str) -> bool:
    """On ParseQuantity's int64 path, an amount whose digits have no trailing zeros to
    move into the suffix keeps the text as written (so "+1k" prints "+1k")."""
    if not _fast_path(num, denom, exponent, fmt):
        return False
    shifted = num + denom
    if fmt == BINARY_SI:
        return int(shifted) << exponent <= _INT64_MAX and exponent % 10 == 0 and int(shifted) & 7 != 0
    return (exponent - len(denom)) % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def parse_quantity(text: str) -> decimal.Decimal:
    """The exact amount of a quantity string, as resource.ParseQuantity reads it:
    "1k" -> 1000, "1Ki" -> 1024, "1e3" -> 1000, "1500m" -> 1.5. ValueError with
    apimachinery's reason for what it refuses ("", "1e", "1kk", " 1", "1 ")."""
    return parse_quantity_format(text)[0]


def quantity(value: Any) -> int:
    """A count as the product counts it: resource.Quantity.Value(), the amount rounded
    up away from zero ("1500m" -> 2, "5000m" -> 5, "1k" -> 1000, "1Ki" -> 1024). Away from
    zero also below 0, as Value() promises; upstream's inf.Dec path (more than 18 digits,
    or below 1n) breaks that promise for some negative amounts, never for a count.

    Ints pass through. Anything that is not a quantity raises ValueError, never reads as 0:
    the API server only ever returns valid quantities, so junk means a bug upstream of here.
    Free-text fields that merely hold numbers (labels, plugin config) use ``label_int``.
    Beyond int64, where Value() itself overflows, it raises ValueError too."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")  # noqa: TRY004  (bad input, as junk)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        value = str(value)  # a YAML/JSON number: Quantity.UnmarshalJSON reads its digits
    amount = parse_quantity(value)
    if abs(amount) > _INT64_MAX:
        raise ValueError(f"quantity {value!r} is beyond what an int64 holds")
    return int(amount.to_integral_value(rounding=decimal.ROUND_UP, context=_EXACT))


_LABEL_INT = re.compile(r"[+-]?[0-9]{1,18}")


_Default = TypeVar("_Default")


def label_int(value: Any, default: _Default) -> int | _Default:
    """A whole number written in free text (a label such as nvidia.com/gpu.count, a
    plugin config's replicas): an int, or a string of plain decimal digits with an
    optional sign; ``default`` for anything else, which a person may have typed."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _LABEL_INT.fullmatch(value):
        return int(value)
    return default


def _canonical_decimal(amount: decimal.Decimal) -> tuple[str, int]:
    """amount.go AsCanonicalBytes: (mantissa, exponent) with the exponent a multiple of 3
    and as large as possible without a fraction. On digit strings: any length prints."""
    sign, digits, _ = amount.as_tuple()
    exponent = _exponent(amount)
    written = "".join(map(str, digits))
    mantissa = written.rstrip("0") or "0"
    exponent += len(written) - len(mantissa)
    shift = exponent % 3
    return ("-" if sign else "") + mantissa + "0" * shift, exponent - shift


def format_quantity(value: str | int | float | decimal.Decimal, fmt: str = DECIMAL_SI) -> str:
    """Quantity.String(): the canonical form the API server writes back. A string is
    parsed and keeps its own format ("1000" -> "1k", "1024Mi" -> "1Gi", "1.5" -> "1500m");
    a number is printed in ``fmt`` (DecimalSI by default: 1000 -> "1k")."""
    if isinstance(value, str):
        amount, fmt, as_written = _parse(value)
        if as_written:
            return value
    else:
        amount = decimal.Decimal(value)
    if amount == 0:
        return "0"
    if fmt == BINARY_SI:
        whole = amount.to_integral_value(rounding=decimal.ROUND_UP, context=_EXACT)
        if -1024 < amount < 1024 or whole != amount:  # below 1Ki, or a fraction: printed as DecimalSI
            fmt = DECIMAL_SI
        else:
            count, times = int(whole), 0
            while count % 1024 == 0:
                count //= 1024
                times += 1
            # As upstream: beyond Ei there is no suffix, and none is printed.
            return f"{count}{next((k for k, v in _BINARY_SUFFIXES.items() if v == times * 10), '')}"
    mantissa, exponent = _canonical_decimal(amount)
    if fmt == DECIMAL_SI:
        # As upstream: an exponent without a suffix (beyond E) prints no suffix at all.
        suffix = next((k for k, v in _DECIMAL_SUFFIXES.items() if v == exponent), "")
    else:
        suffix = f"e{exponent}" if exponent else ""
    return f"{mantissa}{suffix}"


# --- pods ------------------------------------------------------------------------


def is_terminal(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_mirror(pod: KubeObject) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _controller_ref(pod: KubeObject) -> KubeObject | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return dict(ref)
    return None


def daemonset_controller(pod: KubeObject) -> KubeObject | None:
    """The pod's controller reference when it is a DaemonSet (kubectl's isControllerRefDaemonSet:
    kind DaemonSet *and* apiVersion apps/v1). Only the controller counts: a DaemonSet that merely
    appears among the owners would not recreate the pod."""
    ref = _controller_ref(pod)
    if ref and ref.get("kind") == "DaemonSet" and ref.get("apiVersion") == "apps/v1":
        return ref
    return None


def daemonset_controlled(pod: KubeObject) -> bool:
    return daemonset_controller(pod) is not None


# kubectl drain's pod filters (k8s.io/kubectl/pkg/drain/filters.go), their messages and
# PodDeleteStatus reasons, so a drain here answers pod by pod as `kubectl drain` would.
DRAIN_OKAY, DRAIN_SKIP, DRAIN_WARNING, DRAIN_ERROR = "Okay", "Skip", "Warning", "Error"
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods that declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"


class DrainFlags(NamedTuple):
    """kubectl drain's flags that decide which pods go. The product drains as
    `kubectl drain --ignore-daemonsets --force --delete-emptydir-data` (PRODUCT_DRAIN)."""

    force: bool = True
    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = True
    skip_wait_for_delete_timeout: int = 0  # seconds; 0 = never skip a terminating pod


PRODUCT_DRAIN = DrainFlags()


class PodDeleteStatus(NamedTuple):
    delete: bool
    reason: str  # DRAIN_OKAY | DRAIN_SKIP | DRAIN_WARNING | DRAIN_ERROR
    message: str = ""


# What looking the pod's DaemonSet up gave: True (found), False (NotFound), or the error's text.
DaemonSetLookup: TypeAlias = bool | str


def _finished(pod: KubeObject) -> bool:
    return is_terminal(pod)


def _filter_skip_deleted(pod: KubeObject, flags: DrainFlags, now: datetime) -> PodDeleteStatus:
    stamp = (pod.get("metadata") or {}).get("deletionTimestamp")
    if flags.skip_wait_for_delete_timeout > 0 and stamp:
        age = now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        if int(age.total_seconds()) > flags.skip_wait_for_delete_timeout:
            return PodDeleteStatus(False, DRAIN_SKIP)
    return PodDeleteStatus(True, DRAIN_OKAY)


def _filter_daemonset(pod: KubeObject, flags: DrainFlags, found: DaemonSetLookup) -> PodDeleteStatus:
    ref = daemonset_controller(pod)
    if ref is None or _finished(pod):  # any finished pod can be removed
        return PodDeleteStatus(True, DRAIN_OKAY)
    if found is not True:
        if found is False:
            message = f'daemonsets.apps "{ref.get("name", "")}" not found'
            if flags.force:  # an orphaned pod: deleted with a warning under --force
                return PodDeleteStatus(True, DRAIN_WARNING, message)
            return PodDeleteStatus(False, DRAIN_ERROR, message)
        return PodDeleteStatus(False, DRAIN_ERROR, found)
    if not flags.ignore_daemonsets:
        return PodDeleteStatus(False, DRAIN_ERROR, DAEMONSET_FATAL)
    return PodDeleteStatus(False, DRAIN_WARNING, DAEMONSET_WARNING)


def _filter_mirror(pod: KubeObject) -> PodDeleteStatus:
    return PodDeleteStatus(False, DRAIN_SKIP) if is_mirror(pod) else PodDeleteStatus(True, DRAIN_OKAY)


def _filter_local_storage(pod: KubeObject, flags: DrainFlags) -> PodDeleteStatus:
    if not uses_emptydir(pod) or _finished(pod):
        return PodDeleteStatus(True, DRAIN_OKAY)
    if not flags.delete_emptydir_data:
        return PodDeleteStatus(False, DRAIN_ERROR, LOCAL_STORAGE_FATAL)
    return PodDeleteStatus(True, DRAIN_WARNING, LOCAL_STORAGE_WARNING)


def _filter_unreplicated(pod: KubeObject, flags: DrainFlags) -> PodDeleteStatus:
    if _finished(pod) or _controller_ref(pod) is not None:
        return PodDeleteStatus(True, DRAIN_OKAY)
    if flags.force:
        return PodDeleteStatus(True, DRAIN_WARNING, UNMANAGED_WARNING)
    return PodDeleteStatus(False, DRAIN_ERROR, UNMANAGED_FATAL)


def pod_delete_status(
    pod: KubeObject,
    flags: DrainFlags = PRODUCT_DRAIN,
    *,
    daemonset: DaemonSetLookup = True,
    now: datetime | None = None,
) -> PodDeleteStatus:
    """kubectl drain's verdict on one pod: its filters in its order (skip-deleted, DaemonSet,
    mirror, local storage, unreplicated), stopping at the first that keeps the pod.
    ``daemonset``: what a GET of the pod's controlling DaemonSet gave (only asked for a
    running DaemonSet pod; see ``daemonset_to_look_up``)."""
    status = _filter_skip_deleted(pod, flags, now or datetime.now(UTC))
    if status.delete:
        status = _filter_daemonset(pod, flags, daemonset)
    if status.delete:
        status = _filter_mirror(pod)
    if status.delete:
        status = _filter_local_storage(pod, flags)
    if status.delete:
        status = _filter_unreplicated(pod, flags)
    return status


def daemonset_to_look_up(pod: KubeObject) -> tuple[str, str] | None:
    """(namespace, name) of the DaemonSet kubectl would GET for this pod, or None."""
    ref = daemonset_controller(pod)
    if ref is None or _finished(pod):
        return None
    return (pod.get("metadata") or {}).get("namespace", ""), ref.get("name", "")


class DrainList(NamedTuple):
    """kubectl's PodDeleteList: which pods go, which stay and why. When any pod has an error
    the drain evicts nothing (kubectl: "cannot delete <message>: <pods>")."""

    delete: list[KubeObject]
    skipped: list[KubeObject]
    warnings: dict[str, list[str]]  # message -> "ns/name"
    errors: dict[str, str]  # "ns/name" -> "cannot delete <message>"


def drain_list(
    pods: Sequence[KubeObject],
    flags: DrainFlags = PRODUCT_DRAIN,
    *,
    daemonsets: dict[tuple[str, str], DaemonSetLookup] | None = None,
    now: datetime | None = None,
) -> DrainList:
    out = DrainList([], [], {}, {})
    for pod in pods:
        wanted = daemonset_to_look_up(pod)
        found = (daemonsets or {}).get(wanted, True) if wanted else True
        status = pod_delete_status(pod, flags, daemonset=found, now=now)
        if status.reason == DRAIN_ERROR:
            out.errors[pod_key(pod)] = f"cannot delete {status.message or 'unexpected error'}"
        elif status.delete:
            out.delete.append(pod)
        else:
            out.skipped.append(pod)
        if status.reason == DRAIN_WARNING:
            out.warnings.setdefault(status.message, []).append(pod_key(pod))
    return out


SKIP_MIRROR, SKIP_DAEMONSET, EVICT, BLOCKED = "skip-mirror", "skip-daemonset", "evict", "blocked"


def drain_decision(pod: KubeObject, *, daemonset: DaemonSetLookup = True) -> str:
    """What the product's drain (``kubectl drain --ignore-daemonsets --force
    --delete-emptydir-data``) does with a pod on the node. Without a lookup the pod's
    DaemonSet is taken to exist, as it does but for a moment before the garbage collector
    removes an orphaned pod."""
    status = pod_delete_status(pod, daemonset=daemonset)
    if status.delete:
        return EVICT
    if status.reason == DRAIN_ERROR:
        return BLOCKED
    return SKIP_MIRROR if is_mirror(pod) else SKIP_DAEMONSET


def uses_emptydir(pod: KubeObject) -> bool:
    return any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def pod_key(pod: KubeObject) -> str:
    md = pod["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}"


# --- label selectors -------------------------------------------------------------


def labels_match(labels: dict[str, str], match_labels: KubeObject | None) -> bool:
    """Equality-only selection (nodeSelector, matchLabels); empty selects everything."""
    return all(labels.get(k) == v for k, v in (match_labels or {}).items())


def _expression_matches(labels: dict[str, str], expr: KubeObject) -> bool:
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


def selector_matches(labels: dict[str, str], selector: KubeObject | None) -> bool:
    """A LabelSelector (``matchLabels`` + ``matchExpressions``, ANDed). An empty selector
    selects everything; callers decide what a missing (null) selector means."""
    selector = selector or {}
    return labels_match(labels, selector.get("matchLabels")) and all(
        _expression_matches(labels, e) for e in selector.get("matchExpressions") or []
    )


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


# --- label selector strings ---------------------------------------------------------
# labels.Parse, as `kubectl get -l`, `?labelSelector=` and node selectors read a selector
# string, ported from k8s.io/apimachinery pkg/labels/selector.go (its lexer, its recursive
# descent parser and NewRequirement's validation) with the checks of
# pkg/api/validate/content (IsLabelKey, IsLabelValue, IsDNS1123Subdomain) written without
# regular expressions. Tests: tests/foundation/test_label_selectors.py (selector_test.go).


class SelectorError(ValueError):
    """A selector string labels.Parse refuses; the message is the API server's."""


class Requirement(NamedTuple):
    """One term of a parsed selector: key, operator (In, NotIn, =, ==, !=, Exists,
    DoesNotExist, Gt, Lt) and its values, sorted and without repeats (a sets.String)."""

    key: str
    operator: str
    values: tuple[str, ...]


SELECTOR_OPERATORS = ("in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt")
_BINARY_OPERATORS = ("in", "notin", "=", "==", "!=", "gt", "lt")  # the order of parseOperator's message
# The lexer's tokens: the literal for the fixed ones; identifiers and the end are their own kinds.
_IDENT, _END, _ERROR = "identifier", "end", "error"
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": "gt", "in": "in", "<": "lt", "!=": "!="}
_TOKENS.update({"notin": "notin", "(": "("})
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_LABEL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_ALPHANUMERIC = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_DNS_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_DNS_ALPHANUMERIC = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
LABEL_NAME_MAX_LENGTH = 63  # a label key's name part, and a label value
DNS1123_SUBDOMAIN_MAX = 253
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # quoted in messages only, never matched


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """content.RegexError: the message, its examples and the pattern, as the API server words it."""
    quoted = " or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {quoted}, regex used for validation is '{fmt}')"


def _label_name_ok(name: str) -> bool:
    return bool(name) and set(name) <= _LABEL_NAME_CHARS and name[0] in _ALPHANUMERIC and name[-1] in _ALPHANUMERIC


def dns1123_subdomain_shaped(value: str) -> bool:
    """Dot-separated labels of [a-z0-9-], each starting and ending with [a-z0-9] (length apart)."""
    return all(
        part and set(part) <= _DNS_LABEL_CHARS and part[0] in _DNS_ALPHANUMERIC and part[-1] in _DNS_ALPHANUMERIC
        for part in value.split(".")
    )


def dns1123_subdomain_errors(value: str) -> list[str]:
    """content.IsDNS1123Subdomain: dot-separated labels of [a-z0-9-], each starting and
    ending with [a-z0-9], at most 253 bytes."""
    errs = []
    if len(value.encode()) > DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} bytes")
    if not dns1123_subdomain_shaped(value):
        label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character",
                f"{label}(\\.{label})*",
                "example.com",
            )
        )
    return errs


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: an optional DNS-subdomain prefix and '/', then a name of at most
    63 characters of [A-Za-z0-9-_.] starting and ending with an alphanumeric. [] when valid."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in dns1123_subdomain_errors(prefix)]
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > LABEL_NAME_MAX_LENGTH:
        errs.append(f"name part must be no more than {LABEL_NAME_MAX_LENGTH} bytes")
    if not _label_name_ok(name):
        errs.append("name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue: empty, or at most 63 characters of [A-Za-z0-9-_.] starting and
    ending with an alphanumeric. [] when valid."""
    errs = []
    if len(value.encode()) > LABEL_NAME_MAX_LENGTH:
        errs.append(f"must be no more than {LABEL_NAME_MAX_LENGTH} bytes")
    if value and not _label_name_ok(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                f"({_LABEL_KEY_FMT})?",
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def _go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): an optional sign and ASCII digits within int64, else None."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def new_requirement(key: str, operator: str, values: Sequence[str] = ()) -> Requirement:
    """labels.NewRequirement: the requirement, or SelectorError naming every rule broken."""
    errs = [f"key: Invalid value: {key!r}: {'; '.join(e)}" for e in [label_key_errors(key)] if e]
    vals = list(values)
    if operator in ("in", "notin"):
        if not vals:
            errs.append("values: Invalid value: for 'in', 'notin' operators, values set can't be empty")
    elif operator in ("=", "==", "!="):
        if len(vals) != 1:
            errs.append("values: Invalid value: exact-match compatibility requires one single value")
    elif operator in ("exists", "!"):
        if vals:
            errs.append("values: Invalid value: values set must be empty for exists and does not exist")
    elif operator in ("gt", "lt"):
        if len(vals) != 1:
            errs.append("values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required")
        errs += [
            f"values[{i}]: Invalid value: {v!r}: for 'Gt', 'Lt' operators, the value must be an integer"
            for i, v in enumerate(vals)
            if _go_int64(v) is None
        ]
    else:
        supported = ", ".join(f'"{o}"' for o in SELECTOR_OPERATORS)
        errs.append(f"operator: Unsupported value: {operator!r}: supported values: {supported}")
    errs += [
        f"values[{i}][{key}]: Invalid value: {v!r}: {'; '.join(e)}"
        for i, v in enumerate(vals)
        for e in [label_value_errors(v)]
        if e
    ]
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, operator, tuple(sorted(set(vals))))


def requirement_matches(req: Requirement, labels: dict[str, str]) -> bool:
    """Requirement.Matches."""
    op, present = req.operator, req.key in labels
    if op in ("in", "=", "=="):
        return present and labels[req.key] in req.values
    if op in ("notin", "!="):
        return not present or labels[req.key] not in req.values
    if op == "exists":
        return present
    if op == "!":
        return not present
    if op in ("gt", "lt") and present and len(req.values) == 1:
        have, want = _go_int64(labels[req.key]), _go_int64(req.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "gt" else have < want
    return False


def requirement_string(req: Requirement) -> str:
    """Requirement.String: ``!key``, ``key``, ``key=v``, ``key in (a,b)``, ``key>1``."""
    if req.operator in ("exists", "!"):
        return ("!" if req.operator == "!" else "") + req.key
    joined = ",".join(req.values)
    if req.operator in ("in", "notin"):
        return f"{req.key} {req.operator} ({joined})"
    return req.key + {"gt": ">", "lt": "<"}.get(req.operator, req.operator) + joined


def selector_string(requirements: Sequence[Requirement]) -> str:
    return ",".join(requirement_string(r) for r in requirements)


def lex_selector(text: str) -> list[tuple[str, str]]:
    """The lexer: (token, literal) pairs up to and including the end. A special symbol runs
    as long as it stays a token ("!=" not "!" "="); anything else up to a special symbol or
    blank is a keyword (in, notin) or an identifier."""
    out: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n or text[pos] == "\0":  # Go's lexer reads a NUL as the end
            out.append((_END, ""))
            return out
        if text[pos] in _SPECIAL:
            buffer, last = "", None
            while pos < n and text[pos] in _SPECIAL:
                if buffer + text[pos] in _TOKENS:
                    buffer += text[pos]
                    last = (_TOKENS[buffer], buffer)
                    pos += 1
                elif last is not None:
                    break
                else:
                    buffer += text[pos]
                    pos += 1
            out.append(last or (_ERROR, f"error expected: keyword found '{buffer}'"))
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE and text[pos] != "\0":
            pos += 1
        word = text[start:pos]
        out.append((word, word) if word in ("in", "notin") else (_IDENT, word))


class _SelectorParser:
    """parse(): the recursive descent over the lexed tokens; "in" and "notin" read as
    identifiers where values are expected ("notin=in" is a key and a value)."""

    def __init__(self, text: str):
        self.items, self.pos = lex_selector(text), 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        return (_IDENT, lit) if values and tok in ("in", "notin") else (tok, lit)

    def consume(self, values: bool = True) -> tuple[str, str]:
        item = self.lookahead(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok == _END:
                return reqs
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            tok, lit = self.consume()
            if tok == _END:
                return reqs
            if tok != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.lookahead()
            if tok not in (_IDENT, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        operator = ""
        tok, lit = self.consume()
        if tok == "!":
            operator = "!"
            tok, lit = self.consume()
        if tok != _IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        errors = label_key_errors(key)
        if errors:
            raise SelectorError(f"key: Invalid value: {key!r}: {'; '.join(errors)}")
        if operator == "!" or self.lookahead()[0] in (_END, ","):  # "!x=a" fails after, at the "="
            return new_requirement(key, operator or "exists")
        operator = self.operator()
        return new_requirement(key, operator, self.set_values() if operator in ("in", "notin") else self.exact_value())

    def operator(self) -> str:
        tok, lit = self.consume(values=False)
        if tok not in _BINARY_OPERATORS:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return tok

    def set_values(self) -> list[str]:
        tok, lit = self.consume()
        if tok != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == ")":
            self.consume()
            return [""]
        if tok not in (_IDENT, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.consume()[0] != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            tok, lit = self.consume()
            if tok == _IDENT:
                values.append(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == ")":
                    return values
                if tok2 != ",":
                    raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            elif tok == ",":
                if not values or self.lookahead()[0] in (")", ","):
                    values.append("")  # "(," ",)" ",," each hold the empty value
                if self.lookahead()[0] == ")":
                    return values
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        if self.lookahead()[0] in (_END, ","):
            return [""]
        tok, lit = self.consume()
        if tok == _IDENT:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_selector_requirements(selector: str | None) -> list[Requirement]:
    """labels.Parse: the requirements, sorted by key (stable), or SelectorError."""
    return sorted(_SelectorParser(selector or "").parse(), key=lambda r: r.key)


def parse_label_selector(selector: str | None) -> KubeObject:
    """A selector string (``a=b,c!=d,e in (f,g),h,!i``) as a LabelSelector dict selecting
    the same (``matchLabels`` for equalities, the rest as ``matchExpressions``), or
    SelectorError for a string labels.Parse refuses, and for Gt and Lt, which a
    LabelSelector cannot hold (metav1.ParseToLabelSelector refuses them too)."""
    match_labels: dict[str, str] = {}
    exprs: list[KubeObject] = []
    names = {"in": "In", "notin": "NotIn", "!=": "NotIn", "exists": "Exists", "!": "DoesNotExist"}
    for req in parse_selector_requirements(selector):
        if req.operator in ("gt", "lt"):
            raise SelectorError(f'"{req.operator}" isn\'t supported in label selectors')
        if req.operator in ("=", "==") and match_labels.get(req.key, req.values[0]) == req.values[0]:
            match_labels[req.key] = req.values[0]
        elif req.operator in ("=", "=="):
            exprs.append({"key": req.key, "operator": "In", "values": list(req.values)})  # a=x,a=y: nothing
        elif req.operator in ("exists", "!"):
            exprs.append({"key": req.key, "operator": names[req.operator]})
        else:
            exprs.append({"key": req.key, "operator": names[req.operator], "values": list(req.values)})
    out: KubeObject = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


def label_selector_matches(labels: dict[str, str], selector: str | None) -> bool:
    """A selector string, as ``list --selector`` applies it (SelectorError when refused)."""
    return all(requirement_matches(r, labels) for r in parse_selector_requirements(selector))


# --- taints and tolerations ------------------------------------------------------


def toleration_matches(taint: KubeObject, tol: KubeObject) -> bool:
    """Toleration.ToleratesTaint as Kubernetes v1.34 has it (k8s.io/api core/v1/toleration.go):
    an empty effect or key matches every effect or key; an empty operator is Equal; an
    operator it does not know (Gt and Lt need a later release's feature gate) matches nothing."""
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if tol.get("key") and tol["key"] != taint.get("key"):
        return False
    operator = tol.get("operator") or "Equal"
    if operator == "Equal":
        return (tol.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


# The tolerations the DaemonSet controller adds to every pod it makes, so a node under one of
# these conditions (cordoned, not ready, unreachable, under pressure) still gets its
# device-plugin pod (pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations).
DAEMONSET_TOLERATIONS = tuple(
    {"key": key, "operator": "Exists", "effect": effect}
    for key, effect in (
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        (UNSCHEDULABLE_TAINT_KEY, "NoSchedule"),
    )
)
# ... and this one only to pods on the host's network.
DAEMONSET_HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def daemon_pod_tolerations(tolerations: list[KubeObject] | None, host_network: bool = False) -> list[KubeObject]:
    """A DaemonSet pod's tolerations: its template's and the controller's own."""
    added = [*DAEMONSET_TOLERATIONS, *([DAEMONSET_HOST_NETWORK_TOLERATION] if host_network else [])]
    return [*(tolerations or []), *added]


def tolerates(
    taints: list[KubeObject] | None, tolerations: list[KubeObject] | None, host_network: bool = False
) -> bool:
    """True when a DaemonSet's pod tolerates every NoSchedule/NoExecute taint (the daemon
    controller's predicate), counting the tolerations the controller adds."""
    tolerations = daemon_pod_tolerations(tolerations, host_network)
    return all(
        any(toleration_matches(taint, t) for t in tolerations)
        for taint in taints or []
        if taint.get("effect") in ("NoSchedule", "NoExecute")
    )


# --- PodDisruptionBudgets ----------------------------------------------------------
# What a real control plane decides, ported from Kubernetes v1.34: the disruption controller's
# status arithmetic (pkg/controller/disruption/disruption.go), the Eviction API's decision
# (pkg/registry/core/pod/storage/eviction.go) and intstr.GetScaledValueFromIntOrPercent
# (staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go).

# The Eviction API's refusals, word for word.
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
EVICTION_MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
UNHEALTHY_POD_ALWAYS_ALLOW = "AlwaysAllow"
UNHEALTHY_POD_IF_HEALTHY_BUDGET = "IfHealthyBudget"  # the default
DISRUPTION_DELETION_TIMEOUT_SECONDS = 120  # an evicted pod not deleted by then counts again
MAX_DISRUPTED_POD_SIZE = 2000
DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"

_PERCENT_RE = re.compile(r"^[+-]?[0-9]+%$")  # strconv.Atoi's digits, then '%'
# Workloads whose scale the API server serves (the scale finder's REST mapping), by group.
_SCALE_SUBRESOURCE = {
    ("", "ReplicationController"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
}


def pdb_selects(pdb: KubeObject, pod: KubeObject) -> bool:
    """policy/v1: same namespace and the selector matches; an empty selector selects every
    pod of the namespace, a missing one selects none."""
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return selector_matches((pod.get("metadata") or {}).get("labels") or {}, selector)


def pdbs_for(pod: KubeObject, pdbs: list[KubeObject]) -> list[KubeObject]:
    """The budgets that guard this pod."""
    return [b for b in pdbs if pdb_selects(b, pod)]


def pod_ready(pod: KubeObject) -> bool:
    """apipod.IsPodReady: the Ready condition is True (a pod without one is not ready)."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def being_deleted(obj: KubeObject) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_healthy(pod: KubeObject) -> bool:
    """Healthy as a budget counts it: Ready and not being deleted."""
    return pod_ready(pod) and not being_deleted(pod)


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an integer as it is, "N%" of ``total`` rounded
    up or down; any other string is an error (ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _PERCENT_RE.match(value):
        scaled = float(int(value[:-1])) * float(total) / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    if isinstance(value, str):
        raise ValueError(f"invalid value for IntOrString: invalid type: string is not a percentage ({value!r})")
    raise ValueError(f"invalid value for IntOrString: invalid type: neither int nor percentage ({value!r})")


def controller_of(obj: KubeObject) -> KubeObject | None:
    """metav1.GetControllerOf: the owner reference marked controller."""
    refs: list[KubeObject] = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return None


def _api_group(api_version: str | None) -> str:
    return (api_version or "").rpartition("/")[0]


def _workload(workloads: Sequence[KubeObject], kind: str | None, name: str | None, namespace: str) -> KubeObject | None:
    for w in workloads:
        md = w.get("metadata") or {}
        if w.get("kind") == kind and md.get("name") == name and md.get("namespace", namespace) == namespace:
            return w
    return None


def _replicas(workload: KubeObject) -> int:
    replicas = (workload.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)  # the API server defaults spec.replicas to 1


def controller_scale(ref: KubeObject, namespace: str, workloads: Sequence[KubeObject]) -> tuple[str | None, int] | None:
    """The controller a pod's controller reference leads to, as (uid, spec.replicas): the
    disruption controller's finders in their order (ReplicationController; the Deployment of a
    ReplicaSet; a ReplicaSet no Deployment controls; StatefulSet; any other scale subresource).
    None when none is found; ValueError when the owner's kind has no scale (a Job, a DaemonSet).
    ``workloads``: the objects the owner chain may name, as read from the cluster. A custom
    resource with a scale subresource is given with its scale as ``spec.replicas``."""
    kind: str | None = ref.get("kind")
    name: str | None = ref.get("name")
    uid: str | None = ref.get("uid")
    group = _api_group(ref.get("apiVersion"))

    def same(obj: KubeObject | None) -> TypeGuard[KubeObject]:
        return obj is not None and (obj.get("metadata") or {}).get("uid") == uid

    if kind == "ReplicationController" and group == "":
        rc = _workload(workloads, kind, name, namespace)
        if same(rc):
            return uid, _replicas(rc)
    if kind == "ReplicaSet" and group in ("apps", "extensions"):
        rs = _workload(workloads, kind, name, namespace)
        if same(rs):
            owner = controller_of(rs)
            if owner and owner.get("kind") == "Deployment":
                if _api_group(owner.get("apiVersion")) in ("apps", "extensions"):
                    d = _workload(workloads, "Deployment", owner.get("name"), namespace)
                    if d is not None and (d.get("metadata") or {}).get("uid") == owner.get("uid"):
                        return owner.get("uid"), _replicas(d)
            else:
                return uid, _replicas(rs)
    if kind == "StatefulSet" and group == "apps":
        ss = _workload(workloads, kind, name, namespace)
        if same(ss):
            return uid, _replicas(ss)
    # the scale subresource (also a ReplicaSet whose Deployment is gone)
    obj = _workload(workloads, kind, name, namespace)
    if (group, kind) in _SCALE_SUBRESOURCE:
        return (uid, _replicas(obj)) if same(obj) else None
    if (
        obj is not None
        and _api_group(obj.get("apiVersion")) == group
        and isinstance((obj.get("spec") or {}).get("replicas"), int)
    ):
        return (uid, _replicas(obj)) if same(obj) else None
    raise ValueError(f"{kind}.{group or 'core'} does not implement the scale subresource")


def expected_scale(pods: list[KubeObject], workloads: Sequence[KubeObject]) -> tuple[int, list[str | None]]:
    """getExpectedScale: the sum of the scales of the pods' controllers, and the pods that
    have none (left out, not an error). ValueError when a pod's controller is not found."""
    scales: dict[str | None, int] = {}
    unmanaged: list[str | None] = []
    for pod in pods:
        md = pod.get("metadata") or {}
        ref = controller_of(pod)
        if ref is None:
            unmanaged.append(md.get("name"))
            continue
        if ref.get("uid") in scales:
            continue
        found = controller_scale(ref, md.get("namespace", ""), workloads)
        if found is None:
            raise ValueError(f'found no controllers for pod "{md.get("name")}"')
        scales[found[0]] = found[1]
    return sum(scales.values()), unmanaged


def expected_pod_count(pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject]) -> tuple[int, int]:
    """getExpectedPodCount: (expectedPods, desiredHealthy) for the pods the budget selects.
    maxUnavailable and a percentage minAvailable count from the controllers' scale, rounding
    up; an integer minAvailable counts the selected pods."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected, _ = expected_scale(pods, workloads)
        desired = max(expected - scaled_value(spec["maxUnavailable"], expected, True), 0)
        return expected, desired
    min_available = spec.get("minAvailable")
    if min_available is None:
        return 0, 0
    if isinstance(min_available, str):
        expected, _ = expected_scale(pods, workloads)
        return expected, scaled_value(min_available, expected, True)
    return len(pods), scaled_value(min_available, len(pods), True)


def _parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def disrupted_pods(pdb: KubeObject, pods: list[KubeObject], now: datetime) -> dict[str, str]:
    """buildDisruptedPodMap: the evictions still expected to show up as deletions (pods the
    Eviction API let go less than two minutes ago that are not yet being deleted)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    for pod in pods:
        name: str | None = (pod.get("metadata") or {}).get("name")
        if being_deleted(pod) or name is None or name not in recorded:
            continue
        if (now - _parse_time(recorded[name])).total_seconds() <= DISRUPTION_DELETION_TIMEOUT_SECONDS:
            kept[name] = recorded[name]
    return kept


def count_healthy(pods: list[KubeObject], disrupted: dict[str, str], now: datetime) -> int:
    """countHealthyPods: Ready pods not being deleted and not just evicted."""
    healthy = 0
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        if being_deleted(pod):
            continue
        if (
            name in disrupted
            and (now - _parse_time(disrupted[name])).total_seconds() < DISRUPTION_DELETION_TIMEOUT_SECONDS
        ):
            continue
        if pod_ready(pod):
            healthy += 1
    return healthy


def pdb_status(
    pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject] = (), now: datetime | None = None
) -> KubeObject:
    """The status the disruption controller writes for this budget (trySync, updatePdbStatus,
    failSafe). ``pods``: the pods of the budget's namespace (it selects among them);
    ``workloads``: the controllers their owner references lead to (see controller_scale)."""
    now = now or datetime.now(UTC)
    selected = [p for p in pods if pdb_selects(pdb, p)]
    generation = (pdb.get("metadata") or {}).get("generation", 0)
    try:
        expected, desired = expected_pod_count(pdb, selected, list(workloads))
    except ValueError as e:
        # failSafe: no disruption allowed, the rest of the status left as it was
        status = dict(pdb.get("status") or {}, disruptionsAllowed=0)
        status["conditions"] = [
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "False",
                "reason": "SyncFailed",
                "message": str(e),
                "observedGeneration": status.get("observedGeneration", 0),
            }
        ]
        return status
    disrupted = disrupted_pods(pdb, selected, now)
    healthy = count_healthy(selected, disrupted, now)
    # expectedPods must be > 0, so a budget whose pods are not seen yet stays safe
    allowed = healthy - desired if expected > 0 and healthy - desired > 0 else 0
    status = {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": generation,
        "conditions": [
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "observedGeneration": generation,
            }
        ],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


def disruptions_allowed(
    pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject] = (), now: datetime | None = None
) -> int:
    """status.disruptionsAllowed as the disruption controller computes it (see pdb_status)."""
    allowed: int = pdb_status(pdb, pods, workloads, now)["disruptionsAllowed"]
    return allowed


class EvictionRefusal(NamedTuple):
    """The Eviction API's answer when it does not delete the pod (a NamedTuple: lab/lab.py
    loads this module by path, where a dataclass cannot find its module)."""

    status: int  # 429 (try again later), 403, or 500 (more than one budget)
    reason: str
    message: str
    cause: str = ""  # status.details.causes[0].message, naming the budget


def eviction_ignores_budgets(pod: KubeObject) -> bool:
    """canIgnorePDB: a finished, pending or terminating pod is deleted without asking a budget
    (its going disrupts nothing that is not disrupted already)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or being_deleted(pod)


def unready_pod_passes(pod: KubeObject, pdb: KubeObject) -> bool:
    """An unready pod counts for nothing, so the Eviction API lets it go without touching the
    budget: always under AlwaysAllow; under IfHealthyBudget (the default) while the application
    is not disrupted (currentHealthy >= desiredHealthy > 0). Otherwise the budget decides."""
    if pod_ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == UNHEALTHY_POD_ALWAYS_ALLOW:
        return True
    status = pdb.get("status") or {}
    current, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    return bool(current >= desired and desired > 0)


def eviction_refusal(pod: KubeObject, pdbs: list[KubeObject]) -> EvictionRefusal | None:
    """The Eviction API's decision for ``pod`` (EvictionREST.Create, checkAndDecrement), from
    the budgets of its namespace with the status the disruption controller gave them. None:
    the pod is deleted; the budget that let it through is then decremented (status_after_eviction)
    unless the pod was an unready one (unready_pod_passes)."""
    if eviction_ignores_budgets(pod):
        return None
    guarding = pdbs_for(pod, pdbs)
    if len(guarding) > 1:
        return EvictionRefusal(500, "", EVICTION_MULTIPLE_BUDGETS)
    if not guarding:
        return None
    pdb = guarding[0]
    if unready_pod_passes(pod, pdb):
        return None
    name = (pdb.get("metadata") or {}).get("name", "")
    status = pdb.get("status") or {}
    current, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    if status.get("observedGeneration", 0) < (pdb.get("metadata") or {}).get("generation", 0):
        return EvictionRefusal(
            429,
            "TooManyRequests",
            EVICTION_REFUSED,
            f"The disruption budget {name} is still being processed by the server.",
        )
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        return EvictionRefusal(
            403, "Forbidden", f'poddisruptionbudget.policy "{name}" is forbidden: pdb disruptions allowed is negative'
        )
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        return EvictionRefusal(
            403,
            "Forbidden",
            f'poddisruptionbudget.policy "{name}" is forbidden: DisruptedPods '
            "map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        return EvictionRefusal(
            429,
            "TooManyRequests",
            EVICTION_REFUSED,
            f"The disruption budget {name} needs {desired} healthy pods and has {current} currently",
        )
    return None


def status_after_eviction(status: KubeObject, pod_name: str, now: datetime | None = None) -> KubeObject:
    """checkAndDecrement's write when it lets an eviction through: one disruption fewer (the
    condition turns InsufficientPods at 0) and the pod remembered in disruptedPods, so the
    controller does not count it healthy until it sees it being deleted."""
    now = now or datetime.now(UTC)
    new = dict(status, disruptionsAllowed=status.get("disruptionsAllowed", 0) - 1)
    if new["disruptionsAllowed"] == 0:
        new["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != DISRUPTION_ALLOWED_CONDITION]
        new["conditions"].append(
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "False",
                "reason": "InsufficientPods",
                "observedGeneration": status.get("observedGeneration", 0),
            }
        )
    new["disruptedPods"] = {
        **(status.get("disruptedPods") or {}),
        pod_name: now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return new


# --- JSON pointer ------------------------------------------------------------------


def json_pointer_escape(token: str) -> str:
    """RFC 6901: '~' -> '~0', '/' -> '~1' (resource names in status patch paths)."""
    return token.replace("~", "~0").replace("/", "~1")


# --- the device plugin's config -----------------------------------------------------


def parse_plugin_config(config: str | KubeObject | None) -> KubeObject:
    """The plugin's config file (a ConfigMap's ``config.yaml``) as a dict; YAML errors raise."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return config
    import yaml  # here, so the module stays loadable without PyYAML (lab/lab.py)

    return yaml.safe_load(config) or {}


def time_slicing(config: str | KubeObject | None) -> KubeObject:
    """The ``sharing.timeSlicing`` section of a plugin config ({} when absent)."""
    return (parse_plugin_config(config).get("sharing") or {}).get("timeSlicing") or {}


def time_slicing_replicas(config: str | KubeObject | None) -> int | None:
    """Replicas of ``nvidia.com/gpu`` under time-slicing; None when the config names none.
    The plugin reads replicas as a plain int, not a quantity: anything else reads as 0
    here (the callers' checks then refuse it)."""
    for res in time_slicing(config).get("resources") or []:
        if res.get("name") == GPU:
            return label_int(res.get("replicas", 1), 0)
    return None


def configmap_replicas(configmaps: list[KubeObject]) -> int | None:
    """Time-slicing replicas in the BRICK time-slicing ConfigMap among ``configmaps``
    (live objects or manifest documents); None when it or its replicas are missing."""
    for cm in configmaps:
        if cm.get("kind", "ConfigMap") == "ConfigMap" and cm["metadata"]["name"] == TS_CONFIGMAP:
            replicas = time_slicing_replicas((cm.get("data") or {}).get(PLUGIN_CONFIG_KEY) or "")
            if replicas is not None:
                return replicas
    return None
