"""Quantities as the real API server writes them back: a ResourceQuota of 1000 shared GPUs
and a node capacity of 1000 GPUs come back as "1k", and the product's pages read 1000."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from brickadmin.cluster import vocabulary as V
from brickadmin.cluster.base import ClusterError

from .conftest import _exists, make_namespace, make_node, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.django_db]

NS, NODE = "lab-qty", "lab-qty-1k"
QUOTA_KEY = V.quota_key(V.GPU_SHARED)


def text(html: bytes) -> str:
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html.decode(), flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


@pytest.fixture
def thousands(lab):
    """A Workspace-like namespace with a quota of 1000 shared GPUs, and a GFD-labelled node
    (no BRICK label, so gpusim leaves its status alone) with 1000 GPUs, both written as 1000."""
    make_namespace(lab, NS)
    lab.admin._request(
        "PATCH",
        f"/api/v1/namespaces/{NS}",
        content_type="application/merge-patch+json",
        body={"metadata": {"labels": {V.WORKSPACE_LABEL: "true", V.OWNER_LABEL: "carol"}}},
    )
    lab.admin.create_resource_quota(NS, "workspace-quota", {QUOTA_KEY: 1000, "requests.cpu": "2"})
    make_node(lab, NODE, labels={V.GPU_PRODUCT_LABEL: "NVIDIA-A30", V.GPU_COUNT_LABEL: "1000"})
    gpus = {V.GPU: "1000"}
    lab.admin._request(
        "PATCH",
        f"/api/v1/nodes/{NODE}/status",
        content_type="application/merge-patch+json",
        body={"status": {"capacity": gpus, "allocatable": gpus}},
    )
    yield lab
    for kind, name in (("Node", NODE), ("Namespace", NS)):
        try:
            lab.admin.delete("v1", kind, name)
        except ClusterError:
            pass
    wait_until(lambda: not _exists(lab, f"/api/v1/nodes/{NODE}"), 30, f"node {NODE} to go")


def test_the_api_server_writes_a_thousand_as_1k_and_the_pages_read_1000(thousands, settings, admin_client):
    quota = thousands.admin._request("GET", f"/api/v1/namespaces/{NS}/resourcequotas/workspace-quota")
    assert quota["spec"]["hard"][QUOTA_KEY] == "1k"  # what the product must read as 1000
    assert thousands.nvidia(NODE, "capacity") == {V.GPU: "1k"}

    settings.BRICK_CLUSTER, settings.BRICK_KUBECONFIG = "kube", thousands.kubeconfig
    settings.BRICK_SNAPSHOT_CACHE_SECONDS = 0
    settings.PROMETHEUS_URL = ""
    call_command("watch_cluster", "--once")  # list the real cluster and publish, as the watcher does

    html = admin_client.get(reverse("cluster_workspaces")).content
    table = re.search(rb'data-testid="cluster-workspaces".*?</table>', html, re.DOTALL).group(0)
    rows = [text(r) for r in re.findall(rb"<tr>(.*?)</tr>", table, re.DOTALL)]
    mine = [r for r in rows if r.startswith(f"{NS} ")]
    assert mine, f"{NS} is not listed as holding a GPU quota: {rows}"
    assert f"{NS} carol" in mine[0] and f"{V.GPU_SHARED} Shared (time-slicing) 1000 0" in mine[0], mine[0]
    page = text(admin_client.get(reverse("node_detail", args=[NODE])).content)
    assert f"{V.GPU} 1000 1000 0" in page, page[:2000]
