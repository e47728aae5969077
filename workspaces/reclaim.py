"""Asking before reclaiming: an admin asks a Workspace's owner whether its idle GPU quota is
still needed; the owner answers in the product (keep it until a date, with a reason; or
release part or all); with no answer by the deadline the admin may reclaim. Every question
and answer is a record (ReclaimAsk, and a decision row); a release and a reclaim go through
the one quota-change path (workspaces/quota.py), with its preview and audited run."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from brickadmin import notify
from brickadmin.wording import said
from gpus.models import OwnerNotice

from . import quota as quota_mod
from .models import Decision, ReclaimAsk, WorkspaceRequest


class ReclaimError(Exception):
    pass


def record_notice(ask: ReclaimAsk, message, actor_name: str = "") -> None:
    """The question's notice on the owner's Workspace page, under the name of whoever acted
    (the asking admin, the owner who answered, the admin who reclaimed)."""
    reclaimed = ask.quota_run_id and ask.answer != ReclaimAsk.Answer.RELEASE
    OwnerNotice.objects.create(
        namespace=ask.namespace,
        owner_name=ask.workspace.requester_name if ask.workspace else "",
        subject=f"reclaim-ask:{ask.pk}:{'reclaimed' if reclaimed else ask.answer or 'asked'}",
        message=message,
        actor_name=actor_name or ask.asked_by_name,
    )


def notify_owner(ask: ReclaimAsk, kind: str, words, actor_name: str = "") -> None:
    """Tell the owner: the notice on their Workspace page, and through the notifications
    (in the product, and by email or webhook as they chose, in their language).
    ``words()`` -> (subject, body), messages: the notice keeps the body's code (its reader's
    language), the notification is worded in the owner's."""
    record_notice(ask, words()[1], actor_name)
    link = reverse("workspace_detail", args=[ask.workspace.pk]) if ask.workspace else ""
    owner_name = ask.workspace.requester_name if ask.workspace else ""
    notify.notify_owner(ask.namespace, kind, words, link, owner_name=owner_name)


def open_ask(namespace: str) -> ReclaimAsk | None:
    """The Workspace's question still open: unanswered, or kept, and not reclaimed."""
    return (
        ReclaimAsk.objects.filter(namespace=namespace, quota_run_id__isnull=True)
        .exclude(answer=ReclaimAsk.Answer.RELEASE)
        .first()
    )


def ask_owner(namespace: str, *, actor, days: int, message: str = "", gateway=None) -> ReclaimAsk:
    from brickadmin.cluster.gateway import get_gateway

    if days < 1 or days > 90:
        raise ReclaimError(_("Give the owner between 1 and 90 days to answer."))
    if open_ask(namespace) is not None:
        raise ReclaimError(_("The owner of %(ws)s has already been asked.") % {"ws": namespace})
    seen = quota_mod.preview(gateway or get_gateway(), namespace, 0)
    if not seen.resource or not seen.before:
        raise ReclaimError(_("This Workspace holds no GPU quota to change."))
    req = WorkspaceRequest.objects.filter(name=namespace, status=WorkspaceRequest.Status.APPROVED).first()
    with transaction.atomic():
        ask = ReclaimAsk.objects.create(
            namespace=namespace,
            workspace=req,
            resource=seen.resource,
            quota_at_ask=seen.before,
            message=message.strip()[:1000],
            asked_by=actor,
            asked_by_name=actor.get_username(),
            deadline=timezone.now() + timedelta(days=days),
        )
        Decision.objects.create(
            actor=actor,
            actor_name=actor.get_username(),
            action=Decision.Action.RECLAIM_ASK,
            workspace=req,
            subject=namespace,
            gpu_resource=seen.resource,
            amount=seen.before,
            detail=said("decision.reclaim_asked", when=ask.deadline.strftime("%Y-%m-%d %H:%M UTC"), msg=ask.message),
        )
        facts = {
            "who": ask.asked_by_name,
            "ws": namespace,
            "n": seen.before,
            "res": seen.resource,
            "r": seen.requested,
            "when": ask.deadline.strftime("%Y-%m-%d %H:%M UTC"),
            "msg": ask.message,
        }

        def words():
            return said("reclaim.ask_subject", **facts), said("reclaim.ask_body", **facts)

        notify_owner(ask, "reclaim-ask", words)
    return ask


def answer_keep(ask: ReclaimAsk, user, *, until, reason: str) -> ReclaimAsk:
    reason = (reason or "").strip()
    if not reason:
        raise ReclaimError(_("Say why the Workspace still needs its GPUs."))
    if until is None or until <= timezone.now().date():
        raise ReclaimError(_("Keep it until a date after today."))
    return _answer(
        ask,
        user,
        ReclaimAsk.Answer.KEEP,
        keep_until=until,
        answer_reason=reason[:1000],
        text=said(
            "reclaim.kept", who=user.get_username(), n=ask.quota_at_ask, res=ask.resource, until=str(until), why=reason
        ),
    )


