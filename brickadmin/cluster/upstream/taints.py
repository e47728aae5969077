"""Taints and tolerations, and the tolerations the DaemonSet controller gives its pods.

Sources: k8s.io/api core/v1/toleration.go (ToleratesTaint, Kubernetes v1.34) and
pkg/controller/daemon/util/daemonset_util.go (AddOrUpdateDaemonPodTolerations).
"""

from __future__ import annotations

from .names import UNSCHEDULABLE_TAINT_KEY, KubeObject

# --- taints and tolerations ------------------------------------------------------

# The taints Kubernetes itself puts on a node from its conditions and spec: the node lifecycle
# controller's nodeConditionToTaintKeyStatusMap (pkg/controller/nodelifecycle) plus the
# cordon's. They come and go with the node's state, so the answer to one is to wait for (or
# repair) the node, never a toleration in the device plugin's manifest.
NODE_CONDITION_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        UNSCHEDULABLE_TAINT_KEY,
    }
)


def is_node_condition_taint(taint: KubeObject) -> bool:
    """Whether Kubernetes set this taint from the node's state (not an admin)."""
    return taint.get("key") in NODE_CONDITION_TAINT_KEYS


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
