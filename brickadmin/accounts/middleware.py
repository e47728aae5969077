"""Times are shown in the reader's time zone: the one they chose (their Preference), else their
browser's (the cookie static/js/timezone.js sets), else the site's TIME_ZONE_DISPLAY (UTC unless
configured, e.g. Asia/Seoul)."""

import functools
from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings
from django.db import DatabaseError, transaction
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


def _chosen(request) -> tuple[str, str]:
    """(time zone chosen, language the console was last read in) of the signed-in person, or
    ("", ""). One query by key, once per request."""
    cached = getattr(request, "_brick_preference", None)
    if cached is not None:
        return cached
    found: tuple[str, str] = ("", "")
    if request.user.is_authenticated:
        try:
            row = Preference.objects.filter(user_id=request.user.pk).values_list("time_zone", "ui_language").first()
            found = (row[0] or "", row[1] or "") if row else ("", "")
        except DatabaseError:  # the database's own error page says so; times fall back to the site's zone
            pass
    request._brick_preference = found
    return found


def remember_ui_language(request) -> None:
    """Keep the language this signed-in person reads the console in, so that what they are told
    while away (notifications, emails) is in it unless they chose another. Written only when it
    changes; a database that refuses the write leaves the page as it is."""
    if not request.user.is_authenticated:
        return
    current = getattr(request, "LANGUAGE_CODE", "") or ""
    if current not in dict(settings.LANGUAGES):
        return
    known = _chosen(request)[1] or settings.LANGUAGE_CODE
    if current == known:
        return
    try:
        with transaction.atomic():
            Preference.objects.update_or_create(user_id=request.user.pk, defaults={"ui_language": current})
    except DatabaseError:
        return


def browser_zone(request) -> str:
    """The zone the browser reported, or "". A browser that wrote it percent-encoded
    (Asia%2FSeoul, as encodeURIComponent does) is read the same as one that wrote Asia/Seoul."""
    raw = request.COOKIES.get(BROWSER_ZONE_COOKIE, "")
    return valid_zone(unquote(raw[: ZONE_NAME_MAX * 3]))


def zone_source(request) -> str:
    """Where this request's zone comes from: "chosen", "browser" or "site" (TIME_ZONE_DISPLAY, else UTC)."""
    if valid_zone(_chosen(request)[0]):
        return "chosen"
    return "browser" if browser_zone(request) else "site"


def display_zone(request) -> str:
    """The zone this request's pages show times in."""
    return valid_zone(_chosen(request)[0]) or browser_zone(request) or valid_zone(settings.TIME_ZONE_DISPLAY) or "UTC"


class TimezoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            timezone.activate(ZoneInfo(display_zone(request)))
        except (ZoneInfoNotFoundError, ValueError):  # a zone the machine no longer has
            timezone.activate(ZoneInfo("UTC"))
        remember_ui_language(request)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
