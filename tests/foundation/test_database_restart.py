"""A database that goes away mid-way (restarted, failed over; bench/chaos.py restarts a real
one): a run waits for it and continues from the step it was in, an approval is made again
once, and neither does anything twice. The outage is the error a restarted PostgreSQL
gives, raised once from inside the work (transactions as real: committed rows only)."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from brickadmin.cluster import scenarios
from brickadmin.cluster.twin import TwinGateway
from gpus.models import StepRun
from gpus.procedures import engine, service
from workspaces import approvals
from workspaces.models import Decision, WorkspaceRequest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_engine")]
NODE = "dev-a1-ws04"


@pytest.fixture
def fast_engine(monkeypatch):
    for knob in ("BRICK_PROCEDURE_STEP_PAUSE", "BRICK_PROCEDURE_VERIFY_TIMEOUT"):
        monkeypatch.setenv(knob, "0")


@pytest.fixture
def seed():
    gw = TwinGateway()
    gw.load(*scenarios.read("seed-example"))
    return gw


def gone_once(monkeypatch, cls, name):
    """``cls.name`` raises what a restarted PostgreSQL raises, the first time only."""
    real = getattr(cls, name)
    calls = []

    def once(self, *args, **kwargs):
        calls.append(name)
        if len(calls) == 1:
            raise OperationalError("terminating connection due to administrator command")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, once)


def test_a_run_whose_database_went_away_mid_step_continues_from_that_step(seed, monkeypatch):
    gone_once(monkeypatch, TwinGateway, "label_node")
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    assert engine.execute(run.pk, gateway=TwinGateway()) == "succeeded"
    rows = list(StepRun.objects.filter(run_id=run.pk).exclude(step_key=engine.RUN_EVENT))
    failed = [r for r in rows if r.state == "failed"]
    assert len(failed) == 1 and "The database was unavailable" in failed[0].error
    succeeded = [r.step_key for r in rows if r.state == "succeeded"]
    assert len(succeeded) == len(set(succeeded))  # no step done twice
    assert failed[0].step_key in succeeded  # the interrupted step, done on the next attempt
    node = seed.get_node(NODE)
    assert node["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"
    assert not (node.get("spec") or {}).get("unschedulable")


def test_an_approval_whose_database_went_away_is_made_again_once(seed, django_user_model, monkeypatch):
    admin = django_user_model.objects.create_user("root", password="pw-root-123", is_staff=True)
    alice = django_user_model.objects.create_user("alice", password="pw-alice-123")
    req = approvals.create_request(alice, name="team-a", gpu=0, cpu=1, memory_gib=1, storage_gib=1)
    gone_once(monkeypatch, TwinGateway, "create_resource_quota")
    approvals.approve(req.pk, admin, "")
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "approved"
    assert Decision.objects.filter(workspace_id=req.pk, action="approve").count() == 1
    assert [n["metadata"]["name"] for n in seed.list_namespaces()].count("team-a") == 1
