"""What the Workspaces tell their people (brickadmin/notify.py carries it): a decision on a
request or a Job to its requester, in the requester's language."""

from __future__ import annotations

from django.urls import reverse

from brickadmin import notify
from brickadmin.wording import said


def workspace_decided(req) -> None:
    """The requester learns that their Workspace was approved (with its GPU type) or rejected (with why)."""
    link = reverse("workspace_detail", args=[req.pk])
    if req.status == req.Status.APPROVED:

        def words():
            return (
                said("notify.workspace_approved_subject", name=req.name),
                said(
                    "notify.workspace_approved",
                    admin=req.decided_by_name,
                    name=req.name,
                    n=req.gpu,
                    res=req.gpu_resource or "-",
                    ns=req.namespace,
                ),
            )

        notify.notify(req.requester, "workspace-approved", words, link)
    elif req.status == req.Status.REJECTED:

        def words():
            return (
                said("notify.workspace_rejected_subject", name=req.name),
                said("notify.workspace_rejected", admin=req.decided_by_name, name=req.name, why=req.rejection_reason),
            )

        notify.notify(req.requester, "workspace-rejected", words, link)


def job_decided(job) -> None:
    """The Job's owner learns that it was approved (sent to the cluster) or rejected (with why)."""
    link = reverse("job_detail", args=[job.pk])
    if job.status == job.Status.SUBMITTED:

        def words():
            return (
                said("notify.job_approved_subject", job=job.k8s_name),
                said("notify.job_approved", admin=job.decided_by_name or "-", job=job.k8s_name, node=job.node),
            )

        notify.notify(job.owner, "job-approved", words, link)
    elif job.status == job.Status.REJECTED:

        def words():
            return (
                said("notify.job_rejected_subject", job=job.k8s_name),
                said("notify.job_rejected", admin=job.decided_by_name, job=job.k8s_name, why=job.rejection_reason),
            )

        notify.notify(job.owner, "job-rejected", words, link)


def owner_of(namespace: str):
    """The requester of the approved Workspace record of ``namespace`` (brickadmin.notify asks)."""
    from .directory import record_of

    record = record_of(namespace)
    return record.requester if record is not None else None
