"""Run pages in words: why a pending run waits and for how long."""

from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext as _

register = template.Library()


@register.simple_tag
def pending_why(run) -> str:
    """How long a pending run has waited and why: no worker seen yet, the worker stopped (when),
    or runs ahead of it on a worker that is up."""
    from gpus.models import ProcedureRun, RunStatus, ServiceBeat

    now = timezone.now()
    waited = timesince(run.created_at, now)
    seen = ServiceBeat.objects.filter(name="reaper").values_list("beat_at", flat=True).first()
    if seen is None:
        return _(
            "Waiting %(waited)s: no Celery worker has run here yet. Start one (celery -A brickadmin worker --beat)."
        ) % {"waited": waited}
    if now - seen >= timedelta(seconds=settings.BRICK_WORKER_STALE_SECONDS):
        return _(
            "Waiting %(waited)s: the Celery worker stopped (last seen %(ago)s ago). The run starts once it is back."
        ) % {"waited": waited, "ago": timesince(seen, now)}
    ahead = ProcedureRun.objects.filter(status__in=(RunStatus.PENDING, RunStatus.RUNNING), pk__lt=run.pk).count()
    if ahead:
        return _("Waiting %(waited)s: the worker is up and busy with %(n)d earlier runs.") % {
            "waited": waited,
            "n": ahead,
        }
    return _("Waiting %(waited)s: the worker is up and picks the run up within seconds.") % {"waited": waited}


@register.filter
def run_target(run) -> str:
    """What a run without a node changed, in words ("Quota of ws-vision: 8 → 6"), else its target."""
    from gpus.procedures import registry

    proc = registry.find(run.procedure)
    own = proc.headline(run) if proc is not None else ""
    return str(own) if own else str(run.target)
