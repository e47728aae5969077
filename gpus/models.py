"""The audit record of conversion procedures, and the managed device-plugin manifest.

ProcedureRun: one wizard run (procedure A-D on a node). Its status, heartbeat and cancel
flag change while the engine works; nothing else edits it, and nothing deletes it except
the retention prune (finished runs only).

StepRun: append-only, numbered events. Every state change of a step is a new row with the
next ``seq`` of its run, so a page can catch up with "after seq N" and the record is the
whole story (each attempt, what was sent, the output, the error). Rows are never updated
or deleted by the application (only the retention prune removes old finished runs).

ManifestVersion: versioned content of brick-nvidia-device-plugin.yaml.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from brickadmin import wording
from brickadmin.audit import AppendOnlyModel, AppendOnlyViolation
from brickadmin.choices import TaggedChoices

AuditImmutable = AppendOnlyViolation  # the name the procedure code and tests have used


def procedure_choices():
    """The registered procedures (gpus/procedures/registry.py), asked when needed: they are
    registered when the apps are ready, after the models are loaded."""
    from .procedures import registry

    return registry.choices()


class RunStatus(TaggedChoices):
    PENDING = "pending", "", _("Pending")
    RUNNING = "running", "warn", _("Running")
    SUCCEEDED = "succeeded", "ok", _("Succeeded")
    FAILED = "failed", "bad", _("Failed")
    CANCELLED = "cancelled", "warn", _("Cancelled")
    INTERRUPTED = "interrupted", "bad", _("Interrupted")


ACTIVE_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)
FINISHED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED)
RESUMABLE_STATUSES = (RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.CANCELLED)


class StepState(TaggedChoices):
    PENDING = "pending", "", _("Pending")
    RUNNING = "running", "warn", _("Running")
    SUCCEEDED = "succeeded", "ok", _("Succeeded")
    FAILED = "failed", "bad", _("Failed")
    SKIPPED = "skipped", "", _("Skipped")
    CANCELLED = "cancelled", "warn", _("Cancelled")


class RunQuerySet(models.QuerySet):
    def delete(self):
        raise AppendOnlyViolation("Procedure runs are an audit record; use ProcedureRun.prune()")

    def active(self):
        return self.filter(status__in=ACTIVE_STATUSES)


class ProcedureRun(models.Model):
    procedure = models.CharField(max_length=1, choices=procedure_choices)
    node = models.CharField(
        max_length=253, blank=True, default="", help_text=_("Target node; empty for cluster-wide procedures (C).")
    )
    # What the one-run-at-a-time constraint locks: the node, or "cluster:timeslicing" for C.
    lock_key = models.CharField(max_length=260)
    params = models.JSONField(default=dict, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="procedure_runs"
    )
    actor_name = models.CharField(max_length=150)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    claim_token = models.CharField(max_length=36, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    last_seq = models.PositiveIntegerField(default=0)  # the highest StepRun.seq of this run
    current_step = models.CharField(max_length=64, blank=True, default="")
    message = models.TextField(blank=True, default="")  # outcome, or what to fix
    # The message as a code and parameters (brickadmin/wording.py), said in the reader's language;
    # None: written before codes, or a text without one (the message column is shown as written).
    message_said = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=16, default="web")  # web | terminal
    resumed_count = models.PositiveIntegerField(default=0)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["lock_key"], condition=Q(status__in=["pending", "running"]), name="one_active_run_per_lock"
            ),
        ]
        indexes = [models.Index(fields=["node", "-created_at"]), models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self):
        return f"#{self.pk} {self.procedure} {self.node or 'cluster'} ({self.status})"

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    def delete(self, *args, **kwargs):
        raise AppendOnlyViolation("Procedure runs are an audit record and are never deleted by hand")

    @property
    def is_active(self):
        return self.status in ACTIVE_STATUSES

    @property
    def is_resumable(self):
        return self.status in RESUMABLE_STATUSES

    @property
    def status_tag(self):
        return RunStatus.tag_of(self.status)

    @property
    def target(self):
        if self.node:
            return self.node
        workspace = (self.params or {}).get("workspace")
        if workspace:  # a quota change: what it changed, not the nodes it never touched
            return _("Workspace %(ws)s") % {"ws": workspace}
        return _("all time-slicing nodes")

    @property
    def shown_message(self) -> str:
        """The outcome in the reader's language (as written when it has no code)."""
        if self.message_said is None:
            return self.message
        return wording.shown(self.message_said, self.message, self.shown_step_titles()).strip()

    def shown_step_titles(self) -> dict[str, str]:
        """{step key: title} of this run's plan in the active language ({} when its procedure
        is gone); worked out once per language for the run as read."""
        language = translation.get_language() or ""
        known = self.__dict__.setdefault("_shown_step_titles", {})
        if language not in known:
            from .procedures import registry

            proc = registry.find(self.procedure)
            titles = {}
            if proc is not None:
                # what titles read of a run (recording.PlanTarget's fields; the models import no engine)
                params = self.params or {}
                target = SimpleNamespace(node=self.node, params=params, pk=self.pk, actor_name=self.actor_name)
                try:
                    titles = {s.key: str(s.title(target)) for s in proc.steps(self.params or {})}
                except Exception:  # parameters a later version reads otherwise: the titles as recorded
                    titles = {}
            known[language] = titles
        return known[language]

    @property
    def duration(self):
        """From its start to its end (to now while it runs); None before a worker started it."""
        if self.started_at is None:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    @classmethod
    def prune(cls, older_than):
        """Delete finished runs (and their steps) created before ``older_than``. Never
        touches a pending or running run."""
        qs = cls.objects.filter(created_at__lt=older_than, status__in=FINISHED_STATUSES)
        ids = list(qs.values_list("pk", flat=True))
        if not ids:
            return 0
        StepRun.objects.filter(run_id__in=ids)._raw_delete(StepRun.objects.db)
        models.QuerySet(cls).filter(pk__in=ids, status__in=FINISHED_STATUSES)._raw_delete(cls.objects.db)
        return len(ids)