def answer_release(ask: ReclaimAsk, user, *, amount: int) -> ReclaimAsk:
    """The owner gives back ``amount`` of the quota: the quota change runs at once (never below
    what the pods request: the preview's rule)."""
    from brickadmin.cluster.gateway import get_gateway

    gateway = get_gateway()
    now = quota_mod.preview(gateway, ask.namespace, 0).before
    if amount < 1 or amount > now:
        raise ReclaimError(_("Release between 1 and %(n)d.") % {"n": now})
    try:
        run = quota_mod.change_quota(
            ask.namespace,
            now - amount,
            actor=user,
            gateway=gateway,
            reason=said("reason.released", who=user.get_username(), admin=ask.asked_by_name),
        )
    except quota_mod.QuotaError as exc:
        raise ReclaimError(str(exc)) from None
    return _answer(
        ask,
        user,
        ReclaimAsk.Answer.RELEASE,
        released=amount,
        quota_run_id=run.pk,
        text=said("reclaim.released", who=user.get_username(), n=amount, res=ask.resource, id=run.pk),
    )


def _answer(ask, user, answer, *, text, **fields) -> ReclaimAsk:
    with transaction.atomic():
        n = (
            ReclaimAsk.objects.filter(pk=ask.pk, quota_run_id__isnull=True)
            .exclude(answer=ReclaimAsk.Answer.RELEASE)
            .update(answer=answer, answered_at=timezone.now(), answered_by_name=user.get_username(), **fields)
        )
        if not n:
            raise ReclaimError(_("This question is closed already."))
        ask.refresh_from_db()
        Decision.objects.create(
            actor=user,
            actor_name=user.get_username(),
            action=Decision.Action.RECLAIM_ANSWER,
            workspace=ask.workspace,
            subject=ask.namespace,
            gpu_resource=ask.resource,
            amount=ask.released,
            detail=text,
        )
        record_notice(ask, text, user.get_username())  # the owner's own answer: on their page, no message to them
        tell_asking_admin(ask, text)
    return ask


def tell_asking_admin(ask: ReclaimAsk, text) -> None:
    """The admin who asked learns each answer, in their language, with the quota page to act from."""
    facts = {
        "who": ask.answered_by_name,
        "ws": ask.namespace,
        "n": ask.released or 0,
        "res": ask.resource,
        "until": str(ask.keep_until or ""),
    }
    code = "reclaim.released_subject" if ask.answer == ReclaimAsk.Answer.RELEASE else "reclaim.kept_subject"

    def words():
        return said(code, **facts), text

    notify.notify(ask.asked_by, "reclaim-answer", words, reverse("workspace_quota", args=[ask.namespace]))


def reclaim_target(ask: ReclaimAsk, requested: int) -> int:
    """What a reclaim leaves: what the pods request now (never below it)."""
    return max(0, requested)


def reclaim(ask: ReclaimAsk, *, actor, after: int, gateway=None, acknowledged: int | None = None) -> ReclaimAsk:
    """After the deadline without an answer (or past the date the owner kept it until): the
    quota change, through the one path, recorded on the question. ``acknowledged``: as for any
    quota change, the GPUs over the Total the admin acknowledged (a reclaim upward can ask it)."""
    if not ask.overdue():
        raise ReclaimError(
            _("The owner has until %(when)s to answer: reclaim after that.")
            % {"when": (ask.keep_until or ask.deadline).strftime("%Y-%m-%d")}
        )
    try:
        run = quota_mod.change_quota(
            ask.namespace,
            after,
            actor=actor,
            gateway=gateway,
            reason=said("reason.reclaimed", when=ask.asked_at.strftime("%Y-%m-%d"), who=ask.asked_by_name),
            acknowledged=acknowledged,
        )
    except quota_mod.QuotaError as exc:
        raise ReclaimError(str(exc)) from None
    ReclaimAsk.objects.filter(pk=ask.pk).update(quota_run_id=run.pk)
    ask.refresh_from_db()
    facts = {
        "who": actor.get_username(),
        "ws": ask.namespace,
        "res": ask.resource,
        "n": after,
        "when": ask.asked_at.strftime("%Y-%m-%d"),
        "id": run.pk,
    }

    def words():
        return said("reclaim.reclaimed_subject", **facts), said("reclaim.reclaimed_body", **facts)

    notify_owner(ask, "reclaimed", words, actor.get_username())
    return ask
