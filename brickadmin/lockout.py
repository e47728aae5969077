"""Sign-in lockouts (django-axes): the client address behind trusted proxies, and the page
that says the sign-in is locked and for how long."""

from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.shortcuts import render


def client_ip(request) -> str:
    """The address failures are counted for: REMOTE_ADDR, or with BRICK_TRUSTED_PROXY_COUNT
    proxies in front, the address the outermost of them saw (X-Forwarded-For, counted from
    the right, so a client cannot choose it by sending the header itself)."""
    remote = request.META.get("REMOTE_ADDR", "")
    count = settings.BRICK_TRUSTED_PROXY_COUNT
    if count > 0:
        forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
        if len(forwarded) >= count:
            return forwarded[-count]
    return remote


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
