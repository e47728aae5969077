from django.shortcuts import render

from .cluster import ClusterError


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
            request.cluster_error = str(exception)
            return render(request, "cluster_unavailable.html",
                          {"retry_can_help": exception.transient}, status=503)
        return None
