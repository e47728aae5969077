from django.shortcuts import render

from .cluster import ClusterError


def show_cluster_error(request, exc) -> None:
    """The banner on this page says why the cluster could not be read (base.html, through
    the context processor). For views that still render without the cluster; every other
    view lets the ClusterError reach the middleware below."""
    request.cluster_error = str(exc)


class ClusterErrorMiddleware:
    """A cluster call that fails anywhere in a view becomes a 503 page with the
    banner saying why, instead of a crash. Nothing half-done is hidden: views that
    write keep their own all-or-nothing handling; this is the last line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, ClusterError):
            show_cluster_error(request, exception)
            return render(request, "cluster_unavailable.html",
                          {"retry_can_help": exception.transient}, status=503)
        return None
