"""Console pages of the project itself (not of an app): the sign-in lockouts."""

from __future__ import annotations

import ipaddress
import logging
import sys

from django.conf import settings
from django.contrib import messages
from django.db.models import Max, Sum
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST
from django.views.defaults import server_error as django_server_error

from .lockout import cooloff_minutes
from .middleware import clean_text
from .permissions import admin_required
from .tables import Column, Table

LOCKOUT_TABLE = Table(
    Column("username", gettext_lazy("Username")),
    Column("address", gettext_lazy("Address"), "ip_address"),
    Column("failures", gettext_lazy("Failures"), numeric=True),
    Column("until", gettext_lazy("Locked until")),
    Column("unlock", "", None, export=False),
    search=("username", "ip_address"),
    default="-until",
)


@require_GET
@admin_required
def lockouts(request):
    """The sign-ins locked now (a username from an address with failures at or over the limit
    within the cool-off, which counts from the failure that locked it), and the recorded
    failures, newest first. Unlock: each row's button (lockout_unlock), or
    `manage.py unlock_sign_in NAME` (brickadmin/accounts/management/commands)."""
    from axes.models import AccessAttempt, AccessFailureLog

    # one row per username and address (axes keeps one per browser too); a handful: in Python
    pairs = (
        AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - settings.AXES_COOLOFF_TIME)
        .values("username", "ip_address")
        .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
        .filter(failures__gte=settings.AXES_FAILURE_LIMIT)
        .order_by()
    )
    rows = [{**p, "until": p["last"] + settings.AXES_COOLOFF_TIME} for p in pairs]
    table = LOCKOUT_TABLE.bind(request, rows)
    if table.wants_csv:
        return table.csv_response("sign-in-lockouts")
    page = table.page
    return render(
        request,
        "lockouts.html",
        {
            "table": table,
            "page": page,
            "failures": AccessFailureLog.objects.order_by("-attempt_time")[:100],
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "minutes": cooloff_minutes(),
        },
    )


@require_POST
@admin_required
def lockout_unlock(request):
    """An admin unlocks one username from one address (the row's Unlock button)."""
    from axes.models import AccessAttempt

    username, address = clean_text(request.POST.get("username", "")), request.POST.get("address", "").strip()
    try:
        ipaddress.ip_address(address)
        if username is None:
            raise ValueError(address)
    except ValueError:
        messages.error(request, _("Not unlocked: %(address)s is not an IP address.") % {"address": address[:60]})
        return redirect("lockouts")
    removed, _counts = AccessAttempt.objects.filter(username=username, ip_address=address).delete()
    if removed:
        logging.getLogger("brickadmin.lockout").warning(
            "%s unlocked the sign-in of %s from %s", request.user.get_username(), username, address
        )
        messages.success(
            request, _("%(user)s can sign in from %(address)s again.") % {"user": username, "address": address}
        )
    else:
        messages.info(request, _("%(user)s was not locked from %(address)s.") % {"user": username, "address": address})
    return redirect("lockouts")


def server_error(request, template_name="500.html"):
    """handler500: a database error raised outside a view (a middleware reading the session,
    the user...) is the 503 page too; anything else is Django's 500."""
    from .middleware import database_problem, database_unavailable_response

    problem = database_problem(sys.exc_info()[1])
    if problem is not None:
        return database_unavailable_response(request, problem)
    return django_server_error(request, template_name)
