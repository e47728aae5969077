"""Sign-in lockouts (django-axes): the client address behind trusted proxies, and the page
that says the sign-in is locked and for how long."""

from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
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


def client_ip(request) -> str:
    """The address failures are counted for: REMOTE_ADDR, or with BRICK_TRUSTED_PROXY_COUNT
    proxies in front, the address the outermost of them saw (X-Forwarded-For, counted from
    the right, so a client cannot choose it by sending the header itself). Raises
    UnusableForwardedAddress when that entry is not an address (a misconfigured proxy, or a
    client writing what a count too large reads): django-axes would store it in an address
    column, which PostgreSQL refuses."""
    remote = request.META.get("REMOTE_ADDR", "")
    count = settings.BRICK_TRUSTED_PROXY_COUNT
    if count > 0:
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
