"""What the Workspaces tell their people (brickadmin/notify.py carries it): a decision on a
request or a Job to its requester, in the requester's language."""

from __future__ import annotations

from django.urls import reverse
from django.utils.translation import gettext as _

from brickadmin import notify


def workspace_decided(req) -> None:
    """The requester learns that their Workspace was approved (with its GPU type) or rejected (with why)."""
    link = reverse("workspace_detail", args=[req.pk])
    if req.status == req.Status.APPROVED:

        def words():
            return (
                _("Workspace %(name)s approved") % {"name": req.name},
                _(
                    "%(admin)s approved your Workspace %(name)s: %(n)d GPU of %(res)s, namespace %(ns)s. You can "
                    "create Jobs in it now."
                )
                % {
                    "admin": req.decided_by_name,
                    "name": req.name,
                    "n": req.gpu,
                    "res": req.gpu_resource or "-",
                    "ns": req.namespace,
                },
            )

        notify.notify(req.requester, "workspace-approved", words, link)
    elif req.status == req.Status.REJECTED:

        def words():
            return (
                _("Workspace %(name)s rejected") % {"name": req.name},
                _("%(admin)s rejected your Workspace request %(name)s: %(why)s")
                % {"admin": req.decided_by_name, "name": req.name, "why": req.rejection_reason},
            )

        notify.notify(req.requester, "workspace-rejected", words, link)


def job_decided(job) -> None:
    """The Job's owner learns that it was approved (sent to the cluster) or rejected (with why)."""
    link = reverse("job_detail", args=[job.pk])
    if job.status == job.Status.SUBMITTED:

        def words():
            return (
                _("Job %(job)s approved") % {"job": job.k8s_name},
                _("%(admin)s approved your Job %(job)s; it was sent to the cluster (node %(node)s).")
                % {"admin": job.decided_by_name or "-", "job": job.k8s_name, "node": job.node},
            )

        notify.notify(job.owner, "job-approved", words, link)
    elif job.status == job.Status.REJECTED:

        def words():
            return (
                _("Job %(job)s rejected") % {"job": job.k8s_name},
                _("%(admin)s rejected your Job %(job)s: %(why)s")
                % {"admin": job.decided_by_name, "job": job.k8s_name, "why": job.rejection_reason},
            )

        notify.notify(job.owner, "job-rejected", words, link)


def owner_of(namespace: str):
    """The requester of the approved Workspace record of ``namespace`` (brickadmin.notify asks)."""
    from .directory import record_of

    record = record_of(namespace)
    return record.requester if record is not None else None
