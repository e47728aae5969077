"""brickadmin.metrics against a real Prometheus (Debian's) scraping a DCGM-format
exporter: the exporter is the only stand-in, since there are no GPUs here."""

import shutil
import time

import pytest
from django.urls import reverse

from brickadmin import metrics
from brickadmin.cluster.snapshot import take_snapshot
from gpus import ledger
from tests.conftest import require_service
from tests.prometheus_scrape import free_port, serve_metrics, start_prometheus

# Two nodes: the old dcgm-exporter label (Hostname) and the new one (hostname).
DCGM = """# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="train-0",namespace="ws-exclusive",container="main"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-bbb",device="nvidia0",modelName="NVIDIA A30",hostname="dev-a1-ws02"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-mmm",device="nvidia0",modelName="RTX",Hostname="mig-node",GPU_I_PROFILE="1g.24gb",GPU_I_ID="1",pod="llm",namespace="inf"} 50
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-mmm",device="nvidia0",modelName="RTX",Hostname="mig-node",GPU_I_PROFILE="2g.48gb",GPU_I_ID="0"} 0
"""


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    require_service(shutil.which(binary) is not None, "Prometheus (Debian package prometheus)")

    exporter = serve_metrics(lambda: DCGM)
    proc, url = start_prometheus(binary, tmp_path_factory.mktemp("prom"), exporter)
    deadline = time.monotonic() + 60
    from prometheus_api_client import PrometheusConnect

    while True:
        try:
            if len(PrometheusConnect(url=url).custom_query("DCGM_FI_DEV_GPU_UTIL")) == 4:
                break
        except Exception:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("Prometheus did not scrape the exporter within 60 s")
        time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(10)
    exporter.shutdown()


def test_physical_gpus_from_dcgm_accepts_both_host_labels_and_mig_instances(prometheus, settings):
    settings.PROMETHEUS_URL = prometheus
    devices = metrics.physical_gpus()
    assert devices == {
        "dev-a1-ws04": [{"uuid": "GPU-aaa", "model": "NVIDIA A30", "pods": ["ws-exclusive/train-0"]}],
        "dev-a1-ws02": [{"uuid": "GPU-bbb", "model": "NVIDIA A30", "pods": []}],
        # one GPU however many MIG instances it has; instances in GPU_I_ID order
        "mig-node": [{"uuid": "GPU-mmm", "model": "RTX", "pods": ["inf/llm"], "mig": ["2g.48gb", "1g.24gb"]}],
    }


def test_ledger_takes_physical_from_dcgm_when_prometheus_answers(prometheus, settings, twin, admin_client):
    settings.PROMETHEUS_URL = prometheus
    snap = take_snapshot(twin)
    assert snap.device_source == "dcgm"
    led = ledger.compute(snap)
    ws04 = led.node("dev-a1-ws04")
    assert (ws04.physical, ws04.physical_used, ws04.physical_source) == (1, 1, "dcgm")
    html = admin_client.get(reverse("node_detail", args=["dev-a1-ws04"])).content.decode()
    assert "measured by the DCGM exporter" in html and "ws-exclusive/train-0" in html


def test_without_prometheus_the_numbers_are_derived_and_the_page_says_so(settings, twin, admin_client):
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.PROMETHEUS_TIMEOUT = 1
    snap = take_snapshot(twin)
    assert snap.device_source == "twin"
    assert "Prometheus query failed" in snap.device_note
    html = admin_client.get(reverse("dashboard")).content.decode()
    assert "not measured" in html
