"""What an admin sees first: the Dashboard's findings above its figures, Free beside the
Totals (Dashboard, Nodes), each node's load as a bar with its numbers in words, and the
wizard's node picker naming each node's load and findings."""

import re

from django.test import Client
from django.urls import reverse

from gpus.view import reading


def text(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def test_the_dashboard_shows_what_needs_attention_before_the_figures_and_charts(demo, admin_client, alice):
    html = admin_client.get(reverse("dashboard")).content.decode()
    attention = html.index('data-testid="attention"')
    assert attention < html.index('data-testid="headline-by-type"') < html.index('id="alloc-pictures-title"')
    user = Client()
    user.force_login(alice)
    assert 'data-testid="attention"' not in user.get(reverse("dashboard")).content.decode()


def test_the_dashboards_free_is_what_neither_quota_nor_pods_hold(twin, alice_client):
    """The seed: Exclusive Total 1 with 1 allocated, Shared Total 2 with 1 allocated, no pod."""
    html = alice_client.get(reverse("dashboard")).content.decode()
    free = dict(re.findall(r'data-testid="free-([^"]+)">(\d+)<', html))
    assert free == {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "1"}


def node_rows(html):
    """{node: (logical, requested, free, the bar's words)} from the Nodes table."""
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        if len(cells) < 10:
            continue
        name = text(cells[0])  # then model, mode, stack, physical, in use
        bar = re.search(r'<meter[^>]*data-testid="load-[^"]+"[^>]*aria-label="([^"]+)"', cells[8])
        out[name] = (int(text(cells[6])), int(text(cells[7])), int(text(cells[8])), bar.group(1))
    return out


def test_the_nodes_list_shows_each_nodes_free_gpus_and_a_bar_saying_its_load(demo, admin_client, settings):
    settings.PAGE_SIZE = 500
    rows = node_rows(admin_client.get(reverse("node_list")).content.decode())
    ledger = reading.read_cluster().ledger
    assert set(rows) == {n.name for n in ledger.nodes}
    assert any(requested for _l, requested, _f, _b in rows.values())  # the demo has GPU pods
    cordoned = {n.name for n in ledger.nodes if n.cordoned}
    assert cordoned, "the demo has a cordoned node"
    for name, (logical, requested, free, words) in rows.items():
        # a cordoned node takes no new pod: nothing on it is free for one
        assert free == (0 if name in cordoned else max(0, logical - requested)), name
        assert words == f"{requested} of {logical} logical GPUs requested by pods, {free} free", name


def test_the_wizards_node_picker_shows_each_nodes_load_and_findings(demo, admin_client):
    html = admin_client.get(reverse("wizard_pick", args=["B"])).content.decode()
    ledger = reading.read_cluster().ledger
    loads = dict(re.findall(r'data-testid="node-load-([^"]+)">(.*?)</div>', html, re.S))
    assert loads, "the picker lists nodes"
    for name, block in loads.items():
        n = ledger.node(name)
        free = max(0, n.logical - n.requested)
        assert f"{n.requested} of {n.logical} logical GPUs requested by pods, {free} free" in text(block), name
    # gpu-a30-04's plugin advertises old replicas: the finding is named where the node is picked
    assert 'data-kind="replicas-not-reflected"' in loads["gpu-a30-04"]
