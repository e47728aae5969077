"""Each health check on plain in-memory snapshots (no database, no twin), and the one list
the Dashboard card, the Health page and the Nodes State column share."""

import re
from collections import Counter
from datetime import UTC

import pytest
from django.urls import reverse

from gpus.manifest import DriftItem
from gpus.numbers import health, ledger

from .inmemory import GPU, SHARED, gpu_pod, node, quota, snapshot


def found(snap, drift=None):
    return health.problems(health.HealthInputs(ledger.compute(snap), snap, drift))


def triples(problems):
    return [(p.subject, p.kind, p.severity) for p in problems]


def test_stale_allocatable():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8), GPU: (2, 2)})])
    assert triples(found(snap)) == [("ts-1", "stale-allocatable", "bad")]


def test_stale_capacity():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8), GPU: (2, 0)})])
    assert triples(found(snap)) == [("ts-1", "stale-capacity", "warn")]


def test_label_typo_points_to_procedure_a_for_that_node():
    snap = snapshot([node("typo-1", sharing="timesliced")], plugin_pods=[])
    problems = found(snap)
    assert triples(problems) == [("typo-1", "label-typo", "bad")]  # not also "plugin-missing"
    assert problems[0].fix_url == reverse("wizard_pick", args=["A"]) + "?node=typo-1"


def test_plugin_missing():
    snap = snapshot([node("ex-1"), node("ex-2")], plugin_pods=[])
    assert triples(found(snap)) == [("ex-1", "plugin-missing", "bad"), ("ex-2", "plugin-missing", "bad")]


def daemonset(name, sharing, tolerations=()):
    return {
        "metadata": {"namespace": "brick-nvidia", "name": name},
        "spec": {
            "template": {
                "spec": {"nodeSelector": {"brick.cloud/gpu.sharing": sharing}, "tolerations": list(tolerations)}
            }
        },
    }


PLUGIN_DAEMONSETS = [
    daemonset("nvidia-device-plugin-default", "none"),
    daemonset("nvidia-device-plugin-timeslicing", "timeslicing"),
]


def test_plugin_missing_names_the_taint_the_daemonset_does_not_tolerate():
    snap = snapshot(
        [node("ex-1", taints=[{"key": "brick.cloud/dedicated", "value": "llm", "effect": "NoSchedule"}])],
        plugin_pods=[],
    )
    snap.plugin_daemonsets = PLUGIN_DAEMONSETS
    (problem,) = found(snap)
    assert (problem.kind, problem.subject) == ("plugin-missing", "ex-1")
    assert "nvidia-device-plugin-default" in problem.message
    assert "brick.cloud/dedicated=llm:NoSchedule" in problem.message


def test_plugin_missing_says_when_no_daemonset_selects_the_node():
    snap = snapshot([node("ex-1")], plugin_pods=[])
    snap.plugin_daemonsets = [daemonset("nvidia-device-plugin-timeslicing", "timeslicing")]
    (problem,) = found(snap)
    assert "No device-plugin DaemonSet selects this node's labels (brick.cloud/gpu.sharing=none)" in problem.message


def test_a_gpu_operator_cluster_is_said_once_not_reported_as_missing_objects():
    operator_node = {
        "metadata": {
            "name": "op-1",
            "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A30"},
        },
        "spec": {},
        "status": {"capacity": {GPU: "1"}, "allocatable": {GPU: "1"}},
    }
    drift = [
        DriftItem("DaemonSet", "nvidia-device-plugin-default", "missing"),
        DriftItem("ConfigMap", "nvidia-device-plugin-config-timeslicing", "missing"),
    ]
    problems = found(snapshot([operator_node], plugin_pods=[]), drift)
    assert triples(problems) == [("cluster", "convention", "info")]
    assert "GPU Operator" in problems[0].message


def refused(pod, message="Allocate failed due to requested number of devices unavailable"):
    pod["status"].update(reason="UnexpectedAdmissionError", message=message)
    return pod


WORKSPACES = [{"metadata": {"name": "ws-a", "labels": {"brick.cloud/owner": "alice"}}}]


