"""Each finding the product can fix offers "Fix" (a plan page, then a run
through the procedure engine), on the twin, with outcome assertions: what the cluster ends
up with and what the pages show. A finding disappears by itself once the cluster no longer
shows it, and a fix run whose finding has gone ends as "nothing to do" without a write."""

import re
from html import unescape
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.urls import reverse

from brickadmin.cluster.models import TwinEvent
from brickadmin.cluster.scenarios import gpu_pod
from gpus import manifest as manifest_mod
from gpus.models import ManifestVersion, OwnerNotice, ProcedureRun
from gpus.procedures import engine, registry, service

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_engine")]

STALE_NODE, TS_OLD_NODE, TAINTED_NODE, TYPO_NODE = "gpu-a100-04", "gpu-a30-04", "gpu-a100-02", "gpu-h100-05"


def health(client) -> str:
    return client.get(reverse("health")).content.decode()


def fix_link(html: str, kind: str, subject: str) -> str:
    m = re.search(rf'<a class="button" href="([^"]+)" data-testid="fix-{re.escape(kind)}-{re.escape(subject)}">', html)
    return unescape(m.group(1)) if m else ""


def kinds(html: str) -> set[str]:
    return set(re.findall(r'data-kind="([^"]+)"', html))


def run_fix(client, twin, url: str, **extra) -> ProcedureRun:
    """Open the Fix's plan, confirm it as the page's form does, and run it (the worker's part)."""
    plan = client.get(url)
    assert plan.status_code == 200, plan.content.decode()[:2000]
    html = plan.content.decode()
    assert "data-confirm=" in html
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    start = path + "start/"
    assert f'action="{start}"' in html
    resp = client.post(start, {**query, **extra})
    assert resp.status_code == 302, resp.content.decode()[:3000]
    run = ProcedureRun.objects.latest("pk")
    assert resp["Location"] == run.get_absolute_url()
    engine.execute(run.pk, twin)
    run.refresh_from_db()
    return run


def test_fix_procedures_are_not_on_the_procedure_index_and_list_is_unchanged(admin_client):
    index = admin_client.get(reverse("procedure_index")).content.decode()
    listed = [p.code for p in registry.all_procedures() if p.listed]
    # the wizards; the fixes stay off the index
    assert listed == ["A", "B", "C", "D", "E", "G", "H", "I", "J", "K", "L", "M"]
    for proc in registry.all_procedures():
        if proc.fixes and not proc.listed:
            assert str(proc.label) not in index


def test_remove_a_stale_resource_in_one_audited_click(demo, admin_client, admin_user):
    html = health(admin_client)
    url = fix_link(html, "stale-capacity", STALE_NODE)
    assert url.startswith(reverse("fix_plan", args=["S"]))
    plan = admin_client.get(url).content.decode()
    assert "kubectl patch node gpu-a100-04 --subresource=status --type=json" in unescape(plan)
    assert "/status/capacity/nvidia.com~1gpu" in unescape(plan)

    run = run_fix(admin_client, demo, url)
    assert run.status == "succeeded" and run.actor_name == "root" and run.node == STALE_NODE
    status = demo.get_node(STALE_NODE)["status"]
    assert "nvidia.com/gpu" not in status["capacity"] and "nvidia.com/gpu" not in status["allocatable"]
    assert status["allocatable"]["nvidia.com/gpu.shared"] == "16"  # the served resource is untouched
    # The finding went by itself: the cluster no longer shows it.
    html = health(admin_client)
    assert "stale-capacity" not in kinds(html) and not fix_link(html, "stale-capacity", STALE_NODE)
    events = list(run.steps.order_by("seq").values_list("step_key", "state"))
    assert ("remove-stale", "succeeded") in events


