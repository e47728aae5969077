"""Sign-in lockouts (django-axes): the client address behind trusted proxies, and the page
that says the sign-in is locked and for how long."""

from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.core import signing
from django.shortcuts import render


class UnusableForwardedAddress(ValueError):
    """The address to count failures for is not an IP address (brickadmin.middleware answers 400)."""


def address_of(text: str) -> str | None:
    """An IP address as a proxy may write it: bare, IPv4 with a port (``203.0.113.7:51234``)
    or bracketed IPv6 with or without one (``[2001:db8::7]:443``); None when it is none of these."""
    import ipaddress

    text = text.strip()
    if len(text) > 64:
        return None
    candidates = [text]
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        candidates = [host] if rest == "" or (port and port.isascii() and port.isdigit()) else []
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
        candidates = [host] if port.isascii() and port.isdigit() else []
    for candidate in candidates:
        try:
            return str(ipaddress.ip_address(candidate))
        except ValueError:
            return None
    return None


def from_trusted_proxy(remote: str) -> bool:
    """Whether the peer is one of BRICK_TRUSTED_PROXIES (any peer when none is configured)."""
    import ipaddress

    if not settings.BRICK_TRUSTED_PROXIES:
        return True
    address = address_of(remote)
    if address is None:
        return False
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(net, strict=False) for net in settings.BRICK_TRUSTED_PROXIES)


def client_ip(request) -> str:
    """The address failures are counted for: REMOTE_ADDR, or with BRICK_TRUSTED_PROXY_COUNT
    proxies in front, the address the outermost of them saw (X-Forwarded-For, counted from
    the right, so a client cannot choose it by sending the header itself). Raises
    UnusableForwardedAddress when that entry is not an address (a misconfigured proxy, or a
    client writing what a count too large reads): django-axes would store it in an address
    column, which PostgreSQL refuses."""
    remote = request.META.get("REMOTE_ADDR", "")
    count = settings.BRICK_TRUSTED_PROXY_COUNT
    if count > 0 and from_trusted_proxy(remote):
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if len(forwarded) >= count:
            address = address_of(forwarded[-count])
            if address is None:
                raise UnusableForwardedAddress(forwarded[-count][:80])
            return address
    return address_of(remote) or remote


def cooloff_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def lockout_response(request, original_response=None, credentials=None):
    """429 with the login page's look: locked, why, and for how long."""
    return render(
        request,
        "registration/lockout.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": cooloff_minutes()},
        status=429,
    )


def provider_sign_in(request, credentials=None) -> bool:
    """django-axes leaves the single sign-on callback alone (AXES_WHITELIST_CALLABLE): it carries
    no username, so its failures would all count against one empty name and anyone could lock
    single sign-on for everyone. The provider checks (and locks) its own passwords; the lockouts
    here are the local form's."""
    from django.urls import reverse

    return request is not None and request.path == reverse("oidc_authentication_callback")


class LockoutHandler(AxesDatabaseHandler):
    """django-axes' database handler, and a failure refused while locked is still written to
    the failure log: with the wait not extended by such failures (settings.py), axes itself
    leaves them out, and an admin should see that someone keeps trying."""

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        if (
            request is not None
            and getattr(request, "axes_locked_out", False)
            and settings.AXES_ENABLE_ACCESS_FAILURE_LOG
        ):
            from axes.helpers import get_client_username
            from axes.models import AccessFailureLog

            AccessFailureLog.objects.create(
                username=get_client_username(request, credentials),
                ip_address=request.axes_ip_address,
                user_agent=request.axes_user_agent,
                http_accept=request.axes_http_accept,
                path_info=request.axes_path_info,
                attempt_time=request.axes_attempt_time,
                locked_out=True,
            )
        super().user_login_failed(sender, credentials, request, **kwargs)


