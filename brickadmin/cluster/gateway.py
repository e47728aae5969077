"""The one way in to a cluster. ``get_gateway()`` picks the real cluster or the twin.

A module of its own, not the package's ``__init__``: the gateways it builds (kube, twin)
import their siblings, and each of those imports runs the package first."""

import threading
import time

from django.conf import settings

from .base import ClusterError

_kube_gateways: dict = {}
_health: dict = {}
_lock = threading.Lock()
HEALTH_TTL_SECONDS = 10


def get_gateway():
    """The configured gateway. Raises ClusterError when the real cluster's
    configuration cannot even be loaded (the pages show it as a banner)."""
    if settings.BRICK_CLUSTER == "kube":
        key = (settings.BRICK_KUBECONFIG, settings.BRICK_IN_CLUSTER)
        with _lock:
            if key not in _kube_gateways:
                from .kube import KubeGateway

                _kube_gateways[key] = KubeGateway(
                    kubeconfig=settings.BRICK_KUBECONFIG or None, in_cluster=settings.BRICK_IN_CLUSTER or None
                )
            return _kube_gateways[key]
    from .twin import TwinGateway

    return TwinGateway()


def cluster_problem() -> str | None:
    """Why the real cluster cannot be used right now, or None. Probed at most every
    HEALTH_TTL_SECONDS so an unreachable API server does not slow every page."""
    if settings.BRICK_CLUSTER != "kube":
        return None
    key = (settings.BRICK_KUBECONFIG, settings.BRICK_IN_CLUSTER)
    now = time.monotonic()
    cached = _health.get(key)
    if cached and now - cached[0] < HEALTH_TTL_SECONDS:
        return cached[1]
    try:
        get_gateway().ping()
        problem = None
    except ClusterError as exc:
        problem = str(exc)
    _health[key] = (now, problem)
    return problem
