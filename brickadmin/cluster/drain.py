"""What kubectl drain asks the API server before it evicts: the pods' DaemonSets."""

from __future__ import annotations

from .base import ClusterError, ClusterGateway, NotFound
from .vocabulary import daemonset_to_look_up


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
