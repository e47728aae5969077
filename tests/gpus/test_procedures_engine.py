"""Procedures A-D on the simulated cluster: happy paths, pre-check refusals, PDB-blocked
drain, cancel, resume, transient retries, append-only record, one run per node."""

import pytest

from brickadmin.cluster import TransientClusterError
from brickadmin.cluster.twin import TwinGateway
from gpus import manifest
from gpus.models import AuditImmutable, ProcedureRun, StepRun
from gpus.procedures import engine, service
from gpus.tasks import execute_run, prune_old_runs

pytestmark = pytest.mark.usefixtures("fast_engine")

GPU, SHARED = "nvidia.com/gpu", "nvidia.com/gpu.shared"


def run_now(code, node="", params=None, actor_name="root"):
    run = service.start_run(code, node, params or {}, actor_name=actor_name, dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def status(gw, node):
    n = gw.get_node(node)
    return n["metadata"]["labels"], n.get("spec") or {}, n["status"]["capacity"], n["status"]["allocatable"]


def latest_states(run):
    out = {}
    for s in run.steps.exclude(step_key=engine.RUN_EVENT).order_by("seq"):
        out[s.step_key] = s.state
    return out


def test_a_happy_path_converts_exclusive_node(twin):
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "succeeded", run.message
    labels, spec, cap, alloc = status(twin, "dev-a1-ws04")
    assert labels["brick.cloud/gpu.sharing"] == "timeslicing"
    assert not spec.get("unschedulable")
    assert alloc[SHARED] == "2" and cap[SHARED] == "2"  # 1 physical x replicas 2
    assert GPU not in cap and GPU not in alloc  # the stale resource was patched away
    assert set(latest_states(run).values()) == {"succeeded"}
    prom = run.steps.filter(step_key="prometheus", state="succeeded").get()
    assert "fell back to the cluster's allocatable" in prom.output
    patch = run.steps.filter(step_key="remove-stale", state="succeeded").get()
    assert patch.sent == [
        {"op": "remove", "path": "/status/capacity/nvidia.com~1gpu"},
        {"op": "remove", "path": "/status/allocatable/nvidia.com~1gpu"},
    ]


def test_b_happy_path_after_a(twin):
    # Two time-slicing nodes: converting one back leaves room for the shared quota (1 <= 2).
    assert run_now("A", "dev-a1-ws04").status == "succeeded"
    run = run_now("B", "dev-a1-ws02")
    assert run.status == "succeeded", run.message
    labels, spec, cap, alloc = status(twin, "dev-a1-ws02")
    assert labels["brick.cloud/gpu.sharing"] == "none"
    assert alloc[GPU] == "1" and SHARED not in cap and SHARED not in alloc


def test_b_precheck_blocks_and_names_workspaces(twin):
    run = run_now("B", "dev-a1-ws02")
    assert run.status == "failed"
    assert "ws-shared" in run.message and "bob" in run.message
    labels, spec, *_ = status(twin, "dev-a1-ws02")
    assert labels["brick.cloud/gpu.sharing"] == "timeslicing" and not spec.get("unschedulable")  # nothing touched


def test_b_only_ts_node_requires_acknowledgement(load_scenario):
    gw = load_scenario("seed-example")
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "workspace-quota", "namespace": "ws-shared"},
            "spec": {"hard": {"requests.nvidia.com/gpu.shared": "0"}},
        }
    )
    checks = service_prechecks("B", "dev-a1-ws02")
    ack = [c for c in checks if c.level == "ack"]
    assert ack and "ws-shared (owner bob)" in ack[0].detail
    refused = run_now("B", "dev-a1-ws02")
    assert refused.status == "failed" and "acknowledgement" in refused.message
    done = run_now("B", "dev-a1-ws02", {"acknowledged": True})
    assert done.status == "succeeded", done.message


def service_prechecks(code, node, params=None):
    from gpus.procedures.registry import get

    return get(code).prechecks(TwinGateway(), node, params or {})


def test_c_increase_warns_and_reflects_on_every_node(demo):
    checks = service_prechecks("C", "", {"replicas": 8})
    assert any(c.level == "warn" and "Available" in c.detail for c in checks)
    run = run_now("C", params={"replicas": 8})
    assert run.status == "succeeded", run.message
    for name, physical in (("gpu-a30-03", 4), ("gpu-a30-04", 2), ("gpu-h100-04", 4), ("gpu-a100-04", 4)):
        assert demo.get_node(name)["status"]["allocatable"][SHARED] == str(physical * 8), name
    assert manifest.ts_replicas(manifest.parse(manifest.current().content)) == 8
    assert manifest.current().version == 2


