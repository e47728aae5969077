"""What runs tell people (brickadmin/notify.py carries it): a run's end to the admin who
started it; a fix's notice to the Workspace's owner. Never raises into the run."""

from __future__ import annotations

import logging

from django.utils.translation import gettext as _

from brickadmin import notify
from brickadmin.permissions import is_admin
from brickadmin.wording import said

from .registry import headline

log = logging.getLogger(__name__)


def run_ended(run_id: int) -> None:
    from ..models import ProcedureRun

    try:
        run = ProcedureRun.objects.select_related("actor").get(pk=run_id)
    except Exception:
        log.exception("run %s: could not read it to tell its admin", run_id)
        return

    if run.actor is None or not is_admin(run.actor):
        return  # a run page is for admins: an owner's own release is told on their Workspace page

    def words():
        facts = {
            "id": run.pk,
            "proc": run.get_procedure_display(),
            "node": run.node,
            "status": run.get_status_display(),
            "what": headline(run),
            "message": run.shown_message,
        }
        if not run.node:  # a Workspace's quota, the cluster's replicas: what it changed, never "on -"
            return (
                _("Run #%(id)d %(status)s: %(what)s") % facts,
                _("Run #%(id)d (%(what)s) ended: %(status)s. %(message)s") % facts,
            )
        return (
            _("Run #%(id)d %(status)s: %(proc)s on %(node)s") % facts,
            _("Run #%(id)d (%(proc)s, node %(node)s) ended: %(status)s. %(message)s") % facts,
        )

    notify.notify(run.actor, "run-ended", words, run.get_absolute_url())


def tell_owner(namespace: str, owner_name: str, subject: str, message, actor_name: str) -> None:
    """The Workspace's owner learns what an admin's fix did (the notice on their page, too)."""

    def words():
        return (
            said("notice.admin_acted_subject", subject=subject),
            said("notice.by_admin", message=message, admin=actor_name or "-"),
        )

    notify.notify_owner(namespace, "fix-done", words, owner_name=owner_name)
