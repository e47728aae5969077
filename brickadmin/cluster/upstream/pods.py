"""What a pod is, as Kubernetes reads it: finished, static (mirror), ready, being deleted, owned.

Sources: k8s.io/kubernetes/pkg/api/v1/pod/util.go (IsPodReady), k8s.io/kubectl/pkg/drain
(a mirror pod, a terminal phase) and k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go
(GetControllerOf).
"""

from __future__ import annotations

from .names import MIRROR_ANNOTATION, KubeObject


def is_terminal(pod: KubeObject) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


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
