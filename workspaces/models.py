"""Workspace requests, their decisions (append-only audit), resource limits, Jobs.

The cluster is the truth for what exists (namespaces, quotas, Jobs); these rows are
the truth for who asked, who decided and why.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from brickadmin import wording
from brickadmin.audit import AppendOnlyModel

# Kubernetes names the product writes (labels: brickadmin.cluster.vocabulary).
USER_PRIORITY_CLASS = "brick-user-priority"
USER_PRIORITY_VALUE = 1000
JOB_PRIORITY_CLASS = "brick-job-priority"
JOB_PRIORITY_VALUE = -10
COMPUTE_QUOTA = "workspace-compute"
STORAGE_QUOTA = "workspace-storage"
# The devices of a DRA DeviceClass: unscoped, since Kubernetes matches no scope to a ResourceClaim
DEVICE_QUOTA = "workspace-devices"
LIMIT_RANGE = "workspace-defaults"


class ResourceLimit(models.Model):
    """The most a user may request for one Workspace, set by admins for one user or
    one group. A user's own row wins; otherwise the largest of their groups'; otherwise
    settings.BRICK_DEFAULT_LIMITS."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="workspace_limit"
    )
    group = models.OneToOneField(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="workspace_limit")
    gpu = models.PositiveIntegerField(_("GPU"))
    cpu = models.PositiveIntegerField(_("CPU"))
    memory_gib = models.PositiveIntegerField(_("Memory (GiB)"))
    storage_gib = models.PositiveIntegerField(_("Storage (GiB)"))
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False)),
                name="limit_for_user_xor_group",
            ),
        ]

    def __str__(self):
        who = self.user.get_username() if self.user_id else f"@{self.group.name}"
        return f"{who}: {self.gpu} GPU, {self.cpu} CPU, {self.memory_gib} GiB, {self.storage_gib} GiB"

    def as_dict(self):
        return {"gpu": self.gpu, "cpu": self.cpu, "memory_gib": self.memory_gib, "storage_gib": self.storage_gib}


class WorkspaceRequest(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        # Claimed by an approval under way (never left behind: the approval ends in
        # approved, or puts the request back to pending, in the same transaction).
        APPROVING = "approving", _("Being approved")
        APPROVED = "approved", _("Approved")
        REJECTED = "rejected", _("Rejected")
        WITHDRAWN = "withdrawn", _("Withdrawn")

    name = models.CharField(_("Name"), max_length=63)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="workspace_requests"
    )
    requester_name = models.CharField(max_length=150)
    gpu = models.PositiveIntegerField(_("GPU"))
    cpu = models.PositiveIntegerField(_("CPU"))
    memory_gib = models.PositiveIntegerField(_("Memory (GiB)"))
    storage_gib = models.PositiveIntegerField(_("Storage (GiB)"))
    # What the Workspace is for, in the requester's words: admins read it when deciding.
    purpose = models.TextField(_("Purpose"), blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_name = models.CharField(max_length=150, blank=True, default="")
    # Once approved: the GPU type and its Kubernetes resource name ("" when no GPU).
    gpu_type = models.CharField(max_length=63, blank=True, default="")
    gpu_resource = models.CharField(max_length=253, blank=True, default="")
    overcommit = models.BooleanField(default=False)
    rejection_reason = models.TextField(blank=True, default="")
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # A name is held by a pending or approved request; a rejection frees it.
            models.UniqueConstraint(
                fields=["name"],
                condition=Q(status__in=["pending", "approving", "approved"]),
                name="workspace_name_held_once",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"]),
            models.Index(fields=["requester", "status"]),
            # the Workspaces of the cluster find each namespace's record by name (10,000 of them)
            models.Index(fields=["name", "status"], name="workspace_request_name_status"),
        ]

    def __str__(self):
        return self.name

    @property
    def namespace(self) -> str:
        return self.name

    @property
    def is_pending(self):
        return self.status == self.Status.PENDING


class Decision(AppendOnlyModel):
    """One admin decision (or a failed attempt at one): who, when, what."""

    class Action(models.TextChoices):
        APPROVE = "approve", _("Approved Workspace")
        APPROVE_FAILED = "approve_failed", _("Workspace approval failed")
        APPROVE_RETRY = "approve_retry", _("Workspace approval retried")
        REJECT = "reject", _("Rejected Workspace")
        JOB_APPROVE = "job_approve", _("Approved Job")
        JOB_FAILED = "job_failed", _("Job submission failed")
        JOB_REJECT = "job_reject", _("Rejected Job")
        JOB_CANCEL = "job_cancel", _("Cancelled Job")
        SETTING = "setting", _("Changed a setting")
        LIMIT = "limit", _("Changed a limit")
        ADOPT = "adopt", _("Adopted a namespace as a Workspace")
        QUOTA = "quota", _("Changed a Workspace's GPU quota")
        WITHDRAW = "withdraw", _("Withdrew a Workspace request")
        RECLAIM_ASK = "reclaim_ask", _("Asked the owner before reclaiming")
        RECLAIM_ANSWER = "reclaim_answer", _("Answered whether to keep the quota")
        KUEUE_EVICTED = "kueue_evicted", _("Kueue evicted a Workload")

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=32, choices=Action.choices)
    workspace = models.ForeignKey(
        WorkspaceRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    job = models.ForeignKey("WorkspaceJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions")
    subject = models.CharField(max_length=253, help_text="workspace / job name as text, outliving the row")
    gpu_resource = models.CharField(max_length=253, blank=True, default="")
    amount = models.PositiveIntegerField(default=0)
    available_before = models.IntegerField(null=True, blank=True)
    overcommit = models.BooleanField(default=False)
    detail = models.TextField(blank=True, default="")
    # The detail as a code and parameters (brickadmin/wording.py), said in the reader's language;
    # None: a text without one, or a row written before codes (the detail is shown as written).
    detail_said = models.JSONField(null=True, blank=True)
    # What the cluster did that this row records, once ("" for an admin's decision): an eviction
    # by Kueue is read every 15 s while it lasts, and kept as one row (workspaces/elastic.py).
    source = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["source"], condition=~Q(source=""), name="decision_source_once"),
        ]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.subject}"

    def save(self, *args, **kwargs):
        # A detail given as a message keeps its code; its text is written in the site's language.
        if isinstance(self.detail, wording.Said):
            self.detail_said = self.detail.as_record()
            with translation.override(settings.LANGUAGE_CODE):
                self.detail = str(self.detail)
        super().save(*args, **kwargs)

    @property
    def shown_detail(self) -> str:
        """The detail in the reader's language (as written when it has no code)."""
        return wording.shown(self.detail_said, self.detail)


