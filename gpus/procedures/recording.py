"""The record of a run: append-only, numbered events (StepRun rows).

- record(): one event, with the run's next seq, in its own transaction (only while the
  run is still claimed by the caller, when a claim token is given).
- StepRecorder: one attempt of one step, bound once (run, step, index, title, kubectl,
  claim token, attempt, start); each event then says only its state and what differs.
- record_plan(): at creation, the run-created event and one pending row per planned step.
- completed_steps(): what a resume skips.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from brickadmin.wording import Said, joined, record_of, said

from ..models import RUN_EVENT_KEY, ProcedureRun, RunStatus, StepRun, StepState
from .registry import find as find_procedure
from .registry import get as get_procedure

RUN_EVENT = RUN_EVENT_KEY  # "_run": step_key of run-level events (created, resumed, cancel requested, ...)


def remembered(run: ProcedureRun, key: str):
    """The latest fact a run recorded with ``Context.remember`` (None: never recorded)."""
    sent = (
        StepRun.objects.filter(run_id=run.pk, step_key=RUN_EVENT, sent__has_key=key)
        .order_by("-seq")
        .values_list("sent", flat=True)
        .first()
    )
    return (sent or {}).get(key)


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


def record(
    run_id: int,
    *,
    step_key: str,
    step_index: int = 0,
    title: str = "",
    state: str,
    attempt: int = 0,
    started_at=None,
    finished_at=None,
    kubectl: str = "",
    sent=None,
    intent=None,
    output: str = "",
    error: str = "",
    token: str | None = None,
    run_update: dict | None = None,
) -> StepRun:
    """Append one event, with the run's next seq, in its own transaction. With ``token``,
    only while the run is still claimed by us (else LostClaim). A title, output or error
    given as a message (``Said``) is kept as its code too, to be said in each reader's
    language; the text columns keep it as written now."""
    now = timezone.now()
    words = {k: record_of(v) for k, v in (("title", title), ("output", output), ("error", error))}
    words = {k: v for k, v in words.items() if v is not None} or None
    if run_update and "message" in run_update:  # the outcome's code with it (None: a text without one)
        run_update = {**run_update, "message_said": record_of(run_update["message"])}
        run_update["message"] = str(run_update["message"])
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
            run_id=run_id,
            seq=seq,
            step_key=step_key,
            step_index=step_index,
            title=str(title)[:300],
            state=state,
            attempt=attempt,
            started_at=started_at,
            finished_at=finished_at,
            kubectl=kubectl,
            sent=sent,
            intent=intent,
            output=str(output),
            error=str(error),
            said=words,
        )


class StepRecorder:
    """The events of one attempt of one step. Terminal events are finished now unless
    told otherwise; a skip takes no time (finished when started)."""

    def __init__(
        self,
        run_id: int,
        step_key: str,
        index: int,
        title: str,
        *,
        kubectl: str = "",
        token: str | None = None,
        attempt: int = 0,
        started_at=None,
    ):
        self.run_id, self.step_key, self.index, self.title = run_id, step_key, index, title
        self.kubectl, self.token, self.attempt, self.started_at = kubectl, token, attempt, started_at

    def _record(self, state, finished_at=None, **what) -> StepRun:
        return record(
            self.run_id,
            step_key=self.step_key,
            step_index=self.index,
            title=self.title,
            state=state,
            attempt=self.attempt,
            started_at=self.started_at,
            finished_at=finished_at,
            kubectl=self.kubectl,
            token=self.token,
            **what,
        )

    def running(self) -> StepRun:
        return self._record(StepState.RUNNING)

    def succeeded(self, *, sent=None, output: str = "") -> StepRun:
        return self._record(StepState.SUCCEEDED, timezone.now(), sent=sent, output=output)

    def failed(self, error: str | Said, *, sent=None, output: str | Said = "") -> StepRun:
        return self._record(StepState.FAILED, timezone.now(), sent=sent, output=output, error=error)

    def cancelled(self, output: str | Said, *, sent=None, finished_at=None) -> StepRun:
        return self._record(StepState.CANCELLED, finished_at or timezone.now(), sent=sent, output=output)

    def skipped(self, reason: str | Said) -> StepRun:
        return self._record(StepState.SKIPPED, self.started_at, output=reason)

    def request(self, request: dict, state: str, error: str = "") -> StepRun:
        """Write ahead: a request about to go to the API server ("intended"), or what came of
        it ("sent", "failed"). The step stays running."""
        what = said("request." + state, call=call_words(request))
        return self._record(StepState.RUNNING, intent={"request": request, "state": state}, output=what, error=error)


def call_words(request: dict):
    """A recorded write in words, said in each reader's language: "set labels on node gpu-1:
    brick.cloud/gpu.sharing=timeslicing" rather than label_node("gpu-1", {...}). A call without
    words of its own keeps its call form (describe)."""
    call, args = request.get("call"), list(request.get("args", []))
    node = args[0] if args and isinstance(args[0], str) else None
    if node is not None and call in ("cordon", "uncordon", "drain"):
        return said("call." + call, node=node)
    labels = args[1] if len(args) > 1 else request.get("kwargs", {}).get("labels")
    if node is not None and call == "label_node" and isinstance(labels, dict) and labels:
        parts = [
            said("call.label_removed", key=k) if v is None else said("call.label_set", key=k, value=v)
            for k, v in labels.items()
        ]
        return said("call.label_node", node=node, labels=joined(parts, ", "))
    return _object_words(call, args, request.get("kwargs") or {}) or describe(request)


def _object_words(call, args, kwargs):
    """The writes that name a Kubernetes object, in words: "apply ResourceQuota
    team-a/workspace-compute" rather than the manifest as JSON (kept under "Sent to the API
    server"). None when the recorded request does not have the shape its call takes."""
    first = args[0] if args else None

    def obj(kind, name, ns=""):
        return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"

    if call in ("apply", "apply_device_taint_rule") and isinstance(first, dict):
        meta = first.get("metadata") or {}
        kind = first.get("kind") or ("DeviceTaintRule" if call == "apply_device_taint_rule" else "")
        if kind and meta.get("name"):
            return said("call.apply", obj=obj(kind, meta["name"], meta.get("namespace") or ""))
    if call == "delete" and len(args) >= 3:
        return said("call.delete", obj=obj(args[1], args[2], args[3] if len(args) > 3 and args[3] else ""))
    if call == "delete_device_taint_rule" and isinstance(first, str):
        return said("call.delete", obj=obj("DeviceTaintRule", first))
    if call == "remove_node_status_resources" and isinstance(first, str) and len(args) > 1:
        return said("call.remove_resources", node=first, res=", ".join(str(r) for r in args[1] or []))
    if call == "rollout_restart_daemonset" and len(args) >= 2:
        return said("call.rollout_restart", obj=obj("DaemonSet", args[1], args[0]))
    if call == "create_namespace" and isinstance(first, str):
        return said("call.create", obj=obj("Namespace", first))
    if call == "create_resource_quota" and len(args) >= 2:
        return said("call.create", obj=obj("ResourceQuota", args[1], args[0]))
    if call == "create_priority_class" and isinstance(first, str):
        return said("call.create", obj=obj("PriorityClass", first))
    if call == "create_job" and len(args) >= 2 and isinstance(args[1], dict):
        return said("call.create", obj=obj("Job", (args[1].get("metadata") or {}).get("name", "?"), args[0]))
    return None


