"""On the gpus side: the plan lists every pod the drain will evict and
GPU evictions need an acknowledgement naming their count; Cancel and Apply ask once;
"Restore the node" undoes what a stopped run left, as an audited run of its own."""

import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from brickadmin.cluster.twin import TwinGateway
from gpus.models import ProcedureRun
from gpus.procedures import engine, registry, service, steps
from gpus.procedures.base import Check
from gpus.tasks import execute_run

pytestmark = pytest.mark.usefixtures("fast_engine")
NODE = "dev-a1-ws04"
SHARING, TYPE = "brick.cloud/gpu.sharing", "brick.cloud/gpu.type"


def pod(name, namespace, node=NODE, gpu=0, owner_kind=""):
    resources = {"limits": {"nvidia.com/gpu": str(gpu)}, "requests": {"nvidia.com/gpu": str(gpu)}} if gpu else {}
    meta = {"name": name, "namespace": namespace}
    if owner_kind:
        meta["ownerReferences"] = [
            {"kind": owner_kind, "name": "x", "controller": True, "apiVersion": "apps/v1", "uid": "u"}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox", "resources": resources}]},
        "status": {"phase": "Running"},
    }


@pytest.fixture
def busy(twin):
    """Dev-a1-ws04 with two GPU pods of alice's and bob's Workspaces, a CPU pod and a DaemonSet pod."""
    for ns, owner in (("ws-alice", "alice"), ("ws-bob", "bob")):
        twin.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"brick.cloud/workspace": "true", "brick.cloud/owner": owner}},
            }
        )
    twin.apply(pod("train-0", "ws-alice", gpu=1))
    twin.apply(pod("notebook", "ws-bob", gpu=1))
    twin.apply(pod("cpu-only", "ws-bob"))
    # a node agent: its DaemonSet exists, so the drain leaves its pod (an orphan would go)
    twin.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "x", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                },
            },
        }
    )
    twin.apply(pod("agent", "kube-system", owner_kind="DaemonSet"))
    return twin


def plan(client, code="A", node=NODE):
    return client.get(reverse("wizard_plan", args=[code]), {"node": node})


def test_plan_lists_every_pod_to_evict_with_workspace_owner_and_gpu(busy, admin_client):
    r = plan(admin_client)
    html = r.content.decode()
    assert r.status_code == 200
    assert "2 GPU pods on dev-a1-ws04 will be evicted (3 pod(s) in all):" in html
    assert "ws-alice/train-0 · Workspace ws-alice · owner alice · GPU nvidia.com/gpu 1" in html
    assert "ws-bob/notebook · Workspace ws-bob · owner bob · GPU nvidia.com/gpu 1" in html
    assert "ws-bob/cpu-only · Workspace ws-bob · owner bob · GPU none" in html
    assert "kube-system/agent" not in html  # the drain leaves DaemonSet pods
    box = re.search(r'<label class="check" data-testid="confirm-evictions_acknowledged">(.*?)</label>', html, re.S)
    assert box and "I understand 2 GPU pods will be evicted." in box.group(1)
    assert 'value="2" required' in box.group(1)


def test_a_node_without_pods_needs_no_acknowledgement(twin, admin_client):
    html = plan(admin_client).content.decode()
    assert "No pod to evict on dev-a1-ws04" in html and "evictions_acknowledged" not in html


def test_run_cannot_start_without_the_acknowledgement_naming_the_count(busy, admin_client):
    url = reverse("wizard_start", args=["A"])
    r = admin_client.post(url, {"node": NODE})
    assert r.status_code == 400 and "names how many GPU pods will be evicted" in r.content.decode()
    assert not ProcedureRun.objects.exists()
    # an acknowledgement of fewer pods than are there now does not cover them
    assert admin_client.post(url, {"node": NODE, "evictions_acknowledged": "1"}).status_code == 400
    assert not ProcedureRun.objects.exists()
    # the only exclusive node: its allocated exclusive quota is then over the Total, acknowledged too
    r = admin_client.post(url, {"node": NODE, "evictions_acknowledged": "2", "capacity_acknowledged": "1"})
    run = ProcedureRun.objects.get()
    assert r.status_code == 302 and run.params["evictions_acknowledged"] == 2
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    left = {
        p["metadata"]["namespace"] + "/" + p["metadata"]["name"]
        for p in busy.list_pods(field_selector=f"spec.nodeName={NODE}")
    }
    assert not left & {"ws-alice/train-0", "ws-bob/notebook", "ws-bob/cpu-only"}  # evicted, as listed
    assert "kube-system/agent" in left


