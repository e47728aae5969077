"""Times are shown in the signed-in person's time zone (their Preference), else the server's."""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import DatabaseError
from django.utils import timezone

from .models import Preference


def zone_of(user) -> str:
    """The zone name a person chose, or "" (the server's TIME_ZONE). One query by key."""
    if not user.is_authenticated:
        return ""
    try:
        return Preference.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first() or ""
    except DatabaseError:  # the database's own error page says so; times fall back to the server's zone
        return ""


class TimezoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        name = zone_of(request.user)
        try:
            timezone.activate(ZoneInfo(name)) if name else timezone.deactivate()
        except (ZoneInfoNotFoundError, ValueError):  # a zone the machine no longer has
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
