import time

from django.contrib.sessions.exceptions import SessionInterrupted
from django.contrib.sessions.middleware import SessionMiddleware
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
            return render(request, "cluster_unavailable.html", {"retry_can_help": exception.transient}, status=503)
        return None


# --- what a request may carry ----------------------------------------------------------

QUERY_VALUE_MAX = 1000  # characters of one query parameter: more than any page needs (search uses 100)
HEADER_VALUE_MAX = 100  # characters of Last-Event-ID: a sequence number has at most 18 digits
# C0 control characters but tab, line feed and carriage return (a text area holds those):
# PostgreSQL refuses a NUL in text, and none of them belongs in a name, a search or a form field.
_CONTROL = frozenset(chr(c) for c in range(32)) - {"\t", "\n", "\r"}


def has_control_character(text: str) -> bool:
    return not _CONTROL.isdisjoint(text)


def refused_input(request) -> str | None:
    """Why the request's address or query parameters cannot be used (a control character such
    as NUL, or a query parameter longer than QUERY_VALUE_MAX), as a sentence naming the
    parameter; None when they can. Posted form fields are their forms' to refuse, beside the
    field (Django's CharField refuses a NUL; views reading a field without a form use
    clean_text below); tests/foundation/test_forms_fuzz.py posts control characters to every form."""
    from django.utils.translation import gettext as _

    if has_control_character(request.path):
        return _("The address holds a control character (such as a NUL byte).")
    if len(request.headers.get("Last-Event-ID", "")) > HEADER_VALUE_MAX:
        return _("The Last-Event-ID header is longer than %(n)d characters.") % {"n": HEADER_VALUE_MAX}
    from .lockout import UnusableForwardedAddress, client_ip

    try:
        client_ip(request)
    except UnusableForwardedAddress:
        return _(
            "The X-Forwarded-For header does not end with the client's address as the proxy in front saw it; "
            "the proxy or the number of trusted proxies is misconfigured."
        )
    for name, values in request.GET.lists():
        if has_control_character(name) or any(has_control_character(v) for v in values):
            return _("The query parameter %(name)s holds a control character (such as a NUL byte).") % {
                "name": repr(name)[:60]
            }
        if len(name) > QUERY_VALUE_MAX or any(len(v) > QUERY_VALUE_MAX for v in values):
            return _("The query parameter %(name)s is longer than %(n)d characters.") % {
                "name": repr(name[:40]),
                "n": QUERY_VALUE_MAX,
            }
    return None


def clean_text(value: str) -> str | None:
    """A posted value a view reads without a form, or None when it holds a control character."""
    return None if has_control_character(value) else value


class RequestInputMiddleware:
    """One place for what no page can use: a control character in the address or a query
    parameter (a NUL makes PostgreSQL fail the query, and cuts a CSV export off), or a query
    parameter too long to search with (SQLite refuses LIKE patterns over 50,000 bytes, which
    read as a dead database). A 400 page says which and why; no view runs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reason = refused_input(request)
        if reason is not None:
            return render(request, "bad_request.html", {"reason": reason}, status=400)
        return self.get_response(request)


class SlidingSessionMiddleware(SessionMiddleware):
    """Django's session middleware, and a local sign-in's session is saved again at most once
    a minute while it is used, so SESSION_COOKIE_AGE counts hours without a request rather
    than hours since the sign-in (what SESSION_SAVE_EVERY_REQUEST does, without a database
    write per request). A session with an expiry of its own (single sign-on's working day) is
    left alone, and a database that refuses the write (read-only) leaves a page that only
    reads working: the count restarts at the next request that can write."""

    REFRESH_SECONDS = 60
    REFRESHED = "_brick_refreshed"
    KEY_MAX = 64  # characters: Django's keys have 32 (a-z, 0-9)

    def process_request(self, request):
        """A cookie no session could have (a NUL byte, which PostgreSQL refuses in a query,
        another control or non-ASCII character, or a length no key has) is no session: the page
        answers as to someone not signed in, instead of failing on the lookup."""
        name = self.settings_cookie_name()
        key = request.COOKIES.get(name)
        if key is not None and not self.usable_key(key):
            request.COOKIES = {k: v for k, v in request.COOKIES.items() if k != name}
        super().process_request(request)

    @staticmethod
    def settings_cookie_name() -> str:
        from django.conf import settings

        return settings.SESSION_COOKIE_NAME

    @classmethod
    def usable_key(cls, key: str) -> bool:
        return 0 < len(key) <= cls.KEY_MAX and key.isascii() and key.isprintable() and " " not in key

    def process_response(self, request, response):
        session = getattr(request, "session", None)
        refresh_only = False
        if (
            session is not None
            and not session.modified
            and session.get("_auth_user_id")
            and "_session_expiry" not in session
        ):
            now = int(time.time())
            if now - session.get(self.REFRESHED, 0) >= self.REFRESH_SECONDS:
                session[self.REFRESHED] = now
                refresh_only = True
        try:
            return super().process_response(request, response)
        except SessionInterrupted:
            if refresh_only:
                return response
            raise


class NoStoreMiddleware:
    """Pages and exports a signed-in person receives are never kept by a browser or a proxy
    (Cache-Control: no-store): after sign-out, Back or a shared machine's cache must not show
    them again."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from django.utils.cache import add_never_cache_headers

        signed_in = request.user.is_authenticated
        response = self.get_response(request)
        if signed_in or request.user.is_authenticated:
            add_never_cache_headers(response)
        return response


# --- the database ---------------------------------------------------------------------


def database_problem(exception) -> str | None:
    """ "read-only" when the database refuses writes (PostgreSQL in recovery or with
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

    html = render_to_string(
        "database_unavailable.html", {"problem": problem, "method": request.method, "path": request.get_full_path()}
    )
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

        logging.getLogger("brickadmin.database").warning(
            "%s %s: database %s: %s", request.method, request.path, problem, exception
        )
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
