"""Jobs in a Workspace: the node choices of the Job form, the Kubernetes Job, and its
decisions (submit, approve, reject, cancel), recorded as Decisions; the Jobs settings row
(approval required, the Workspace access text)."""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext as _

from brickadmin.cluster import ClusterError, NotFound, dra
from brickadmin.cluster.gateway import get_gateway
from brickadmin.cluster.vocabulary import (
    HOSTNAME_LABEL,
    JOB_ID_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MIG_PREFIX,
    OWNER_LABEL,
)
from brickadmin.wording import said
from gpus.numbers import ledger as ledger_mod
from gpus.numbers.dra_lines import dra_lines, quota_resource
from gpus.view.live import LiveRead

from . import elastic, notices
from .approvals import WorkspaceError, ensure_priority_class, record_decision
from .labels import owner_label_value
from .models import (
    JOB_PRIORITY_CLASS,
    JOB_PRIORITY_VALUE,
    Decision,
    JobSettings,
    WorkspaceJob,
    WorkspaceRequest,
)

log = logging.getLogger(__name__)

# A Job on whole GPUs published through DRA asks for devices of this DeviceClass (quota key below)
DRA_JOB_CLASS = dra.DEVICE_CLASS_GPU
DRA_JOB_RESOURCE = quota_resource(DRA_JOB_CLASS)
CLAIM_NAME = "gpu"  # the pod's name for its claim (spec.resourceClaims[].name, resources.claims[].name)


@dataclass
class NodeOption:
    name: str
    resource: str
    free: int
    allocatable: int
    selectable: bool
    reason: str = ""


def is_dra_job(job: WorkspaceJob) -> bool:
    """Whether the Job asks for whole DRA GPUs: its Workspace's quota is of gpu.nvidia.com's devices."""
    return job.workspace.gpu_resource == DRA_JOB_RESOURCE


def _dra_option(n) -> NodeOption:
    """A node whose GPUs only DRA publishes: selectable with its whole GPUs free / published;
    shares and MIG devices are not whole GPUs a Job could use."""
    whole = [x for x in dra_lines(n.dra) if x.device_class == DRA_JOB_CLASS and x.gpu_type == ledger_mod.EXCLUSIVE]
    alloc = sum(x.logical for x in whole)
    free = max(0, alloc - sum(x.used for x in whole))
    reason = ""
    if not n.ready:
        reason = _("Node is not Ready")
    elif n.cordoned:
        reason = _("Node is cordoned (no new pods)")
    elif n.dra.incomplete_pools:
        reason = _("Not all of the node's ResourceSlices are seen: its GPUs are not counted")
    elif alloc == 0:
        reason = _("No whole GPU is published through DRA on this node")
    elif free == 0:
        reason = _("No free GPU on this node right now")
    return NodeOption(n.name, DRA_JOB_RESOURCE, free, alloc, not reason, reason)


