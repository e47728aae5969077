"""Telling people what happened: the one function every app calls.

``notify(user, kind, words, link)`` records a notification in the recipient's language (shown
in the product, with an unread count) and, by the recipient's choice on their profile, hands
an email and a chat webhook (Slack/Mattermost-compatible JSON) to the worker, which sends them
with retries (brickadmin/accounts/tasks.py). Nothing here ever raises into the caller: a
notification that cannot be recorded or queued is logged and, when it could be recorded,
left visible to admins as a failed delivery; the action it tells of stands.

``notify_owner(namespace, ...)`` tells a Workspace's owner: the apps that know owners register
a resolver from their AppConfig.ready() (``OWNER_RESOLVERS``), so the gpus app can tell an
owner without importing the workspaces app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import translation

log = logging.getLogger(__name__)

# (namespace) -> user or None: who owns a Workspace namespace. Filled by the apps' ready().
OWNER_RESOLVERS: list[Callable] = []


def language_of(user) -> str:
    from .accounts.models import Preference

    # The language they chose for notifications, else the one they read the console in.
    chosen, reading = Preference.objects.filter(user_id=user.pk).values_list("language", "ui_language").first() or (
        "",
        "",
    )
    for lang in (chosen, reading):
        if lang in dict(settings.LANGUAGES):
            return lang
    return settings.LANGUAGE_CODE


def notify(user, kind: str, words: Callable[[], tuple[str, str]], link: str = ""):
    """Tell ``user``: ``words()`` -> (subject, body), called in the recipient's language.
    Returns the Notification, or None when nothing could be recorded."""
    if user is None or not getattr(user, "pk", None):
        return None
    try:
        return _record(user, kind, words, link)
    except Exception:  # never into the action that notifies
        log.exception("could not record a %s notification for user %s", kind, user.pk)
        return None


def _record(user, kind, words, link):
    from .accounts.models import Delivery, Notification, Preference

    pref = Preference.objects.filter(user_id=user.pk).first()
    with translation.override(language_of(user)):
        subject, body = words()
        subject, body = str(subject), str(body)
    with transaction.atomic():
        note = Notification.objects.create(recipient=user, kind=kind, subject=subject[:300], body=body, link=link[:500])
        deliveries = []
        if (pref is None or pref.email_notifications) and user.email:
            deliveries.append(
                Delivery.objects.create(notification=note, channel=Delivery.Channel.EMAIL, address=user.email)
            )
        if pref is not None and pref.webhook_url:
            deliveries.append(
                Delivery.objects.create(notification=note, channel=Delivery.Channel.WEBHOOK, address=pref.webhook_url)
            )
    for d in deliveries:
        transaction.on_commit(lambda pk=d.pk: enqueue(pk))
    return note


def enqueue(delivery_id: int) -> None:
    """Hand a delivery to the worker; a queue that cannot be reached marks it failed (seen by
    admins) instead of failing the caller."""
    from .accounts.models import Delivery
    from .accounts.tasks import deliver

    try:
        deliver.delay(delivery_id)
    except Exception as exc:  # kombu/redis raise many types
        log.exception("could not queue delivery %s", delivery_id)
        Delivery.objects.filter(pk=delivery_id).exclude(status=Delivery.Status.SENT).update(
            status=Delivery.Status.FAILED, last_error=f"could not reach the task queue: {exc}"[:2000]
        )


def owner_of(namespace: str):
    """The user owning a Workspace namespace by the registered resolvers, or None."""
    for resolve in OWNER_RESOLVERS:
        try:
            user = resolve(namespace)
        except Exception:
            log.exception("owner resolver failed for %s", namespace)
            continue
        if user is not None:
            return user
    return None


def notify_owner(namespace: str, kind: str, words, link: str = "", *, owner_name: str = ""):
    """Tell the owner of a Workspace namespace (by its record; else by the owner label's
    username, when such a user exists)."""
    try:
        user = owner_of(namespace)
        if user is None and owner_name:
            user = get_user_model().objects.filter(username=owner_name).first()
    except Exception:
        log.exception("could not find the owner of %s", namespace)
        return None
    return notify(user, kind, words, link) if user is not None else None