def test_a_pod_asking_for_two_shared_gpus_is_explained_with_its_workspace_and_owner():
    snap = snapshot([node("ts-1", sharing="timeslicing", resources={SHARED: (16, 16)})])
    snap.failed_gpu_pods = [refused(gpu_pod("ws-a", "train", "ts-1", SHARED, 2, phase="Failed"))]
    snap.namespaces = WORKSPACES
    (problem,) = found(snap)
    assert (problem.kind, problem.subject, problem.severity) == ("pod-admission-failed", "ts-1", "bad")
    assert "ws-a/train" in problem.message and "owner alice" in problem.message
    assert "failRequestsGreaterThanOne" in problem.message


def test_a_pod_refused_on_a_stale_resource_names_the_node_and_the_resource():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (8, 8), GPU: (2, 2)})])
    snap.failed_gpu_pods = [refused(gpu_pod("ws-a", "infer", "ts-1", GPU, 1, phase="Failed"))]
    problems = [p for p in found(snap) if p.kind == "pod-admission-failed"]
    assert len(problems) == 1 and "ts-1" in problems[0].message and GPU in problems[0].message
    assert "recreate the pod" in problems[0].remedy


def test_another_refusal_gives_the_kubelets_message():
    snap = snapshot([node("ex-1")])
    snap.failed_gpu_pods = [refused(gpu_pod("ws-a", "x", "ex-1", GPU, 1, phase="Failed"), "device plugin gone")]
    (problem,) = found(snap)
    assert "device plugin gone" in problem.message


def test_a_pod_pending_for_a_resource_no_node_offers():
    pending = gpu_pod("ws-a", "waits", "", SHARED, 1, phase="Pending")
    pending["spec"].pop("nodeName")
    snap = snapshot([node("ex-1")], gpu_pods=[pending])
    snap.namespaces = WORKSPACES
    (problem,) = found(snap)
    assert (problem.kind, problem.subject) == ("pod-pending-no-resource", SHARED)
    assert "ws-a/waits" in problem.message and "alice" in problem.message


def test_replicas_not_reflected_points_to_procedure_c_without_a_node():
    snap = snapshot([node("ts-1", sharing="timeslicing", physical=4, resources={SHARED: (8, 8)})], replicas=4)
    problems = found(snap)
    assert triples(problems) == [("ts-1", "replicas-not-reflected", "warn")]
    assert problems[0].fix_url == reverse("wizard_pick", args=["C"])


def test_cordoned_node_says_uncordon():
    problems = found(snapshot([node("ex-1", unschedulable=True), node("ex-2")]))
    assert triples(problems) == [("ex-1", "cordoned", "info")]
    assert "uncordon" in problems[0].remedy and problems[0].fix_url == ""


def test_quota_over_total_is_about_a_resource():
    snap = snapshot([node("ex-1", physical=2)], quotas=[quota("ws-a", {GPU: 2}), quota("ws-b", {GPU: 1})])
    problems = found(snap)
    assert triples(problems) == [(GPU, "quota-over-total", "bad")]
    assert problems[0].node == "" and problems[0].subject_url == ""
    assert "Held by: ws-a (owner ?): 2; ws-b (owner ?): 1." in problems[0].message


def test_quota_over_total_names_the_owners():
    snap = snapshot([node("ex-1", physical=1)], quotas=[quota("ws-a", {GPU: 2})])
    snap.namespaces = [{"metadata": {"name": "ws-a", "labels": {"brick.cloud/owner": "alice"}}}]
    (problem,) = found(snap)
    assert "ws-a (owner alice): 2" in problem.message


def test_manifest_drift_from_the_gathered_drift_items():
    drift = [
        DriftItem("DaemonSet", "nvidia-device-plugin-default", "drifted", ["spec.template.spec.tolerations"]),
        DriftItem("ConfigMap", "nvidia-device-plugin-config-timeslicing", "missing"),
        DriftItem("ConfigMap", "nvidia-device-plugin-config-default", "in-sync"),
    ]
    problems = found(snapshot([node("ex-1")]), drift)
    assert triples(problems) == [
        ("ConfigMap/nvidia-device-plugin-config-timeslicing", "manifest-drift", "warn"),
        ("DaemonSet/nvidia-device-plugin-default", "manifest-drift", "warn"),
    ]
    assert all(p.node == "" and p.subject_url == reverse("manifest") for p in problems)
    assert found(snapshot([node("ex-1")]), None) == []  # drift not read: nothing claimed


def test_a_healthy_cluster_has_no_problem():
    assert found(snapshot([node("ex-1"), node("ts-1", sharing="timeslicing", resources={SHARED: (16, 16)})])) == []


