"""The demo's utilisation, measured as in production: the simulated cluster serves what its
dcgm-exporter and kube-state-metrics would (TwinGateway.exporter_page, served by
`manage.py twin_exporter`), a real Prometheus scrapes it, and the watcher's DCGM feed
brings it into the view; the figures the simulated cluster already showed do not change."""

import re
import shutil

import pytest

from brickadmin.cluster.vocabulary import NVIDIA_PREFIX
from gpus.models import ViewState, ViewWorkspace
from gpus.view import reading
from tests.conftest import require_service
from tests.prometheus_scrape import serve_metrics, start_prometheus
from tests.workspaces.test_utilisation import wait_for

pytestmark = pytest.mark.django_db


def running_gpu_pods(gw):
    return [
        p
        for p in gw.list_gpu_pods()
        if (p.get("status") or {}).get("phase") == "Running" and (p.get("spec") or {}).get("nodeName")
    ]


def test_the_simulated_cluster_exports_every_gpu_and_every_pod_holding_one(load_scenario):
    gw = load_scenario("demo")
    page = gw.exporter_page(now=1_800_000_000)
    util = [line for line in page.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    uuids = {g["uuid"] for gpus in gw.gpu_devices().values() for g in gpus}
    assert uuids and {re.search(r'UUID="([^"]+)"', line)[1] for line in util} == uuids
    exported_pods = {
        tuple(re.search(r'pod="([^"]+)",namespace="([^"]+)"', line).groups()) for line in util if "pod=" in line
    }
    pods = {(p["metadata"]["name"], p["metadata"]["namespace"]) for p in running_gpu_pods(gw)}
    assert pods and pods <= exported_pods
    # kube-state-metrics: every node's labels, and what each node serves of nvidia.com/*
    for node in gw.list_nodes():
        name = node["metadata"]["name"]
        assert f'kube_node_labels{{node="{name}"' in page
        for res, qty in (node["status"].get("allocatable") or {}).items():
            if res.startswith(NVIDIA_PREFIX):
                flat = res.replace("/", "_").replace(".", "_").replace("-", "_")
                assert (
                    f'kube_node_status_allocatable{{node="{name}",resource="{flat}",unit="integer"}} {int(qty)}' in page
                )


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_the_demo_shows_measured_utilisation_with_the_same_gpu_figures(load_scenario, settings, tmp_path):
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    require_service(shutil.which(binary) is not None, "Prometheus (Debian package prometheus)")
    gw = load_scenario("demo")
    settings.PROMETHEUS_URL = ""
    reading.read_cluster(gw)
    simulated = ViewState.objects.get(pk=1)
    assert not simulated.extra["usage_measured"]

    page = gw.exporter_page()  # served from another thread, which cannot read this test's transaction
    exporter = serve_metrics(lambda: page)
    proc, url = start_prometheus(binary, tmp_path, exporter)
    try:
        wait_for(url, 'DCGM_FI_DEV_GPU_UTIL{pod!=""}')
        settings.PROMETHEUS_URL = url
        settings.BRICK_METRICS_INTERVAL = 3600  # one fetch: the feed asks on its interval
        reading.read_cluster(gw)
    finally:
        proc.terminate()
        proc.wait(10)
        exporter.shutdown()
    measured = ViewState.objects.get(pk=1)
    assert measured.device_source == "dcgm" and measured.extra["usage_measured"]
    for figure in ("physical", "logical", "requested", "physical_used", "gpu_nodes"):
        assert measured.totals[figure] == simulated.totals[figure], figure
    busy = {p["metadata"]["namespace"] for p in running_gpu_pods(gw)}
    rows = {w.namespace: w for w in ViewWorkspace.objects.filter(namespace__in=busy)}
    assert rows and all(w.utilisation is not None and 0 < w.utilisation <= 100 for w in rows.values())
