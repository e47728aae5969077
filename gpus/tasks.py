"""Celery tasks: thin wrappers over the engine (given only a run id)."""
from celery import shared_task
from django.conf import settings
from django.utils import timezone


@shared_task(name="gpus.tasks.execute_run", acks_late=True, reject_on_worker_lost=True)
def execute_run(run_id: int) -> str:
    from .procedures import engine

    return engine.execute(run_id)


@shared_task(name="gpus.tasks.reap_stale_runs")
def reap_stale_runs() -> list[int]:
    from .procedures import engine

    return engine.reap_stale()


@shared_task(name="gpus.tasks.prune_old_runs")
def prune_old_runs() -> int:
    from .models import ProcedureRun

    cutoff = timezone.now() - timezone.timedelta(days=settings.BRICK_RUN_RETENTION_DAYS)
    return ProcedureRun.prune(cutoff)