class JobSettings(models.Model):
    """Singleton (pk=1): the admin's Job settings and the site's Workspace texts."""

    approval_required = models.BooleanField(_("Job approval required"), default=True)
    # How a Workspace owner gets access to the cluster (the platform's kubeconfig, SSO...),
    # shown on every approved Workspace's page; "" shows the product's default text.
    access_text = models.TextField(_("How users get access to the cluster"), blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        # One row of settings: its plural is itself (Django would add an "s": "Job settingss").
        verbose_name = _("Job settings")
        verbose_name_plural = _("Job settings")

    def __str__(self):
        return str(_("Settings"))  # the one row, in the admin

    def save(self, *args, **kwargs):
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> JobSettings:
        obj, _created = cls.objects.get_or_create(pk=1)
        return obj


class WorkspaceJob(models.Model):
    """A training Job on one exclusive node. ``status`` is brickadmin's side (approval,
    submission); the running state is read from the cluster."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting for approval")
        REJECTED = "rejected", _("Rejected")
        SUBMITTED = "submitted", _("Submitted to the cluster")
        FAILED = "failed", _("Submission failed")
        CANCELLED = "cancelled", _("Cancelled")

    workspace = models.ForeignKey(WorkspaceRequest, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="workspace_jobs"
    )
    owner_name = models.CharField(max_length=150)
    node = models.CharField(_("Node"), max_length=253)
    image = models.CharField(_("Image"), max_length=512)
    command = models.TextField(_("Command"), blank=True, default="")
    gpu = models.PositiveIntegerField(_("GPU count"))
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    decided_by_name = models.CharField(max_length=150, blank=True, default="")  # who approved or rejected it
    cancelled_by_name = models.CharField(max_length=150, blank=True, default="")  # beside the decider, not over it
    rejection_reason = models.TextField(blank=True, default="")
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self):
        return self.k8s_name

    @property
    def k8s_name(self) -> str:
        return f"brick-job-{self.pk}"

    @property
    def cancellable(self) -> bool:
        """Waiting for approval (withdrawn) or sent to the cluster (deleted there)."""
        return self.status in (self.Status.PENDING, self.Status.SUBMITTED)

    def visible_to(self, user) -> bool:
        """Its owner and admins see and cancel it; nobody else."""
        return bool(user.is_staff or (self.owner_id and self.owner_id == user.pk))


class ReclaimAsk(models.Model):
    """An admin asks a Workspace's owner whether its idle GPU quota is still needed, before
    reclaiming it: the question, the deadline, the owner's answer (keep it until a date, with a
    reason; or release part or all) and, after the deadline without an answer, the reclaim run.
    One row per question: with the decision rows it is the Workspace's history."""

    class Answer(models.TextChoices):
        NONE = "", _("No answer yet")
        KEEP = "keep", _("Keep it")
        RELEASE = "release", _("Release")

    namespace = models.CharField(max_length=63, db_index=True)
    workspace = models.ForeignKey(
        WorkspaceRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="reclaim_asks"
    )
    resource = models.CharField(max_length=253)
    quota_at_ask = models.PositiveIntegerField()
    message = models.TextField(blank=True, default="")
    asked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    asked_by_name = models.CharField(max_length=150)
    asked_at = models.DateTimeField(default=timezone.now)
    deadline = models.DateTimeField()
    answer = models.CharField(max_length=8, choices=Answer.choices, blank=True, default="")
    keep_until = models.DateField(null=True, blank=True)
    answer_reason = models.TextField(blank=True, default="")
    released = models.PositiveIntegerField(default=0)
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by_name = models.CharField(max_length=150, blank=True, default="")
    quota_run_id = models.IntegerField(null=True, blank=True)  # the quota run of a release or a reclaim

    class Meta:
        ordering = ["-asked_at", "-id"]

    def __str__(self):
        return f"{self.namespace}: {self.resource} {self.quota_at_ask} by {self.deadline:%Y-%m-%d}"

    def overdue(self, now=None) -> bool:
        """No answer by the deadline (or kept past the date given): the admin may reclaim."""
        now = now or timezone.now()
        if self.quota_run_id:
            return False
        if self.answer == self.Answer.KEEP:
            return self.keep_until is not None and now.date() > self.keep_until
        return not self.answer and now >= self.deadline


