"""The health of the GPUs pods hold and mig-manager beside DRA's dynamic MIG, on the `dra` scenario
loaded into the twin: what the Health page says, where each finding's lever leads, and what the
cluster ends with once the lever is pulled through the procedure engine.

The scenario: train-0 (ws-dra) holds gpu-0 of dra-a100-01 through its claim, which the kubelet reports
Unhealthy; infer-0's gpu-1 is Healthy; dyn-0's MIG device on dra-h100-dyn-01 is Unknown; vision-0
(ws-vision) holds a time-slicing replica of a GPU of gpu-a30-03 that the device plugin reports
Unhealthy; dra-h100-dyn-01, whose GPU the DRA driver partitions when claimed, also runs mig-manager
(its pod, its deploy label and a mig.config)."""

import re
from html import unescape
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.urls import reverse

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.models import TwinHardware
from brickadmin.cluster.twin import TwinGateway
from gpus.models import ProcedureRun
from gpus.procedures import engine, registry, service
from gpus.tasks import execute_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_engine")]

DRA_NODE, DYN_NODE, PLUGIN_NODE = "dra-a100-01", "dra-h100-dyn-01", "gpu-a30-03"


@pytest.fixture
def dra(load_scenario):
    return load_scenario("dra")


def text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def health_rows(client, kind: str) -> list[str]:
    html = client.get(reverse("health")).content.decode()
    return re.findall(rf'<tr class="problem-{re.escape(kind)}".*?</tr>', html, re.S)


def link(row: str, label: str) -> str:
    m = re.search(rf'<a (?:class="button" )?href="([^"]+)"[^>]*>{re.escape(label)}</a>', row)
    return unescape(m.group(1)) if m else ""


