from django.conf import settings

from .cluster import cluster_problem


def cluster_banner(request):
    """Which cluster the pages show, and why it cannot be reached if it cannot:
    the banner in base.html, on every page."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"cluster_kind": settings.BRICK_CLUSTER, "cluster_error": None}
    return {
        "cluster_kind": settings.BRICK_CLUSTER,
        "cluster_error": getattr(request, "cluster_error", None) or cluster_problem(),
    }
