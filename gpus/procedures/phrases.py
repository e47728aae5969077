"""The messages a run records, by code (brickadmin/wording.py): what the engine, the
recorder, the reaper and the run service say, kept as codes so each reader reads them in
their own language. Registered by ``GpusConfig.ready()``. A code, once recorded, keeps its
meaning: change a template's wording freely, never what its parameters are."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

PHRASES = {
    # run-level events
    "run.created": _("Run created by %(who)s"),
    "run.parameters": _("parameters: %(p)s"),
    "run.claimed": _("Claimed by worker %(w)s"),
    "run.resuming": _("resuming: %(n)d step(s) already done"),
    "run.succeeded": _("Run succeeded"),
    "run.failed": _("Run failed"),
    "run.cancelled": _("Run cancelled"),
    "run.interrupted": _("Run interrupted"),
    "run.all_done": _("All %(n)d steps done."),
    "run.nothing_to_do": _("Nothing to do"),
    "run.nothing_to_do_why": _("Nothing to do: %(why)s"),
    "run.left_cordoned": _("Node %(node)s may be left cordoned: uncordon it or resume the run."),
    "run.cancelled_during": _("Cancelled during step %(title)s. %(where)s"),
    "run.cancelled_before": _("Cancelled before step %(title)s. %(where)s"),
    "run.cancelled_pending": _("Cancelled by %(who)s before it started."),
    "run.cancel_requested": _("Cancel requested by %(who)s"),
    "run.resumed_by": _("Resumed by %(who)s"),
    "run.resumed_automatically": _("Resumed automatically"),
    "run.checklist_confirmed": _("Checklist confirmed by %(who)s"),
    "run.checklist_installed": _("The NVIDIA driver and nvidia-container-runtime are installed on %(node)s."),
    "run.stopped_at": _("Stopped at %(title)s: %(error)s"),
    "run.database_outage": _(
        "The database was unavailable for %(s).1f s (%(err)s); the run continued from the step it was in "
        "(steps are idempotent)."
    ),
    "run.database_unavailable": _("Database unavailable"),
    "run.heartbeat_resumed": _(
        "The worker %(w)s stopped sending heartbeats (last at %(t)s); the run was resumed "
        "automatically from the step it was in (steps are idempotent)."
    ),
    "run.heartbeat_interrupted": _(
        "Interrupted: the worker %(w)s stopped sending heartbeats (last at %(t)s), and the run was "
        "already resumed automatically %(n)d times. Resume the run to continue from the step it "
        "was in; steps are idempotent."
    ),
    # one step's events
    "step.nothing_sent": _("Nothing to do: nothing was sent for this step."),
    "step.cancelled_before": _("Cancelled before this step; nothing was sent for it."),
    "step.cancelled_waiting": _("Cancelled while this step was waiting."),
    "step.cancelled_waiting_sent": _("Cancelled while this step was waiting; its change was sent but not verified."),
    "step.transient": _("Transient API error (%(err)s); retrying in %(d).1fs (attempt %(a)d of %(m)d)."),
    "step.kept_failing": _(
        "The API server kept failing (%(err)s) after %(m)d attempts. Check the cluster is reachable, then resume."
    ),
    "step.refused": _(
        "The API server refused the request (%(err)s). This will not succeed by retrying: fix the cause, then resume."
    ),
    "step.unexpected": _("Unexpected error in this step (%(err)s). Check the worker log, then resume."),
    "request.intended": _("about to send: %(call)s"),
    "request.sent": _("sent: %(call)s"),
    "request.failed": _("not accepted: %(call)s"),
    # the notes runs leave on the manifest versions they save
    "manifest.replicas_set": _("procedure C run #%(id)d: replicas %(have)s -> %(want)d"),
    "manifest.toleration_added": _("fix run #%(id)d: tolerate %(taint)s"),
}
