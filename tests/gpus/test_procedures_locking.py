"""Procedure C against node conversions (A/B/D): the conflict check and the insert are one
step under one lock, so they never run side by side; and a refused checklist confirmation
leaves no trace."""

import threading

import pytest
from django.db import connection
from django.urls import reverse

from gpus.models import ProcedureRun, StepRun
from gpus.procedures import engine, service
from gpus.tasks import execute_run
from tests.conftest import require_service

pytestmark = pytest.mark.usefixtures("fast_engine")


def test_c_pending_refuses_b_on_a_timeslicing_node_with_link(twin):
    c_run = service.start_run("C", "", {"replicas": 3}, actor_name="root", dispatch=False)
    with pytest.raises(service.RunRefused) as exc:
        service.start_run("B", "dev-a1-ws02", {}, actor_name="other", dispatch=False)
    assert exc.value.active.pk == c_run.pk
    assert list(ProcedureRun.objects.active().values_list("pk", flat=True)) == [c_run.pk]


def test_b_pending_refuses_c_with_link(twin):
    b_run = service.start_run("B", "dev-a1-ws02", {}, actor_name="root", dispatch=False)
    with pytest.raises(service.RunRefused) as exc:
        service.start_run("C", "", {"replicas": 3}, actor_name="other", dispatch=False)
    assert exc.value.active.pk == b_run.pk
    assert list(ProcedureRun.objects.active().values_list("pk", flat=True)) == [b_run.pk]


def test_c_pending_refuses_node_wizard_with_link_to_c(twin, admin_client):
    c_run = service.start_run("C", "", {"replicas": 3}, actor_name="root", dispatch=False)
    # the plan otherwise in order: only the pending C run stands in the way
    r = admin_client.post(reverse("wizard_start", args=["A"]), {"node": "dev-a1-ws04", "capacity_acknowledged": "1"})
    assert r.status_code == 409
    assert reverse("run_detail", args=[c_run.pk]) in r.content.decode()
    assert list(ProcedureRun.objects.active().values_list("pk", flat=True)) == [c_run.pk]


@pytest.mark.parametrize("first,second", [(("C", ""), ("B", "dev-a1-ws02")), (("B", "dev-a1-ws02"), ("C", ""))])
def test_c_and_node_run_started_at_the_same_time_make_one_active_run(
    transactional_db, load_scenario, monkeypatch, first, second
):
    """Both starts pass their conflict check before either inserts (the race the lock closes)."""
    if connection.vendor == "sqlite" and "memory" in str(connection.settings_dict["NAME"]):
        require_service(False, "a file database shared by threads")  # never in-memory in CI (PostgreSQL)
    load_scenario("seed-example")
    barrier = threading.Barrier(2)
    checked = service._conflicting

    def check_then_wait(code, lock_key):
        other = checked(code, lock_key)
        try:
            barrier.wait(timeout=2)  # with the lock, the other start waits for us: the barrier breaks
        except threading.BrokenBarrierError:
            pass
        return other

    monkeypatch.setattr(service, "_conflicting", check_then_wait)
    started, refused, errors = [], [], []

    def start(code, node):
        try:
            params = {"replicas": 3} if code == "C" else {}
            started.append(service.start_run(code, node, params, actor_name="root", dispatch=False).pk)
        except service.RunRefused as exc:
            refused.append(exc.active.pk if exc.active else None)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=args) for args in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(started) == 1 and refused == started
    assert list(ProcedureRun.objects.active().values_list("pk", flat=True)) == started


def test_refused_checklist_confirmation_is_not_recorded(twin):
    from .test_procedures_engine import add_blank_node

    add_blank_node(twin)
    d_run = service.start_run("D", "gpu-new-01", {"sharing": "none"}, actor_name="root", dispatch=False)
    execute_run(d_run.pk)
    d_run.refresh_from_db()
    assert d_run.status == "failed"
    c_run = service.start_run("C", "", {"replicas": 3}, actor_name="root", dispatch=False)
    with pytest.raises(service.RunRefused) as exc:
        service.confirm_checklist(d_run, actor_name="alice", dispatch=False)
    assert exc.value.active.pk == c_run.pk
    d_run.refresh_from_db()
    assert d_run.status == "failed"
    assert not StepRun.objects.filter(run=d_run, step_key=engine.RUN_EVENT, sent__checklist_confirmed=True).exists()

    service.cancel_run(c_run, actor_name="root")
    service.confirm_checklist(d_run, actor_name="bob", dispatch=False)
    confirmations = StepRun.objects.filter(run=d_run, step_key=engine.RUN_EVENT, sent__checklist_confirmed=True)
    assert [c.sent["by"] for c in confirmations] == ["bob"]
    execute_run(d_run.pk)
    d_run.refresh_from_db()
    assert d_run.status == "succeeded", d_run.message
    assert "Confirmed by bob" in d_run.steps.get(step_key="checklist", state="succeeded").output
