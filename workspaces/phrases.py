"""The audit details Workspace decisions record, by code (brickadmin/wording.py), so each
reader reads them in their own language. Registered by ``WorkspacesConfig.ready()``. A code,
once recorded, keeps its parameters."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

PHRASES = {
    # the reasons the product gives a quota change (workspaces/quota.py keeps them as messages)
    "reason.released": _("Released by the owner %(who)s, asked by %(admin)s"),
    "reason.reclaimed": _("Reclaimed: asked on %(when)s by %(who)s, no answer by the deadline"),
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
    "workspace_step.elastic_already": _("The ClusterQueue of %(ws)s holds this grant already."),
    "workspace_step.no_cluster_queue": _(
        "Workspace %(ws)s has no ClusterQueue any more: re-approve or set it by hand."
    ),
    "workspace_step.elastic_now": _("ClusterQueue of %(ws)s: guarantee %(g)s, burst ceiling %(b)s, lend ceiling %(l)s"),
    "decision.elastic_granted": _(
        "Elastic quota on Kueue: guarantee %(g)s, burst ceiling %(b)s, lend ceiling %(lend)s "
        "(ClusterQueue %(q)s in cohort %(c)s); the ResourceQuota holds guarantee + burst."
    ),
    # what Kueue took back (workspaces/elastic.py record_evictions): the audit row and the owner's notice
    "decision.kueue_reclaimed": _(
        "Kueue took back %(n)s %(res)s borrowed by %(what)s (Workload %(wl)s) for Workspace %(by)s, "
        "whose guarantee they were (%(reason)s). Borrowed GPUs are taken back without asking; the "
        "Workload waits in its queue again."
    ),
    "decision.kueue_preempted_in_queue": _(
        "Kueue preempted %(what)s (Workload %(wl)s, %(n)s %(res)s) for a Workload of higher priority "
        "in the same Workspace; it waits in its queue again."
    ),
    "decision.kueue_evicted": _("Kueue evicted %(what)s (Workload %(wl)s, %(n)s %(res)s): %(reason)s. %(msg)s"),
    "notify.kueue_evicted_subject": _("Kueue took GPUs back from %(what)s in Workspace %(ws)s"),
    "decision.approval_retry": _(
        "Transient API error (%(err)s); retrying in %(d).1fs (retry %(a)d; retried for up to %(s)d s)."
    ),
    "decision.job_approved": _("node %(node)s; namespace %(ns)s"),
    "decision.job_approval_on": _("Job approval required: yes"),
    "decision.job_approval_off": _("Job approval required: no"),
    "decision.limit_deleted": _("deleted: %(limit)s"),
    # what the owner is told (gpus.models.OwnerNotice on their Workspace page, and the notification)
    "notice.you_released": _("You released %(n)s %(res)s: the quota of your Workspace is %(b)s (was %(a)s)."),
    "notice.quota_changed": _(
        "An admin (%(who)s) changed the %(res)s quota of your Workspace from %(a)s to %(b)s: %(why)s"
    ),
    # the requester's notifications of a decision (workspaces/notices.py)
    "notify.workspace_approved_subject": _("Workspace %(name)s approved"),
    "notify.workspace_approved": _(
        "%(admin)s approved your Workspace %(name)s: %(n)d GPU of %(res)s, namespace %(ns)s. You can "
        "create Jobs in it now."
    ),
    "notify.workspace_rejected_subject": _("Workspace %(name)s rejected"),
    "notify.workspace_rejected": _("%(admin)s rejected your Workspace request %(name)s: %(why)s"),
    "notify.job_approved_subject": _("Job %(job)s approved"),
    "notify.job_approved": _("%(admin)s approved your Job %(job)s; it was sent to the cluster (node %(node)s)."),
    "notify.job_rejected_subject": _("Job %(job)s rejected"),
    "notify.job_rejected": _("%(admin)s rejected your Job %(job)s: %(why)s"),
    "reclaim.ask_subject": _("Does Workspace %(ws)s still need its GPUs? Answer by %(when)s"),
    "reclaim.ask_body": _(
        "An admin (%(who)s) asks whether Workspace %(ws)s still needs its %(n)d %(res)s: its pods "
        "request %(r)d of them. Answer on this page by %(when)s (keep it until a date, or release "
        "part or all); without an answer the quota may be reclaimed down to what the pods "
        "request. %(msg)s"
    ),
    "reclaim.kept": _("%(who)s keeps %(n)d %(res)s until %(until)s: %(why)s"),
    "reclaim.released": _("%(who)s releases %(n)d %(res)s (quota run #%(id)d)."),
    "reclaim.kept_subject": _("%(who)s keeps the GPUs of Workspace %(ws)s until %(until)s"),
    "reclaim.released_subject": _("%(who)s released %(n)d %(res)s of Workspace %(ws)s"),
    "reclaim.reclaimed_subject": _("GPU quota of Workspace %(ws)s reclaimed"),
    "reclaim.reclaimed_body": _(
        "An admin (%(who)s) reclaims the %(res)s quota of Workspace %(ws)s down to %(n)d (quota run "
        "#%(id)d): asked on %(when)s, with no answer by the deadline."
    ),
    # what the Workspace procedures' steps found and did (workspaces/procedures.py)
    "workspace_step.namespace_exists": _("namespace %(ns)s exists"),
    "workspace_step.no_workspace": _("No approved Workspace named %(ws)s."),
    "workspace_step.namespace_present": _("namespace present"),
    "workspace_step.namespace_missing": _("namespace missing"),
    "workspace_step.quotas_exist": _("every quota of %(ns)s exists"),
    "workspace_step.missing_quotas": _("Missing quotas: %(q)s"),
    "workspace_step.no_quota_any_more": _("Workspace %(ws)s holds no %(res)s quota any more."),
    "workspace_step.quota_already": _("the quota is %(n)d already"),
    "workspace_step.pods_request_too_much": _("Start the change again once the pods request less."),
    "workspace_step.quota": _("quota %(res)s: %(n)d"),
    "workspace_step.fix_quota_by_hand": _("Set it by hand: %(cmd)s"),
    # the quota change's pre-checks, recorded as its run's step 0 (workspaces/procedures.py)
    "workspace_precheck.quota_change": _(
        "Workspace %(ws)s (owner %(owner)s): %(res)s quota %(a)d → %(b)d; its pods request %(r)d."
    ),
    "workspace_precheck.capacity_after": _("Capacity after the change:"),
    "workspace_precheck.no_gpu_quota": _("This Workspace holds no GPU quota to change."),
    "workspace_precheck.negative_quota": _("A quota cannot be negative."),
    "workspace_precheck.below_requests": _(
        "Its pods request %(r)d %(res)s now: the quota cannot go below that. Ask the owner to stop some first."
    ),
}
