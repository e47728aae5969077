from django.conf import settings


def cluster_banner(request):
    """Which cluster the pages show, for the banner in base.html. A failure to reach
    the cluster is set on the request by the views (request.cluster_error)."""
    return {
        "cluster_kind": settings.BRICK_CLUSTER,
        "cluster_error": getattr(request, "cluster_error", None),
    }