def test_more_gpu_pods_at_run_time_than_acknowledged_stops_at_the_precheck(busy, admin_client):
    run = service.start_run("A", NODE, {"evictions_acknowledged": 2}, actor_name="root", dispatch=False)
    busy.apply(pod("late", "ws-alice", gpu=1))  # arrived after the plan was confirmed
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "acknowledgement" in run.message and "3 GPU pods" in run.message
    assert not (busy.get_node(NODE).get("spec") or {}).get("unschedulable")  # nothing touched
    left = {p["metadata"]["name"] for p in busy.list_pods(field_selector=f"spec.nodeName={NODE}")}
    assert {"train-0", "notebook", "cpu-only", "agent", "late"} <= left


def test_terminal_plan_lists_the_pods_and_the_flag_acknowledges_the_count(busy, capsys):
    call_command("procedure", "plan", "A", "--node", NODE)
    out = capsys.readouterr().out
    assert "- ws-alice/train-0 · Workspace ws-alice · owner alice · GPU nvidia.com/gpu 1" in out
    assert "I understand 2 GPU pods will be evicted. (--acknowledge-evictions 2)" in out
    call_command(
        "procedure",
        "run",
        "A",
        "--node",
        NODE,
        "--acknowledge-evictions",
        "2",
        "--acknowledge-overcommit",
        "1",
        "--inline",
    )
    assert ProcedureRun.objects.get().status == "succeeded"


def test_cancel_and_apply_ask_once_naming_the_object(twin, admin_client):
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f'data-confirm="Cancel run #{run.pk}? It stops before its next step' in page
    manifest = admin_client.get(reverse("manifest")).content.decode()
    assert re.search(r'data-confirm="Apply manifest version \d+ to the cluster now\?', manifest)
    assert "js/confirm.js" in page  # the one script that asks, loaded by base.html


# --- Restore the node ---------------------------------------------------------------


@pytest.fixture
def stopped_after_label(twin, monkeypatch):
    """A run of A that failed after cordoning, draining and relabelling dev-a1-ws04."""
    monkeypatch.setattr(steps.PluginPodRunning, "verify", lambda self, ctx: Check(False, "no pod", "fix it"))
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    monkeypatch.undo()
    node = twin.get_node(NODE)
    assert run.status == "failed" and node["spec"].get("unschedulable")
    assert node["metadata"]["labels"][SHARING] == "timeslicing"
    return run