RUN_EVENT_KEY = "_run"  # gpus.procedures.recording.RUN_EVENT (the models do not import the engine)
_OLD_STEP_NUMBER = re.compile(r"^[0-9]{1,2}\. ")


class StepRun(AppendOnlyModel):
    append_only_message = "Step events are append-only"

    run = models.ForeignKey(ProcedureRun, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField(db_index=True)
    step_index = models.PositiveSmallIntegerField(default=0)
    step_key = models.CharField(max_length=64)
    title = models.CharField(max_length=300)
    state = models.CharField(max_length=10, choices=StepState.choices)
    attempt = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)
    kubectl = models.TextField(blank=True, default="")
    sent = models.JSONField(null=True, blank=True)  # what was sent to the API server (None: nothing)
    # Write ahead: {"request": {"call", "args"}, "state": "intended" | "sent" | "failed"}, recorded
    # before a write goes to the API server and after it returns, so a worker killed in
    # between leaves a record of what may have reached the cluster.
    intent = models.JSONField(null=True, blank=True)
    output = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    # The title, output and error as codes and parameters ({"title": {"code", "params"}, ...},
    # brickadmin/wording.py), said in the reader's language; the text columns keep them as
    # written (LANGUAGE_CODE), for exports and for rows recorded before codes.
    said = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="step_seq_unique_per_run")]

    def __str__(self):
        return f"run {self.run_id} #{self.seq} {self.step_key} {self.state}"

    @property
    def state_tag(self):
        return StepState.tag_of(self.state)

    def _shown(self, part: str, text: str) -> str:
        said = (self.said or {}).get(part)
        if said is None:
            return text
        return wording.shown(said, text, self.run.shown_step_titles()).strip()

    @property
    def shown_title(self) -> str:
        """The title in the reader's language: a step's from its procedure's plan, a run event's
        from its message code; else as recorded."""
        if self.step_key != RUN_EVENT_KEY:
            return self.run.shown_step_titles().get(self.step_key) or _OLD_STEP_NUMBER.sub("", self.title, count=1)
        return self._shown("title", self.title)

    @property
    def shown_output(self) -> str:
        return self._shown("output", self.output)

    @property
    def shown_error(self) -> str:
        return self._shown("error", self.error)

    @property
    def numbered_title(self) -> str:
        """ "3. Drain …": the step's place in its run's plan (0 is the pre-check), unique on the run.
        Run-level events have no number. Events recorded before titles lost their hand-written
        numbers (which repeated: "1. Cordon", "1. Drain") are shown without the old one."""
        if self.step_key == RUN_EVENT_KEY:
            return self.shown_title
        return f"{self.step_index}. {self.shown_title}"