class ShowbackHour(models.Model):
    """One hour of showback (workspaces/showback.py): the cluster's physical GPUs and each
    Workspace's figures in physical GPUs, as the cluster view showed them when the hour was
    rolled up. One row per hour: rolling an hour up again replaces it (never adds to it).
    Kept for BRICK_SHOWBACK_RETENTION_DAYS."""

    hour = models.DateTimeField(unique=True)  # UTC, on the hour
    physical = models.FloatField(default=0)
    measured = models.BooleanField(default=False)  # utilisation came from DCGM
    # {namespace: [allocated, requested, used or None, measurable(, borrowed, lent: elastic quota)]}
    lines = models.JSONField(default=dict)
    rolled_up_at = models.DateTimeField(null=True, blank=True)  # None: the row is only being written

    class Meta:
        ordering = ["-hour"]

    def __str__(self):
        return f"showback {self.hour:%Y-%m-%d %H}:00 UTC"


class ShowbackMonth(models.Model):
    """A Workspace's physical GPU-hours in one UTC month: the sum of its rolled-up hours,
    kept as they are rolled up, so the page reads one row per Workspace and month. The row
    of namespace "" is the cluster's: its physical GPU-hours and the Workspaces' sums."""

    CLUSTER = ""

    month = models.DateField()  # the first day of the month
    namespace = models.CharField(max_length=63, blank=True)
    hours = models.IntegerField(default=0)  # hours rolled up (the cluster) or in which it held GPUs
    physical = models.FloatField(default=0)  # the cluster's row only
    allocated = models.FloatField(default=0)
    requested = models.FloatField(default=0)
    used = models.FloatField(default=0)  # over the hours it was measured
    used_hours = models.IntegerField(default=0)
    unmeasurable_hours = models.IntegerField(default=0)  # on time-sliced GPUs shared with other Workspaces
    # Elastic quota on Kueue: held above its guarantee, lent by its cohort; and of its guarantee, held by others
    borrowed = models.FloatField(default=0)
    lent = models.FloatField(default=0)

    class Meta:
        ordering = ["-month", "namespace"]
        constraints = [models.UniqueConstraint(fields=["month", "namespace"], name="showback_month_namespace")]

    def __str__(self):
        return f"{self.namespace or 'cluster'} {self.month:%Y-%m}"

    @property
    def unallocated(self) -> float:
        return self.physical - self.allocated

    @property
    def used_state(self) -> str:
        """'measured' (a figure over every hour), 'partial' (measured some hours),
        'not-measurable' (time-sliced GPUs shared with other Workspaces) or 'not-measured'."""
        if self.unmeasurable_hours:
            return "not-measurable"
        if not self.used_hours:
            return "not-measured"
        return "measured" if self.used_hours >= self.hours else "partial"


class KueueFacts(models.Model):
    """The one row (pk=1): whether the cluster serves Kueue and its ClusterQueues as last read
    (workspaces/elastic.py; the beat reads them every 15 s, an approval or a quota change
    after it writes), so that pages show elastic quota without an API call."""

    served = models.BooleanField(default=False)
    read_at = models.DateTimeField(null=True, blank=True)
    cluster_queues = models.JSONField(default=list, blank=True)  # name, spec, status of each
    # The Workloads Kueue has not admitted: namespace, workload, owner, reason, message, position
    waiting = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")  # why the last read failed ("" when it did not)

    def __str__(self):
        return f"Kueue {'served' if self.served else 'not served'} at {self.read_at}"