def test_every_registered_check_is_tested_here():
    tested = {
        "stale-allocatable",
        "stale-capacity",
        "label-typo",
        "plugin-missing",
        "replicas-not-reflected",
        "cordoned",
        "quota-over-total",
        "manifest-drift",
        "convention",
        "run-left-cordoned",
        "checklist-waiting",
        "pod-admission-failed",
        "pod-pending-no-resource",
        "reaper-stopped",
    }
    tested |= {"mig-single-not-uniform", "mps-refused"}  # tests/foundation/test_nvidia_layouts.py
    tested |= {"dra-pool-incomplete", "dra-both-stacks", "dra-stranded-gpu", "dra-device-taint"}  # below
    tested |= {"pod-device-unhealthy", "pod-device-health-unknown", "dra-mig-manager"}  # below
    # the Workspace checks: tests/foundation/test_health_workspaces.py
    tested |= {
        "workspace-namespace-missing",
        "workspace-quota-missing",
        "workspace-quota-edited",
        "workspace-unrecorded",
        "workspace-idle",
    }
    # elastic quota on Kueue: tests/workspaces/test_elastic.py
    tested |= {"kueue-not-installed", "workspace-borrowing-while-waiting"}
    assert set(health.REGISTRY) == tested


def record_found(stopped_runs, now=None):
    return health.problems(health.HealthInputs(ledger=None, stopped_runs=stopped_runs, now=now), reads="records")


def test_a_stopped_run_that_left_its_node_cordoned_links_to_the_run():
    from gpus.models import ProcedureRun

    failed = ProcedureRun(pk=7, procedure="A", node="ex-1", status="failed")
    cancelled_elsewhere = ProcedureRun(pk=8, procedure="B", node="ex-2", status="cancelled")
    problems = record_found([(failed, True), (cancelled_elsewhere, False)])
    assert triples(problems) == [("ex-1", "run-left-cordoned", "warn")]
    assert problems[0].link == reverse("run_detail", args=[7]) and "#7" in problems[0].message


def test_a_reaper_silent_for_minutes_is_a_finding_that_says_what_to_do():
    from datetime import datetime, timedelta

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def found(beats):
        inputs = health.HealthInputs(ledger=None, now=now, service_beats=beats, service_late_after=timedelta(minutes=2))
        return health.problems(inputs, reads="records")

    assert found({"reaper": now - timedelta(seconds=10)}) == []  # beat runs it every 5 s
    assert found({}) == [] and found(None) == []  # never ran here: nothing to compare with
    late = found({"reaper": now - timedelta(minutes=3)})
    assert [(p.kind, p.severity) for p in late] == [("reaper-stopped", "bad")]
    assert "11:57:00" in late[0].message and "beat" in late[0].remedy


def test_a_checklist_waiting_for_more_than_a_day():
    from datetime import datetime, timedelta

    from gpus.models import ProcedureRun

    now = datetime(2026, 12, 1, tzinfo=UTC)
    old = ProcedureRun(
        pk=9,
        procedure="D",
        node="new-1",
        status="failed",
        current_step="checklist",
        params={"sharing": "none"},
        finished_at=now - timedelta(days=2),
    )
    fresh = ProcedureRun(
        pk=10,
        procedure="D",
        node="new-2",
        status="failed",
        current_step="checklist",
        params={"sharing": "none"},
        finished_at=now - timedelta(hours=2),
    )
    assert triples(record_found([(old, False), (fresh, False)], now)) == [("new-1", "checklist-waiting", "info")]


@pytest.mark.django_db
def test_a_run_stopped_after_cordoning_shows_on_health_and_the_nodes_list(admin_client, load_scenario):
    from gpus.procedures import engine, service

    demo = load_scenario("demo")
    run = service.start_run(
        "B", "gpu-a30-03", {"evictions_acknowledged": 2}, actor_name="root", dispatch=False
    )  # a PDB blocks its drain
    engine.execute(run.pk, demo)
    run.refresh_from_db()
    assert run.status == "failed" and demo.get_node("gpu-a30-03")["spec"].get("unschedulable")
    assert ("gpu-a30-03", "run-left-cordoned") in page_kinds_by_node(
        admin_client.get(reverse("health")).content.decode()
    )
    assert ("gpu-a30-03", "run-left-cordoned") in page_kinds_by_node(
        admin_client.get(reverse("node_list"), {"model": "NVIDIA A30"}).content.decode()
    )
    service.resume_run(run, actor_name="root", dispatch=False)
    demo.delete("policy/v1", "PodDisruptionBudget", "tokenizer-svc-pdb", "ws-nlp-lab")
    engine.execute(run.pk, demo)
    assert "run-left-cordoned" not in admin_client.get(reverse("health")).content.decode()


