"""The reaper (a periodic task): runs whose worker died are taken over and resumed
automatically (a few times, then left interrupted for a person); pending runs no worker
claimed are enqueued again. A redelivered task does the same for its run when it finds it
running with a stale heartbeat (engine.claim)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from brickadmin.wording import said

from ..models import ProcedureRun, RunStatus, StepRun, StepState
from .base import knob
from .queue import enqueue
from .recording import RUN_EVENT, StepRecorder, record


def beat() -> None:
    """The reaper ran (Celery beat scheduled it, a worker ran it): Health says so when it stops."""
    from ..models import ServiceBeat

    ServiceBeat.objects.update_or_create(name="reaper", defaults={"beat_at": timezone.now()})


def reap_stale(stale_seconds: float | None = None) -> list[int]:
    """Take over the running runs whose heartbeat is older than ``stale_seconds`` (their
    worker died): each is resumed automatically from the step it was in (steps are
    idempotent) and enqueued again, at most BRICK_RUN_AUTO_RESUMES times; after that it is
    marked interrupted for a person to look at. Returns the runs taken over or interrupted."""
    stale_seconds = stale_seconds if stale_seconds is not None else knob("BRICK_RUN_HEARTBEAT_STALE_SECONDS", 10)
    cutoff = timezone.now() - timezone.timedelta(seconds=stale_seconds)
    reaped = [
        pk
        for pk in ProcedureRun.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).values_list(
            "pk", flat=True
        )
        if take_over(pk, cutoff)
    ]
    requeue_orphans(stale_seconds)
    return reaped


def take_over(run_id: int, cutoff) -> bool:
    """If the run's worker stopped beating before ``cutoff``: close the step it was in as
    failed, then make the run pending again (recorded as an automatic resume) and enqueue
    it; or, past the limit of automatic resumes, mark it interrupted. False when the run
    is not stale (its worker is alive, or someone else took it over first)."""
    limit = int(knob("BRICK_RUN_AUTO_RESUMES", 3))
    with transaction.atomic():
        run = ProcedureRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).first()
        if run is None:
            return False
        last_beat = run.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        resumes = StepRun.objects.filter(run_id=run.pk, step_key=RUN_EVENT, sent__auto_resume=True).count()
        automatic = resumes < limit
        if automatic:
            message = said("run.heartbeat_resumed", w=run.worker or "?", t=last_beat)
            n = ProcedureRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
                status=RunStatus.PENDING,
                claim_token="",
                message="",
                message_said=None,
                heartbeat_at=timezone.now(),
                resumed_count=F("resumed_count") + 1,
            )
        else:
            message = said("run.heartbeat_interrupted", w=run.worker or "?", t=last_beat, n=resumes)
            n = ProcedureRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).update(
                status=RunStatus.INTERRUPTED,
                finished_at=timezone.now(),
                message=str(message),
                message_said=message.as_record(),
                claim_token="",
            )
        if not n:
            return False
        in_step = StepRun.objects.filter(run_id=run.pk).exclude(step_key=RUN_EVENT).order_by("-seq").first()
        if in_step and in_step.state == StepState.RUNNING:
            StepRecorder(
                run.pk,
                in_step.step_key,
                in_step.step_index,
                in_step.title,
                kubectl=in_step.kubectl,
                attempt=in_step.attempt,
                started_at=in_step.started_at,
            ).failed(message)
        if automatic:
            record(
                run.pk,
                step_key=RUN_EVENT,
                title=said("run.resumed_automatically"),
                state=StepState.PENDING,
                output=message,
                sent={"auto_resume": True, "worker": run.worker},
            )
            transaction.on_commit(lambda: enqueue(run.pk))
        else:
            record(run.pk, step_key=RUN_EVENT, title=said("run.interrupted"), state=StepState.FAILED, error=message)
    return True


def requeue_orphans(stale_seconds: float) -> list[int]:
    """Pending runs no worker claimed within ``stale_seconds`` (the message was lost, or a
    worker died between receiving and claiming it) are enqueued again, at most once per
    period (heartbeat_at marks the last enqueue). A duplicate message is harmless: only
    one claim succeeds."""
    now = timezone.now()
    cutoff = now - timezone.timedelta(seconds=stale_seconds)
    stale = Q(status=RunStatus.PENDING, created_at__lt=cutoff) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff)
    )
    out = []
    for pk in ProcedureRun.objects.filter(stale).values_list("pk", flat=True):
        if ProcedureRun.objects.filter(stale, pk=pk).update(heartbeat_at=now):
            enqueue(pk)
            out.append(pk)
    return out