def test_c_decrease_blocked_when_quota_would_not_fit(demo):
    # demo: shared quota 28 allocated; 14 whole GPUs on time-slicing nodes -> replicas 2 gives 28, 1 is invalid
    run = run_now("C", params={"replicas": 2})
    assert run.status == "succeeded", run.message  # 28 fits under 28
    demo.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "workspace-quota", "namespace": "ws-notebooks"},
            "spec": {"hard": {"requests.nvidia.com/gpu.shared": "40"}},
        }
    )
    blocked = run_now("C", params={"replicas": 2})
    assert blocked.status == "succeeded"  # same value: not a decrease
    run = run_now("C", params={"replicas": 4})
    assert run.status == "succeeded", run.message
    refused = run_now("C", params={"replicas": 3})
    assert refused.status == "failed"
    assert "ws-notebooks" in refused.message and "Lower shared quotas" in refused.message
    assert manifest.ts_replicas(manifest.parse(manifest.current().content)) == 4


def add_blank_node(gw, name="gpu-new-01", count=2):
    from brickadmin.cluster import scenarios as s
    from brickadmin.cluster.models import TwinHardware

    gw._save(s.node(name, model=None))
    TwinHardware.objects.create(node=name, gpus=s.gpus(name, "NVIDIA A30", count, 24576))


@pytest.mark.parametrize("sharing,resource,amount", [("none", GPU, "2"), ("timeslicing", SHARED, "4")])
def test_d_adds_node_with_both_labels(twin, sharing, resource, amount):
    add_blank_node(twin)
    refused = run_now("D", "gpu-new-01", {"sharing": sharing})
    assert refused.status == "failed" and "checklist" in refused.message.lower()
    run = run_now("D", "gpu-new-01", {"sharing": sharing, "checklist_confirmed": True})
    assert run.status == "succeeded", run.message
    labels, spec, cap, alloc = status(twin, "gpu-new-01")
    assert labels["brick.cloud/gpu.type"] == "nvidia" and labels["brick.cloud/gpu.sharing"] == sharing
    assert alloc[resource] == amount
    label_step = run.steps.get(step_key="label", state="succeeded")
    assert label_step.sent == {
        "metadata": {"labels": {"brick.cloud/gpu.type": "nvidia", "brick.cloud/gpu.sharing": sharing}}
    }
    assert run.steps.filter(step_key="status-patch", state="skipped").exists()


def test_d_refuses_existing_gpu_node(twin):
    run = run_now("D", "dev-a1-ws04", {"sharing": "none", "checklist_confirmed": True})
    assert run.status == "failed" and "Already a GPU node" in run.message


def test_drain_blocked_by_pdb_names_the_pod_and_budget(demo):
    run = run_now("B", "gpu-a30-03", {"evictions_acknowledged": 2})  # its 2 GPU pods, acknowledged
    # the B pre-check passes in demo? if not, the drain test uses A on a time-slicing-free path
    assert run.status == "failed"
    failed = run.steps.filter(state="failed").exclude(step_key=engine.RUN_EVENT).last()
    assert failed.step_key == "drain", run.message
    assert "ws-nlp-lab/tokenizer-svc" in failed.error and "tokenizer-svc-pdb" in failed.error
    labels, spec, *_ = status(demo, "gpu-a30-03")
    assert spec.get("unschedulable") and labels["brick.cloud/gpu.sharing"] == "timeslicing"