# --- the account's guess budget, across addresses ------------------------------------------
# django-axes locks a username from one address. An attacker with many addresses (or, before
# the proxies were pinned, a forged X-Forwarded-For) gets AXES_FAILURE_LIMIT guesses from each.
# So an account also has a budget across all addresses, counted over the failures django-axes
# still holds (each address's within the cool-off): past BRICK_LOGIN_ACCOUNT_SLOW_AFTER failures
# each further attempt waits longer after the last failure (1, 2, 4 ... up to 60 s), and at
# BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT the account is locked. Both apply only to browsers that have
# not signed in to the account before: a successful sign-in leaves a signed device cookie
# (OWASP's device cookies), so an outsider cannot lock the admin out of their own browser.
# `manage.py unlock_sign_in NAME` and the lockouts page unlock it.

DEVICE_COOKIE = "brick_device"
DEVICE_SALT = "brickadmin.lockout.device"
DEVICE_MAX_AGE = 180 * 24 * 3600  # seconds: a browser signed in within half a year
SLOW_MAX_SECONDS = 60


def known_device(request, username: str) -> bool:
    """Whether this browser has signed in as ``username`` before (its signed device cookie)."""
    value = request.COOKIES.get(DEVICE_COOKIE, "")
    if not value or len(value) > 4000:
        return False
    try:
        names = signing.loads(value, salt=DEVICE_SALT, max_age=DEVICE_MAX_AGE)
    except signing.BadSignature:
        return False
    return isinstance(names, list) and username in names


def remember_device(request, response, username: str) -> None:
    """After a successful sign-in: this browser is known for ``username`` (and the names it
    already knew, the last 10)."""
    names = []
    value = request.COOKIES.get(DEVICE_COOKIE, "")
    if value and len(value) <= 4000:
        try:
            old = signing.loads(value, salt=DEVICE_SALT, max_age=DEVICE_MAX_AGE)
            names = [n for n in old if isinstance(n, str) and n != username] if isinstance(old, list) else []
        except signing.BadSignature:
            names = []
    names = ([*names, username])[-10:]
    response.set_cookie(
        DEVICE_COOKIE,
        signing.dumps(names, salt=DEVICE_SALT),
        max_age=DEVICE_MAX_AGE,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def account_failures(username: str):
    """(failures across every address that django-axes still holds, the last one's time)."""
    from axes.models import AccessAttempt
    from django.db.models import Max, Sum
    from django.utils import timezone

    held = AccessAttempt.objects.filter(
        username=username, attempt_time__gte=timezone.now() - settings.AXES_COOLOFF_TIME
    ).aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
    return held["failures"] or 0, held["last"]


def account_wait(username: str) -> int | None:
    """Seconds this account's next sign-in from an unknown browser must wait (0: none), or None
    when the account is locked for unknown browsers."""
    from django.utils import timezone

    failures, last = account_failures(username)
    if failures >= settings.BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT:
        return None
    over = failures - settings.BRICK_LOGIN_ACCOUNT_SLOW_AFTER
    if over < 0 or last is None:
        return 0
    delay = min(2**over, SLOW_MAX_SECONDS)
    return max(0, int(delay - (timezone.now() - last).total_seconds() + 0.999))


def account_locked_response(request, wait: int | None):
    """429, the sign-in page's look: the account is slowed (wait so long) or locked."""
    response = render(
        request,
        "registration/lockout.html",
        {
            "account": True,
            "wait": wait,
            "failure_limit": settings.BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT,
            "minutes": cooloff_minutes(),
        },
        status=429,
    )
    response["Retry-After"] = str(wait if wait else int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response


class AccountBudgetMiddleware:
    """The sign-in form's POST: an account over its budget is answered 429 before any password
    is checked (an attempt refused so is not counted and extends nothing), unless this browser
    has signed in to it before; a successful sign-in remembers the browser."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from django.urls import reverse

        if request.method != "POST" or request.path != reverse("login"):
            return self.get_response(request)
        username = request.POST.get("username", "")
        if username and len(username) <= 150 and not known_device(request, username):
            wait = account_wait(username)
            if wait != 0:
                import logging

                logging.getLogger("brickadmin.lockout").warning(
                    "sign-in of %s from %s refused: the account is %s",
                    username,
                    request.META.get("REMOTE_ADDR", ""),
                    "locked" if wait is None else f"slowed ({wait} s)",
                )
                return account_locked_response(request, wait)
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and response.status_code in (301, 302, 303):
            remember_device(request, response, user.get_username())
        return response
