"""What a pod is, as Kubernetes reads it: finished, static (mirror), ready, being deleted, owned.

Sources: k8s.io/kubernetes/pkg/api/v1/pod/util.go (IsPodReady), k8s.io/kubectl/pkg/drain
(a mirror pod, a terminal phase), k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go
(GetControllerOf) and kube-scheduler's view of a node's pods (pkg/scheduler/scheduler.go
newPodInformer, pkg/scheduler/eventhandlers.go assignedPod, pkg/scheduler/framework/types.go
NodeInfo.AddPod).
"""

from __future__ import annotations

from .names import MIRROR_ANNOTATION, KubeObject


def is_terminal(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def holds_node_resources(pod: KubeObject) -> bool:
    """Whether kube-scheduler counts the pod's requests against its node (NodeResourcesFit):
    its pod informer lists only pods whose phase is neither Succeeded nor Failed
    (newPodInformer's field selector ``status.phase!=Succeeded,status.phase!=Failed``), and a
    pod is added to its node's NodeInfo, requests and all, once ``spec.nodeName`` is set
    (assignedPod). A pod bound to a node that is still pulling its image (phase Pending)
    holds its GPUs there as a Running one does."""
    return bool((pod.get("spec") or {}).get("nodeName")) and not is_terminal(pod)


def waits_for_a_node(pod: KubeObject) -> bool:
    """A pod the scheduler has not placed yet: not finished, no ``spec.nodeName``."""
    return not (pod.get("spec") or {}).get("nodeName") and not is_terminal(pod)


def is_mirror(pod: KubeObject) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def pod_key(pod: KubeObject) -> str:
    md = pod["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}"


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


def controller_of(obj: KubeObject) -> KubeObject | None:
    """metav1.GetControllerOf: the owner reference marked controller."""
    refs: list[KubeObject] = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return None
