"""What the pages show, and who may see them."""

import re

import pytest
from django.urls import reverse


def cells(html, testid):
    """Rows of the table marked data-testid=..., as lists of cell texts."""
    table = re.search(rf'data-testid="{testid}".*?</table>', html, re.S).group(0)
    out = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S):
        texts = [
            re.sub(r"<[^>]+>", "", c).split("\n")[0].strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        if texts:
            out.append(texts)
    return out


def test_dashboard_model_detail_shows_the_seed_rows(alice_client, twin):
    html = alice_client.get(reverse("dashboard_models")).content.decode()
    assert [r[:3] for r in cells(html, "model-table")] == [["NVIDIA A30", "1", "0"], ["NVIDIA A30 (Shared)", "2", "0"]]


def test_dashboard_card_counts_logical_and_requested(alice_client, twin):
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert re.search(r'data-testid="gpu-total">3<', html)
    assert re.search(r'data-testid="gpu-used">0<', html)


def test_magnifier_swaps_in_just_the_table(alice_client, twin):
    resp = alice_client.get(reverse("dashboard_models"), HTTP_HX_REQUEST="true")
    html = resp.content.decode()
    assert html.lstrip().startswith("<table") and "<html" not in html


def test_availability_shows_the_seed_table_and_warns_at_zero(alice_client, twin):
    html = alice_client.get(reverse("availability")).content.decode()
    rows = cells(html, "availability-table")
    assert [r[1:4] for r in rows] == [["1", "1", "0"], ["2", "1", "1"]]
    assert "nvidia.com/gpu" in rows[0][0] and "nvidia.com/gpu.shared" in rows[1][0]
    assert "approval may be delayed" in rows[0][4]
    assert rows[1][4] == ""


def test_every_number_names_its_glossary_term(alice_client, twin):
    html = alice_client.get(reverse("availability")).content.decode()
    for term in ("logical", "allocated", "available"):
        assert f'data-term="{term}"' in html


def test_nodes_list_filters_and_paginates(admin_client, load_scenario, settings):
    load_scenario("demo")
    settings.PAGE_SIZE = 5
    html = admin_client.get(reverse("node_list")).content.decode()
    assert "Page 1 of 4" in html  # 16 GPU nodes
    html = admin_client.get(reverse("node_list"), {"mode": "timeslicing"}).content.decode()
    names = set(re.findall(r'href="/nodes/([^/]+)/"', html))
    assert names == {"gpu-a30-03", "gpu-a30-04", "gpu-a100-04", "gpu-h100-04"}
    html = admin_client.get(reverse("node_list"), {"model": "NVIDIA A30"}).content.decode()
    assert set(re.findall(r'href="/nodes/([^/]+)/"', html)) == {f"gpu-a30-0{i}" for i in range(1, 6)}


def test_node_detail_shows_devices_stale_entries_and_plugin(admin_client, load_scenario):
    load_scenario("demo")
    html = admin_client.get(reverse("node_detail", args=["gpu-a100-04"])).content.decode()
    assert "stale in capacity only" in html
    assert "nvidia-device-plugin-timeslicing" in html and "Running" in html
    assert html.count('<li class="device') == 4
    assert "ws-notebooks/jupyter-frank" in html
    html = admin_client.get(reverse("node_detail", args=["gpu-a30-04"])).content.decode()
    assert "the plugin was not restarted" in html
    html = admin_client.get(reverse("node_detail", args=["gpu-h100-05"])).content.decode()
    assert "No device-plugin pod on this node." in html


def test_unknown_node_is_a_404_page(admin_client, twin):
    resp = admin_client.get(reverse("node_detail", args=["no-such-node"]))
    assert resp.status_code == 404
    assert "no-such-node" in resp.content.decode()


@pytest.mark.parametrize("name,args", [("node_list", []), ("node_detail", ["dev-a1-ws04"])])
def test_users_get_no_nodes(alice_client, twin, name, args):
    assert alice_client.get(reverse(name, args=args)).status_code == 403


@pytest.mark.parametrize(
    "name,args",
    [
        ("dashboard", []),
        ("dashboard_models", []),
        ("availability", []),
        ("node_list", []),
        ("node_detail", ["dev-a1-ws04"]),
        ("help", []),
    ],
)
def test_anonymous_visitors_go_to_login(client, twin, name, args):
    url = reverse(name, args=args)
    resp = client.get(url)
    assert resp.status_code == 302 and resp["Location"] == f"{reverse('login')}?next={url}"


def test_login_page_and_korean_translation(client, alice):
    assert client.get(reverse("login")).status_code == 200
    client.force_login(alice)
    client.post(reverse("set_language"), {"language": "ko", "next": "/"})
    html = client.get(reverse("help")).content.decode()
    assert 'lang="ko"' in html
    assert "용어집" in html  # "Glossary"


def test_node_detail_reads_taints_and_pods_from_the_ledger(admin_client, load_scenario):
    load_scenario("demo")
    html = admin_client.get(reverse("node_detail", args=["gpu-a30-01"])).content.decode()
    assert "<code>nvidia.com/gpu:NoSchedule</code>" in html


def test_node_detail_of_a_node_without_gpus(admin_client, twin):
    from brickadmin.cluster import scenarios as s

    twin._save(s.node("cpu-only-01", model=None))
    resp = admin_client.get(reverse("node_detail", args=["cpu-only-01"]))
    assert resp.status_code == 200
    assert "This node has no GPUs" in resp.content.decode()