def mixed_snapshot():
    """A replicas mismatch and a cordoned node, beside a healthy node."""
    return snapshot(
        [
            node("ts-1", sharing="timeslicing", physical=4, resources={SHARED: (8, 8)}),
            node("ex-1", unschedulable=True),
            node("ex-2"),
        ],
        replicas=4,
    )


def test_card_nodes_and_health_read_the_same_list():
    problems = found(mixed_snapshot())
    assert triples(problems) == [("ts-1", "replicas-not-reflected", "warn"), ("ex-1", "cordoned", "info")]
    per_node = health.by_node(problems)
    assert {n: [p.kind for p in ps] for n, ps in per_node.items()} == {
        "ts-1": ["replicas-not-reflected"],
        "ex-1": ["cordoned"],
    }
    card = health.summary(problems)
    assert [(g.kind, g.severity, g.count) for g in card] == [
        ("replicas-not-reflected", "warn", 1),
        ("cordoned", "info", 1),
    ]


def test_a_check_added_once_appears_everywhere(monkeypatch):
    monkeypatch.setitem(
        health.REGISTRY,
        "too-hot",
        health.HealthCheck(
            "too-hot",
            "Too hot",
            lambda inputs: [
                health.Problem("warn", "too-hot", n.name, "hot", "cool it")
                for n in inputs.ledger.nodes
                if n.name == "ex-2"
            ],
        ),
    )
    problems = found(mixed_snapshot())
    assert ("ex-2", "too-hot", "warn") in triples(problems)
    assert [p.kind for p in health.by_node(problems)["ex-2"]] == ["too-hot"]
    assert ("too-hot", 1) in [(g.kind, g.count) for g in health.summary(problems)]
    assert problems[[p.kind for p in problems].index("too-hot")].title == "Too hot"


# --- the same agreement through the pages, on the twin --------------------------------


def page_kinds_by_node(html):
    """{(node, kind)} from the rows of a page: a row's node link and its data-kind marks."""
    out = set()
    for row in re.findall(r"<tr[^>]*>.*?</tr>", html, re.S):
        names = re.findall(r'href="/nodes/([^/]+)/"', row)
        for kind in re.findall(r'data-kind="([^"]+)"', row):
            if names:
                out.add((names[0], kind))
    return out


@pytest.mark.django_db
def test_dashboard_card_nodes_state_and_health_page_agree(admin_client, load_scenario, settings):
    load_scenario("demo")  # gpu-a30-04: replicas not reflected; gpu-a100-03: cordoned
    settings.PAGE_SIZE = 500
    health_html = admin_client.get(reverse("health")).content.decode()
    nodes_html = admin_client.get(reverse("node_list")).content.decode()
    dash_html = admin_client.get(reverse("dashboard")).content.decode()

    on_health = page_kinds_by_node(health_html)
    assert ("gpu-a30-04", "replicas-not-reflected") in on_health and ("gpu-a100-03", "cordoned") in on_health
    assert page_kinds_by_node(nodes_html) == on_health

    health_counts = Counter(re.findall(r'<tr class="problem-[^"]*" data-kind="([^"]+)"', health_html))
    card = re.search(r'data-testid="attention">(.*?)</ul>', dash_html, re.S).group(1)
    card_counts = {k: int(n) for k, n in re.findall(r'data-kind="([^"]+)"><span class="tag \w+">(\d+)</span>', card)}
    assert card_counts == dict(health_counts)
    assert {"replicas-not-reflected", "cordoned", "manifest-drift"} <= set(card_counts)


@pytest.mark.django_db
def test_drift_from_the_snapshot_is_the_live_drift(load_scenario):
    from brickadmin.cluster.snapshot import take_snapshot
    from gpus import manifest
    from gpus.view.reading import ClusterView, health_inputs

    demo = load_scenario("demo")
    snap = take_snapshot(demo, use_prometheus=False)
    from_snapshot = health_inputs(ClusterView(snap, ledger.compute(snap))).drift
    assert from_snapshot == manifest.drift(manifest.parse(manifest.current().content), demo)
    assert any(d.state != "in-sync" for d in from_snapshot)


