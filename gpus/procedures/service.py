"""Starting, resuming and cancelling runs: what the wizard views and the terminal share."""

from __future__ import annotations

import functools

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone, translation
from django.utils.html import format_html
from django.utils.translation import gettext as _

from brickadmin.wording import said
from gpus.view.live import LiveRead

from ..models import ACTIVE_STATUSES, RESUMABLE_STATUSES, ProcedureLock, ProcedureRun, RunStatus, StepRun, StepState
from .base import CLUSTER_LOCK
from .catalogue.common import NODE_BEFORE, node_state
from .catalogue.dra import CREATED_RULES
from .queue import enqueue
from .recording import RUN_EVENT, record, record_plan, remembered
from .registry import all_procedures, find, repair_codes
from .registry import get as get_procedure


def refusal_message(exc: RunRefused):
    """What the page says when a run is refused: why, and a link to the run in the way."""
    if exc.active is None:
        return exc.message
    return format_html(
        '{} <a href="{}">{}</a>',
        exc.message,
        exc.active.get_absolute_url(),
        _("Open run #%(id)d") % {"id": exc.active.pk},
    )


class RunRefused(Exception):
    """A run cannot start; ``active`` is the run in the way, when there is one."""

    def __init__(self, message, active: ProcedureRun | None = None):
        super().__init__(message)
        self.message = message
        self.active = active