def job_node_options(ledger) -> list[NodeOption]:
    """The node list of the Job form: exclusive nodes selectable with free / allocatable;
    time-slicing and MIG nodes, and nodes that cannot take pods, disabled with a reason.
    A node whose GPUs only DRA publishes offers its whole GPUs (gpu.nvidia.com's devices) to
    the Jobs of Workspaces whose quota is of that DeviceClass."""
    out = []
    for n in ledger.nodes if ledger else []:
        if n.stack == "dra" and n.dra is not None:
            out.append(_dra_option(n))
            continue
        served = [r for r in n.served if r.allocatable or r.capacity]
        if n.mode in ledger_mod.REPLICATED_MODES:
            res = next((r.resource for r in served), ledger_mod.GPU_SHARED)
            mps = n.mode == ledger_mod.MODE_MPS or n.sharing_strategy == ledger_mod.MPS
            why = _("MPS nodes do not support Jobs") if mps else _("Time-slicing nodes do not support Jobs")
            out.append(NodeOption(n.name, res, 0, 0, False, why))
            continue
        line = n.resources.get(ledger_mod.GPU)
        alloc = line.allocatable if line and not line.stale else 0
        if n.mode == "mig-single" or (n.mode == "mig" and not alloc):
            # Only MIG instances: no whole exclusive GPU a Job could use. A node with whole
            # GPUs beside its MIG instances (mixed strategy) offers those whole GPUs; under
            # MIG strategy single its nvidia.com/gpu are MIG instances, not whole GPUs.
            res = next((r.resource for r in served if r.gpu_type.startswith("mig-")), f"{MIG_PREFIX}*")
            out.append(NodeOption(n.name, res, 0, 0, False, _("MIG nodes do not support Jobs")))
            continue
        free = max(0, alloc - (line.requested if line else 0))
        reason = ""
        if n.mode not in ("exclusive", "mig"):
            reason = _("The node's GPU sharing label is not recognised")
        elif not n.ready:
            reason = _("Node is not Ready")
        elif n.cordoned:
            reason = _("Node is cordoned (no new pods)")
        elif n.plugin_state in ledger_mod.PLUGIN_DOWN:
            reason = _("Device plugin is not running on this node")
        elif alloc == 0:
            reason = _("No nvidia.com/gpu is allocatable on this node")
        elif free == 0:
            reason = _("No free GPU on this node right now")
        out.append(NodeOption(n.name, ledger_mod.GPU, free, alloc, not reason, reason))
    out.sort(key=lambda o: (not o.selectable, o.name))  # selectable first, then the disabled ones
    return out


def _labels(job: WorkspaceJob) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, JOB_ID_LABEL: str(job.pk), OWNER_LABEL: owner_label_value(job.owner_name)}


