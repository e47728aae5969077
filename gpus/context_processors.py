from django.conf import settings
from django.db import DatabaseError

from .clusterview import freshness


def view_freshness(request):
    """How old the numbers on every page are and whether the watcher keeps them up to date
    (one query, for signed-in users only)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    try:
        return {"freshness": freshness(live=settings.BRICK_CLUSTER == "twin")}
    except DatabaseError:  # the page that says the database is unavailable must still render
        return {}
