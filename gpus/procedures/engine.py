"""The engine: claims a run, executes its steps in order, records every state change.

- Claim: a conditional UPDATE (pending -> running, with a fresh claim token); a
  redelivered task finds nothing to claim and does nothing.
- Every event is its own transaction (no transaction around the run), numbered with the
  run's next seq, so pages see progress as it happens and catch up from "after seq N".
- Cancel is checked between steps (and while waiting); transient API errors are retried
  with exponential backoff, each attempt recorded; the first failed verification stops
  the run with what to fix. Resume skips the steps that already succeeded.
- A heartbeat thread keeps ``heartbeat_at`` fresh; the reaper (reaper.py) marks runs whose
  worker died as interrupted.
- A database that goes away mid-run (restarted, failed over) is waited for; the step it
  interrupted is recorded as failed with the outage and run again (steps are idempotent).

Events are written through recording.py (a StepRecorder per step attempt); nothing here
enqueues (queue.py) and nothing here imports the Celery tasks (tasks.py imports this).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from django.conf import settings
from django.db import connection
from django.utils import timezone, translation
from django.utils.translation import gettext_noop

from brickadmin.cluster import ClusterError, TransientClusterError
from brickadmin.cluster.deviceplugin import PLUGIN_NAMESPACE
from brickadmin.cluster.gateway import get_gateway
from brickadmin.database import DATABASE_GONE, wait_for_database
from brickadmin.wording import StepRef, joined, said
from gpus.view.live import LiveRead

from ..models import ProcedureRun, RunStatus, StepRun, StepState
from . import notices
from .base import Check, NothingToDo, StepFailed, knob
from .reaper import reap_stale, requeue_orphans, take_over
from .recording import (
    RUN_EVENT,
    LostClaim,
    PlanTarget,
    StepRecorder,
    WriteAheadGateway,
    completed_steps,
    plan,
    record,
    record_plan,
)
from .registry import get as get_procedure

# Callers plan, record and reap through the engine too; those live in recording.py and reaper.py.
__all__ = [
    "FINISH_TITLES",
    "RUN_EVENT",
    "Cancelled",
    "Context",
    "Heartbeat",
    "LostClaim",
    "PlanTarget",
    "StepRecorder",
    "WriteAheadGateway",
    "claim",
    "completed_steps",
    "execute",
    "plan",
    "reap_stale",
    "record",
    "record_plan",
    "requeue_orphans",
    "take_over",
]

log = logging.getLogger(__name__)


class Cancelled(Exception):
    def __init__(self, recorded=False):
        super().__init__("cancelled")
        self.recorded = recorded


# --- heartbeat ------------------------------------------------------------------


class Heartbeat(threading.Thread):
    def __init__(self, run_id, token, interval):
        super().__init__(daemon=True, name=f"heartbeat-{run_id}")
        self.run_id, self.token, self.interval = run_id, token, interval
        self.stop = threading.Event()

    def run(self):
        try:
            while not self.stop.wait(self.interval):
                try:
                    ProcedureRun.objects.filter(
                        pk=self.run_id, claim_token=self.token, status=RunStatus.RUNNING
                    ).update(heartbeat_at=timezone.now())
                except Exception:  # a busy database must not kill the heartbeat
                    log.exception("heartbeat failed for run %s", self.run_id)
                    connection.close()  # a restarted database: the next beat connects again
        finally:
            connection.close()


# --- the context steps see ------------------------------------------------------


class Context:
    def __init__(self, run: ProcedureRun, gateway, token: str):
        self.run = run
        self.cluster = gateway  # the gateway itself; steps use self.gateway, which records their writes
        self.gateway = gateway
        self.token = token
        self.node = run.node
        self.params = run.params or {}
        self.drain_timeout = knob("BRICK_PROCEDURE_DRAIN_TIMEOUT", 60 if gateway.name != "twin" else 0)

    # Titles/kubectl take a run-like object; the context is one.
    @property
    def pk(self):
        return self.run.pk

    @property
    def actor_name(self):
        return self.run.actor_name

    def ledger(self):
        """The cluster's ledger now (the decisions' live read: gpus/live.py)."""
        return LiveRead(self.gateway).ledger()

    def replicas(self) -> int:
        from gpus.numbers import ledger as ledger_mod

        return ledger_mod.brick_replicas(self.gateway.list_configmaps(namespace=PLUGIN_NAMESPACE))

    def finished_at(self, step_key):
        return (
            StepRun.objects.filter(run_id=self.run.pk, step_key=step_key, state=StepState.SUCCEEDED)
            .order_by("-seq")
            .values_list("finished_at", flat=True)
            .first()
        )

    def checklist_confirmed_by(self) -> str:
        """Who confirmed the manual checklist on the run page or terminal, if anyone."""
        sent = (
            StepRun.objects.filter(run_id=self.run.pk, step_key=RUN_EVENT, sent__checklist_confirmed=True)
            .order_by("-seq")
            .values_list("sent", flat=True)
            .first()
        )
        return (sent or {}).get("by", "")

    def sent_before(self, step_key) -> bool:
        """Whether this run already sent something for this step (an earlier attempt)."""
        return StepRun.objects.filter(run_id=self.run.pk, step_key=step_key, sent__isnull=False).exists()

    def remember(self, key: str, value, title: str):
        """Record a fact of this run for later (a run event whose ``sent`` is {key: value});
        the latest one is what ``recording.remembered`` reads."""
        record(
            self.run.pk, step_key=RUN_EVENT, title=title, state=StepState.SUCCEEDED, token=self.token, sent={key: value}
        )

    def cancel_requested(self) -> bool:
        return ProcedureRun.objects.filter(pk=self.run.pk, cancel_requested=True).exists()

    def sleep(self, seconds):
        """Sleep, waking early to honour a cancel."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.cancel_requested():
                raise Cancelled()
            time.sleep(min(left, 0.5))


