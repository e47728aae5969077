"""brickadmin.metrics against a real Prometheus (Debian's) scraping a DCGM-format
exporter: the exporter is the only stand-in, since there are no GPUs here."""

import shutil
import time

import pytest
from django.urls import reverse

from brickadmin import metrics
from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger
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


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_physical_gpus_from_dcgm_accepts_both_host_labels_and_mig_instances(prometheus, settings):
    settings.PROMETHEUS_URL = prometheus
    devices = metrics.physical_gpus()
    assert devices == {
        "dev-a1-ws04": [{"uuid": "GPU-aaa", "model": "NVIDIA A30", "pods": ["ws-exclusive/train-0"]}],
        "dev-a1-ws02": [{"uuid": "GPU-bbb", "model": "NVIDIA A30", "pods": []}],
        # one GPU however many MIG instances it has; instances in GPU_I_ID order
        "mig-node": [{"uuid": "GPU-mmm", "model": "RTX", "pods": ["inf/llm"], "mig": ["2g.48gb", "1g.24gb"]}],
    }


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
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


# A time-sliced GPU used by two pods (its series repeated per pod), a MIG instance, an idle
# GPU, and the memory each pod's device uses.
DCGM_WITH_MEMORY = (
    DCGM
    + """DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-sss",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="nb-1",namespace="ws-shared"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-sss",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="nb-2",namespace="ws-shared"} 40
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaa",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="train-0",namespace="ws-exclusive"} 2048
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-mmm",modelName="RTX",Hostname="mig-node",GPU_I_PROFILE="1g.24gb",GPU_I_ID="1",pod="llm",namespace="inf"} 512
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-sss",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="nb-1",namespace="ws-shared"} 9000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-sss",modelName="NVIDIA A30",Hostname="dev-a1-ws04",pod="nb-2",namespace="ws-shared"} 9000
"""
)


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_the_watcher_reads_the_same_devices_from_the_chart_recording_rules(tmp_path, settings, monkeypatch):
    """With the chart's recording rules loaded, the watcher's feed reads the recorded series
    and gets what it computes from the DCGM series without them."""
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    require_service(shutil.which(binary) is not None, "Prometheus (Debian package prometheus)")
    from pathlib import Path

    rules = Path(__file__).resolve().parents[2] / "deploy" / "chart" / "files" / "brickadmin-rules.yaml"
    exporter = serve_metrics(lambda: DCGM_WITH_MEMORY)
    proc, url = start_prometheus(binary, tmp_path, exporter, rules=rules)
    settings.PROMETHEUS_URL = url
    try:
        deadline = time.monotonic() + 60
        while (
            len(metrics.query(metrics.POD_MEMORY_USED_RECORDED) or []) < 4
            or len(metrics.query(metrics.DEVICE_UTILISATION_RECORDED) or []) < 6
        ):
            assert time.monotonic() < deadline, "Prometheus did not record the series within 60 s"
            time.sleep(0.5)
        recorded = metrics.measure_devices()
        monkeypatch.setattr(metrics, "DEVICE_UTILISATION_RECORDED", "brick:absent_device_series")
        monkeypatch.setattr(metrics, "POD_MEMORY_USED_RECORDED", "brick:absent_memory_series")
        computed = metrics.measure_devices()
    finally:
        proc.terminate()
        proc.wait(10)
        exporter.shutdown()

    def in_order(devices):
        return {
            host: sorted((d | {"pods": sorted(d["pods"])} for d in devs), key=lambda d: d["uuid"])
            for host, devs in devices.items()
        }

    assert in_order(recorded[0]) == in_order(computed[0])
    assert (
        recorded[1]
        == computed[1]
        == {
            "ws-exclusive/train-0": {"GPU-aaa": [87.0, 2048.0]},
            "inf/llm": {"GPU-mmm/1": [50.0, 512.0]},
            "ws-shared/nb-1": {"GPU-sss": [40.0, 9000.0]},
            "ws-shared/nb-2": {"GPU-sss": [40.0, 9000.0]},
        }
    )
    assert sorted(d["uuid"] for d in recorded[0]["dev-a1-ws04"]) == ["GPU-aaa", "GPU-sss"]
