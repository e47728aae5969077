"""The worker's side of notifications: send one delivery (an email or a webhook post),
retrying with backoff; after the last attempt it stays failed, for admins to see."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.request
from contextlib import contextmanager

from celery import shared_task
from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from . import webhooks
from .models import Delivery


def _absolute(link: str) -> str:
    base = settings.BRICK_PUBLIC_URL.rstrip("/")
    return f"{base}{link}" if link and base else link


class DeadlinePassed(TimeoutError):
    """The peer did not take the notification within BRICK_NOTIFY_DEADLINE_SECONDS."""


@contextmanager
def deadline(sockets: list):
    """A total deadline for one send: a per-read timeout lets a peer that trickles a byte every
    few seconds hold the worker for ever, so when BRICK_NOTIFY_DEADLINE_SECONDS have passed the
    connection's sockets (appended to ``sockets`` as they open) are shut, whatever they wait for."""
    seconds = settings.BRICK_NOTIFY_DEADLINE_SECONDS
    passed = threading.Event()

    def cut():
        passed.set()
        for sock in list(sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(seconds, cut)
    timer.daemon = True
    timer.start()
    try:
        yield time.monotonic() + seconds
    except Exception as exc:
        if passed.is_set():
            raise DeadlinePassed(f"no answer within {seconds:g} s") from exc
        raise
    finally:
        timer.cancel()
    if passed.is_set():
        raise DeadlinePassed(f"no answer within {seconds:g} s")


def send_email(d: Delivery) -> None:
    note = d.notification
    body = note.body + (f"\n\n{_absolute(note.link)}" if note.link else "")
    sockets: list = []
    with deadline(sockets) as until:
        backend = get_connection(fail_silently=False, timeout=min(settings.EMAIL_TIMEOUT, until - time.monotonic()))
        backend.open()
        if backend.connection is not None and backend.connection.sock is not None:
            sockets.append(backend.connection.sock)
        try:
            EmailMessage(
                subject=note.subject,
                body=body,
                to=[d.address],
                from_email=settings.DEFAULT_FROM_EMAIL,
                connection=backend,
            ).send(fail_silently=False)
        finally:
            backend.close()


def _opener(sockets: list):
    """webhooks.opener (no redirects), its connections' sockets recorded for the deadline."""

    class Connection(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            sockets.append(self.sock)

    class SecureConnection(http.client.HTTPSConnection):
        def connect(self):
            super().connect()
            sockets.append(self.sock)

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Connection, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(SecureConnection, req, context=self._context)

    return urllib.request.build_opener(webhooks.NoRedirects, Handler, SecureHandler)


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
    sockets: list = []
    with deadline(sockets) as until:
        timeout = min(settings.BRICK_NOTIFY_TIMEOUT, until - time.monotonic())
        with _opener(sockets).open(req, timeout=timeout) as resp:  # a 3xx is an error here
            if resp.status >= 300:
                raise OSError(f"HTTP {resp.status}")
            resp.read(65536)  # the answer, within the deadline too


SENDERS = {Delivery.Channel.EMAIL: send_email, Delivery.Channel.WEBHOOK: send_webhook}


# On its own queue (settings.CELERY_TASK_ROUTES: "notify", its own worker), so a slow peer never
# holds the worker that runs procedures and the reaper; the hard time limit is a last resort
# behind the deadline above.
@shared_task(
    name="brickadmin.accounts.tasks.deliver",
    bind=True,
    acks_late=True,
    time_limit=int(settings.BRICK_NOTIFY_DEADLINE_SECONDS) + 30,
)
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