@pytest.mark.django_db
def test_every_finding_has_an_entry_on_the_help_page(alice_client):
    from django.utils.html import escape

    html = alice_client.get(reverse("help")).content.decode()
    for entry in health.REGISTRY.values():
        assert f'id="finding-{entry.kind}"' in html and str(entry.explain) and escape(str(entry.explain)) in html


# --- GPUs published through DRA (NVIDIA's driver's objects, tests/dra_objects.py) ---------


def dra_snapshot(slices, *, claims=(), capacity=None, devices=None, taint_rules=()):
    """One node, node-a100, publishing ``slices`` (and advertising ``capacity`` through a device plugin)."""
    from brickadmin.cluster.snapshot import Snapshot

    from .test_dra_ledger import node as dra_node

    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"} if capacity else None
    return Snapshot(
        nodes=[dra_node("node-a100", capacity, labels)],
        gpu_pods=[],
        quotas=[],
        resource_slices=slices,
        resource_claims=list(claims),
        device_taint_rules=list(taint_rules),
        devices=devices or {},
        device_source="dcgm" if devices else "labels",
    )


def dra_found(snap):
    return [t for t in triples(found(snap)) if t[1].startswith("dra-")]


def test_a_healthy_dra_node_has_no_dra_finding():
    from tests import dra_objects as ex

    raw = [{"uuid": ex.GPU_A, "model": "NVIDIA A100-SXM4-80GB"}, {"uuid": ex.GPU_B, "model": "NVIDIA A100-SXM4-80GB"}]
    assert dra_found(dra_snapshot(ex.whole_gpu_node(), devices={"node-a100": raw})) == []


def test_dra_pool_incomplete():
    from tests import dra_objects as ex

    slices = ex.whole_gpu_node()
    slices[0]["spec"]["pool"]["resourceSliceCount"] = 2  # one of two slices seen
    problems = [p for p in found(dra_snapshot(slices)) if p.kind.startswith("dra-")]
    assert triples(problems) == [("node-a100", "dra-pool-incomplete", "warn")]
    assert "1 of 2 ResourceSlices seen at generation 1" in problems[0].message
    assert problems[0].subject_url == reverse("node_detail", args=["node-a100"])


def test_dra_both_stacks():
    from tests import dra_objects as ex

    snap = dra_snapshot(ex.whole_gpu_node(), capacity={"nvidia.com/gpu": "2"})
    assert dra_found(snap) == [("node-a100", "dra-both-stacks", "bad")]


def test_dra_stranded_gpu():
    from tests import dra_objects as ex

    raw = [{"uuid": u, "model": "NVIDIA A100-SXM4-80GB"} for u in (ex.GPU_A, ex.GPU_B, "GPU-in-mig-mode-no-devices")]
    problems = [
        p for p in found(dra_snapshot(ex.whole_gpu_node(), devices={"node-a100": raw})) if p.kind.startswith("dra-")
    ]
    assert triples(problems) == [("node-a100", "dra-stranded-gpu", "warn")]
    assert "GPU-in-mig-mode-no-devices offered to nobody" in problems[0].message


