"""The engine with a real Celery worker (Redis broker, file database shared with the test),
killed with SIGKILL in the middle of a step; and ten simultaneous starts on one node."""

import shutil
import subprocess
import threading

import pytest
from django.db import connection

from gpus.models import ProcedureRun, StepRun
from gpus.procedures import engine, service
from tests.conftest import require_service

from .conftest import Worker, free_port, wait_for


def node_label(gw, node):
    return gw.get_node(node)["metadata"]["labels"].get("brick.cloud/gpu.sharing")


@pytest.mark.worker
def test_worker_killed_mid_step_is_taken_over_automatically_and_nothing_applied_twice(
    transactional_db, load_scenario, worker_factory, settings
):
    twin = load_scenario("seed-example")
    first = worker_factory(BRICK_PROCEDURE_STEP_PAUSE=1.0, BRICK_RUN_HEARTBEAT_STALE_SECONDS=2)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root")  # enqueued on commit

    # The label step has sent its change and is pausing before its verification: kill now.
    wait_for(lambda: node_label(twin, "dev-a1-ws04") == "timeslicing", what="the label step's effect")
    first.kill()
    assert ProcedureRun.objects.get(pk=run.pk).status == "running"
    assert not StepRun.objects.filter(run=run, step_key="label", state="succeeded").exists()

    # What may have reached the API server is on record: the label request, written ahead.
    assert run.steps.filter(step_key="label", intent__state="intended").exists()

    settings.BRICK_RUN_HEARTBEAT_STALE_SECONDS = 2
    from gpus.tasks import reap_stale_runs

    worker_factory(BRICK_PROCEDURE_STEP_PAUSE=0)
    # No person resumes it: the reaper takes it over and the new worker continues.
    wait_for(lambda: reap_stale_runs() == [run.pk], timeout=30, interval=0.5, what="the reaper")
    assert run.steps.filter(step_key=engine.RUN_EVENT, title="Resumed automatically").count() == 1
    wait_for(
        lambda: ProcedureRun.objects.get(pk=run.pk).status in ("succeeded", "failed"),
        timeout=60,
        what="the resumed run to finish",
    )
    run.refresh_from_db()
    assert run.status == "succeeded", run.message

    # Cluster state is the target state.
    node = twin.get_node("dev-a1-ws04")
    assert node["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
    assert node["status"]["allocatable"]["nvidia.com/gpu.shared"] == "2"
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert not node["spec"].get("unschedulable")
    # No step's effect was applied twice: at most one event per step carries what was sent,
    # and the label step, interrupted after sending, found its work done on resume.
    for key in {s.step_key for s in run.steps.all()} - {engine.RUN_EVENT}:
        assert run.steps.filter(step_key=key, sent__isnull=False).count() <= 1, key
    label_events = list(
        run.steps.filter(step_key="label", intent__isnull=True).order_by("seq").values_list("state", "attempt")
    )
    assert label_events == [("pending", 0), ("running", 1), ("failed", 1), ("running", 1), ("succeeded", 1)]
    final = run.steps.filter(step_key="label", state="succeeded").get()
    assert final.sent is None and "already" in final.output
    # Steps finished before the kill were not run again.
    for key in ("precheck", "cordon", "drain"):
        assert run.steps.filter(step_key=key, state="running", intent__isnull=True).count() == 1, key


@pytest.mark.worker
def test_worker_runs_procedure_enqueued_on_commit(transactional_db, load_scenario, worker_factory):
    twin = load_scenario("seed-example")
    worker_factory()
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root")
    wait_for(lambda: ProcedureRun.objects.get(pk=run.pk).status == "succeeded", timeout=60, what="the run")
    assert node_label(twin, "dev-a1-ws04") == "timeslicing"


def test_ten_simultaneous_starts_on_one_node_make_exactly_one_run(transactional_db, load_scenario):
    if connection.vendor == "sqlite" and "memory" in str(connection.settings_dict["NAME"]):
        require_service(False, "a file database shared by threads")  # never in-memory in CI (PostgreSQL)
    load_scenario("seed-example")
    barrier = threading.Barrier(10)
    started, refused, errors = [], [], []

    def start(i):
        try:
            barrier.wait()
            started.append(service.start_run("A", "dev-a1-ws04", {}, actor_name=f"admin{i}", dispatch=False).pk)
        except service.RunRefused as exc:
            refused.append(exc.active.pk if exc.active else None)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(started) == 1 and len(refused) == 9
    assert ProcedureRun.objects.filter(node="dev-a1-ws04").count() == 1
    assert all(pk == started[0] for pk in refused)  # each refusal links to the running one


@pytest.fixture
def restartable_broker(tmp_path):
    """A redis-server of this test's own (so it may restart it), without persistence as the
    chart's; this process's Celery app publishes to it."""
    from brickadmin.celery import app

    binary = shutil.which("redis-server")
    require_service(bool(binary), "redis-server")
    port = free_port()
    procs = []

    def start():
        procs.append(
            subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        import redis

        wait_for(lambda: _answers(redis, port), timeout=20, what="redis-server")

    def restart():
        procs[-1].terminate()
        procs[-1].wait(timeout=20)
        start()

    start()
    old = app.conf.broker_url
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    app._pool = None
    app.amqp._producer_pool = None
    yield app.conf.broker_url, restart
    app.conf.broker_url = old
    app._pool = None
    app.amqp._producer_pool = None
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=20)


def _answers(redis, port):
    try:
        return redis.Redis(port=port, socket_timeout=1).ping()
    except Exception:
        return False


@pytest.mark.worker
def test_the_worker_outlives_a_redis_restart_in_the_middle_of_a_run(
    transactional_db, load_scenario, restartable_broker
):
    twin = load_scenario("seed-example")
    url, restart = restartable_broker
    worker = Worker(url, {"BRICK_PROCEDURE_STEP_PAUSE": "1.0"}, pool="prefork").start()
    try:
        first = service.start_run("A", "dev-a1-ws04", {}, actor_name="root")
        wait_for(lambda: node_label(twin, "dev-a1-ws04") == "timeslicing", what="the run under way")
        restart()  # its task is unacknowledged (acks_late) while the broker goes away
        wait_for(lambda: ProcedureRun.objects.get(pk=first.pk).status != "running", timeout=60, what="the run")
        assert ProcedureRun.objects.get(pk=first.pk).status == "succeeded"
        # The same worker, reconnected, takes the next run (whatever its pre-check finds).
        second = service.start_run("B", "dev-a1-ws04", {}, actor_name="root")
        wait_for(
            lambda: ProcedureRun.objects.get(pk=second.pk).status in ("succeeded", "failed"),
            timeout=90,
            what="the next run",
        )
        assert worker.proc.poll() is None
    finally:
        worker.stop()