def _worker_name():
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(run_id: int) -> str | None:
    token = str(uuid.uuid4())
    now = timezone.now()
    pending = ProcedureRun.objects.filter(pk=run_id, status=RunStatus.PENDING)
    n = pending.update(
        status=RunStatus.RUNNING, claim_token=token, started_at=now, heartbeat_at=now, worker=_worker_name()
    )
    if not n:
        # A redelivered message for a run whose worker died: take it over now rather than
        # wait for the reaper (a live worker's run has a fresh heartbeat and is left alone).
        stale = now - timezone.timedelta(seconds=knob("BRICK_RUN_HEARTBEAT_STALE_SECONDS", 10))
        if take_over(run_id, stale):
            n = pending.update(
                status=RunStatus.RUNNING, claim_token=token, started_at=now, heartbeat_at=now, worker=_worker_name()
            )
    return token if n else None


def execute(run_id: int, gateway=None) -> str:
    """Run (or continue) a run. Returns its final status, or 'not-claimed'."""
    with translation.override(settings.LANGUAGE_CODE):  # one language for the audit record
        return _claim_and_execute(run_id, gateway)


def _claim_and_execute(run_id, gateway):
    token = claim(run_id)
    if token is None:
        return "not-claimed"
    run = ProcedureRun.objects.get(pk=run_id)
    beat = Heartbeat(run_id, token, max(0.5, knob("BRICK_RUN_HEARTBEAT_STALE_SECONDS", 10) / 4))
    if not connection.in_atomic_block:  # (inside a test's transaction another connection would block)
        beat.start()
    try:
        return _execute_through_outages(run, token, gateway or get_gateway())
    except LostClaim:
        log.warning("run %s was taken away (reaped) while running", run_id)
        return "lost"
    finally:
        beat.stop.set()
        if beat.is_alive():
            beat.join(timeout=5)


def _execute_through_outages(run, token, gateway) -> str:
    """_execute, continued after the database came back when it went away mid-run; after
    BRICK_RUN_DATABASE_WAIT_SECONDS without it the error is raised (the task fails; the
    reaper takes the run over once the database answers). An error that comes back every
    time (a deadlock, say, not an outage) is raised after a few rounds."""
    outages = 0
    while True:
        try:
            return _execute(run, token, gateway)
        except DATABASE_GONE as exc:
            outages += 1
            log.warning("run %s: the database went away (%s); waiting for it", run.pk, exc)
            began = time.monotonic()
            if outages > 10 or not wait_for_database(knob("BRICK_RUN_DATABASE_WAIT_SECONDS", 300)):
                raise
            _record_outage(run, token, exc, time.monotonic() - began)


