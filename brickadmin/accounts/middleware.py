"""Times are shown in the reader's time zone: the one they chose (their Preference), else their
browser's (the cookie static/js/timezone.js sets), else the site's TIME_ZONE_DISPLAY (UTC unless
configured, e.g. Asia/Seoul)."""

import functools
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from .models import Preference

BROWSER_ZONE_COOKIE = "brick_tz"  # static/js/timezone.js writes it
ZONE_NAME_MAX = 64  # the longest IANA name is about 32 characters


@functools.cache
def known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def valid_zone(name: str) -> str:
    """The name when it is a zone this machine knows, else "" (a cookie is anyone's to write)."""
    if not name or len(name) > ZONE_NAME_MAX:
        return ""
    return name if name in known_zones() else ""


def zone_of(user) -> str:
    """The zone name a person chose, or "" (none chosen). One query by key."""
    if not user.is_authenticated:
        return ""
    try:
        return Preference.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first() or ""
    except DatabaseError:  # the database's own error page says so; times fall back to the site's zone
        return ""


def display_zone(request) -> str:
    """The zone this request's pages show times in."""
    return (
        valid_zone(zone_of(request.user))
        or valid_zone(request.COOKIES.get(BROWSER_ZONE_COOKIE, ""))
        or valid_zone(getattr(settings, "TIME_ZONE_DISPLAY", ""))
        or "UTC"
    )


class TimezoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            timezone.activate(ZoneInfo(display_zone(request)))
        except (ZoneInfoNotFoundError, ValueError):  # a zone the machine no longer has
            timezone.activate(ZoneInfo("UTC"))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
