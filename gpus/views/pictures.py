"""The utilisation chart fragment (htmx): GET /charts/utilisation/<scope>/?of=<subject>&range=hour|day|week.

Loaded lazily by ``{% utilisation_chart %}`` (gpus/templatetags/pictures.py), so a page
never waits for Prometheus. Makes no Kubernetes API call and no SQL query but the
Workspace permission check; one Prometheus range query (cached for a step).
Who may see what: the cluster and a GPU type, everyone (like the Dashboard and
Availability); a node, admins (like the node pages); a Workspace, its owner and admins
(anyone else gets 404, as for a Workspace that does not exist)."""

import hashlib
from datetime import UTC, datetime

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from brickadmin import metrics
from brickadmin.permissions import is_admin
from gpus.numbers import pictures

SCOPES = ("cluster", "type", "node", "workspace")


def _admins_only(user, subject: str) -> bool:
    return is_admin(user)


# Who may see a Workspace's chart is the Workspaces' rule (its owner and admins), registered
# from WorkspacesConfig.ready(): gpus never imports Workspaces. Without a rule, admins only.
VIEWERS: dict = {}  # {scope: (user, subject) -> bool}


def _ranges():
    return {
        "hour": (_("Last hour"), _("the last hour")),
        "day": (_("Last day"), _("the last day")),
        "week": (_("Last week"), _("the last week")),
    }


def _title(scope: str, subject: str) -> str:
    if scope == "cluster":
        return _("GPU utilisation, whole cluster")
    if scope == "type":
        return _("GPU utilisation of %(resource)s") % {"resource": subject}
    if scope == "node":
        return _("GPU utilisation of node %(node)s") % {"node": subject}
    return _("GPU utilisation of Workspace %(workspace)s") % {"workspace": subject}


def summary(points, period: str, step: float) -> str:
    """The chart in one sentence: mean, lowest and highest, and how often it was sampled."""
    values = [v for _t, v in points]
    if step < 60:
        every = _("one every %(n)s s") % {"n": f"{step:g}"}
    elif step < 7200:
        every = _("one every %(n)s min") % {"n": f"{step / 60:g}"}
    else:
        every = _("one every %(n)s h") % {"n": f"{step / 3600:g}"}
    return _("Mean %(mean)s%%, lowest %(low)s%%, highest %(high)s%% over %(period)s (%(count)s points, %(every)s).") % {
        "mean": round(sum(values) / len(values)),
        "low": round(min(values)),
        "high": round(max(values)),
        "period": period,
        "count": len(values),
        "every": every,
    }


@require_GET
def utilisation(request, scope):
    if scope not in SCOPES:
        raise Http404("no such chart")
    subject = request.GET.get("of", "")[:253]
    if scope != "cluster" and not subject:
        raise Http404("which one?")
    if scope == "node" and not is_admin(request.user):
        raise PermissionDenied
    if scope == "workspace" and not VIEWERS.get(scope, _admins_only)(request.user, subject):
        raise Http404("no such Workspace")
    range_key = request.GET.get("range", "day")
    ranges = _ranges()
    if range_key not in ranges:
        range_key = "day"
    try:
        series = metrics.utilisation(scope, subject if scope != "cluster" else "", range_key)
    except ValueError:
        raise Http404("no utilisation for this GPU type") from None
    title = _title(scope, subject)
    base = reverse("utilisation_chart", args=[scope])
    links = []
    for key, (label, _period) in ranges.items():
        query = {"range": key, **({"of": subject} if subject else {})}
        links.append((key, label, base + "?" + urlencode(query)))
    period = ranges[range_key][1]
    ctx = {
        "scope": scope,
        "subject": subject,
        "title": title,
        "series": series,
        "range_key": range_key,
        "range_label": period,
        "ranges": links,
        "dom_id": f"util-{scope}-{hashlib.sha1(subject.encode()).hexdigest()[:10]}",
    }
    if series.measured and series.points:
        label = f"{title}: {summary(series.points, period, series.step)}"
        ctx.update(
            svg=pictures.line_chart(series.points, series.start, series.end, series.step, label),
            summary=summary(series.points, period, series.step),
            start=datetime.fromtimestamp(series.start, tz=UTC),
            end=datetime.fromtimestamp(series.end, tz=UTC),
            rows=[(datetime.fromtimestamp(t, tz=UTC), v) for t, v in series.points],
        )
    return render(request, "components/pictures/utilisation.html", ctx)