def _record_outage(run, token, exc, seconds):
    """The step the outage interrupted is closed as failed (as the reaper closes a dead
    worker's step); the engine then runs it again. LostClaim when the reaper took the run
    over meanwhile (its heartbeat went stale during a long outage)."""
    message = said("run.database_outage", s=round(seconds, 1), err=str(exc).strip()[:200] or type(exc).__name__)
    in_step = StepRun.objects.filter(run_id=run.pk).exclude(step_key=RUN_EVENT).order_by("-seq").first()
    if in_step is not None and in_step.state == StepState.RUNNING:
        StepRecorder(
            run.pk,
            in_step.step_key,
            in_step.step_index,
            in_step.title,
            kubectl=in_step.kubectl,
            token=token,
            attempt=in_step.attempt,
            started_at=in_step.started_at,
        ).failed(message)
    else:
        record(
            run.pk,
            step_key=RUN_EVENT,
            title=said("run.database_unavailable"),
            state=StepState.RUNNING,
            token=token,
            output=message,
        )


FINISH_TITLES = {
    RunStatus.SUCCEEDED: gettext_noop("Run succeeded"),
    RunStatus.FAILED: gettext_noop("Run failed"),
    RunStatus.CANCELLED: gettext_noop("Run cancelled"),
}
FINISH_CODES = {
    RunStatus.SUCCEEDED: "run.succeeded",
    RunStatus.FAILED: "run.failed",
    RunStatus.CANCELLED: "run.cancelled",
}


def _finish(run, token, status, message, title=""):
    """The run's final status, with its own event (so pages polling "after seq N" see it)."""
    state = {RunStatus.SUCCEEDED: StepState.SUCCEEDED, RunStatus.FAILED: StepState.FAILED}.get(
        status, StepState.CANCELLED
    )
    record(
        run.pk,
        step_key=RUN_EVENT,
        title=title or said(FINISH_CODES[status]),
        state=state,
        token=token,
        output=message if status == RunStatus.SUCCEEDED else "",
        error="" if status == RunStatus.SUCCEEDED else message,
        run_update={"status": status, "finished_at": timezone.now(), "message": message},
    )
    notices.run_ended(run.pk)
    return status


def _execute(run, token, gateway) -> str:
    proc = get_procedure(run.procedure)
    ctx = Context(run, gateway, token)
    done = completed_steps(run.pk)
    record(
        run.pk,
        step_key=RUN_EVENT,
        title=said("run.claimed", w=_worker_name()),
        state=StepState.RUNNING,
        token=token,
        output=said("run.resuming", n=len(done)) if done else "",
    )
    steps = proc.steps(run.params or {})
    for index, step in enumerate(steps):
        if step.key in done:
            continue
        title, kubectl = step.title(ctx), step.kubectl(ctx)
        if ctx.cancel_requested():
            return _cancel(run, token, index, step, title, kubectl)
        if step.skip_reason:
            StepRecorder(run.pk, step.key, index, title, token=token, started_at=timezone.now()).skipped(
                step.skip_reason
            )
            continue
        try:
            ok, message = _run_step(ctx, index, step, title, kubectl)
        except Cancelled as exc:
            if exc.recorded:
                return _finish(
                    run, token, RunStatus.CANCELLED, _cancel_message(run, StepRef(step.key, title), during=True)
                )
            return _cancel(run, token, index, step, title, kubectl)
        except NothingToDo as exc:
            return _nothing_to_do(ctx, token, steps[index + 1 :], index + 1, exc.reason)
        if not ok:
            return _finish(run, token, RunStatus.FAILED, message)
    summary = said("run.all_done_after_precheck", n=max(len(steps) - 1, 0))  # step 0 is the pre-check
    return _finish(run, token, RunStatus.SUCCEEDED, summary)


def _nothing_to_do(ctx, token, rest, first_index, reason):
    """A fix whose finding has gone: the steps left are skipped, nothing is sent, and the
    run ends as "nothing to do" (succeeded: the cluster is as the fix would leave it)."""
    for offset, step in enumerate(rest):
        StepRecorder(
            ctx.run.pk,
            step.key,
            first_index + offset,
            step.title(ctx),
            kubectl=step.kubectl(ctx),
            token=token,
            started_at=timezone.now(),
        ).skipped(said("step.nothing_sent"))
    return _finish(
        ctx.run,
        token,
        RunStatus.SUCCEEDED,
        said("run.nothing_to_do_why", why=reason),
        title=said("run.nothing_to_do"),
    )


def _cancel(run, token, index, step, title, kubectl):
    now = timezone.now()
    StepRecorder(run.pk, step.key, index, title, kubectl=kubectl, token=token, started_at=now).cancelled(
        said("step.cancelled_before"), finished_at=now
    )
    return _finish(run, token, RunStatus.CANCELLED, _cancel_message(run, StepRef(step.key, title)))


