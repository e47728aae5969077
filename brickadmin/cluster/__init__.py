"""A cluster as the product sees it. The package itself holds only the gateway's contract
and errors (``base``), so that its modules can import one another without importing the
package back; ``get_gateway()`` (the real cluster or the twin) is in ``gateway``."""

from .base import (
    ClusterError,
    ClusterGateway,
    ClusterUnreachable,
    Conflict,
    DrainResult,
    Forbidden,
    Gone,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)

__all__ = [
    "ClusterError",
    "ClusterGateway",
    "ClusterUnreachable",
    "Conflict",
    "DrainResult",
    "Forbidden",
    "Gone",
    "NotFound",
    "PermanentClusterError",
    "RolloutStatus",
    "TransientClusterError",
]
