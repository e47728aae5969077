"""A page reads one generation of the cluster view, never a mix (gpus.view.stored)."""

from gpus.view import stored as clusterview


class OneGenerationMiddleware:
    """Every GET or HEAD page reads the view in one snapshot, from its first read of it
    until its response is rendered (the watcher may publish meanwhile). Listed after the
    session and message middleware, whose writes come after the snapshot is closed."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        with clusterview.PageGeneration():
            return self.get_response(request)

    def process_exception(self, request, exception):
        # Before the error page renders (its queries must not run in a failed transaction).
        clusterview.end_page_generation(exception)
        return None
