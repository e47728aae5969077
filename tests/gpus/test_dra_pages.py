"""What the pages show of GPUs published through Dynamic Resource Allocation, on the `dra`
scenario (scenarios/dra.yaml: DRA nodes of every shape beside device-plugin nodes): the
Dashboard's model rows with their DRA part and unlimited shares, the Nodes page's stack,
a DRA node's pools, GPUs and devices, Availability's DeviceClasses, the four DRA findings;
who may see them, and what they cost in queries."""

import csv
import io
import re

import pytest
import yaml
from django.db import connection
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

GPU_CLASS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_CLASS = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
DRA_ONLY = {
    "dra-a100-01",
    "dra-a100-mig-01",
    "dra-h100-dyn-01",
    "dra-incomplete-01",
    "dra-l40s-shares-01",
    "dra-l40s-unlimited-01",
    "dra-stranded-01",
}


@pytest.fixture
def dra(load_scenario):
    return load_scenario("dra")


def text(html: str) -> str:
    """The page's words, tags removed and spaces folded."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def rows_of(html: str, testid: str) -> list[str]:
    """The rows of the table marked data-testid=..., each as its text."""
    table = re.search(rf'data-testid="{testid}".*?</table>', html, re.S).group(0)
    return [text(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S) if "<td" in r]


def node_names(html: str) -> list[str]:
    return re.findall(r'<td><a href="/nodes/([^/]+)/">', html)


def queries(client, url) -> int:
    """The SQL statements one page makes, counted at the cursor (the twin's view brought up to date first)."""
    client.get(url)
    seen: list[str] = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert client.get(url).status_code == 200
    return len(seen)


# --- Dashboard ----------------------------------------------------------------------------


def test_a_model_row_shows_its_dra_part_and_dra_types_read_well(dra, alice_client):
    html = alice_client.get(reverse("dashboard_models")).content.decode()
    rows = rows_of(html, "model-table")
    a100 = next(r for r in rows if r.startswith("NVIDIA A100 80GB PCIe of which"))
    # one row for the model whether the device plugin or DRA serves it: 11 logical on 9 GPUs
    assert a100 == (f"NVIDIA A100 80GB PCIe of which DRA: 5 logical on 3 GPUs 11 4 9 {GPU_CLASS}"), rows
    # dynamic MIG: the two partitions claims hold and the two 1g.10gb that still fit
    assert f"NVIDIA H100 80GB HBM3 MIG, dynamic of which DRA: 4 logical on 1 GPU 4 2 1 {MIG_CLASS}" in rows
    # unlimited shares are among the L40S GPUs: no ceiling, the claims held are counted
    assert f"NVIDIA L40S (Consumable shares) of which DRA: 9 logical on 4 GPUs ∞ 9 counted 4 4 {GPU_CLASS}" in rows
    # a device-plugin row says nothing of DRA (ws-vision's pod holds one of its shares)
    assert "NVIDIA A30 (Shared) 8 1 4 nvidia.com/gpu.shared" in rows


def test_the_headline_names_the_device_class_and_shows_unlimited_as_infinite(dra, alice_client):
    html = alice_client.get(reverse("dashboard")).content.decode()
    rows = rows_of(html, "headline-by-type")
    assert f"{GPU_CLASS} DRA: devices of DeviceClass gpu.nvidia.com ∞ 14 counted ∞ 7 8 0" in rows, rows
    assert f"{MIG_CLASS} DRA: devices of DeviceClass mig.nvidia.com 18 13 5 0 0" in rows


# --- Nodes --------------------------------------------------------------------------------


def test_the_nodes_page_shows_each_nodes_stack_and_both_as_a_finding(dra, admin_client):
    html = admin_client.get(reverse("node_list")).content.decode()
    stack = dict(re.findall(r'data-testid="stack-([^"]+)">(.*?)</td>', html))
    assert text(stack["gpu-a100-01"]) == "Device plugin" and text(stack["dra-a100-01"]) == "DRA"
    both = stack["dra-both-01"]
    assert 'class="tag bad"' in both and text(both) == "Both"
    assert re.search(r'href="/health/\?q=dra-both-01#dra-both-stacks"', both)
    # the mode filter offers DRA, and the stack filter each stack
    assert '<option value="dra" >DRA</option>' in html and '<option value="both" >Both</option>' in html
    assert set(node_names(admin_client.get(reverse("node_list"), {"mode": "dra"}).content.decode())) == DRA_ONLY
    assert node_names(admin_client.get(reverse("node_list"), {"stack": "both"}).content.decode()) == ["dra-both-01"]


def test_the_nodes_page_sorts_by_stack_and_exports_it(dra, admin_client):
    names = node_names(admin_client.get(reverse("node_list"), {"sort": "stack"}).content.decode())
    assert names[0] == "dra-both-01" and names[1:3] == ["gpu-a100-01", "gpu-a30-03"]
    assert set(names[3:]) == DRA_ONLY
    names = node_names(admin_client.get(reverse("node_list"), {"sort": "-stack"}).content.decode())
    assert names[-1] == "dra-both-01"
    resp = admin_client.get(reverse("node_list"), {"format": "csv"})
    exported = list(csv.DictReader(io.StringIO(b"".join(resp.streaming_content).decode())))
    assert {r["stack"] for r in exported if r["name"] in DRA_ONLY} == {"dra"}
    assert {r["name"]: r["stack"] for r in exported}["dra-both-01"] == "both"
    assert {r["name"]: r["stack"] for r in exported}["gpu-a30-03"] == "device-plugin"


# --- Node detail --------------------------------------------------------------------------


def test_a_dra_node_shows_its_pools_gpus_and_devices(dra, admin_client):
    html = admin_client.get(reverse("node_detail", args=["dra-a100-01"])).content.decode()
    assert rows_of(html, "dra-pools") == ["dra-a100-01 gpu.nvidia.com 1 1 slice seen: counted"]
    assert [r.split(" ", 1)[1] for r in rows_of(html, "dra-gpus")] == [
        "NVIDIA A100 80GB PCIe Whole GPU 1 1",
        "NVIDIA A100 80GB PCIe Whole GPU 1 1",
    ]
    devices = rows_of(html, "dra-devices")
    assert devices[0] == "gpu-0 gpu GPU-9ca76ddd-a03a-9… ws-dra/train-gpu ws-dra/train-0"
    gpu1 = devices[1]
    # a claim shared by three pods, an admin-access claim as an observer (not use), a dry-run rule
    assert "ws-dra/shared-gpu" in gpu1 and "ws-dra/infer-0 , ws-dra/infer-1 , ws-dra/infer-2" in gpu1
    assert "observer gpu-monitoring/dcgm-admin" in gpu1
    assert "brick.cloud/maintenance=planned:None dry run · rule dra-a100-01-gpu-1-maintenance" in gpu1
    assert "Not used: NVIDIA's DRA driver publishes this node's GPUs" in text(html)
    # the device plugin's GPU map is not shown (it would call claimed GPUs free); the pods card says where they are
    assert 'id="gpu-map-title"' not in html
    assert "the pods that hold GPUs through ResourceClaims are listed with their devices above" in text(html)


def test_an_incomplete_pool_says_what_was_seen_and_counts_nothing(dra, admin_client):
    html = admin_client.get(reverse("node_detail", args=["dra-incomplete-01"])).content.decode()
    assert rows_of(html, "dra-pools") == [
        "dra-incomplete-01 gpu.nvidia.com 1 1 of 2 slices seen at generation 1: not counted"
    ]
    assert rows_of(html, "dra-gpus")[0].startswith("None counted: a pool of this node is not seen whole")
    assert rows_of(html, "dra-devices") == ["No device counted on this node: see its pools above."]
    assert "DRA pool not seen whole" in html  # the finding, on the node's page


def test_unlimited_shares_are_infinite_with_the_claims_counted(dra, admin_client):
    html = admin_client.get(reverse("node_detail", args=["dra-l40s-unlimited-01"])).content.decode()
    gpus = [r.split(" ", 1)[1] for r in rows_of(html, "dra-gpus")]
    assert gpus == ["NVIDIA L40S Consumable shares ∞ 1", "NVIDIA L40S Consumable shares ∞ 0"]
    assert "∞ (1 counted)" in text(html)  # the GPU resources card: the claims held
    html = admin_client.get(reverse("node_detail", args=["dra-l40s-shares-01"])).content.decode()
    assert "3 shares held" in text(html) and "Consumable shares 4 3" in " ".join(rows_of(html, "dra-gpus"))


def test_dynamic_and_static_mig_and_a_long_device_list_is_paged(dra, admin_client, settings):
    html = admin_client.get(reverse("node_detail", args=["dra-h100-dyn-01"])).content.decode()
    (gpu,) = rows_of(html, "dra-gpus")
    assert "MIG, dynamic (partitioned when claimed) 1g.10gb ×2, 1g.20gb ×1" in gpu and gpu.endswith(" 4 2")
    settings.PAGE_SIZE = 10
    first = admin_client.get(reverse("node_detail", args=["dra-h100-dyn-01"])).content.decode()
    assert len(rows_of(first, "dra-devices")) == 10 and "Page 1 of 2 (19 in all)" in first
    second = admin_client.get(reverse("node_detail", args=["dra-h100-dyn-01"]), {"page": 2}).content.decode()
    assert len(rows_of(second, "dra-devices")) == 9
    html = admin_client.get(reverse("node_detail", args=["dra-a100-mig-01"])).content.decode()
    assert [r.split(" ", 1)[1] for r in rows_of(html, "dra-gpus")] == [
        "NVIDIA A100 80GB PCIe MIG, static " + ", ".join(["1g.10gb"] * 7) + " 7 2",
        "NVIDIA A100 80GB PCIe MIG, static " + ", ".join(["1g.10gb"] * 7) + " 7 1",
    ]


def test_a_node_with_both_stacks_says_so(dra, admin_client):
    html = admin_client.get(reverse("node_detail", args=["dra-both-01"])).content.decode()
    assert 'data-testid="stack"' in html and 'data-testid="both-stacks"' in html
    assert "GPUs published by both the device plugin and DRA" in html


def test_a_device_plugin_node_has_no_dra_card(dra, admin_client):
    html = admin_client.get(reverse("node_detail", args=["gpu-a100-01"])).content.decode()
    assert 'data-testid="dra"' not in html and "no-plugin-needed" not in html


def test_users_may_not_see_nodes_and_an_unknown_node_is_404(dra, alice, admin_client):
    alice_client = Client()
    alice_client.force_login(alice)
    assert alice_client.get(reverse("node_list")).status_code == 403
    assert alice_client.get(reverse("node_detail", args=["dra-a100-01"])).status_code == 403
    assert alice_client.get(reverse("node_list"), {"format": "csv"}).status_code == 403
    assert admin_client.get(reverse("node_detail", args=["dra-no-such-node"])).status_code == 404


def test_dra_pages_cost_the_same_queries_whatever_the_node(dra, admin_client, settings):
    settings.PAGE_SIZE = 5
    detail = [queries(admin_client, reverse("node_detail", args=[n])) for n in ("dra-h100-dyn-01", "dra-a100-01")]
    assert detail[0] == detail[1] == queries(admin_client, reverse("node_detail", args=["gpu-a100-01"]))
    first = queries(admin_client, reverse("node_list"))
    assert queries(admin_client, reverse("node_list") + "?page=2&sort=stack") == first
    settings.PAGE_SIZE = 25
    assert queries(admin_client, reverse("node_list")) == first


# --- Availability -------------------------------------------------------------------------


def test_availability_tells_users_which_device_class_to_ask_for_and_how(dra, alice_client):
    html = alice_client.get(reverse("availability")).content.decode()
    section = re.search(r'data-testid="dra-classes".*?</section>', html, re.S).group(0)
    words = text(section)
    assert "DeviceClass gpu.nvidia.com" in words and "DeviceClass mig.nvidia.com" in words
    # the dynamic-MIG H100: partitioned on demand, or asked for whole from the whole-GPU class
    assert "partitioned when a claim asks" in words and "asked for whole, from DeviceClass gpu.nvidia.com" in words
    note = text(re.search(r'data-testid="dra-quota-note".*?</p>', section, re.S).group(0))
    assert "counts each request of a claim as 1 device" in note and "allocationMode: All as 32" in note
    examples = [
        list(yaml.safe_load_all(e.replace("&quot;", '"').replace("&#x27;", "'")))
        for e in re.findall(r'data-testid="claim-example">(.*?)</pre>', section, re.S)
    ]
    by_class = {}
    for template, pod in examples:
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        by_class[request["exactly"]["deviceClassName"]] = request["exactly"]
        assert template["kind"] == "ResourceClaimTemplate" and pod["kind"] == "Pod"
        assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert by_class["gpu.nvidia.com"]["count"] == 1 and by_class["gpu.nvidia.com"]["capacity"]["requests"] == {
        "shares": "1"
    }
    assert by_class["mig.nvidia.com"]["selectors"][0]["cel"]["expression"] == (
        'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
    )
    assert 'data-copy="claim-1"' in section  # copyable
    rows = rows_of(html, "availability-table")
    assert any(r.startswith(GPU_CLASS) and "∞ 14 counted 8 ∞" in r for r in rows), rows


def test_availability_without_dra_says_nothing_of_it(twin, alice_client):
    html = alice_client.get(reverse("availability")).content.decode()
    assert 'data-testid="dra-classes"' not in html


# --- Health -------------------------------------------------------------------------------

DRA_FINDINGS = {
    "dra-both-stacks": "dra-both-01",
    "dra-pool-incomplete": "dra-incomplete-01",
    "dra-stranded-gpu": "dra-stranded-01",
    "dra-device-taint": "dra-a100-01",
}


def test_the_health_page_and_the_dashboard_card_show_the_dra_findings_linked_to_their_node(dra, admin_client):
    html = admin_client.get(reverse("health")).content.decode()
    for kind, node in DRA_FINDINGS.items():
        row = re.search(rf'<tr class="problem-{kind}".*?</tr>', html, re.S).group(0)
        assert f'href="/nodes/{node}/"' in row, kind
    assert "would evict: ws-dra/infer-0, ws-dra/infer-1, ws-dra/infer-2" in html
    card = re.search(r'data-testid="attention".*?</ul>', admin_client.get(reverse("dashboard")).content.decode(), re.S)
    for kind, node in DRA_FINDINGS.items():
        item = re.search(rf'<li[^>]*data-kind="{kind}".*?</li>', card.group(0), re.S).group(0)
        assert f'href="/nodes/{node}/"' in item, kind


def test_the_dra_pages_speak_korean(dra, admin_client):
    admin_client.cookies["django_language"] = "ko"
    html = admin_client.get(reverse("node_detail", args=["dra-incomplete-01"]), HTTP_ACCEPT_LANGUAGE="ko").content
    words = text(html.decode())
    assert "Dynamic Resource Allocation" not in words and "not counted" not in words
