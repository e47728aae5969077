"""kubectl drain's pod filters, their messages and PodDeleteStatus reasons, so a drain here
answers pod by pod as `kubectl drain` would.

Source: k8s.io/kubectl/pkg/drain/filters.go (and drain.go's PodDeleteList).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple, TypeAlias

from .names import KubeObject
from .pods import is_mirror, is_terminal, pod_key


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