class ManifestVersion(models.Model):
    """One version of brick-nvidia-device-plugin.yaml. The highest version is current."""

    version = models.PositiveIntegerField(unique=True)
    content = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")
    note = models.CharField(max_length=300, blank=True, default="")
    # A note a run wrote, as a code and parameters (brickadmin/wording.py), said in the reader's
    # language; None: an admin's own note, or one written before codes (shown as written).
    note_said = models.JSONField(null=True, blank=True)
    run = models.ForeignKey(ProcedureRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-version"]

    def __str__(self):
        return f"v{self.version}"

    def save(self, *args, **kwargs):
        # A note given as a message keeps its code; its text is written in the site's language.
        if isinstance(self.note, wording.Said):
            self.note_said = self.note.as_record()
            with translation.override(settings.LANGUAGE_CODE):
                self.note = str(self.note)[:300]
        super().save(*args, **kwargs)

    @property
    def shown_note(self) -> str:
        return wording.shown(self.note_said, self.note)


class ProcedureLock(models.Model):
    """A single row (pk=1), locked (``select_for_update``) while a run is started or
    resumed: the conflict check across lock keys (C against node runs) and the insert are
    then one step. The unique index on ProcedureRun.lock_key covers only the same key."""

    class Meta:
        verbose_name = "procedure lock"

    def __str__(self):
        return "procedure lock"

    @classmethod
    def acquire(cls):
        """Lock the row until the current transaction ends (creating it on first use).
        SQLite has no row locks; there every write transaction starts IMMEDIATE (settings)."""
        cls.objects.select_for_update().get_or_create(pk=1)


# --- the materialised cluster view (gpus/view_publish.py writes, gpus/clusterview.py reads) ---
# Written by the cluster watcher (one writer at a time), read by every page: a page view
# costs the API server nothing and a constant number of queries. Each row carries the
# generation that last wrote it; ViewState says which generation is current, the time
# it reflects and the form it was written in.


class ViewState(models.Model):
    """The one row (pk=1) describing the current view."""

    generation = models.PositiveBigIntegerField(default=0)
    # view_publish.SCHEMA_VERSION of the code that wrote it (0: before the form was versioned)
    schema = models.PositiveIntegerField(default=0)
    as_of = models.DateTimeField(null=True, blank=True)  # the time the projection reflects
    published_at = models.DateTimeField(null=True, blank=True)
    # Where the watcher got to, for ordering writers (the twin's event id; "" for kube).
    position = models.BigIntegerField(default=0)
    source = models.CharField(max_length=16, blank=True, default="")  # twin | kube
    device_source = models.CharField(max_length=16, blank=True, default="labels")
    device_note = models.TextField(blank=True, default="")
    # The watcher's identity and liveness: pages say plainly when it is behind or down.
    watcher = models.CharField(max_length=200, blank=True, default="")
    watcher_seen_at = models.DateTimeField(null=True, blank=True)
    watcher_status = models.JSONField(default=dict, blank=True)
    # Fencing: the Lease holder that last claimed or published the view, and its fencing
    # token (the Lease's leaseTransitions when it took it). A watcher with an older token
    # (one that lost the Lease without knowing it) is refused, under this row's lock.
    holder = models.CharField(max_length=200, blank=True, default="")
    fencing_token = models.BigIntegerField(default=-1)
    totals = models.JSONField(default=dict, blank=True)  # the ledger's headline numbers
    # Small cluster-wide objects some pages read (device-plugin ConfigMaps and DaemonSets,
    # the GPU Operator's ConfigMaps, quota per namespace): a few kB whatever the size.
    extra = models.JSONField(default=dict, blank=True)

    def __str__(self):
        return f"view generation {self.generation}"


class ServiceBeat(models.Model):
    """The last time a periodic service ran (the reaper, run by Celery beat and a worker):
    Health says so when it stops, instead of runs silently staying stuck."""

    name = models.CharField(max_length=64, primary_key=True)
    beat_at = models.DateTimeField()

    def __str__(self):
        return f"{self.name} at {self.beat_at}"


class ViewNode(models.Model):
    """One node: every node of the cluster (GPU or not), its ledger line when it is a GPU node."""

    name = models.CharField(max_length=253, unique=True)
    generation = models.PositiveBigIntegerField()
    is_gpu = models.BooleanField(default=False)
    model = models.CharField(max_length=200, blank=True, default="")
    mode = models.CharField(max_length=16, blank=True, default="")
    # Which stack publishes its GPUs: device-plugin | dra | both | "" (NodeLedger.stack)
    stack = models.CharField(max_length=16, blank=True, default="")
    convention = models.CharField(max_length=16, blank=True, default="")
    cordoned = models.BooleanField(default=False)
    problems = models.PositiveIntegerField(default=0)
    ledger = models.JSONField(null=True, blank=True)  # gpus.numbers.ledger.node_to_dict
    raw = models.JSONField(default=dict)  # the node's projection (labels, taints, status)
    digest = models.CharField(max_length=64, blank=True, default="")  # skip rewriting an unchanged node

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(fields=["is_gpu", "mode", "name"]),
            models.Index(fields=["is_gpu", "model", "name"]),
            # every publication reads each row's digest: from the index alone, not from rows
            # whose JSON runs to kilobytes (5,000 DRA nodes: 45 ms -> a few on SQLite)
            models.Index(fields=["name", "digest"], name="gpus_viewnode_name_digest"),
        ]

    def __str__(self):
        return self.name


