"""The terminal runs the same procedures and writes the same records."""

import pytest
from django.core.management import call_command

from gpus.models import ProcedureRun

pytestmark = pytest.mark.usefixtures("fast_engine")


def test_plan_prints_steps_and_changes_nothing(twin, capsys):
    call_command("procedure", "plan", "A", "--node", "dev-a1-ws04")
    out = capsys.readouterr().out
    assert "kubectl cordon dev-a1-ws04" in out and "nvidia.com~1gpu" in out
    assert not ProcedureRun.objects.exists()


def test_run_inline_writes_the_record(twin, capsys):
    # the only exclusive node: its allocated exclusive quota (1) is then over the Total, acknowledged
    call_command(
        "procedure", "run", "A", "--node", "dev-a1-ws04", "--acknowledge-overcommit", "1", "--inline", "--actor", "ops"
    )
    out = capsys.readouterr().out
    run = ProcedureRun.objects.get()
    assert run.status == "succeeded" and run.actor_name == "ops" and run.source == "terminal" and run.actor is None
    assert "✓ succeeded 6. Remove the stale nvidia.com/gpu" in out  # its place in the plan (0: pre-check)
    assert twin.get_node("dev-a1-ws04")["metadata"]["labels"]["brick.cloud/gpu.sharing"] == "timeslicing"


def test_failed_run_exits_1_and_resume_completes(demo, capsys):
    with pytest.raises(SystemExit) as exc:
        # its 2 GPU pods are acknowledged (the plan names them); the PDB then blocks the drain
        call_command("procedure", "run", "B", "--node", "gpu-a30-03", "--acknowledge-evictions", "2", "--inline")
    assert exc.value.code == 1
    run = ProcedureRun.objects.get()
    assert run.status == "failed" and "tokenizer-svc-pdb" in capsys.readouterr().out
    demo.delete("policy/v1", "PodDisruptionBudget", "tokenizer-svc-pdb", "ws-nlp-lab")
    call_command("procedure", "resume", str(run.pk), "--inline")
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_second_start_refused_names_running_run(twin, capsys):
    call_command("procedure", "run", "C", "--replicas", "4")  # enqueued (no worker here): stays pending
    run = ProcedureRun.objects.get()
    with pytest.raises(SystemExit):
        call_command("procedure", "run", "A", "--node", "dev-a1-ws04", "--inline")
    assert f"run #{run.pk}" in capsys.readouterr().err
    call_command("procedure", "cancel", str(run.pk))
    run.refresh_from_db()
    assert run.status == "cancelled"