def run_now(code, node, params):
    run = service.start_run(code, node, params, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def pod_names(gw, ns):
    return {p["metadata"]["name"] for p in gw.list_pods(namespace=ns)}


# --- pods on devices the kubelet reports Unhealthy or cannot tell -----------------------------


def test_health_names_each_running_pod_on_an_unhealthy_gpu_with_its_node_device_and_workspace(dra, admin_client):
    rows = health_rows(admin_client, "pod-device-unhealthy")
    assert len(rows) == 2  # train-0's DRA device and vision-0's device-plugin GPU; infer-0's is Healthy
    dra_row, plugin_row = sorted(rows, key=lambda r: PLUGIN_NODE in r)
    assert f'href="/nodes/{DRA_NODE}/"' in dra_row and 'class="tag bad"' in dra_row
    gpu0 = dra.list_resource_slices(DRA_NODE)[0]["spec"]["devices"][0]["attributes"]["uuid"]["string"]
    assert (
        f"Pod ws-dra/train-0 (Workspace ws-dra, owner alice) runs on device gpu-0 of pool {DRA_NODE} "
        f"(gpu.nvidia.com) [{gpu0}], through its claim gpu; the kubelet reports the device Unhealthy."
    ) in text(dra_row)
    assert f'href="/nodes/{PLUGIN_NODE}/"' in plugin_row
    words = text(plugin_row)
    assert "Pod ws-vision/vision-0 (Workspace ws-vision, owner bob) runs on nvidia.com/gpu.shared device" in words
    gpu = TwinHardware.objects.get(node=PLUGIN_NODE).gpus[2]["uuid"]
    assert f"{gpu}::1 [{gpu}]" in words  # the replica and the GPU behind it
    assert f"Cordon and drain the node (kubectl drain {PLUGIN_NODE} --ignore-daemonsets)" in words
    assert not link(plugin_row, "Open the wizard") and not link(plugin_row, "Fix")  # no procedure: said in words
    assert "infer-0" not in " ".join(rows)


def test_unknown_health_is_a_note_not_a_problem(dra, admin_client):
    [row] = health_rows(admin_client, "pod-device-health-unknown")
    assert 'class="tag info"' in row and f'href="/nodes/{DYN_NODE}/"' in row
    assert "The kubelet cannot tell the health of gpu-0-mig-3g40gb-9-0, held by ws-dra/dyn-0." in text(row)
    card = admin_client.get(reverse("dashboard")).content.decode()
    item = re.search(r'<li[^>]*data-kind="pod-device-unhealthy".*?</li>', card, re.S)
    assert item is not None  # the card counts the bad ones


def test_the_dra_finding_opens_the_taint_wizard_with_the_device_chosen(dra, admin_client):
    [row] = [r for r in health_rows(admin_client, "pod-device-unhealthy") if DRA_NODE in r]
    url = link(row, "Open the wizard")
    assert urlsplit(url).path == reverse("wizard_pick", args=["G"])
    assert dict(parse_qsl(urlsplit(url).query)) == {
        "node": DRA_NODE,
        "device": "gpu-0",
        "effect": "NoExecute",
        "taint_key": "brick.cloud/unhealthy",
    }
    pick = admin_client.get(url).content.decode()
    assert re.search(r'<option value="gpu-0"[^>]*selected', pick)
    assert re.search(r'<option value="NoExecute"[^>]*selected', pick)
    assert 'value="brick.cloud/unhealthy"' in pick
    plan = admin_client.get(reverse("wizard_plan", args=["G"]), dict(parse_qsl(urlsplit(url).query)))
    assert plan.status_code == 200
    assert "NoExecute: the 1 pod(s) using gpu-0 will be evicted" in text(plan.content.decode())


def test_tainting_the_unhealthy_device_evicts_its_pod_and_the_finding_goes(dra, admin_client):
    [row] = [r for r in health_rows(admin_client, "pod-device-unhealthy") if DRA_NODE in r]
    params = {k: v for k, v in parse_qsl(urlsplit(link(row, "Open the wizard")).query) if k != "node"}
    run = run_now("G", DRA_NODE, {**params, "taint_value": "", "evictions_acknowledged": 1})
    assert run.status == "succeeded", run.message
    [rule] = [r for r in dra.list_device_taint_rules() if r["spec"]["deviceSelector"]["device"] == "gpu-0"]
    assert rule["spec"]["taint"] == {"key": "brick.cloud/unhealthy", "effect": "NoExecute"}
    assert "train-0" not in pod_names(dra, "ws-dra")  # evicted, as the device taint eviction controller does
    assert {"infer-0", "infer-1", "infer-2"} <= pod_names(dra, "ws-dra")  # gpu-1's pods stay
    claims, _rv = dra.list_with_version("ResourceClaim", "ws-dra")
    claim = next(c for c in claims if c["metadata"]["name"] == "train-gpu")
    assert "allocation" not in claim["status"] and not claim["status"].get("reservedFor")  # released
    rows = health_rows(admin_client, "pod-device-unhealthy")
    assert len(rows) == 1 and PLUGIN_NODE in rows[0]  # train-0's finding went by itself
    [taint] = [r for r in health_rows(admin_client, "dra-device-taint") if "gpu-0" in text(r)]
    assert "gpu-0 is tainted brick.cloud/unhealthy:NoExecute by DeviceTaintRule" in text(taint)


def test_only_nvidias_dra_devices_offer_the_taint_wizard():
    facts = {"device": "gpu-0", "pool": DRA_NODE, "driver": "gpu.nvidia.com"}
    assert [p.code for p, _f in registry.fixers("pod-device-unhealthy", facts)] == ["G"]
    assert registry.fixers("pod-device-unhealthy", {**facts, "driver": "other.example.com"}) == []
    assert registry.fixers("pod-device-unhealthy", {}) == []  # a device-plugin GPU


# --- mig-manager on a node the DRA driver partitions ----------------------------------------


def test_mig_manager_on_a_dynamic_mig_node_is_a_finding_with_its_signs_and_a_fix(dra, admin_client):
    [row] = health_rows(admin_client, "dra-mig-manager")
    assert f'href="/nodes/{DYN_NODE}/"' in row and 'class="tag bad"' in row  # claims hold 2 MIG devices there
    words = text(row)
    for sign in (
        "pod gpu-operator/nvidia-mig-manager-",
        f"{vocab.MIG_MANAGER_DEPLOY_LABEL}=true",
        f"{vocab.MIG_CONFIG_LABEL}=all-disabled",
    ):
        assert sign in words
    assert "2 MIG device(s) are held by claims now" in words
    url = link(row, "Fix")
    assert url == reverse("fix_plan", args=["N"]) + f"?node={DYN_NODE}"
    # the static-MIG node runs no mig-manager; no other node is a dynamic-MIG one
    assert len(health_rows(admin_client, "dra-mig-manager")) == 1


def test_the_fix_stops_mig_manager_and_the_dra_driver_alone_partitions(dra, admin_client):
    [row] = health_rows(admin_client, "dra-mig-manager")
    url = link(row, "Fix")
    plan = text(admin_client.get(url).content.decode())
    assert f"mig-manager runs on {DYN_NODE}" in plan and "No pod is evicted" in plan
    assert f"{vocab.MIG_CONFIG_LABEL}=all-disabled stays on the node" in plan
    start = urlsplit(url).path + "start/"
    resp = admin_client.post(start, dict(parse_qsl(urlsplit(url).query)))
    assert resp.status_code == 302
    run = ProcedureRun.objects.latest("pk")
    engine.execute(run.pk, TwinGateway())
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    labels = dra.get_node(DYN_NODE)["metadata"]["labels"]
    assert labels[vocab.MIG_MANAGER_DEPLOY_LABEL] == "false"
    assert not [
        p for p in dra.list_pods(namespace=vocab.GPU_OPERATOR_NAMESPACE) if "mig-manager" in p["metadata"]["name"]
    ]
    assert pod_names(dra, "ws-dra") >= {"dyn-0", "dyn-1"}  # no pod evicted
    assert health_rows(admin_client, "dra-mig-manager") == []
    # mig-manager no longer acts on the node: a new mig.config leaves its GPUs as the DRA driver has them
    gpus = TwinHardware.objects.get(node=DYN_NODE).gpus
    dra.label_node(DYN_NODE, {vocab.MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert TwinHardware.objects.get(node=DYN_NODE).gpus == gpus
    # a second run finds nothing to do and writes nothing
    again = run_now("N", DYN_NODE, {})
    assert again.status == "succeeded" and "already off" in str(again.message)


def test_the_fix_of_a_node_without_dynamic_mig_does_nothing(dra):
    run = run_now("N", DRA_NODE, {})
    assert run.status == "succeeded" and "no GPU that NVIDIA's DRA driver partitions" in str(run.message)
    assert vocab.MIG_MANAGER_DEPLOY_LABEL not in dra.get_node(DRA_NODE)["metadata"]["labels"]


def test_the_findings_and_the_fix_speak_korean(dra, admin_client):
    admin_client.cookies["django_language"] = "ko"
    html = admin_client.get(reverse("health"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    words = text(html)
    assert "kubelet은 이 장치를 Unhealthy로 보고합니다" in words and "상태를 알 수 없습니다" in words
    assert "mig-manager도 여기서 실행 중입니다" in words
    assert "the kubelet reports" not in words and "mig-manager runs here too" not in words
    plan = text(admin_client.get(reverse("fix_plan", args=["N"]) + f"?node={DYN_NODE}").content.decode())
    assert "레이블을 붙이면 멈춥니다" in plan


def test_the_mig_layout_wizard_is_not_offered_where_the_dra_driver_partitions(dra, admin_client):
    from gpus.view.reading import read_cluster

    proc = registry.find("M")
    n = read_cluster().ledger.node(DYN_NODE)
    assert not proc.offered_on(n)  # though mig-manager's deploy label is true there
    assert "NVIDIA's DRA driver partitions this node's GPUs" in str(proc.eligibility(n))
    page = admin_client.get(reverse("node_detail", args=[DYN_NODE])).content.decode()
    assert reverse("wizard_pick", args=["M"]) not in page
