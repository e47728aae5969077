"""Handing a run to the worker: the Celery task is named, not imported (the tasks module
imports the engine; nothing here does)."""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ..models import ProcedureRun, RunStatus, StepState
from . import notices
from .recording import RUN_EVENT, record

EXECUTE_RUN = "gpus.tasks.execute_run"  # gpus/tasks.py registers it under this name
log = logging.getLogger(__name__)


def enqueue(run_id: int):
    """Hand the run to the worker. When the queue cannot be reached the run is marked
    failed (nothing was changed on the cluster) so it can be resumed later."""
    try:
        # The registered task when this process has it (CELERY_TASK_ALWAYS_EAGER is then
        # honoured), else a message by name.
        current_app.signature(EXECUTE_RUN, args=(run_id,)).delay()
    except Exception as exc:  # kombu/redis raise many types
        log.exception("could not enqueue run %s", run_id)
        message = _(
            "Could not reach the task queue (%(err)s). Nothing was changed on the cluster; resume the run "
            "once the queue and a worker are up."
        ) % {"err": exc}
        with transaction.atomic():
            if ProcedureRun.objects.filter(pk=run_id, status=RunStatus.PENDING).update(
                status=RunStatus.FAILED, finished_at=timezone.now(), message=message
            ):
                record(run_id, step_key=RUN_EVENT, title=_("Not queued"), state=StepState.FAILED, error=message)
                transaction.on_commit(lambda: notices.run_ended(run_id))
