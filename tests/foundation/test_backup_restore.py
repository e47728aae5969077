"""The backup and restore drill of docs/operator-guide.md ("Back up the database"), run
against the real PostgreSQL: a dump taken while a run is between two steps and an approval
is half-way, restored into a new database, and the product started on it. Every audit row
is there, each run's events are numbered without a gap, the append-only guards still
refuse, the run the dump caught in progress is taken over and finishes from the step it
was in, and the approval the dump caught half-way is simply still pending."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from brickadmin.cluster import scenarios
from brickadmin.cluster.twin import TwinGateway
from gpus.models import ProcedureRun, StepRun
from gpus.procedures import engine, service
from tests.conftest import require_service
from workspaces import approvals
from workspaces.models import Decision, WorkspaceRequest

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
NODE = "dev-a1-ws04"  # procedure A's node in the seed (tests/gpus/test_procedures_engine.py)


def client_binary(name: str) -> str:
    """The newest PostgreSQL client (pg_dump refuses a server newer than itself)."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    return str(found[-1]) if found else (shutil.which(name) or "")


def database_url(name: str) -> str:
    db = settings.DATABASES["default"]
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgresql://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{name}"


class HeldAt:
    """The twin, except that one write waits until released: the caller sees the moment
    a run or an approval is in the middle of its work."""

    def __init__(self, call: str, nth: int = 1):
        self._gw, self._call, self._left = TwinGateway(), call, nth
        self.reached, self.release = threading.Event(), threading.Event()
        self.name = self._gw.name

    def __getattr__(self, name):
        attr = getattr(self._gw, name)
        if name != self._call:
            return attr

        def held(*args, **kwargs):
            self._left -= 1
            if self._left == 0:
                self.reached.set()
                self.release.wait(60)
            return attr(*args, **kwargs)

        return held


def in_thread(fn) -> threading.Thread:
    def target():
        try:
            fn()
        finally:
            connection.close()

    t = threading.Thread(target=target)
    t.start()
    return t


# What the product, started on the restored database, is asked (in its own process, as the
# worker and beat would be): the audit rows it has, whether the guards refuse, and then the
# reaper's take-over of the run the dump caught in progress, executed by the engine.
PRODUCT_ON_RESTORED = """
import json, sys
import django
django.setup()
from django.db.models import Count
from brickadmin.audit import AppendOnlyViolation
from gpus.models import ProcedureRun, StepRun
from gpus.procedures import reaper
from workspaces import approvals
from workspaces.models import Decision, WorkspaceRequest
from django.contrib.auth import get_user_model

run_id, pending_request = int(sys.argv[1]), int(sys.argv[2])
out = {
    "steps": sorted(StepRun.objects.values_list("run_id", "seq", "step_key", "state")),
    "decisions": sorted(Decision.objects.values_list("pk", "action", "subject")),
    "run_before": ProcedureRun.objects.get(pk=run_id).status,
    "request_before": WorkspaceRequest.objects.get(pk=pending_request).status,
}
refused = []
for attempt in (
    lambda: StepRun.objects.filter(run_id=run_id).update(title="edited"),
    lambda: StepRun.objects.filter(run_id=run_id).delete(),
    lambda: Decision.objects.all().delete(),
    lambda: Decision.objects.update(detail="edited"),
):
    try:
        attempt()
    except AppendOnlyViolation:
        refused.append(True)
out["guards_refused"] = len(refused)
out["taken_over"] = reaper.reap_stale(stale_seconds=0)  # the worker of the dump's time is gone
run = ProcedureRun.objects.get(pk=run_id)
out["run_after"] = run.status
out["succeeded_per_step"] = dict(
    StepRun.objects.filter(run_id=run_id, state="succeeded").exclude(step_key="_run")
    .values_list("step_key").annotate(n=Count("pk"))
)
out["seqs"] = {
    str(r.pk): [r.last_seq, list(r.steps.order_by("seq").values_list("seq", flat=True))]
    for r in ProcedureRun.objects.all()
}
admin = get_user_model().objects.get(username="root")
out["approved_after"] = approvals.approve(pending_request, admin, "").status
out["approvals_of_it"] = Decision.objects.filter(workspace_id=pending_request, action="approve").count()
print(json.dumps(out))
"""


