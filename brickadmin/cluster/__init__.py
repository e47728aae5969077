"""The one way in to a cluster. ``get_gateway()`` picks the real cluster or the twin."""
from django.conf import settings

from .base import (  # noqa: F401  (re-exported)
    ClusterError,
    ClusterGateway,
    ClusterUnreachable,
    Conflict,
    DrainResult,
    Forbidden,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)

_kube_gateway = None


def get_gateway():
    global _kube_gateway
    if settings.BRICK_CLUSTER == "kube":
        if _kube_gateway is None:
            from .kube import KubeGateway

            _kube_gateway = KubeGateway(
                kubeconfig=settings.BRICK_KUBECONFIG or None, in_cluster=settings.BRICK_IN_CLUSTER
            )
        return _kube_gateway
    from .twin import TwinGateway

    return TwinGateway()
