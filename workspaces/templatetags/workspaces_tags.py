"""Template helpers of the workspaces app."""

from django import template
from django.utils import timezone
from django.utils.translation import gettext as _

register = template.Library()


@register.simple_tag
def job_approval_off() -> bool:
    """True when admins switched Job approval off (Jobs then have no resource ceiling)."""
    from workspaces.models import JobSettings

    row = JobSettings.objects.filter(pk=1).values_list("approval_required", flat=True).first()
    return row is False


@register.simple_tag
def quota_counting(line):
    """Whether ``line``'s pods' GPUs count against its quota (workspaces/counting.py)."""
    from workspaces import counting

    return counting.of_line(line)


@register.filter
def note_of(counting, pod_name):
    """The note of one pod of a quota_counting ('' when its GPUs are counted)."""
    return counting.notes.get(pod_name, "")


@register.filter
def waiting(since):
    """How long something has waited, coarse: '3 d 4 h', '2 h 5 min', '4 min'."""
    if not since:
        return ""
    secs = max(0, int((timezone.now() - since).total_seconds()))
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m = rem // 60
    if d:
        return _("%(d)s d %(h)s h") % {"d": d, "h": h}
    if h:
        return _("%(h)s h %(m)s min") % {"h": h, "m": m}
    return _("%(m)s min") % {"m": m}


@register.filter
def quota_reason(params):
    """The reason of a quota run in the reader's language (the product's own reasons), else as typed."""
    from brickadmin.wording import shown
    from workspaces.procedures import quota_reason as reason

    why = reason(params or {})
    return shown(why, (params or {}).get("reason", "")) if isinstance(why, dict) else why
