import logging
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")

log = logging.getLogger(__name__)


def survive_a_restarted_redis():
    """Keep the worker alive when Redis restarts while a task is unacknowledged (acks_late).

    Celery 5.7's consumer, on a lost broker connection, first collects the connection (its
    transport forgets its client) and then closes the channel, whose QoS restores the
    unacknowledged messages through that client: AttributeError ('NoneType' object has no
    attribute 'hostname'), not a connection error, so the worker exits ("Unrecoverable
    error"); the task's own ack fails the same way once it finishes. Seen by bench/chaos.py.
    Through a collected connection there is nothing to restore or acknowledge: the message
    stays in Redis's unacked index (restored after the visibility timeout; a redelivered run
    finds nothing to claim), and a restarted Redis without persistence has lost it anyway
    (the reaper enqueues a pending run again and resumes a stale one)."""
    from kombu.transport import redis as kombu_redis
    from kombu.transport import virtual

    def collected(qos) -> bool:
        return getattr(qos.channel.connection, "client", None) is None

    restore_unacked, ack = kombu_redis.QoS.restore_unacked, kombu_redis.QoS.ack

    def restore_unacked_unless_collected(self, client=None):
        if client is None and collected(self):
            log.warning("broker connection lost: %d unacknowledged message(s) left to Redis", len(self._delivered))
            self._delivered.clear()
            return None
        return restore_unacked(self, client)

    def ack_unless_collected(self, delivery_tag):
        if collected(self):
            return virtual.QoS.ack(self, delivery_tag)  # forgotten here; nothing to reach in Redis
        return ack(self, delivery_tag)

    kombu_redis.QoS.restore_unacked = restore_unacked_unless_collected
    kombu_redis.QoS.ack = ack_unless_collected


survive_a_restarted_redis()

app = Celery("brickadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
