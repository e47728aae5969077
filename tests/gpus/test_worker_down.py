"""Nothing dies silently: a Celery worker (or its beat) that stops is a banner on every page
within a minute, a pending run says how long it has waited and why, and bin/demo's keeper
starts a worker that died again and says so."""

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from gpus.models import ServiceBeat
from gpus.procedures import service

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]


def beat(seconds_ago: float) -> None:
    ServiceBeat.objects.update_or_create(
        name="reaper", defaults={"beat_at": timezone.now() - timedelta(seconds=seconds_ago)}
    )


@pytest.mark.parametrize("path", ["/", "/workspaces/", "/profile/"])
def test_a_stopped_worker_is_a_banner_on_every_page(admin_client, twin, path):
    beat(45)
    body = admin_client.get(path).content.decode()
    assert 'data-testid="worker-down"' in body and "The Celery worker is not running." in body
    assert "bin/demo restarts it by itself" in body


def test_a_running_worker_shows_no_banner(admin_client, twin):
    beat(3)
    assert 'data-testid="worker-down"' not in admin_client.get("/").content.decode()


def test_the_banner_says_it_in_korean(admin_client, twin):
    beat(45)
    admin_client.cookies["django_language"] = "ko"
    body = admin_client.get("/").content.decode()
    assert 'data-testid="worker-down"' in body and "Celery 워커가 실행되고 있지 않습니다." in body


def pending_page(client, run) -> str:
    body = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    start = body.index('data-testid="pending-why">')
    return body[start : body.index("</p>", start)]


def test_a_pending_run_says_it_waits_for_a_worker_that_never_ran(admin_client, twin):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    type(run).objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=4))
    assert "Waiting 4\xa0minutes: no Celery worker has run here yet" in pending_page(admin_client, run)


def test_a_pending_run_says_the_worker_stopped(admin_client, twin):
    beat(600)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    assert "the Celery worker stopped (last seen 10\xa0minutes ago)" in pending_page(admin_client, run)


def test_a_pending_run_on_a_live_worker_says_it_starts_within_seconds(admin_client, twin):
    beat(1)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    assert "the worker is up and picks the run up within seconds" in pending_page(admin_client, run)


@pytest.mark.slow
def test_the_demo_starts_a_worker_that_died_again_and_says_so(tmp_path):
    log = tmp_path / "worker.log"
    marker = tmp_path / "starts"
    worker = f"echo $$ >> {marker}; exec sleep 30"  # a worker that writes its pid and runs on
    keeper = subprocess.Popen(
        [str(REPO / "bin" / "keep-running"), "Celery worker", str(log), "sh", "-c", worker],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "KEEP_RUNNING_PAUSE": "0.2"},
    )
    try:
        for _ in range(100):
            if marker.exists():
                break
            time.sleep(0.05)
        os.kill(int(marker.read_text().split()[0]), signal.SIGKILL)  # the worker dies
        for _ in range(100):
            if marker.exists() and len(marker.read_text().split()) >= 2:
                break
            time.sleep(0.05)
        assert len(marker.read_text().split()) == 2  # started again
        assert "the Celery worker stopped (exit 137); starting it again" in log.read_text()
    finally:
        os.killpg(keeper.pid, signal.SIGTERM)  # bin/demo's stop: the keeper and its worker end together
        keeper.wait(5)
    assert "the Celery worker stopped (exit 137)" in keeper.stderr.read()
