"""The engine with a real Celery worker (Redis broker, file database shared with the test),
killed with SIGKILL in the middle of a step; and ten simultaneous starts on one node."""

import threading

import pytest
from django.db import connection

from gpus.models import ProcedureRun, StepRun
from gpus.procedures import engine, service
from tests.conftest import require_service

from .conftest import wait_for


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
