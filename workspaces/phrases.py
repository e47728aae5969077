"""The audit details Workspace decisions record, by code (brickadmin/wording.py), so each
reader reads them in their own language. Registered by ``WorkspacesConfig.ready()``. A code,
once recorded, keeps its parameters."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

PHRASES = {
    "decision.quota_changed": _("GPU quota %(a)s → %(b)s (run #%(id)d): %(why)s"),
    "decision.job_deleted": _("deleted from the cluster (namespace %(ns)s)"),
    "decision.job_withdrawn": _("withdrawn before approval"),
    "decision.reclaim_asked": _("Answer by %(when)s. %(msg)s"),
    "decision.adopted": _(
        "Adopted for %(owner)s as the cluster holds it: %(r)s %(n)d, CPU %(cpu)d, memory %(mem)d GiB, "
        "storage %(st)d GiB."
    ),
    "decision.adopted_with_note": "%(adopted)s %(note)s",  # the admin's note, in their own words
    "decision.approved": _("namespace %(ns)s; quota %(quota)s"),
    "decision.job_approved": _("node %(node)s; namespace %(ns)s"),
    "decision.job_approval_on": _("Job approval required: yes"),
    "decision.job_approval_off": _("Job approval required: no"),
    "decision.limit_deleted": _("deleted: %(limit)s"),
}
