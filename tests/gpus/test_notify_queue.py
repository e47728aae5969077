"""Notifications on their own queue: while a worker's notifications are held by receivers that
trickle their answers, the worker that runs procedures starts a wizard run at once."""

from __future__ import annotations

import pytest

from brickadmin.accounts.models import Delivery, Notification
from brickadmin.accounts.tasks import deliver
from gpus.models import ProcedureRun
from gpus.procedures import service
from tests.trickle import TricklingServer

from .conftest import wait_for


@pytest.mark.worker
def test_a_wizard_run_is_not_held_behind_trickling_webhooks(
    transactional_db, load_scenario, worker_factory, django_user_model
):
    twin = load_scenario("seed-example")
    server = TricklingServer(every=2.0)
    try:
        env = {"BRICK_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "BRICK_NOTIFY_DEADLINE_SECONDS": "120"}
        worker_factory(**env)  # the procedures' worker (no -Q: the default queue)
        user = django_user_model.objects.create_user("hooked", password="pw-hooked-123")
        for i in range(10):
            note = Notification.objects.create(recipient=user, kind="test", subject=f"s{i}", body="b")
            d = Delivery.objects.create(notification=note, channel=Delivery.Channel.WEBHOOK, address=server.url)
            deliver.delay(d.pk)
        run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root")
        wait_for(
            lambda: ProcedureRun.objects.get(pk=run.pk).status == "succeeded",
            timeout=45,
            what="the run, with ten webhooks trickling",
        )
        assert twin.get_node("dev-a1-ws04")["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
        assert server.accepted == 0  # the notify queue has no worker here: none was taken by the procedures' worker
    finally:
        server.stop()
