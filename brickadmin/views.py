"""Console pages of the project itself (not of an app): the sign-in lockouts."""
from __future__ import annotations

import sys

from django.conf import settings
from django.db.models import Max, Sum
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.defaults import server_error as django_server_error

from .lockout import cooloff_minutes
from .permissions import admin_required


@require_GET
@admin_required
def lockouts(request):
    """Usernames and addresses locked out now (failures within the cool-off at or over the
    limit), and the recorded failures, newest first. Unlock: `manage.py axes_reset_username
    NAME` / `axes_reset_ip ADDRESS` (or the Django admin's Access attempts)."""
    from axes.models import AccessAttempt, AccessFailureLog

    recent = AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - settings.AXES_COOLOFF_TIME)

    def locked(key):
        rows = (recent.exclude(**{f"{key}__isnull": True}).values(key)
                .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
                .filter(failures__gte=settings.AXES_FAILURE_LIMIT).order_by("-last"))
        return [{"who": r[key], "failures": r["failures"], "until": r["last"] + settings.AXES_COOLOFF_TIME}
                for r in rows]

    return render(request, "lockouts.html", {
        "by_username": locked("username"), "by_address": locked("ip_address"),
        "failures": AccessFailureLog.objects.order_by("-attempt_time")[:100],
        "failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": cooloff_minutes()})


def server_error(request, template_name="500.html"):
    """handler500: a database error raised outside a view (a middleware reading the session,
    the user...) is the 503 page too; anything else is Django's 500."""
    from .middleware import database_problem, database_unavailable_response

    problem = database_problem(sys.exc_info()[1])
    if problem is not None:
        return database_unavailable_response(request, problem)
    return django_server_error(request, template_name)
