from django.conf import settings


def cluster_banner(request):
    """Which cluster the pages show, and why it could not be read for this page (set by
    the middleware): the banner in base.html. Pages read the materialised view, so no
    page asks the API server whether it answers; gpus.context_processors does, only
    while there is no view at all."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"cluster_kind": settings.BRICK_CLUSTER, "cluster_error": None}
    return {"cluster_kind": settings.BRICK_CLUSTER, "cluster_error": getattr(request, "cluster_error", None)}
