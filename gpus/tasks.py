"""Celery tasks: thin wrappers over the engine and the reaper (given only a run id).

Nothing in gpus/procedures imports this module: runs are enqueued by task name
(procedures/queue.py)."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from .models import ProcedureRun
from .procedures import engine, reaper


@shared_task(name="gpus.tasks.execute_run", acks_late=True, reject_on_worker_lost=True)
def execute_run(run_id: int) -> str:
    return engine.execute(run_id)


@shared_task(name="gpus.tasks.reap_stale_runs")
def reap_stale_runs() -> list[int]:
    reaper.beat()
    return reaper.reap_stale()


@shared_task(name="gpus.tasks.prune_old_runs")
def prune_old_runs() -> int:
    cutoff = timezone.now() - timezone.timedelta(days=settings.BRICK_RUN_RETENTION_DAYS)
    return ProcedureRun.prune(cutoff)
