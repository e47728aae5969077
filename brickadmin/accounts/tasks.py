"""The worker's side of notifications: send one delivery (an email or a webhook post),
retrying with backoff; after the last attempt it stays failed, for admins to see."""

from __future__ import annotations

import json
import urllib.request

from celery import shared_task
from django.conf import settings
from django.core.mail import EmailMessage

from . import webhooks
from .models import Delivery


def _absolute(link: str) -> str:
    base = settings.BRICK_PUBLIC_URL.rstrip("/")
    return f"{base}{link}" if link and base else link


def send_email(d: Delivery) -> None:
    note = d.notification
    body = note.body + (f"\n\n{_absolute(note.link)}" if note.link else "")
    EmailMessage(subject=note.subject, body=body, to=[d.address], from_email=settings.DEFAULT_FROM_EMAIL).send(
        fail_silently=False
    )


def webhook_payload(d: Delivery) -> dict:
    """Slack's incoming-webhook JSON, which Mattermost accepts as is: ``text`` (Markdown)."""
    note = d.notification
    link = _absolute(note.link)
    return {"text": f"*{note.subject}*\n{note.body}" + (f"\n{link}" if link else "")}


def send_webhook(d: Delivery) -> None:
    refused = webhooks.refusal(d.address, settings.BRICK_WEBHOOK_ALLOWED_HOSTS)
    if refused:
        raise PermissionError(refused)
    data = json.dumps(webhook_payload(d)).encode()
    req = urllib.request.Request(
        d.address, data=data, method="POST", headers={"Content-Type": "application/json", "User-Agent": "brickadmin"}
    )
    with webhooks.opener.open(req, timeout=settings.BRICK_NOTIFY_TIMEOUT) as resp:  # a 3xx is an error here
        if resp.status >= 300:
            raise OSError(f"HTTP {resp.status}")


SENDERS = {Delivery.Channel.EMAIL: send_email, Delivery.Channel.WEBHOOK: send_webhook}


@shared_task(name="brickadmin.accounts.tasks.deliver", bind=True, acks_late=True)
def deliver(self, delivery_id: int) -> str:
    d = Delivery.objects.select_related("notification").filter(pk=delivery_id).first()
    if d is None or d.status == Delivery.Status.SENT:
        return "nothing to do"
    try:
        SENDERS[d.channel](d)
    except Exception as exc:  # SMTP, HTTP and socket errors alike
        d.attempts += 1
        d.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        retries = settings.BRICK_NOTIFY_RETRIES
        if self.request.retries >= retries or isinstance(exc, PermissionError):  # a refused address stays refused
            d.status = Delivery.Status.FAILED
            d.save(update_fields=["attempts", "last_error", "status", "updated_at"])
            return "failed"
        d.status = Delivery.Status.RETRYING
        d.save(update_fields=["attempts", "last_error", "status", "updated_at"])
        raise self.retry(
            exc=exc, countdown=settings.BRICK_NOTIFY_RETRY_SECONDS * 2**self.request.retries, max_retries=retries
        ) from exc
    d.attempts += 1
    d.status, d.last_error = Delivery.Status.SENT, ""
    d.save(update_fields=["attempts", "last_error", "status", "updated_at"])
    return "sent"