def test_restore_puts_labels_back_and_uncordons_as_an_audited_run(stopped_after_label, admin_user, twin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    run = stopped_after_label
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Restore the node" in page and reverse("run_resume", args=[run.pk]) in page
    assert (
        f'data-confirm="Restore {NODE}? A new run puts its GPU labels back as they were before run #{run.pk} '
        "and uncordons it" in page
    )
    token = client.cookies["csrftoken"].value
    assert client.post(reverse("run_restore", args=[run.pk])).status_code == 403  # CSRF kept
    r = client.post(reverse("run_restore", args=[run.pk]), {"csrfmiddlewaretoken": token})
    restore = ProcedureRun.objects.exclude(pk=run.pk).get()
    assert r.status_code == 302 and r["Location"] == reverse("run_detail", args=[restore.pk])
    assert restore.node == NODE and restore.lock_key == NODE and restore.actor == admin_user
    assert restore.params == {"restore_of": run.pk, "labels": {TYPE: "nvidia", SHARING: "none"}, "uncordon": True}
    # it holds the node's lock like any node run
    with pytest.raises(service.RunRefused):
        service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(restore.pk)
    restore.refresh_from_db()
    assert restore.status == "succeeded", restore.message
    node = twin.get_node(NODE)
    assert node["metadata"]["labels"][SHARING] == "none" and node["metadata"]["labels"][TYPE] == "nvidia"
    assert not node["spec"].get("unschedulable")
    keys = [e.step_key for e in restore.steps.filter(state="succeeded").exclude(step_key=engine.RUN_EVENT)]
    assert keys == ["precheck", "restore-labels", "uncordon"]
    # nothing left to restore: the stopped run no longer offers it, and refuses a second one
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Restore the node" not in page
    r = client.post(reverse("run_restore", args=[run.pk]), {"csrfmiddlewaretoken": token}, follow=True)
    assert "Nothing to restore" in r.content.decode() and ProcedureRun.objects.count() == 2


def test_the_run_page_offers_restore_from_the_view_without_an_api_call(
    stopped_after_label, twin, admin_client, request
):
    """The run's page only offers: it reads the node from the cluster view, so the offer is
    there on a real cluster whose API server does not answer (starting the restore reads live)."""
    from django.utils import timezone

    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.models import ViewState
    from gpus.view import publish as view_publish

    view_publish.publish(take_snapshot(twin), watcher="watcher-1")
    ViewState.objects.filter(pk=1).update(watcher_seen_at=timezone.now())
    request.getfixturevalue("unreachable")
    page = admin_client.get(reverse("run_detail", args=[stopped_after_label.pk])).content.decode()
    assert "Restore the node" in page and "The cluster cannot be reached." not in page


def test_restore_keeps_a_node_cordoned_that_was_cordoned_before(twin, monkeypatch, admin_client):
    twin.cordon(NODE)
    monkeypatch.setattr(steps.PluginPodRunning, "verify", lambda self, ctx: Check(False, "no pod", "fix it"))
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    monkeypatch.undo()
    restore = service.start_restore(
        ProcedureRun.objects.get(pk=run.pk), TwinGateway(), actor_name="root", dispatch=False
    )
    assert restore.params["uncordon"] is False
    execute_run(restore.pk)
    node = twin.get_node(NODE)
    assert node["metadata"]["labels"][SHARING] == "none" and node["spec"].get("unschedulable")


def test_restore_is_not_offered_when_nothing_needs_it(twin, admin_client, busy):
    # blocked at its pre-check (no acknowledgement): the node was never touched
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed"
    assert "Restore the node" not in admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    # a succeeded run offers no restore either
    done = service.start_run("A", NODE, {"evictions_acknowledged": 2}, actor_name="root", dispatch=False)
    execute_run(done.pk)
    assert "Restore the node" not in admin_client.get(reverse("run_detail", args=[done.pk])).content.decode()
    assert admin_client.post(reverse("run_restore", args=[done.pk])).status_code == 302
    assert ProcedureRun.objects.count() == 2


def test_restore_is_not_a_wizard_on_the_procedure_index(twin, admin_client):
    proc = service.restorer()
    assert proc is not None and registry.find(proc.code) is proc
    index = admin_client.get(reverse("procedure_index")).content.decode()
    assert str(proc.label) not in index
    assert "A. Exclusive" in index
    # opened by hand, its plan refuses to run without a stopped run to undo
    html = admin_client.get(reverse("wizard_plan", args=[proc.code]), {"node": NODE}).content.decode()
    assert "started from the page of the run it undoes" in html or "does not apply" in html


def test_restore_is_for_admins_only(stopped_after_label, alice_client, twin):
    r = alice_client.post(reverse("run_restore", args=[stopped_after_label.pk]))
    assert r.status_code == 403 and ProcedureRun.objects.count() == 1
    assert twin.get_node(NODE)["spec"].get("unschedulable")  # still as the stopped run left it