class ViewTypeRow(models.Model):
    """One Dashboard detail row: a GPU model × type."""

    generation = models.PositiveBigIntegerField()
    position = models.PositiveIntegerField()
    model = models.CharField(max_length=200)
    gpu_type = models.CharField(max_length=64)
    resource = models.CharField(max_length=128)
    logical = models.IntegerField(default=0)
    requested = models.IntegerField(default=0)
    physical = models.IntegerField(default=0)
    cordoned_logical = models.IntegerField(default=0)
    nodes = models.IntegerField(default=0)
    sharing_strategy = models.CharField(max_length=32, default="none")  # none | time-slicing | mps | consumable-shares
    # Of the row, what nodes publishing through DRA add (the rest is the device plugin's),
    # and whether unlimited consumable shares are among its GPUs (logical then counts claims).
    dra_logical = models.IntegerField(default=0)
    dra_physical = models.IntegerField(default=0)
    unlimited = models.BooleanField(default=False)

    class Meta:
        ordering = ["position"]

    def __str__(self):
        return f"{self.model} {self.gpu_type}"


class ViewResourceRow(models.Model):
    """One availability row: a resource name."""

    generation = models.PositiveBigIntegerField()
    position = models.PositiveIntegerField()
    resource = models.CharField(max_length=128)
    logical = models.IntegerField(default=0)
    allocated = models.IntegerField(default=0)
    requested = models.IntegerField(default=0)
    shared_logical = models.IntegerField(default=0)  # time-sliced without a rename (GPU Operator)
    shared_on = models.JSONField(default=list, blank=True)  # [[node, replicas, logical], ...]
    mig_on = models.JSONField(default=list, blank=True)  # MIG strategy single: [[node, profile, logical], ...]
    mps_on = models.JSONField(default=list, blank=True)  # shared by MPS: [[node, replicas, logical], ...]

    class Meta:
        ordering = ["position"]

    def __str__(self):
        return self.resource


class ViewJob(models.Model):
    """A Job the product made, as the cluster last showed it: the Jobs pages read its state
    here instead of listing Jobs from the API server."""

    generation = models.PositiveBigIntegerField()
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    status = models.JSONField(default=dict)  # the Job's .status

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="view_job_unique")]

    def __str__(self):
        return f"{self.namespace}/{self.name}"