def test_resume_after_failure_continues_from_failed_step(demo):
    run = run_now("B", "gpu-a30-03", {"evictions_acknowledged": 2})  # its 2 GPU pods, acknowledged
    assert run.status == "failed"
    done_before = set(engine.completed_steps(run.pk))
    # the owner relaxes the budget
    demo.delete("policy/v1", "PodDisruptionBudget", "tokenizer-svc-pdb", "ws-nlp-lab")
    service.resume_run(run, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    for key in done_before:  # steps done before the failure ran exactly once
        assert run.steps.filter(step_key=key, state="running", intent__isnull=True).count() == 1, key
    assert run.steps.filter(step_key="drain", state="running", intent__isnull=True).count() == 2
    labels, spec, cap, alloc = status(demo, "gpu-a30-03")
    assert labels["brick.cloud/gpu.sharing"] == "none" and alloc[GPU] == "4" and SHARED not in cap


def test_cancel_in_the_middle(twin, monkeypatch):
    from gpus.procedures import steps

    original = steps.Drain.ensure

    def drain_then_admin_cancels(self, ctx):
        result = original(self, ctx)
        service.cancel_run(ctx.run, actor_name="root")  # the admin clicks Cancel during the drain
        return result

    monkeypatch.setattr(steps.Drain, "ensure", drain_then_admin_cancels)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "cancelled"
    states = latest_states(run)
    assert states["drain"] == "succeeded" and states["label"] == "cancelled"
    labels, spec, *_ = status(twin, "dev-a1-ws04")
    assert labels["brick.cloud/gpu.sharing"] == "none"  # nothing after the cancel was applied
    assert spec.get("unschedulable")
    assert "cordoned" in run.message


def test_a_run_cancelled_before_it_cordoned_does_not_say_the_node_may_be_cordoned(twin, monkeypatch):
    from gpus.procedures import definitions

    original = definitions.PrecheckStep.ensure

    def precheck_then_admin_cancels(self, ctx):
        result = original(self, ctx)
        service.cancel_run(ctx.run, actor_name="root")  # the admin clicks Cancel during the pre-check
        return result

    monkeypatch.setattr(definitions.PrecheckStep, "ensure", precheck_then_admin_cancels)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "cancelled"
    _, spec, *_ = status(twin, "dev-a1-ws04")
    assert not spec.get("unschedulable")  # never cordoned
    assert "cordoned" not in run.message


def test_transient_errors_are_retried_and_each_attempt_recorded(twin, monkeypatch):
    calls = {"n": 0}
    original = TwinGateway.label_node

    def flaky(self, node, labels):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise TransientClusterError("etcdserver: request timed out", status=503)
        return original(self, node, labels)

    monkeypatch.setattr(TwinGateway, "label_node", flaky)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "succeeded", run.message
    attempts = list(
        run.steps.filter(step_key="label", intent__isnull=True).exclude(state="pending").values_list("attempt", "state")
    )
    assert attempts == [(1, "running"), (1, "failed"), (2, "running"), (2, "failed"), (3, "running"), (3, "succeeded")]
    # Written ahead: each attempt recorded the request before sending it, then what came of it.
    requests = [
        (e.attempt, e.intent["state"], e.intent["request"]["call"])
        for e in run.steps.filter(step_key="label", intent__isnull=False).order_by("seq")
    ]
    assert requests == [
        (1, "intended", "label_node"),
        (1, "failed", "label_node"),
        (2, "intended", "label_node"),
        (2, "failed", "label_node"),
        (3, "intended", "label_node"),
        (3, "sent", "label_node"),
    ]


def test_permanent_error_stops_without_retry(twin, monkeypatch):
    from brickadmin.cluster import Forbidden

    def forbidden(self, node, labels):
        raise Forbidden('nodes "dev-a1-ws04" is forbidden', status=403)

    monkeypatch.setattr(TwinGateway, "label_node", forbidden)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "failed"
    assert run.steps.filter(step_key="label", state="running", intent__isnull=True).count() == 1
    assert "forbidden" in run.message


def test_one_run_per_node_refused_with_link(twin):
    first = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    with pytest.raises(service.RunRefused) as exc:
        service.start_run("A", "dev-a1-ws04", {}, actor_name="other", dispatch=False)
    assert exc.value.active.pk == first.pk
    # another node is fine
    service.start_run("B", "dev-a1-ws02", {}, actor_name="root", dispatch=False)


def test_redelivered_task_does_nothing(twin):
    run = run_now("A", "dev-a1-ws04")
    n = run.steps.count()
    assert execute_run(run.pk) == "not-claimed"
    assert run.steps.count() == n


def test_steps_are_append_only_and_runs_not_deletable(twin):
    run = run_now("A", "dev-a1-ws04")
    step = run.steps.first()
    step.output = "edited"
    with pytest.raises(AuditImmutable):
        step.save()
    with pytest.raises(AuditImmutable):
        step.delete()
    with pytest.raises(AuditImmutable):
        StepRun.objects.filter(run=run).update(output="x")
    with pytest.raises(AuditImmutable):
        run.delete()
    with pytest.raises(AuditImmutable):
        ProcedureRun.objects.all().delete()


def test_seq_is_monotonic_per_run(twin):
    run = run_now("A", "dev-a1-ws04")
    seqs = list(run.steps.order_by("id").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and run.last_seq == len(seqs)


def test_prune_keeps_running_and_recent_runs(twin, settings):
    from django.utils import timezone

    old = run_now("A", "dev-a1-ws04")
    running = service.start_run("B", "dev-a1-ws02", {}, actor_name="root", dispatch=False)
    engine.claim(running.pk)
    long_ago = timezone.now() - timezone.timedelta(days=1000)
    ProcedureRun.objects.filter(pk__in=[old.pk, running.pk]).update(created_at=long_ago)
    settings.BRICK_RUN_RETENTION_DAYS = 30
    assert prune_old_runs() == 1
    assert not ProcedureRun.objects.filter(pk=old.pk).exists()
    assert not StepRun.objects.filter(run_id=old.pk).exists()
    assert ProcedureRun.objects.get(pk=running.pk).status == "running"


def _stale(run):
    from django.utils import timezone

    ProcedureRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timezone.timedelta(minutes=10))


def test_reaper_resumes_a_run_whose_worker_died(twin, monkeypatch, django_capture_on_commit_callbacks):
    from gpus.procedures import reaper

    enqueued = []
    monkeypatch.setattr(reaper, "enqueue", enqueued.append)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    engine.claim(run.pk)
    _stale(run)
    with django_capture_on_commit_callbacks(execute=True):
        assert engine.reap_stale(60) == [run.pk]
    run.refresh_from_db()
    assert run.status == "pending" and enqueued == [run.pk]
    event = run.steps.filter(step_key=engine.RUN_EVENT).order_by("-seq").first()
    assert event.title == "Resumed automatically" and "heartbeats" in event.output
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_after_the_automatic_resumes_a_person_decides(twin, monkeypatch, settings):
    from gpus.procedures import reaper

    monkeypatch.setattr(reaper, "enqueue", lambda pk: None)
    settings.BRICK_RUN_AUTO_RESUMES = 2
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    for _ in range(2):
        engine.claim(run.pk)
        _stale(run)
        assert engine.reap_stale(60) == [run.pk]
        assert ProcedureRun.objects.get(pk=run.pk).status == "pending"
    engine.claim(run.pk)
    _stale(run)
    assert engine.reap_stale(60) == [run.pk]
    run.refresh_from_db()
    assert run.status == "interrupted" and "heartbeat" in run.message and "2 times" in run.message
    service.resume_run(run, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_redelivered_task_takes_over_a_run_whose_worker_died(twin, monkeypatch):
    from gpus.procedures import reaper

    monkeypatch.setattr(reaper, "enqueue", lambda pk: None)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    assert engine.claim(run.pk)
    assert execute_run(run.pk) == "not-claimed"  # its worker is alive: the duplicate does nothing
    _stale(run)
    assert execute_run(run.pk) == "succeeded"  # the worker died: the redelivered message continues it
    assert run.steps.filter(step_key=engine.RUN_EVENT, title="Resumed automatically").count() == 1


class WorkerDied(BaseException):
    """What a SIGKILL looks like from inside a step: nothing after it runs."""


def test_a_write_is_recorded_before_it_is_sent(twin, monkeypatch):
    """Killed between sending a write and recording it: the audit still says what may have
    reached the API server, and the resumed run finds the change made and does not repeat it."""
    from gpus.procedures import reaper

    monkeypatch.setattr(reaper, "enqueue", lambda pk: None)
    original = TwinGateway.label_node

    def label_then_die(self, node, labels):
        original(self, node, labels)
        raise WorkerDied()

    monkeypatch.setattr(TwinGateway, "label_node", label_then_die)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    with pytest.raises(WorkerDied):
        engine.execute(run.pk, twin)
    intent = run.steps.filter(step_key="label", intent__isnull=False).get()
    assert intent.intent["state"] == "intended"
    assert intent.intent["request"] == {
        "call": "label_node",
        "args": ["dev-a1-ws04", {"brick.cloud/gpu.sharing": "timeslicing"}],
        "kwargs": {},
    }
    monkeypatch.setattr(TwinGateway, "label_node", original)
    _stale(run)
    assert engine.reap_stale(60) == [run.pk]
    assert execute_run(run.pk) == "succeeded"
    final = run.steps.filter(step_key="label", state="succeeded").get()
    assert final.sent is None and "already" in final.output


def test_missing_toleration_fails_with_fix_then_resume_after_manifest_fix(demo):
    run = run_now("A", "gpu-a100-02")  # tainted brick.cloud/dedicated=llm: neither DaemonSet tolerates it
    assert run.status == "failed"
    failed = run.steps.filter(state="failed").exclude(step_key=engine.RUN_EVENT).last()
    assert failed.step_key == "precheck" and "brick.cloud/dedicated=llm:NoSchedule" in failed.output
    assert "toleration" in failed.error
    assert not demo.get_node("gpu-a100-02")["spec"].get("unschedulable")  # stopped before touching the node
    content = manifest.set_replicas(manifest.current().content, 4).replace(  # demo runs replicas 4
        "      tolerations:\n",
        "      tolerations:\n      - key: brick.cloud/dedicated\n"
        "        operator: Exists\n        effect: NoSchedule\n",
    )
    assert content.count("brick.cloud/dedicated") == 4  # every DaemonSet, identical tolerations
    manifest.apply(manifest.parse(manifest.save_version(content, actor_name="root").content), demo)
    service.resume_run(run, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert demo.get_node("gpu-a100-02")["status"]["allocatable"][SHARED] == str(8 * 4)


def test_a_node_kubernetes_marked_not_ready_is_waited_for_not_tolerated(twin):
    import copy

    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.numbers import health
    from gpus.numbers import ledger as ledger_mod

    node = copy.deepcopy(twin.get_node("dev-a1-ws04"))
    node["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    twin._save(node)
    twin._reconcile(nodes=["dev-a1-ws04"])
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "failed"
    failed = run.steps.filter(state="failed").exclude(step_key=engine.RUN_EVENT).last()
    assert failed.step_key == "precheck" and "node.kubernetes.io/not-ready:NoSchedule" in failed.output
    assert "Wait until dev-a1-ws04 is Ready" in failed.error and "toleration" not in failed.error
    assert not twin.get_node("dev-a1-ws04")["spec"].get("unschedulable")  # stopped before touching the node
    # a plugin pod missing for that reason is not offered the toleration fix either
    twin.label_node("dev-a1-ws04", {"brick.cloud/gpu.sharing": "timeslicing"})
    snap = take_snapshot(twin)
    found = [
        p
        for p in health.problems(health.HealthInputs(ledger_mod.compute(snap), snapshot=snap))
        if p.subject == "dev-a1-ws04"
    ]
    missing = [p for p in found if p.kind == "plugin-missing"]
    assert missing and "not Ready" in missing[0].message
    assert not missing[0].fix_params.get("taint_key") and not missing[0].fix
    assert "not Ready" in missing[0].remedy


def test_unexpected_error_fails_the_run_with_a_message(twin, monkeypatch):
    from gpus.procedures import steps

    def broken(self, ctx):
        raise KeyError("status")

    monkeypatch.setattr(steps.Label, "ensure", broken)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "failed" and "Unexpected error" in run.message


def test_cancel_while_a_step_waits_records_what_was_sent(twin, monkeypatch):
    from gpus.procedures import steps

    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0.05")
    original = steps.Label.ensure

    def label_then_cancel(self, ctx):
        result = original(self, ctx)
        service.cancel_run(ctx.run, actor_name="root")
        return result

    monkeypatch.setattr(steps.Label, "ensure", label_then_cancel)
    run = run_now("A", "dev-a1-ws04")
    assert run.status == "cancelled" and "during step" in run.message
    ev = run.steps.filter(step_key="label", state="cancelled").get()
    assert ev.sent == {"metadata": {"labels": {"brick.cloud/gpu.sharing": "timeslicing"}}}
    assert "sent but not verified" in ev.output
    assert latest_states(run)["plugin-pod"] == "pending"  # nothing after it ran


def test_unreachable_queue_marks_run_failed_and_resumable(twin, monkeypatch, django_capture_on_commit_callbacks):
    from brickadmin.celery import app

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("Error 111 connecting to redis:6379")

    monkeypatch.setattr(app, "send_task", broker_down)  # every message this process publishes
    with django_capture_on_commit_callbacks(execute=True):
        run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root")
    run.refresh_from_db()
    assert run.status == "failed" and "task queue" in run.message
    service.resume_run(run, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_reaper_requeues_a_pending_run_no_worker_claimed(twin, monkeypatch):
    from django.utils import timezone

    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)  # its message was lost
    ProcedureRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timezone.timedelta(minutes=5))
    from gpus.procedures import reaper

    monkeypatch.setattr(reaper, "enqueue", lambda run_id: execute_run(run_id))  # a worker, inline
    engine.reap_stale(60)
    run.refresh_from_db()
    assert run.status == "succeeded"
    fresh = service.start_run("B", "dev-a1-ws02", {}, actor_name="root", dispatch=False)
    engine.reap_stale(60)  # just created: left alone
    fresh.refresh_from_db()
    assert fresh.status == "pending"