def describe(request: dict) -> str:
    """One line for a recorded request: cordon('gpu-1'), label_node('gpu-1', {...})."""
    args = ", ".join(json.dumps(a, ensure_ascii=False)[:200] for a in request.get("args", []))
    kwargs = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:200]}" for k, v in request.get("kwargs", {}).items())
    return f"{request.get('call')}({', '.join(x for x in (args, kwargs) if x)})"


class WriteAheadGateway:
    """The gateway a step sees: reads pass through; every write is recorded (intended)
    before it is sent and again once it returned (sent) or raised (failed)."""

    WRITES = frozenset(
        {
            "cordon",
            "uncordon",
            "label_node",
            "remove_node_status_resources",
            "drain",
            "apply",
            "delete",
            "rollout_restart_daemonset",
            "create_namespace",
            "create_resource_quota",
            "create_priority_class",
            "create_job",
            "apply_device_taint_rule",
            "delete_device_taint_rule",
        }
    )

    def __init__(self, gateway, recorder: StepRecorder):
        self._gateway = gateway
        self._recorder = recorder

    def __getattr__(self, name):
        attr = getattr(self._gateway, name)
        if name not in self.WRITES:
            return attr

        def write(*args, **kwargs):
            request = json.loads(json.dumps({"call": name, "args": list(args), "kwargs": kwargs}, default=str))
            self._recorder.request(request, "intended")
            try:
                result = attr(*args, **kwargs)
            except Exception as exc:
                self._recorder.request(request, "failed", error=str(exc)[:2000])
                raise
            self._recorder.request(request, "sent")
            return result

        return write