def claim_template_manifest(job: WorkspaceJob) -> dict:
    """The ResourceClaimTemplate of a Job on whole DRA GPUs, in its Workspace's namespace: one
    request of ``job.gpu`` devices of gpu.nvidia.com (ExactCount). Each pod of the Job gets a
    claim made from it, which the Workspace's device quota counts (Kubernetes applies no
    priority scope to claims)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": job.k8s_name, "namespace": job.workspace.namespace, "labels": _labels(job)},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": CLAIM_NAME,
                            "exactly": {
                                "deviceClassName": DRA_JOB_CLASS,
                                "allocationMode": "ExactCount",
                                "count": job.gpu,
                            },
                        }
                    ]
                }
            }
        },
    }


def job_manifest(job: WorkspaceJob) -> dict:
    labels = _labels(job)
    pod_spec: dict = {}
    if is_dra_job(job):  # the devices come from a claim made from the Job's template, not from limits
        resources: dict = {"claims": [{"name": CLAIM_NAME}]}
        pod_spec["resourceClaims"] = [{"name": CLAIM_NAME, "resourceClaimTemplateName": job.k8s_name}]
    else:
        resources = {"limits": {ledger_mod.GPU: str(job.gpu)}, "requests": {ledger_mod.GPU: str(job.gpu)}}
    container = {"name": "main", "image": job.image, "resources": resources}
    if job.command.strip():
        container["command"] = shlex.split(job.command)
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.k8s_name, "namespace": job.workspace.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": JOB_PRIORITY_CLASS,
                    "nodeSelector": {HOSTNAME_LABEL: job.node},
                    "tolerations": [{"key": ledger_mod.GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [container],
                    **pod_spec,
                },
            },
        },
    }
    return manifest


def job_resource(job: WorkspaceJob) -> str:
    """The GPU resource the Job asks for, as decisions record it."""
    return DRA_JOB_RESOURCE if is_dra_job(job) else ledger_mod.GPU


def node_mismatch(option: NodeOption, workspace: WorkspaceRequest) -> str:
    """Why a node cannot take the Jobs of this Workspace ('' when it can): a Workspace whose quota
    is of gpu.nvidia.com's devices runs its Jobs on DRA GPUs, any other on the device plugin's."""
    dra_workspace = workspace.gpu_resource == DRA_JOB_RESOURCE
    if dra_workspace and option.resource != DRA_JOB_RESOURCE:
        return _("This Workspace's GPUs come through DRA (gpu.nvidia.com): choose a node that publishes them")
    if not dra_workspace and option.resource == DRA_JOB_RESOURCE:
        return _("This node's GPUs come through DRA: only Workspaces with a gpu.nvidia.com quota run Jobs on it")
    return ""


def create_job(user, workspace: WorkspaceRequest, *, node: str, image: str, command: str, gpu: int) -> WorkspaceJob:
    job = WorkspaceJob.objects.create(
        workspace=workspace,
        owner=user,
        owner_name=user.get_username(),
        node=node,
        image=image,
        command=command,
        gpu=gpu,
    )
    if not JobSettings.load().approval_required:
        submit_job(job, None)
    return job


def submit_job(job: WorkspaceJob, actor) -> WorkspaceJob:
    """Create the Kubernetes Job (after approval, or at once when approval is off).

    The Job is claimed first (pending -> submitted, one conditional UPDATE), so of two
    decisions made at once only one reaches the cluster; the other is told it was already
    decided and writes nothing. A refusal by the cluster takes the claim back with a
    conditional UPDATE too (to pending for a retry, or to failed when no admin decided),
    never by saving stale in-memory state over whatever the row holds now."""
    Status = WorkspaceJob.Status
    decider = actor.get_username() if actor is not None else ""
    if not WorkspaceJob.objects.filter(pk=job.pk, status=Status.PENDING).update(
        status=Status.SUBMITTED, last_error="", decided_by_name=decider
    ):
        raise WorkspaceError(_("This Job was already decided."))
    gw = get_gateway()
    try:
        ensure_priority_class(
            gw,
            JOB_PRIORITY_CLASS,
            JOB_PRIORITY_VALUE,
            "BRICK Jobs: scavenging tier, preempted by Workspace pods.",
            "Never",
        )
        if is_dra_job(job):
            gw.apply(claim_template_manifest(job))
        gw.create_job(job.workspace.namespace, elastic.queued(gw, job_manifest(job)))
    except ClusterError as exc:
        _remove_claim_template(gw, job)
        back = Status.FAILED if actor is None else Status.PENDING
        WorkspaceJob.objects.filter(pk=job.pk, status=Status.SUBMITTED).update(
            status=back, last_error=str(exc), decided_by_name=""
        )
        job.refresh_from_db()
        if actor is not None:
            record_decision(
                actor,
                Decision.Action.JOB_FAILED,
                job=job,
                subject=job.k8s_name,
                gpu_resource=job_resource(job),
                amount=job.gpu,
                detail=str(exc),
            )
        raise WorkspaceError(_("Kubernetes refused the Job: %(e)s") % {"e": exc}) from exc
    job.refresh_from_db()
    if actor is not None:
        record_decision(
            actor,
            Decision.Action.JOB_APPROVE,
            job=job,
            subject=job.k8s_name,
            gpu_resource=job_resource(job),
            amount=job.gpu,
            detail=said("decision.job_approved", node=job.node, ns=job.workspace.namespace),
        )
    return job


def _remove_claim_template(gw, job: WorkspaceJob) -> None:
    """The Job's ResourceClaimTemplate deleted (a Job on DRA GPUs refused or cancelled); gone already is fine."""
    if not is_dra_job(job):
        return
    try:
        gw.delete("resource.k8s.io/v1", "ResourceClaimTemplate", job.k8s_name, job.workspace.namespace)
    except NotFound:
        pass
    except ClusterError:
        log.exception("could not delete the ResourceClaimTemplate of %s", job.k8s_name)


def approve_job(job_id: int, actor, ledger=None) -> WorkspaceJob:
    job = WorkspaceJob.objects.select_related("workspace").get(pk=job_id)
    if job.status != WorkspaceJob.Status.PENDING:
        raise WorkspaceError(_("This Job was already decided."))
    if ledger is None:
        try:
            ledger = LiveRead().ledger()  # a decision reads the cluster, not the view
        except ClusterError as exc:
            raise WorkspaceError(_("The cluster cannot be read; nothing was changed.")) from exc
    option = next((o for o in job_node_options(ledger) if o.name == job.node), None)
    if option is not None and option.selectable and option.resource != job_resource(job):
        option.selectable, option.reason = False, node_mismatch(option, job.workspace)
    if option is None or not option.selectable:
        raise WorkspaceError(
            _("Node %(n)s cannot take this Job now: %(why)s")
            % {"n": job.node, "why": option.reason if option else _("node not found")}
        )
    if job.gpu > option.free:
        raise WorkspaceError(
            _("Node %(n)s has %(f)s free GPU; the Job asks for %(g)s.")
            % {"n": job.node, "f": option.free, "g": job.gpu}
        )
    job = submit_job(job, actor)  # claims the Job: a second approval stops there
    notices.job_decided(job)
    return job


