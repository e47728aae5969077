"""What kubectl drain asks the API server before it evicts: the pods' DaemonSets."""

from __future__ import annotations

from .base import ClusterError, ClusterGateway, DrainResult, NotFound
from .vocabulary import PRODUCT_DRAIN, daemonset_to_look_up, drain_list, pod_key


def look_up_daemonsets(gateway: ClusterGateway, pods: list[dict]) -> dict[tuple[str, str], bool | str]:
    """kubectl drain GETs the DaemonSet of each running DaemonSet pod: found (True), gone
    (False: the pod is an orphan, deleted under --force), or the error's text (the drain stops)."""
    found: dict[tuple[str, str], bool | str] = {}
    for pod in pods:
        wanted = daemonset_to_look_up(pod)
        if wanted is None or wanted in found:
            continue
        try:
            gateway.get_daemonset(*wanted)
            found[wanted] = True
        except NotFound:
            found[wanted] = False
        except ClusterError as e:
            found[wanted] = e.message
    return found


def pods_to_evict(
    gateway: ClusterGateway, pods: list[dict], result: DrainResult, *, delete_emptydir_data: bool
) -> list[dict]:
    """kubectl drain's first half, before any eviction: the pods that go. The pods left alone
    go in ``result.skipped``; a pod kubectl may not delete goes in ``result.blocked`` and stops
    the drain there (nothing is evicted: the list is empty)."""
    flags = PRODUCT_DRAIN._replace(delete_emptydir_data=delete_emptydir_data)
    listed = drain_list(pods, flags, daemonsets=look_up_daemonsets(gateway, pods))
    result.skipped = [pod_key(p) for p in listed.skipped]
    if listed.errors:
        result.blocked.update(listed.errors)
        return []
    return listed.delete