def left_cordoned(run_id) -> bool:
    """Whether the run asked the API server to cordon its node and not to uncordon it after
    (its write-ahead records): only then may a stopped run have left the node cordoned."""
    calls = StepRun.objects.filter(
        run_id=run_id, intent__request__call__in=("cordon", "uncordon"), intent__state__in=("intended", "sent")
    ).order_by("seq")
    last = [(e.intent or {}).get("request", {}).get("call") for e in calls]
    return bool(last) and last[-1] == "cordon"


def _cancel_message(run, title, during=False):
    where = said("run.left_cordoned", node=run.node) if run.node and left_cordoned(run.pk) else ""
    return said("run.cancelled_during" if during else "run.cancelled_before", title=title, where=where)


def _run_step(ctx: Context, index: int, step, title: str, kubectl: str) -> tuple[bool, str]:
    # 1, 2, 4, 8, then every 10 s: an API server away for up to 45 s (restarted, say) is waited for.
    max_attempts = int(knob("BRICK_PROCEDURE_MAX_ATTEMPTS", 8))
    backoff = knob("BRICK_PROCEDURE_RETRY_BACKOFF", 1.0)
    max_wait = knob("BRICK_PROCEDURE_RETRY_MAX_WAIT", 10.0)
    pause = knob("BRICK_PROCEDURE_STEP_PAUSE", 0.0)
    timeout = knob(step.wait_knob, 0 if ctx.gateway.name == "twin" else step.wait_default) if step.waits else 0
    attempt = 0
    while True:
        attempt += 1
        rec = StepRecorder(
            ctx.run.pk,
            step.key,
            index,
            title,
            kubectl=kubectl,
            token=ctx.token,
            attempt=attempt,
            started_at=timezone.now(),
        )
        rec.running()
        ctx.gateway = WriteAheadGateway(ctx.cluster, rec)  # every write of this attempt is recorded first
        outcome = None
        try:
            outcome = step.ensure(ctx)
            if pause:
                ctx.sleep(pause)  # slow motion for demos/benchmarks; a kill here tests idempotency
            check = step.verify(ctx)
            deadline = time.monotonic() + timeout
            while not check.ok and time.monotonic() < deadline:
                ctx.sleep(min(2.0, max(0.1, timeout / 30)))
                if step.reensure_on_poll:
                    more = step.ensure(ctx)
                    if more.changed:
                        outcome.sent = [outcome.sent, more.sent] if outcome.sent else more.sent
                        outcome.output = joined([outcome.output, more.output])
                check = step.verify(ctx)
        except TransientClusterError as exc:
            if attempt < max_attempts:
                delay = min(backoff * (2 ** (attempt - 1)), max_wait * backoff)
                rec.failed(said("step.transient", err=str(exc), d=delay, a=attempt, m=max_attempts))
                ctx.sleep(delay)
                continue
            return _fail(
                rec,
                Check(
                    False,
                    str(exc),
                    said("step.kept_failing", err=str(exc), m=max_attempts),
                ),
            )
        except StepFailed as exc:
            return _fail(rec, Check(False, exc.detail, exc.fix))
        except NothingToDo as exc:  # the finding a fix was started for has gone: record why, send nothing
            rec.succeeded(output=said("run.nothing_to_do_why", why=exc.reason))
            raise
        except ClusterError as exc:
            return _fail(
                rec,
                Check(
                    False,
                    str(exc),
                    said("step.refused", err=str(exc)),
                ),
            )
        except Cancelled:
            # The cancel arrived while this step waited (pause, polling or backoff).
            rec.cancelled(
                said("step.cancelled_waiting_sent") if outcome and outcome.changed else said("step.cancelled_waiting"),
                sent=outcome.sent if outcome else None,
            )
            raise Cancelled(recorded=True) from None
        except (LostClaim, *DATABASE_GONE):  # the database went away: waited for above, not a step failure
            raise
        except Exception as exc:  # a bug or an unexpected answer: record it rather than vanish
            log.exception("step %s of run %s crashed", step.key, ctx.run.pk)
            return _fail(
                rec,
                Check(
                    False,
                    repr(exc),
                    said("step.unexpected", err=repr(exc)[:300]),
                ),
            )
        if not check.ok:
            return _fail(rec, check, sent=outcome.sent, output=outcome.output)
        rec.succeeded(sent=outcome.sent, output=joined([outcome.output, check.detail]))
        return True, ""


def _fail(rec: StepRecorder, check: Check, *, sent=None, output: str = ""):
    error = check.fix or check.detail
    rec.failed(error, sent=sent, output=joined([output, check.detail]))
    return False, said("run.stopped_at", title=StepRef(rec.step_key, rec.title), error=error)