def test_dra_device_taint_by_the_driver_and_a_rule_in_dry_run():
    from tests import dra_objects as ex

    slices = ex.whole_gpu_node()
    gpu0 = next(d for d in slices[0]["spec"]["devices"] if d["name"] == "gpu-0")
    gpu0["taints"] = [{"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]
    rule = {
        "metadata": {"name": "drain-gpu-1"},
        "spec": {
            "deviceSelector": {"driver": ex.DRIVER, "pool": "node-a100", "device": "gpu-1"},
            "taint": {"key": "brick.cloud/maintenance", "effect": "None"},
        },
    }
    problems = [p for p in found(dra_snapshot(slices, taint_rules=[rule])) if p.kind.startswith("dra-")]
    assert sorted(triples(problems)) == [
        ("node-a100", "dra-device-taint", "info"),
        ("node-a100", "dra-device-taint", "warn"),
    ]
    said = sorted(p.message for p in problems)
    assert said == [
        "DeviceTaintRule drain-gpu-1 (dry run) on gpu-1 would evict: no pod.",
        "gpu-0 is tainted gpu.nvidia.com/unhealthy=xid-79:NoSchedule by the driver; pods on it: no pod.",
    ]


# --- the health the kubelet reports of the devices pods hold (allocatedResourcesStatus) ---------


def with_health(pod, entries, *, init=False):
    """``pod`` with a container status whose allocatedResourcesStatus is ``entries``: [(name, id, health)]."""
    status = {
        "name": "main",
        "allocatedResourcesStatus": [
            {"name": name, "resources": [{"resourceID": rid, "health": h}]} for name, rid, h in entries
        ],
    }
    pod["status"]["initContainerStatuses" if init else "containerStatuses"] = [status]
    return pod


def claim_pod(ns, name, node_name, phase="Running"):
    return {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"nodeName": node_name, "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]},
        "status": {"phase": phase},
    }


def health_snapshot(pods, *, claim_pods=()):
    from brickadmin.cluster.snapshot import Snapshot
    from tests import dra_objects as ex

    from .test_dra_ledger import node as dra_node

    snap = snapshot([node("ex-1")], gpu_pods=pods)
    return Snapshot(
        nodes=[*snap.nodes, dra_node("node-a100")],
        gpu_pods=snap.gpu_pods,
        quotas=[],
        plugin_pods=snap.plugin_pods,
        plugin_configmaps=snap.plugin_configmaps,
        resource_slices=ex.whole_gpu_node(),
        claim_pods=list(claim_pods),
        namespaces=[{"metadata": {"name": "team-a", "labels": {"brick.cloud/owner": "alice"}}}],
    )


def device_found(snap):
    return [p for p in found(snap) if p.kind.startswith("pod-device")]


def test_a_running_pod_on_an_unhealthy_dra_device_opens_the_taint_wizard_on_it():
    pod = with_health(
        claim_pod("team-a", "train", "node-a100"), [("claim:gpu/gpu", "gpu.nvidia.com/node-a100/gpu-1", "Unhealthy")]
    )
    [p] = device_found(health_snapshot([], claim_pods=[pod]))
    assert (p.subject, p.kind, p.severity) == ("node-a100", "pod-device-unhealthy", "bad")
    assert "Pod team-a/train (Workspace team-a, owner alice) runs on device gpu-1 of pool node-a100" in p.message
    assert "through its claim gpu" in p.message and "NoExecute (procedure G" in p.remedy
    assert p.fix_params == {
        "device": "gpu-1",
        "pool": "node-a100",
        "driver": "gpu.nvidia.com",
        "effect": "NoExecute",
        "taint_key": "brick.cloud/unhealthy",
    }


def test_another_drivers_unhealthy_device_names_the_rule_to_write_without_a_wizard():
    pod = with_health(
        claim_pod("team-a", "net", "node-a100"), [("claim:nic/nic", "sriov.example.com/node-a100/vf-3", "Unhealthy")]
    )
    [p] = device_found(health_snapshot([], claim_pods=[pod]))
    assert "device vf-3 of pool node-a100 (sriov.example.com)" in p.message
    assert "driver sriov.example.com, pool node-a100 and device vf-3" in p.remedy
    assert p.fix_params == {} and p.wizard == ""


def test_a_device_plugin_gpu_reported_unhealthy_says_drain_or_restart():
    pod = with_health(gpu_pod("team-a", "solo", "ex-1"), [(GPU, "GPU-0000-aaaa", "Unhealthy")])
    [p] = device_found(health_snapshot([pod]))
    assert (p.subject, p.kind, p.severity) == ("ex-1", "pod-device-unhealthy", "bad")
    assert "runs on nvidia.com/gpu device GPU-0000-aaaa; the kubelet reports it Unhealthy." in p.message
    assert "kubectl drain ex-1 --ignore-daemonsets" in p.remedy and "restart the pod" in p.remedy
    assert p.fix_params == {} and p.fix_url == ""


def test_an_init_container_s_device_counts_and_one_device_two_containers_hold_is_said_once():
    pod = with_health(
        claim_pod("team-a", "sidecar", "node-a100"),
        [("claim:gpu/gpu", "gpu.nvidia.com/node-a100/gpu-0", "Unhealthy")],
        init=True,
    )
    pod["status"]["containerStatuses"] = [dict(pod["status"]["initContainerStatuses"][0], name="main")]
    [p] = device_found(health_snapshot([], claim_pods=[pod]))
    assert "gpu-0" in p.message


def test_healthy_devices_and_pods_not_running_are_no_finding():
    healthy = with_health(gpu_pod("team-a", "ok", "ex-1"), [(GPU, "GPU-1", "Healthy")])
    done = with_health(gpu_pod("team-a", "done", "ex-1", phase="Pending"), [(GPU, "GPU-2", "Unhealthy")])
    assert device_found(health_snapshot([healthy, done])) == []


def test_unknown_health_is_one_note_per_node():
    pods = [with_health(gpu_pod("team-a", f"p{i}", "ex-1"), [(GPU, f"GPU-{i}", "Unknown")]) for i in range(2)]
    [p] = device_found(health_snapshot(pods))
    assert (p.subject, p.kind, p.severity) == ("ex-1", "pod-device-health-unknown", "info")
    assert p.message == "The kubelet cannot tell the health of GPU-0, GPU-1, held by team-a/p0, team-a/p1."


def test_a_dra_resource_id_whose_pool_holds_slashes_is_taken_apart():
    from gpus.numbers.device_health import dra_resource_id

    assert dra_resource_id("gpu.nvidia.com/rack-1/node-a/gpu-3") == ("gpu.nvidia.com", "rack-1/node-a", "gpu-3")
    assert dra_resource_id("GPU-9ca76ddd") is None


# --- mig-manager beside the DRA driver's dynamic MIG -------------------------------------------


def mig_snapshot(labels=None, pods=(), slices=None, name="node-h100-dynmig"):
    from brickadmin.cluster.snapshot import Snapshot
    from tests import dra_objects as ex

    from .test_dra_ledger import node as dra_node

    return Snapshot(
        nodes=[dra_node(name, labels=labels)],
        gpu_pods=[],
        quotas=[],
        resource_slices=slices if slices is not None else ex.dynamic_mig_node(),
        mig_manager_pods=list(pods),
    )


def mig_manager_pod(node_name, phase="Running"):
    return {
        "metadata": {
            "namespace": "gpu-operator",
            "name": "nvidia-mig-manager-x1",
            "labels": {"app": "nvidia-mig-manager"},
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("labels", "pods", "said"),
    [
        ({"nvidia.com/gpu.deploy.mig-manager": "true"}, [], "nvidia.com/gpu.deploy.mig-manager=true"),
        ({"nvidia.com/mig.config": "all-1g.10gb"}, [], "nvidia.com/mig.config=all-1g.10gb"),
        (
            {"nvidia.com/gpu.deploy.mig-manager": "false"},
            [mig_manager_pod("node-h100-dynmig")],
            "pod gpu-operator/nvidia-mig-manager-x1",
        ),
    ],
)
def test_mig_manager_on_a_dynamic_mig_node_is_found_by_each_of_its_signs(labels, pods, said):
    [p] = [p for p in found(mig_snapshot(labels, pods)) if p.kind == "dra-mig-manager"]
    assert (p.subject, p.severity) == ("node-h100-dynmig", "warn")  # no claim holds a MIG device
    assert said in p.message and "nvidia.com/gpu.deploy.mig-manager=false" in p.remedy


def test_no_mig_manager_finding_when_it_is_off_or_the_node_is_not_dynamic_mig():
    from tests import dra_objects as ex

    off = {"nvidia.com/gpu.deploy.mig-manager": "false", "nvidia.com/mig.config": "all-disabled"}
    assert [p for p in found(mig_snapshot(off)) if p.kind == "dra-mig-manager"] == []
    assert [p for p in found(mig_snapshot({})) if p.kind == "dra-mig-manager"] == []
    gone = mig_snapshot(off, [mig_manager_pod("node-h100-dynmig", phase="Succeeded")])
    assert [p for p in found(gone) if p.kind == "dra-mig-manager"] == []
    on = {"nvidia.com/gpu.deploy.mig-manager": "true"}
    static = mig_snapshot(on, slices=ex.static_mig_node(), name="node-a100-mig")
    assert ledger.compute(static).node("node-a100-mig").dra.devices  # a DRA node, its MIG made beforehand
    assert [p for p in found(static) if p.kind == "dra-mig-manager"] == []