def test_a_fix_whose_finding_has_gone_ends_as_nothing_to_do_without_a_write(demo, admin_client):
    url = fix_link(health(admin_client), "stale-capacity", STALE_NODE)
    query = dict(parse_qsl(urlsplit(url).query))
    run = service.start_run(
        "S", STALE_NODE, {"stale_resource": query["stale_resource"]}, actor_name="root", dispatch=False
    )
    demo.remove_node_status_resources(STALE_NODE, ["nvidia.com/gpu"])  # someone cleaned it up by hand meanwhile
    assert "stale-capacity" not in kinds(health(admin_client))
    writes_before = TwinEvent.objects.count()
    engine.execute(run.pk, demo)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.message.startswith("Nothing to do: nvidia.com/gpu is no longer in")
    assert TwinEvent.objects.count() == writes_before  # nothing was written to the cluster
    assert not run.steps.filter(intent__isnull=False).exists()
    latest = {}
    for e in run.steps.order_by("seq"):
        latest[e.step_key] = e.state
    assert latest["remove-stale"] == "skipped"
    detail = admin_client.get(run.get_absolute_url()).content.decode()
    assert "Nothing to do" in detail
    # The plan page says so too, before anything is started.
    assert "Nothing to do now" in admin_client.get(url).content.decode()


def test_restart_the_time_slicing_plugin_when_replicas_are_not_reflected(demo, admin_client):
    html = health(admin_client)
    assert "replicas-not-reflected" in kinds(html)
    url = fix_link(html, "replicas-not-reflected", TS_OLD_NODE)
    assert url == reverse("fix_plan", args=["P"])
    assert f'href="{reverse("wizard_pick", args=["C"])}"' in html  # procedure C stays offered as the wizard
    assert demo.get_node(TS_OLD_NODE)["status"]["allocatable"]["nvidia.com/gpu.shared"] == "4"  # 2 GPUs × old 2
    run = run_fix(admin_client, demo, url)
    assert run.status == "succeeded", run.message
    assert demo.get_node(TS_OLD_NODE)["status"]["allocatable"]["nvidia.com/gpu.shared"] == "8"  # 2 GPUs × 4
    assert "replicas-not-reflected" not in kinds(health(admin_client))
    # Started again, there is nothing left to do: no restart is sent.
    again = service.start_run("P", "", {}, actor_name="root", dispatch=False)
    writes_before = TwinEvent.objects.count()
    engine.execute(again.pk, demo)
    again.refresh_from_db()
    assert again.message.startswith("Nothing to do") and TwinEvent.objects.count() == writes_before


