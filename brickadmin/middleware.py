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


# --- the database ---------------------------------------------------------------------

def database_problem(exception) -> str | None:
    """"read-only" when the database refuses writes (PostgreSQL in recovery or with
    default_transaction_read_only, a read-only SQLite file), "busy" when it is locked,
    "unreachable" when it cannot be reached; None for errors that are bugs (an integrity or
    programming error stays a 500)."""
    from django.db import DatabaseError, InterfaceError, InternalError, OperationalError

    if not isinstance(exception, DatabaseError):
        return None
    text = f"{type(getattr(exception, '__cause__', None)).__name__} {exception}".lower()
    if "readonlysqltransaction" in text or "read-only" in text or "readonly" in text or "read only" in text:
        return "read-only"
    if "database is locked" in text:
        return "busy"
    if isinstance(exception, (OperationalError, InterfaceError)):
        return "unreachable"
    if type(exception) in (DatabaseError, InternalError):
        return "unreachable"
    return None


def database_unavailable_response(request, problem: str):
    """The 503 page, rendered without touching the database (no context processors, no
    user): it says the database cannot be written or reached and that nothing was saved."""
    from django.http import HttpResponse
    from django.template.loader import render_to_string

    html = render_to_string("database_unavailable.html", {
        "problem": problem, "method": request.method, "path": request.get_full_path()})
    resp = HttpResponse(html, status=503)
    resp["Retry-After"] = "30"
    return resp


class DatabaseErrorMiddleware:
    """A database that is read-only, locked or down turns a view's crash into a 503 page
    saying so. Pages that only read keep working while it is read-only;
    errors raised outside views reach brickadmin.views.server_error (handler500) instead."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        problem = database_problem(exception)
        if problem is None:
            return None
        import logging

        logging.getLogger("brickadmin.database").warning("%s %s: database %s: %s", request.method,
                                                         request.path, problem, exception)
        return database_unavailable_response(request, problem)


# --- the Content-Security-Policy ------------------------------------------------------

def content_security_policy() -> str:
    """Scripts, styles, images and requests from the console's own origin only: no inline
    script, style or eval (htmx is told not to inject its style nor evaluate attributes, in
    base.html), no plugin, no framing. Forms post here, and the logout form's redirect to the
    identity provider's end-session endpoint is a form action too when single sign-on is on."""
    from urllib.parse import urlsplit

    from django.conf import settings

    form_action = ["'self'"]
    if settings.BRICK_OIDC_ENABLED:
        issuer = urlsplit(settings.BRICK_OIDC_ISSUER)
        form_action.append(f"{issuer.scheme}://{issuer.netloc}")
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": form_action,
    }
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives.items())


class ContentSecurityPolicyMiddleware:
    """Sends the policy above on every response (Django 5.2 has no CSP of its own; a few
    lines here rather than a dependency, since the policy is one fixed header)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        # built per response (microseconds): it follows the single sign-on settings as they are
        response.headers.setdefault("Content-Security-Policy", content_security_policy())
        return response