class ViewWorkspace(models.Model):
    """A namespace that is a Workspace (labelled) or holds a GPU quota, as the cluster last
    showed it: the Workspaces pages read it (0 API calls, one query per page). Utilisation
    and memory are DCGM's (None: not measured, never 0). ``idle_since`` is carried from one
    generation to the next: since when its GPU quota has had no pod holding a GPU, or
    utilisation under BRICK_IDLE_UTILISATION_PERCENT, while none of its GPU pods waited for
    the scheduler (``waiting``: a Workspace waiting for GPUs is not idle)."""

    generation = models.PositiveBigIntegerField()
    namespace = models.CharField(max_length=63, unique=True)
    owner = models.CharField(max_length=150, blank=True, default="")  # the namespace's owner label
    labelled = models.BooleanField(default=False)  # brick.cloud/workspace=true
    resource = models.CharField(max_length=253, blank=True, default="")  # the GPU resource(s) of its quota
    gpu_type = models.CharField(max_length=64, blank=True, default="")
    quota = models.IntegerField(default=0)  # Allocated to the Workspace: hard requests.nvidia.com/*
    gpu_quotas = models.JSONField(default=dict, blank=True)  # {resource: hard}
    # [{"name", "hard": {}, "used": {}, "scopes": [selector, ...]}]: every ResourceQuota
    quotas = models.JSONField(default=list, blank=True)
    requested = models.IntegerField(default=0)  # Requested by its pods bound to a node now, as the scheduler counts
    waiting = models.IntegerField(default=0)  # its GPU pods the scheduler has not placed
    physical = models.IntegerField(default=0)  # In use physically: distinct GPUs its Running pods hold
    utilisation = models.FloatField(null=True, blank=True)  # %, DCGM; None: not measured
    memory_mib = models.FloatField(null=True, blank=True)  # framebuffer used, DCGM; None: not measured
    created_at = models.DateTimeField(null=True, blank=True)  # the namespace's creationTimestamp
    pods = models.JSONField(default=list, blank=True)  # [{"name", "node", "phase", "requests", "gpus", ...}]
    idle_since = models.DateTimeField(null=True, blank=True)
    digest = models.CharField(max_length=64, blank=True, default="")  # skip rewriting an unchanged row

    class Meta:
        ordering = ["namespace"]
        indexes = [
            models.Index(fields=["quota", "namespace"]),
            # what a requester holds (the approval queue's cards, a user's list): by owner label
            models.Index(fields=["owner", "namespace"], name="view_workspace_owner"),
        ]

    def __str__(self):
        return self.namespace

    @property
    def gpu_type_list(self) -> list[str]:
        return [t for t in self.gpu_type.split(", ") if t]

    @property
    def no_pod(self) -> bool:
        """No pod holds a GPU: nothing for DCGM to measure."""
        return not self.requested

    @property
    def shared_only(self) -> bool:
        """Its quota is of time-sliced GPUs only: DCGM cannot tell its use from its
        neighbours' on the same GPU (the lists read this; they do not load the pods)."""
        return self.gpu_type_list == ["shared"]

    @property
    def time_sliced_only(self) -> bool:
        """Its Running GPU pods all hold time-sliced GPUs: no utilisation of its own is
        measurable (gpus/occupancy.py leaves them out)."""
        running = [p for p in self.pods or [] if p.get("phase") == "Running"]
        return bool(running) and all(p.get("time_sliced") for p in running)


class ViewProblem(models.Model):
    """One health finding (gpus/health.py)."""

    generation = models.PositiveBigIntegerField()
    position = models.PositiveIntegerField()
    severity = models.CharField(max_length=8)
    kind = models.CharField(max_length=64)
    subject = models.CharField(max_length=300)
    subject_type = models.CharField(max_length=16)
    # {language code: text}: computed once per language of the site (settings.LANGUAGES)
    message = models.JSONField(default=dict)
    remedy = models.JSONField(default=dict)
    wizard = models.CharField(max_length=8, blank=True, default="")
    fix = models.CharField(max_length=8, blank=True, default="")  # the unlisted procedure offered as "Fix"
    fix_params = models.JSONField(default=dict, blank=True)  # the facts it needs (gpus/health.py Problem)

    class Meta:
        ordering = ["position"]
        indexes = [models.Index(fields=["subject_type", "subject"])]

    def __str__(self):
        return f"{self.severity} {self.kind}: {self.subject}"


class OwnerNotice(models.Model):
    """What an admin's fix run tells a Workspace owner (a failed pod it deleted, and why).
    Shown on the owner's Workspace page (matched by namespace); written by the run's step
    before it changes anything, so the owner learns of it even when the run stops later."""

    namespace = models.CharField(max_length=63, db_index=True)
    owner_name = models.CharField(max_length=150, blank=True, default="")
    subject = models.CharField(max_length=300)  # namespace/pod
    message = models.TextField()
    # The message as a code and parameters (brickadmin/wording.py), said in the reader's language;
    # None: a text without one, or a notice written before codes (the message is shown as written).
    message_said = models.JSONField(null=True, blank=True)
    run = models.ForeignKey(ProcedureRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="notices")
    actor_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run", "subject"], name="one_notice_per_run_and_subject")]

    def __str__(self):
        return f"notice to {self.owner_name or '?'} about {self.subject}"

    def save(self, *args, **kwargs):
        # A message given as a code keeps it; its text is written in the site's language.
        if isinstance(self.message, wording.Said):
            self.message_said = self.message.as_record()
            with translation.override(settings.LANGUAGE_CODE):
                self.message = str(self.message)
        super().save(*args, **kwargs)

    @property
    def shown_message(self) -> str:
        """The message in the reader's language (as written when it has no code)."""
        return wording.shown(self.message_said, self.message)
