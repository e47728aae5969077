"""A webhook receiver that trickles its answer (a header line every 2 s, so a per-read timeout
never fires) is cut when the send's total deadline has passed: the delivery is retried later,
and the worker is free again."""

from __future__ import annotations

import threading

import pytest

from brickadmin.accounts import tasks
from brickadmin.accounts.models import Delivery, Notification
from tests.trickle import TricklingServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def trickling(settings):
    server = TricklingServer(every=2.0)
    settings.BRICK_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    yield server
    server.stop()


def test_a_trickling_webhook_is_given_up_after_the_total_deadline(alice, trickling, settings):
    settings.BRICK_NOTIFY_DEADLINE_SECONDS = 3
    settings.BRICK_NOTIFY_TIMEOUT = 10  # longer than any gap between the receiver's lines
    note = Notification.objects.create(recipient=alice, kind="test", subject="s", body="b")
    d = Delivery.objects.create(notification=note, channel=Delivery.Channel.WEBHOOK, address=trickling.url)
    outcome = {}

    def send():
        try:
            tasks.send_webhook(d)
            outcome["sent"] = True
        except Exception as exc:
            outcome["error"] = exc

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(timeout=60)  # unbounded before: the receiver answers a line every 2 s for ever
    assert not sender.is_alive(), "the send was still waiting on the trickling receiver"
    assert isinstance(outcome.get("error"), tasks.DeadlinePassed)
    assert "no answer within 3 s" in str(outcome["error"])
    assert trickling.accepted == 1


def test_the_task_records_the_cut_send_and_retries_it(alice, trickling, settings, monkeypatch):
    settings.BRICK_NOTIFY_DEADLINE_SECONDS = 2
    note = Notification.objects.create(recipient=alice, kind="test", subject="s", body="b")
    d = Delivery.objects.create(notification=note, channel=Delivery.Channel.WEBHOOK, address=trickling.url)
    retried = {}

    class Retry(Exception):
        pass

    def retry(**kwargs):
        retried.update(kwargs)
        return Retry()

    monkeypatch.setattr(tasks.deliver, "retry", retry)
    with pytest.raises(Retry):
        tasks.deliver.run(d.pk)
    d.refresh_from_db()
    assert d.status == Delivery.Status.RETRYING and "DeadlinePassed" in d.last_error and retried


def test_notifications_have_a_queue_of_their_own():
    from brickadmin.celery import app

    assert app.amqp.router.route({}, tasks.deliver.name)["queue"].name == "notify"
    assert app.amqp.router.route({}, "gpus.tasks.reap_stale_runs")["queue"].name == "celery"
