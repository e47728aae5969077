"""The findings of stopped runs: a conversion or a Fix stopped on a node (failed, or waiting
to be resumed) and what it left behind, and whether the reaper runs (Celery beat and a
worker). Read from the product's records at page time (``reads="records"``), with the
cordoned state from the cluster view; handed to the view's findings by ``register()``, from
``GpusConfig.ready()``, so the view imports no procedure."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from gpus.models import RESUMABLE_STATUSES, ProcedureRun, ServiceBeat
from gpus.numbers import health as health_mod
from gpus.view import reading

from . import registry


def stopped_run_problems(nodes=None) -> list[health_mod.Problem]:
    """The checks that read the product's records (stopped runs), with the cordoned state
    from the view: two queries whatever the number of runs and nodes (of ``nodes`` only, when given)."""
    repairs = registry.repair_codes()  # a fix that neither cordons nor relabels: not the node's last conversion
    later = ProcedureRun.objects.filter(node=OuterRef("node"), created_at__gt=OuterRef("created_at")).exclude(
        procedure__in=repairs
    )
    stopped = (
        ProcedureRun.objects.filter(status__in=RESUMABLE_STATUSES)
        .exclude(node="")
        .exclude(procedure__in=repairs)
        .exclude(Exists(later))
    )
    if nodes is not None:
        stopped = stopped.filter(node__in=list(nodes))
    stopped = list(stopped)
    cordoned = reading.cordoned_among(r.node for r in stopped) if stopped else set()
    inputs = health_mod.HealthInputs(ledger=None, stopped_runs=[(r, r.node in cordoned) for r in stopped])
    if nodes is None:  # the cluster-wide findings: is the reaper (Celery beat and a worker) running?
        beats = dict(ServiceBeat.objects.values_list("name", "beat_at"))
        if health_mod.CONSOLE_UP not in beats:  # the first look: from now on a beat never recorded is due
            beats[health_mod.CONSOLE_UP] = timezone.now()
            try:
                with transaction.atomic():
                    rows = [ServiceBeat(name=health_mod.CONSOLE_UP, beat_at=beats[health_mod.CONSOLE_UP])]
                    ServiceBeat.objects.bulk_create(rows, ignore_conflicts=True)
            except DatabaseError:  # another page's first look at the same moment: it recorded it
                pass
        inputs.service_beats = beats
        inputs.service_late_after = timedelta(seconds=float(settings.BRICK_REAPER_STALE_SECONDS))
    return health_mod.problems(inputs, reads="records")


def register() -> None:
    """Hand the stopped runs' findings to the cluster view (from ``GpusConfig.ready()``)."""
    if stopped_run_problems not in reading.RUN_READERS:
        reading.RUN_READERS.append(stopped_run_problems)