def test_add_a_missing_toleration_as_a_new_manifest_version_then_apply_it(demo, admin_client):
    # The live time-slicing ConfigMap says replicas 4: make the managed manifest say so too,
    # so the apply changes only the toleration.
    manifest_mod.save_version(manifest_mod.set_replicas(manifest_mod.current().content, 4), actor_name="root")
    before = ManifestVersion.objects.count()
    html = health(admin_client)
    url = fix_link(html, "plugin-missing", TAINTED_NODE)
    assert "taint_key=brick.cloud" in url and "taint_value=llm" in url
    plan = unescape(admin_client.get(url).content.decode())
    assert "brick.cloud/dedicated=llm:NoSchedule" in plan
    assert "kubectl apply --server-side -f brick-nvidia-device-plugin.yaml" in plan
    # the toleration as people read it, not as a Python dict
    assert "key=brick.cloud/dedicated, operator=Equal, value=llm, effect=NoSchedule" in plan
    assert "{'" not in plan

    run = run_fix(admin_client, demo, url)
    assert run.status == "succeeded", run.message
    assert ManifestVersion.objects.count() == before + 1
    latest = manifest_mod.current()
    assert latest.run_id == run.pk and "brick.cloud/dedicated" in latest.content
    assert manifest_mod.validate(manifest_mod.parse(latest.content)).ok
    for name in ("nvidia-device-plugin-default", "nvidia-device-plugin-timeslicing"):
        tolerations = demo.get_daemonset("brick-nvidia", name)["spec"]["template"]["spec"]["tolerations"]
        assert {
            "key": "brick.cloud/dedicated",
            "operator": "Equal",
            "value": "llm",
            "effect": "NoSchedule",
        } in tolerations
    pods = demo.list_pods(namespace="brick-nvidia", field_selector=f"spec.nodeName={TAINTED_NODE}")
    assert [p["status"]["phase"] for p in pods] == ["Running"]
    assert demo.get_node(TAINTED_NODE)["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    html = health(admin_client)
    assert not fix_link(html, "plugin-missing", TAINTED_NODE)
    assert "manifest-drift" not in kinds(html)


def test_the_toleration_fix_asks_before_its_apply_undoes_live_changes(demo, admin_client):
    url = fix_link(health(admin_client), "plugin-missing", TAINTED_NODE)  # manifest v1 says replicas 2, live 4
    plan = admin_client.get(url).content.decode()
    assert 'data-testid="confirm-drift_acknowledged"' in plan
    assert "ConfigMap/nvidia-device-plugin-config-timeslicing: drifted" in plan
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    resp = admin_client.post(path + "start/", query)
    assert resp.status_code == 400 and ProcedureRun.objects.count() == 0
    assert "Tick the acknowledgement: the apply also changes the live objects listed." in resp.content.decode()


def test_delete_a_failed_pod_after_telling_its_owner(demo, admin_client, alice):
    from workspaces.models import WorkspaceRequest

    pod = gpu_pod("ws-vision", "detector-retry", "gpu-a100-01", "nvidia.com/gpu", 1, phase="Failed")
    pod["status"].update(
        reason="UnexpectedAdmissionError", message="Allocate failed due to requested number of devices unavailable"
    )
    demo._create(pod)
    html = health(admin_client)
    url = fix_link(html, "pod-admission-failed", "gpu-a100-01")
    assert url.startswith(reverse("fix_plan", args=["F"])) and "pod_name=detector-retry" in url
    plan = unescape(admin_client.get(url).content.decode())
    assert "kubectl -n ws-vision delete pod detector-retry" in plan and "owner alice" in plan

    run = run_fix(admin_client, demo, url)
    assert run.status == "succeeded", run.message
    assert demo.list_pods(namespace="ws-vision", field_selector="metadata.name=detector-retry") == []
    notice = OwnerNotice.objects.get()
    assert (notice.namespace, notice.owner_name, notice.subject, notice.run_id) == (
        "ws-vision",
        "alice",
        "ws-vision/detector-retry",
        run.pk,
    )
    assert "Allocate failed due to requested number of devices unavailable" in notice.message
    assert "pod-admission-failed" not in kinds(health(admin_client))

    # The owner sees it on their Workspace page.
    ws = WorkspaceRequest.objects.create(
        name="ws-vision",
        requester=alice,
        requester_name="alice",
        gpu=8,
        cpu=64,
        memory_gib=256,
        storage_gib=1024,
        status="approved",
        gpu_resource="nvidia.com/gpu",
        gpu_type="exclusive",
    )
    admin_client.force_login(alice)
    page = admin_client.get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    assert 'data-testid="owner-notices"' in page and "ws-vision/detector-retry" in page
    assert "An admin (root) deleted it" in page


def test_a_failed_pod_outside_a_workspace_is_not_deleted_by_the_console(demo, admin_client):
    """The chart lets the console delete pods in Workspace namespaces only: the plan says so and
    gives the command, and nothing starts."""
    demo._create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-infra", "labels": {}}})
    pod = gpu_pod("team-infra", "probe-retry", "gpu-a100-01", "nvidia.com/gpu", 1, phase="Failed")
    pod["status"].update(reason="UnexpectedAdmissionError", message="Allocate failed")
    demo._create(pod)
    url = fix_link(health(admin_client), "pod-admission-failed", "gpu-a100-01")
    plan = unescape(admin_client.get(url).content.decode())
    assert "is in namespace team-infra, which is not a Workspace" in plan
    assert "kubectl -n team-infra delete pod probe-retry" in plan
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    assert admin_client.post(path + "start/", query).status_code == 400 and ProcedureRun.objects.count() == 0
    assert demo.list_pods(namespace="team-infra", field_selector="metadata.name=probe-retry")


def test_uncordon_a_node_a_stopped_run_left_cordoned_through_restore(demo, admin_client):
    run = service.start_run(
        "B", "gpu-a30-03", {"evictions_acknowledged": 2}, actor_name="root", dispatch=False
    )  # a PDB blocks its drain: the run stops with the node cordoned
    engine.execute(run.pk, demo)
    run.refresh_from_db()
    assert run.status == "failed" and demo.get_node("gpu-a30-03")["spec"].get("unschedulable")
    url = fix_link(health(admin_client), "run-left-cordoned", "gpu-a30-03")
    assert url.startswith(reverse("fix_plan", args=["R"])) and f"restore_of={run.pk}" in url
    plan = admin_client.get(url).content.decode()
    assert "kubectl uncordon gpu-a30-03" in plan and "Restore gpu-a30-03?" in unescape(plan)
    restore = run_fix(admin_client, demo, url)
    assert restore.status == "succeeded" and restore.params["restore_of"] == run.pk
    assert not demo.get_node("gpu-a30-03")["spec"].get("unschedulable")
    assert "run-left-cordoned" not in kinds(health(admin_client))


def test_a_label_typo_offers_the_wizard_of_the_mode_it_meant_with_the_node_chosen(demo, admin_client):
    html = health(admin_client)
    row = re.search(r'<tr class="problem-label-typo".*?</tr>', html, re.S).group(0)
    assert f'href="{reverse("wizard_pick", args=["A"])}?node={TYPO_NODE}"' in row  # "time-slicing" meant A
    assert 'data-testid="fix-label-typo' not in row  # never a bare relabel
    demo.label_node(TYPO_NODE, {"brick.cloud/gpu.sharing": "non"})
    row = re.search(r'<tr class="problem-label-typo".*?</tr>', health(admin_client), re.S).group(0)
    assert f'href="{reverse("wizard_pick", args=["B"])}?node={TYPO_NODE}"' in row


def test_fix_pages_are_for_admins(demo, alice_client):
    url = reverse("fix_plan", args=["S"]) + f"?node={STALE_NODE}&stale_resource=nvidia.com/gpu"
    assert alice_client.get(url).status_code == 403
    assert alice_client.post(reverse("fix_start", args=["S"]), {"node": STALE_NODE}).status_code == 403


def test_fix_plan_with_bad_facts_goes_back_to_health(demo, admin_client):
    resp = admin_client.get(
        reverse("fix_plan", args=["F"]) + "?node=gpu-a100-01&pod_namespace=ws-vision&pod_name=Bad_Name"
    )
    assert resp.status_code == 302 and resp["Location"] == reverse("health")
    assert admin_client.get(reverse("fix_plan", args=["A"])).status_code == 404  # a wizard is not a Fix
    assert ProcedureRun.objects.count() == 0


def test_a_fix_from_the_terminal_writes_the_same_record(demo, capsys):
    from django.core.management import call_command

    call_command(
        "procedure",
        "run",
        "S",
        "--node",
        STALE_NODE,
        "--stale-resource",
        "nvidia.com/gpu",
        "--inline",
        "--actor",
        "ops",
    )
    run = ProcedureRun.objects.get()
    assert (run.procedure, run.status, run.actor_name, run.source) == ("S", "succeeded", "ops", "terminal")
    assert "nvidia.com/gpu" not in demo.get_node(STALE_NODE)["status"]["capacity"]


def test_recreate_a_missing_workspace_namespace_and_quota_from_its_approval(twin, admin_client, admin_user, alice):
    from workspaces import approvals

    req = approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    before = {q["metadata"]["name"]: q["spec"] for q in twin.list_resource_quotas("team-a")}
    twin.delete("v1", "Namespace", "team-a")  # removed by hand: its quotas went with it
    assert twin.list_resource_quotas("team-a") == []

    url = registry.find("W").fix_url("", {"workspace": "team-a"})
    plan = unescape(admin_client.get(url).content.decode())
    assert "The namespace is gone" in plan and "requests.nvidia.com/gpu.shared=1" in plan
    run = run_fix(admin_client, twin, url)
    assert run.status == "succeeded", run.message
    ns = next(n for n in twin.list_namespaces() if n["metadata"]["name"] == "team-a")
    assert ns["metadata"]["labels"] == {  # as approval made it, Pod Security included
        "brick.cloud/workspace": "true",
        "brick.cloud/owner": "alice",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "baseline",
    }
    assert {q["metadata"]["name"]: q["spec"] for q in twin.list_resource_quotas("team-a")} == before

    # Only the compute quota gone: only it is created; then there is nothing to do.
    twin.delete("v1", "ResourceQuota", "workspace-compute", "team-a")
    run = run_fix(admin_client, twin, url)
    assert (
        run.status == "succeeded"
        and "workspace-compute" in run.steps.get(step_key="recreate-quotas", state="succeeded").output
    )
    assert {q["metadata"]["name"]: q["spec"] for q in twin.list_resource_quotas("team-a")} == before
    writes_before = TwinEvent.objects.count()
    again = service.start_run("W", "", {"workspace": "team-a"}, actor_name="root", dispatch=False)
    engine.execute(again.pk, twin)
    again.refresh_from_db()
    assert again.message.startswith("Nothing to do") and TwinEvent.objects.count() == writes_before


def test_recreate_refuses_a_workspace_without_an_approval_record(twin, admin_client):
    url = registry.find("W").fix_url("", {"workspace": "nobody"})
    plan = admin_client.get(url).content.decode()
    assert "No approved Workspace named nobody" in plan
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    assert admin_client.post(path + "start/", query).status_code == 400 and ProcedureRun.objects.count() == 0


def test_a_fix_on_a_node_does_not_hide_the_stopped_run_that_left_it_cordoned(demo, admin_client):
    run = service.start_run("B", "gpu-a30-03", {"evictions_acknowledged": 2}, actor_name="root", dispatch=False)
    engine.execute(run.pk, demo)  # stopped by a PDB, the node left cordoned
    pod = gpu_pod("ws-nlp-lab", "retry", "gpu-a30-03", "nvidia.com/gpu.shared", 2, phase="Failed")
    pod["status"].update(reason="UnexpectedAdmissionError", message="requested 2")
    demo._create(pod)
    fix = run_fix(admin_client, demo, fix_link(health(admin_client), "pod-admission-failed", "gpu-a30-03"))
    assert fix.status == "succeeded" and fix.node == "gpu-a30-03"
    assert fix_link(health(admin_client), "run-left-cordoned", "gpu-a30-03")  # still offered: R for run B
    run.refresh_from_db()
    assert service.restore_params(run, demo) is not None


def test_a_fix_run_is_cancelled_and_resumed_like_any_run(demo, admin_client):
    url = fix_link(health(admin_client), "stale-capacity", STALE_NODE)
    path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
    admin_client.post(path + "start/", query)
    run = ProcedureRun.objects.get()
    admin_client.post(reverse("run_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "cancelled" and "nvidia.com/gpu" in demo.get_node(STALE_NODE)["status"]["capacity"]
    admin_client.post(reverse("run_resume", args=[run.pk]))
    engine.execute(run.pk, demo)
    run.refresh_from_db()
    assert run.status == "succeeded" and "nvidia.com/gpu" not in demo.get_node(STALE_NODE)["status"]["capacity"]
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "Remove a stale resource from node status" in page and "root" in page


def test_a_restore_fix_whose_node_was_uncordoned_meanwhile_says_nothing_to_do(demo, admin_client):
    run = service.start_run("B", "gpu-a30-03", {"evictions_acknowledged": 2}, actor_name="root", dispatch=False)
    engine.execute(run.pk, demo)  # stopped by a PDB, the node left cordoned
    url = fix_link(health(admin_client), "run-left-cordoned", "gpu-a30-03")
    demo.uncordon("gpu-a30-03")  # by hand, meanwhile
    assert "Nothing to do now" in admin_client.get(url).content.decode()


def test_a_workspace_finding_points_to_its_recreate_fix_by_its_subject():
    """The Workspace findings name the Workspace as their subject: that is
    the fix's parameter, without the check naming a procedure."""
    from gpus.numbers import health

    problem = health.Problem(
        "bad", "workspace-namespace-missing", "team-a", "gone", "re-create it", subject_type="workspace"
    ).resolve_fixes()
    assert problem.fix == "W" and problem.fix_params == {"workspace": "team-a"}
    assert problem.fix_plan_url == reverse("fix_plan", args=["W"]) + "?workspace=team-a"
    other = health.Problem(
        "warn", "quota-over-total", "nvidia.com/gpu", "over", "lower quotas", subject_type="resource"
    ).resolve_fixes()
    assert (other.fix, other.fix_params) == ("", {})
