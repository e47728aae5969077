"""The reaper (a periodic task): runs whose worker died are marked interrupted; pending
runs no worker claimed are enqueued again."""
from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from ..models import ProcedureRun, RunStatus, StepRun, StepState
from .base import knob
from .queue import enqueue
from .recording import RUN_EVENT, StepRecorder, record


def reap_stale(stale_seconds: float | None = None) -> list[int]:
    """Mark running runs whose heartbeat is older than ``stale_seconds`` as interrupted."""
    stale_seconds = stale_seconds if stale_seconds is not None else knob("BRICK_RUN_HEARTBEAT_STALE_SECONDS", 60)
    cutoff = timezone.now() - timezone.timedelta(seconds=stale_seconds)
    reaped = []
    for run in ProcedureRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff):
        message = _("Interrupted: the worker %(w)s stopped sending heartbeats (last at %(t)s). Resume the run to "
                    "continue from the step it was in; steps are idempotent.") % {
            "w": run.worker or "?", "t": run.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S UTC")}
        with transaction.atomic():
            n = ProcedureRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
                status=RunStatus.INTERRUPTED, finished_at=timezone.now(), message=message, claim_token="")
            if not n:
                continue
            in_step = (StepRun.objects.filter(run_id=run.pk).exclude(step_key=RUN_EVENT).order_by("-seq").first())
            if in_step and in_step.state == StepState.RUNNING:
                StepRecorder(run.pk, in_step.step_key, in_step.step_index, in_step.title, kubectl=in_step.kubectl,
                             attempt=in_step.attempt, started_at=in_step.started_at).failed(message)
            record(run.pk, step_key=RUN_EVENT, title=_("Run interrupted"), state=StepState.FAILED, error=message)
        reaped.append(run.pk)
    requeue_orphans(stale_seconds)
    return reaped


def requeue_orphans(stale_seconds: float) -> list[int]:
    """Pending runs no worker claimed within ``stale_seconds`` (the message was lost, or a
    worker died between receiving and claiming it) are enqueued again, at most once per
    period (heartbeat_at marks the last enqueue). A duplicate message is harmless: only
    one claim succeeds."""
    now = timezone.now()
    cutoff = now - timezone.timedelta(seconds=stale_seconds)
    stale = Q(status=RunStatus.PENDING, created_at__lt=cutoff) & (Q(heartbeat_at__isnull=True) |
                                                                  Q(heartbeat_at__lt=cutoff))
    out = []
    for pk in ProcedureRun.objects.filter(stale).values_list("pk", flat=True):
        if ProcedureRun.objects.filter(stale, pk=pk).update(heartbeat_at=now):
            enqueue(pk)
            out.append(pk)
    return out