def record_plan(run: ProcedureRun):
    """At creation: the run-created event and one pending row per planned step (the plan as
    confirmed, with its kubectl equivalents, is part of the record)."""
    with translation.override(settings.LANGUAGE_CODE):
        _record_plan(run)


def _record_plan(run):
    record(
        run.pk,
        step_key=RUN_EVENT,
        title=said("run.created", who=run.actor_name),
        state=StepState.PENDING,
        output=said("run.parameters", p=params_text(run.params, run.procedure)) if run.params else "",
    )
    for i, (step, title, kubectl) in enumerate(plan(run.procedure, run.node, run.params)):
        record(run.pk, step_key=step.key, step_index=i, title=title, state=StepState.PENDING, kubectl=kubectl)


def params_text(params: dict, code: str = "") -> str:
    """A run's parameters as people read them ("Uncordon: no · GPU labels: a=b, c=d"), not as a
    Python dict: each named as its procedure names it (``code``), yes and no in the active language."""
    proc = find_procedure(code) if code else None

    def value(v):
        if isinstance(v, bool):
            return _("yes") if v else _("no")
        if isinstance(v, dict):
            return ", ".join(f"{k}={'-' if x is None else value(x)}" for k, x in v.items()) or "-"
        if isinstance(v, (list, tuple)):
            return ", ".join(value(x) for x in v) or "-"
        return "-" if v is None or v == "" else str(v)

    if proc is None:
        return " · ".join(f"{k}: {value(v)}" for k, v in (params or {}).items())
    asked = {p.name for p in proc.params if p.confirm == "ack"}  # shown once the plan asked for them
    # in the procedure's order (a database may keep a JSON object's keys in another): its form's
    # parameters, the others it names, anything else, then the confirmations
    order = [p.name for p in proc.params if not p.confirm] + list(proc.param_words)
    order += [k for k in (params or {}) if k not in order and k not in asked]
    order += [p.name for p in proc.params if p.confirm and p.name not in order]
    return " · ".join(
        f"{proc.param_name(k)}: {value(params[k])}"
        for k in order
        if k in (params or {}) and k not in proc.unnamed_params and not (k in asked and not params[k])
    )


def completed_steps(run_id) -> set[str]:
    """Step keys whose latest event is succeeded or skipped."""
    latest = {}
    for key, state in StepRun.objects.filter(run_id=run_id).order_by("seq").values_list("step_key", "state"):
        latest[key] = state
    return {k for k, s in latest.items() if s in (StepState.SUCCEEDED, StepState.SKIPPED)}