def reject_job(job_id: int, actor, reason: str) -> WorkspaceJob:
    reason = (reason or "").strip()
    if not reason:
        raise WorkspaceError(_("A rejection needs a reason; the user will see it."))
    with transaction.atomic():
        job = WorkspaceJob.objects.get(pk=job_id)
        if not WorkspaceJob.objects.filter(pk=job.pk, status=WorkspaceJob.Status.PENDING).update(
            status=WorkspaceJob.Status.REJECTED, decided_by_name=actor.get_username(), rejection_reason=reason
        ):
            raise WorkspaceError(_("This Job was already decided."))
        record_decision(actor, Decision.Action.JOB_REJECT, job=job, subject=job.k8s_name, amount=job.gpu, detail=reason)
    job.refresh_from_db()
    notices.job_decided(job)
    return job


def cancel_job(job_id: int, actor) -> WorkspaceJob:
    """Cancel a Job: one waiting for approval is withdrawn; one sent to the cluster is
    deleted there (with its pods). Recorded as a decision with who did it."""
    with transaction.atomic():
        job = WorkspaceJob.objects.select_related("workspace").get(pk=job_id)
        was = job.status
        if not WorkspaceJob.objects.filter(
            pk=job.pk, status__in=[WorkspaceJob.Status.PENDING, WorkspaceJob.Status.SUBMITTED]
        ).update(status=WorkspaceJob.Status.CANCELLED, cancelled_by_name=actor.get_username()):
            raise WorkspaceError(_("This Job is not waiting or running, so there is nothing to cancel."))
        if was == WorkspaceJob.Status.SUBMITTED:
            # Inside the transaction: when the cluster refuses, the Job stays as it was.
            gw = get_gateway()
            try:
                gw.delete("batch/v1", "Job", job.k8s_name, job.workspace.namespace)
            except NotFound:
                pass  # already gone from the cluster: cancelled all the same
            _remove_claim_template(gw, job)
            detail = said("decision.job_deleted", ns=job.workspace.namespace)
        else:
            detail = said("decision.job_withdrawn")
        record_decision(
            actor,
            Decision.Action.JOB_CANCEL,
            job=job,
            workspace=job.workspace,
            subject=job.k8s_name,
            amount=job.gpu,
            detail=detail,
        )
    job.refresh_from_db()
    return job


def job_state(k8s_job: dict | None) -> str:
    """A Job's state as kubectl would summarise it."""
    if k8s_job is None:
        return ""
    status = k8s_job.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "Complete"
        if cond.get("status") == "True" and cond.get("type") in ("Failed", "FailureTarget"):
            return "Failed"
        if cond.get("status") == "True" and cond.get("type") == "Suspended":
            return "Suspended"
    if status.get("active"):
        return "Running"
    if status.get("succeeded"):
        return "Complete"
    if status.get("failed"):
        return "Failed"
    return "Pending"


def set_job_approval(actor, required: bool) -> JobSettings:
    s = JobSettings.load()
    if s.approval_required != required:
        s.approval_required = required
        s.updated_by_name = actor.get_username()
        s.save()
        record_decision(
            actor,
            Decision.Action.SETTING,
            subject="job_approval_required",
            detail=said("decision.job_approval_on" if required else "decision.job_approval_off"),
        )
    return s


def set_access_text(actor, text: str) -> JobSettings:
    """The text every approved Workspace's page gives for getting access to the cluster (audited)."""
    s = JobSettings.load()
    text = (text or "").strip()
    if s.access_text != text:
        s.access_text = text
        s.updated_by_name = actor.get_username()
        s.save()
        record_decision(actor, Decision.Action.SETTING, subject="workspace_access_text", detail=text or "(default)")
    return s