def test_a_dump_taken_mid_run_and_mid_approval_restores_into_a_database_the_product_continues_on(
    tmp_path, django_user_model, monkeypatch
):
    require_service(connection.vendor == "postgresql", "PostgreSQL (DATABASE_URL)")
    pg_dump, pg_restore = client_binary("pg_dump"), client_binary("pg_restore")
    require_service(bool(pg_dump and pg_restore), "pg_dump and pg_restore (Debian package postgresql-client)")
    for knob in ("BRICK_PROCEDURE_STEP_PAUSE", "BRICK_PROCEDURE_VERIFY_TIMEOUT"):
        monkeypatch.setenv(knob, "0")
    TwinGateway().load(*scenarios.read("seed-example"))
    admin = django_user_model.objects.create_user("root", password="pw-root-123", is_staff=True)
    alice = django_user_model.objects.create_user("alice", password="pw-alice-123")
    limits = {"gpu": 0, "cpu": 1, "memory_gib": 1, "storage_gib": 1}
    approvals.approve(approvals.create_request(alice, name="team-done", **limits).pk, admin, "")
    done = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    assert engine.execute(done.pk, gateway=TwinGateway()) == "succeeded"
    TwinGateway().load(*scenarios.read("seed-example"))  # the node as it was, for the run in progress

    # A run in progress: held at its second write (its first step has succeeded).
    run_gw = HeldAt("label_node")
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    run_thread = in_thread(lambda: engine.execute(run.pk, gateway=run_gw))
    assert run_gw.reached.wait(60)
    # An approval half-way: its claim and its namespace are written, not yet committed.
    half = approvals.create_request(alice, name="team-half", **limits)
    approval_gw = HeldAt("create_resource_quota")
    monkeypatch.setattr(approvals, "get_gateway", lambda: approval_gw)
    approval_thread = in_thread(lambda: approvals.approve(half.pk, admin, ""))
    assert approval_gw.reached.wait(60)

    at_dump = {
        "steps": sorted(StepRun.objects.values_list("run_id", "seq", "step_key", "state")),
        "decisions": sorted(Decision.objects.values_list("pk", "action", "subject")),
    }
    dump = tmp_path / "brickadmin.dump"
    source = database_url(settings.DATABASES["default"]["NAME"])
    subprocess.run([pg_dump, "--format=custom", "--no-owner", "--file", str(dump), source], check=True, timeout=120)
    run_gw.release.set()
    approval_gw.release.set()
    run_thread.join(60)
    approval_thread.join(60)

    restored = f"{settings.DATABASES['default']['NAME']}_restored"
    with connection.cursor() as c:
        c.execute(f'DROP DATABASE IF EXISTS "{restored}"')
        c.execute(f'CREATE DATABASE "{restored}"')
    try:
        url = database_url(restored)
        subprocess.run([pg_restore, "--no-owner", "--exit-on-error", "-d", url, str(dump)], check=True, timeout=120)
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
            "BRICK_CLUSTER": "twin",
            "CELERY_TASK_ALWAYS_EAGER": "1",  # the reaper's enqueue runs the engine here, as a worker would
            "BRICK_PROCEDURE_STEP_PAUSE": "0",
            "BRICK_PROCEDURE_VERIFY_TIMEOUT": "0",
        }
        env.pop("BRICK_KUBECONFIG", None)
        # The restored schema is the code's: no migration is missing.
        subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=REPO, env=env, check=True, timeout=120)
        answer = subprocess.run(
            [sys.executable, "-c", PRODUCT_ON_RESTORED, str(run.pk), str(half.pk)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert answer.returncode == 0, answer.stderr[-3000:]
        out = json.loads(answer.stdout.strip().splitlines()[-1])
    finally:
        with connection.cursor() as c:
            c.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')

    assert [tuple(x) for x in out["steps"]] == at_dump["steps"]  # every audit row of the dump's moment
    assert [tuple(x) for x in out["decisions"]] == at_dump["decisions"]
    assert out["guards_refused"] == 4
    assert (out["run_before"], out["request_before"]) == ("running", WorkspaceRequest.Status.PENDING)
    assert out["taken_over"] == [run.pk]
    assert out["run_after"] == "succeeded"
    assert set(out["succeeded_per_step"].values()) == {1}  # the step done before the dump is not done again
    for last_seq, seqs in out["seqs"].values():
        assert seqs == list(range(1, last_seq + 1))  # numbered without a gap, on after the restore too
    assert (out["approved_after"], out["approvals_of_it"]) == (WorkspaceRequest.Status.APPROVED, 1)
    # The original database went on by itself meanwhile: the run and the approval finished there too.
    assert ProcedureRun.objects.get(pk=run.pk).status == "succeeded"
    assert WorkspaceRequest.objects.get(pk=half.pk).status == WorkspaceRequest.Status.APPROVED