def in_record_language(fn):
    """Audit rows are written in the site's language, whoever clicks (RunRefused messages
    too: callers show them as they are)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with translation.override(settings.LANGUAGE_CODE):
            return fn(*args, **kwargs)

    return wrapper


def active_run_for(lock_key: str) -> ProcedureRun | None:
    return ProcedureRun.objects.filter(lock_key=lock_key, status__in=ACTIVE_STATUSES).first()


def _conflicting(code: str, lock_key: str) -> ProcedureRun | None:
    """A cluster-wide procedure (C changes every time-slicing node) does not run beside
    any other run; node runs do not run beside it."""
    if get_procedure(code).cluster_wide:
        return ProcedureRun.objects.filter(status__in=ACTIVE_STATUSES).exclude(lock_key=lock_key).first()
    return active_run_for(CLUSTER_LOCK)


@in_record_language
def start_run(
    code: str, node: str, params: dict, *, actor=None, actor_name: str = "", source: str = "web", dispatch=True
) -> ProcedureRun:
    """Create the run row and its planned steps, then enqueue the task after commit.
    Raises RunRefused when another run holds the node (or the cluster for C)."""
    proc = get_procedure(code)
    node = node if proc.needs_node else ""
    lock_key = proc.lock_key(node)
    name = actor_name or (actor.get_username() if actor else "")
    try:
        with transaction.atomic():
            ProcedureLock.acquire()  # the check and the insert are one step (C against node runs)
            other = _conflicting(code, lock_key)
            if other is not None:
                raise RunRefused(
                    _("Run #%(id)d (%(p)s on %(t)s) is in progress; wait for it to finish.")
                    % {"id": other.pk, "p": other.procedure, "t": other.target},
                    other,
                )
            run = ProcedureRun.objects.create(
                procedure=code,
                node=node,
                lock_key=lock_key,
                params=params,
                actor=actor,
                actor_name=name or "?",
                source=source,
            )
            record_plan(run)
            if dispatch:
                transaction.on_commit(lambda: enqueue(run.pk))
    except IntegrityError:
        other = active_run_for(lock_key)
        raise RunRefused(
            _("Another run is already in progress on %(t)s.") % {"t": node or _("the time-slicing nodes")}, other
        ) from None
    return run


@in_record_language
def resume_run(run: ProcedureRun, *, actor=None, actor_name: str = "", dispatch=True) -> ProcedureRun:
    """Make a failed, interrupted or cancelled run pending again; the engine skips the
    steps that already succeeded."""
    return _resume(run, actor=actor, actor_name=actor_name, dispatch=dispatch)


def _resume(run: ProcedureRun, *, actor=None, actor_name: str = "", dispatch=True, before=None) -> ProcedureRun:
    """``before(run)`` records what goes with this resume (the checklist confirmation),
    in the same transaction and only once every check has passed."""
    name = actor_name or (actor.get_username() if actor else "?")
    if run.status not in RESUMABLE_STATUSES:
        raise RunRefused(
            _("Only a failed, interrupted or cancelled run can be resumed (this one is %(s)s).")
            % {"s": run.get_status_display()}
        )
    try:
        with transaction.atomic():
            ProcedureLock.acquire()  # the check and the update are one step (C against node runs)
            other = _conflicting(run.procedure, run.lock_key)
            if other is not None and other.pk != run.pk:
                raise RunRefused(_("Run #%(id)d is in progress on %(t)s.") % {"id": other.pk, "t": other.target}, other)
            n = ProcedureRun.objects.filter(pk=run.pk, status__in=RESUMABLE_STATUSES).update(
                status=RunStatus.PENDING,
                cancel_requested=False,
                finished_at=None,
                claim_token="",
                message="",
                message_said=None,
                resumed_count=F("resumed_count") + 1,
                heartbeat_at=timezone.now(),
            )
            if not n:
                raise RunRefused(_("The run changed meanwhile; reload the page."))
            if before is not None:
                before(run)
            record(run.pk, step_key=RUN_EVENT, title=said("run.resumed_by", who=name), state=StepState.PENDING)
            if dispatch:
                transaction.on_commit(lambda: enqueue(run.pk))
    except IntegrityError:
        raise RunRefused(
            _("Another run is already in progress on %(t)s.") % {"t": run.target}, active_run_for(run.lock_key)
        ) from None
    run.refresh_from_db()
    return run


@in_record_language
def cancel_run(run: ProcedureRun, *, actor=None, actor_name: str = "") -> ProcedureRun:
    """A pending run is cancelled at once; a running one stops before its next step."""
    name = actor_name or (actor.get_username() if actor else "?")
    cancelled_pending = said("run.cancelled_pending", who=name)
    with transaction.atomic():
        n = ProcedureRun.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED,
            cancel_requested=True,
            finished_at=timezone.now(),
            message=str(cancelled_pending),
            message_said=cancelled_pending.as_record(),
        )
        if not n:  # only the request that sets the flag records it: ten clicks, one row
            n = ProcedureRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, cancel_requested=False).update(
                cancel_requested=True
            )
        if n:
            record(
                run.pk,
                step_key=RUN_EVENT,
                title=said("run.cancel_requested", who=name),
                state=StepState.CANCELLED,
            )
    run.refresh_from_db()
    return run


@in_record_language
def confirm_checklist(run: ProcedureRun, *, actor=None, actor_name: str = "", dispatch=True) -> ProcedureRun:
    """Procedure D's manual step: the admin confirms the node build checklist (recorded
    with who and when), and the run resumes from that step."""
    name = actor_name or (actor.get_username() if actor else "?")
    if not get_procedure(run.procedure).checklist or run.status not in RESUMABLE_STATUSES:
        raise RunRefused(_("Only a stopped procedure D run waits for the checklist."))

    def record_confirmation(run):
        record(
            run.pk,
            step_key=RUN_EVENT,
            title=said("run.checklist_confirmed", who=name),
            state=StepState.SUCCEEDED,
            sent={"checklist_confirmed": True, "by": name},
            output=said("run.checklist_installed", node=run.node),
        )

    return _resume(run, actor=actor, actor_name=actor_name, dispatch=dispatch, before=record_confirmation)


# --- Restore the node ---------------------------------------------------------------


def restorer():
    """The procedure that restores a node (None if none is registered)."""
    return next((p for p in all_procedures() if p.restores), None)


def restore_params(run: ProcedureRun, gateway=None, *, seen: dict | None = None) -> dict | None:
    """The parameters of a "Restore the node" run for this run, or None when it is not
    offered: only for a stopped (failed, cancelled, interrupted) run of a restorable node
    procedure, the latest on its node, whose node is left cordoned or relabelled.

    The node is read live through ``gateway`` (a gateway or a LiveRead: a run decides on it),
    or taken from ``seen`` (the node as the cluster view shows it: the run's page, which only offers)."""
    proc = find(run.procedure)
    if (
        proc is None
        or not proc.restorable
        or restorer() is None
        or not run.node
        or run.status not in RESUMABLE_STATUSES
    ):
        return None
    later = (
        ProcedureRun.objects.filter(lock_key=run.lock_key, pk__gt=run.pk)
        .exclude(params__restore_of=run.pk)
        .exclude(procedure__in=repair_codes())
    )
    if later.exists():
        return None
    before = remembered(run, NODE_BEFORE)
    now = node_state(
        seen if seen is not None else LiveRead.of(gateway).get_node(run.node), tuple((before or {}).get("labels") or ())
    )
    if before is None:  # stopped before it recorded the node: only undo its own cordon
        labels = {}
        cordoned_by_run = StepRun.objects.filter(run_id=run.pk, intent__request__call="cordon").exists()
        uncordon = cordoned_by_run
    else:
        labels = before.get("labels") or {}
        uncordon = not before.get("unschedulable")
    relabelled = any(now["labels"].get(k) != v for k, v in labels.items())
    rules = created_rules(run, gateway if seen is None else None)
    if not relabelled and not (uncordon and now["unschedulable"]) and not rules:
        return None
    params = {"restore_of": run.pk, "labels": labels, "uncordon": uncordon}
    if rules:
        params["delete_rules"] = rules
    return params


def created_rules(run: ProcedureRun, gateway=None) -> list[str]:
    """The DeviceTaintRules a run created (recorded when it sent them): with a gateway, those
    still there."""
    names = remembered(run, CREATED_RULES) or []
    if not names or gateway is None:
        return list(names)
    there = {r["metadata"]["name"] for r in LiveRead.of(gateway).gateway.list_device_taint_rules()}
    return [n for n in names if n in there]


def fix_params(proc, node: str, params: dict, gateway) -> dict:
    """The parameters of a Fix run, completed from the records where the finding gives only a
    reference: "Restore the node" is given the stopped run, and puts back what that run
    recorded (read live, as on the run's page)."""
    if proc.restores and params.get("restore_of"):
        run = ProcedureRun.objects.filter(pk=params["restore_of"], node=node).first()
        full = restore_params(run, gateway) if run is not None else None
        return full or {"restore_of": params["restore_of"], "labels": {}, "uncordon": False}
    return params


@in_record_language
def start_restore(
    run: ProcedureRun, gateway, *, actor=None, actor_name: str = "", source: str = "web", dispatch=True
) -> ProcedureRun:
    """Start "Restore the node" for a stopped run (RunRefused when it is not offered)."""
    params = restore_params(run, gateway)
    if params is None:
        raise RunRefused(
            _(
                "Nothing to restore: run #%(id)d's node is not left cordoned or relabelled by it, or a "
                "later run changed the node."
            )
            % {"id": run.pk}
        )
    return start_run(
        restorer().code, run.node, params, actor=actor, actor_name=actor_name, source=source, dispatch=dispatch
    )
