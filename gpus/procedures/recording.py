"""The record of a run: append-only, numbered events (StepRun rows).

- record(): one event, with the run's next seq, in its own transaction (only while the
  run is still claimed by the caller, when a claim token is given).
- StepRecorder: one attempt of one step, bound once (run, step, index, title, kubectl,
  claim token, attempt, start); each event then says only its state and what differs.
- record_plan(): at creation, the run-created event and one pending row per planned step.
- completed_steps(): what a resume skips.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from ..models import ProcedureRun, RunStatus, StepRun, StepState
from .registry import get as get_procedure

RUN_EVENT = "_run"  # step_key of run-level events (created, resumed, cancel requested, ...)


class LostClaim(Exception):
    """The run is no longer ours (reaped as interrupted while we were slow)."""


@dataclass
class PlanTarget:
    """What step titles and kubectl lines need, before a run exists."""

    node: str
    params: dict = field(default_factory=dict)
    pk: int | None = None
    actor_name: str = ""


def plan(code: str, node: str, params: dict):
    """[(step, title, kubectl)] for a procedure on a node."""
    target = PlanTarget(node=node, params=params)
    return [(s, s.title(target), s.kubectl(target)) for s in get_procedure(code).steps(params)]


def record(run_id: int, *, step_key: str, step_index: int = 0, title: str = "", state: str,
           attempt: int = 0, started_at=None, finished_at=None, kubectl: str = "", sent=None,
           output: str = "", error: str = "", token: str | None = None, run_update: dict | None = None) -> StepRun:
    """Append one event, with the run's next seq, in its own transaction. With ``token``,
    only while the run is still claimed by us (else LostClaim)."""
    now = timezone.now()
    with transaction.atomic():
        qs = ProcedureRun.objects.filter(pk=run_id)
        if token is not None:
            qs = qs.filter(claim_token=token, status=RunStatus.RUNNING)
        updates = {"last_seq": F("last_seq") + 1, **(run_update or {})}
        if token is not None:
            updates["heartbeat_at"] = now
        if step_key != RUN_EVENT:
            updates["current_step"] = step_key
        if qs.update(**updates) == 0:
            raise LostClaim(run_id)
        seq = ProcedureRun.objects.filter(pk=run_id).values_list("last_seq", flat=True).get()
        return StepRun.objects.create(
            run_id=run_id, seq=seq, step_key=step_key, step_index=step_index, title=str(title)[:300], state=state,
            attempt=attempt, started_at=started_at, finished_at=finished_at, kubectl=kubectl, sent=sent,
            output=output, error=error)


class StepRecorder:
    """The events of one attempt of one step. Terminal events are finished now unless
    told otherwise; a skip takes no time (finished when started)."""

    def __init__(self, run_id: int, step_key: str, index: int, title: str, *, kubectl: str = "",
                 token: str | None = None, attempt: int = 0, started_at=None):
        self.run_id, self.step_key, self.index, self.title = run_id, step_key, index, title
        self.kubectl, self.token, self.attempt, self.started_at = kubectl, token, attempt, started_at

    def _record(self, state, finished_at=None, **what) -> StepRun:
        return record(self.run_id, step_key=self.step_key, step_index=self.index, title=self.title, state=state,
                      attempt=self.attempt, started_at=self.started_at, finished_at=finished_at,
                      kubectl=self.kubectl, token=self.token, **what)

    def running(self) -> StepRun:
        return self._record(StepState.RUNNING)

    def succeeded(self, *, sent=None, output: str = "") -> StepRun:
        return self._record(StepState.SUCCEEDED, timezone.now(), sent=sent, output=output)

    def failed(self, error: str, *, sent=None, output: str = "") -> StepRun:
        return self._record(StepState.FAILED, timezone.now(), sent=sent, output=output, error=error)

    def cancelled(self, output: str, *, sent=None, finished_at=None) -> StepRun:
        return self._record(StepState.CANCELLED, finished_at or timezone.now(), sent=sent, output=output)

    def skipped(self, reason: str) -> StepRun:
        return self._record(StepState.SKIPPED, self.started_at, output=reason)


def record_plan(run: ProcedureRun):
    """At creation: the run-created event and one pending row per planned step (the plan as
    confirmed, with its kubectl equivalents, is part of the record)."""
    with translation.override(settings.LANGUAGE_CODE):
        _record_plan(run)


def _record_plan(run):
    record(run.pk, step_key=RUN_EVENT, title=_("Run created by %(who)s") % {"who": run.actor_name},
           state=StepState.PENDING, output=_("parameters: %(p)s") % {"p": run.params})
    for i, (step, title, kubectl) in enumerate(plan(run.procedure, run.node, run.params)):
        record(run.pk, step_key=step.key, step_index=i, title=title, state=StepState.PENDING, kubectl=kubectl)


def completed_steps(run_id) -> set[str]:
    """Step keys whose latest event is succeeded or skipped."""
    latest = {}
    for key, state in StepRun.objects.filter(run_id=run_id).order_by("seq").values_list("step_key", "state"):
        latest[key] = state
    return {k for k, s in latest.items() if s in (StepState.SUCCEEDED, StepState.SKIPPED)}
