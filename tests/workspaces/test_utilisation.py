"""With utilisation measured: a real Prometheus (Debian's) scrapes the lab's
simulated DCGM exporter (lab/gpusim.py, whose utilisation moves per pod over time) serving
the twin's GPUs and pods; the watcher's feed brings each pod's utilisation and memory into
the view, and the Workspaces page shows them without asking Prometheus itself."""

import re
import shutil
import time
from pathlib import Path

import pytest
from django.urls import reverse

from brickadmin import metrics
from gpus.models import ViewWorkspace
from tests.conftest import require_service
from tests.gpus.test_utilisation import load_gpusim
from tests.prometheus_scrape import serve_metrics, start_prometheus
from workspaces import jobs

from .conftest import text

pytestmark = pytest.mark.django_db


def simulator_of(twin):
    gpusim = load_gpusim()
    sim = gpusim.Simulator(api=None, hardware_path=Path("/nonexistent"), state_path=None, interval=1)
    sim.hardware = twin.gpu_devices()
    sim.advertised = {
        n["metadata"]["name"]: {
            k: int(v) for k, v in (n["status"].get("allocatable") or {}).items() if k.startswith("nvidia.com/")
        }
        for n in twin.list_nodes()
    }
    sim.pods = twin.list_gpu_pods()
    return sim


@pytest.fixture
def prometheus_of(tmp_path):
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    require_service(shutil.which(binary) is not None, "Prometheus (Debian package prometheus)")
    started = []

    def start(sim):
        exporter = serve_metrics(sim.metrics)
        proc, url = start_prometheus(binary, tmp_path, exporter)
        started.append((proc, exporter))
        return url

    yield start
    for proc, exporter in started:
        proc.terminate()
        proc.wait(10)
        exporter.shutdown()


def wait_for(url, promql, deadline=60):
    from prometheus_api_client import PrometheusConnect

    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            rows = PrometheusConnect(url=url).custom_query(promql)
            if rows:
                return rows
        except Exception:  # noqa: BLE001  (not up yet)
            pass
        time.sleep(0.5)
    pytest.fail(f"Prometheus had no {promql} within {deadline} s")


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_the_workspaces_page_shows_dcgm_utilisation_and_memory_per_workspace(
    twin, approved, alice, admin_user, admin_client, prometheus_of, settings, monkeypatch
):
    ws = approved(alice, "team-a", resource="nvidia.com/gpu")
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    url = prometheus_of(simulator_of(twin))
    wait_for(url, 'DCGM_FI_DEV_FB_USED{namespace="team-a"}')
    settings.PROMETHEUS_URL = url
    settings.BRICK_METRICS_INTERVAL = 3600  # one fetch for the test: the feed asks on its interval

    html = admin_client.get(reverse("cluster_workspaces")).content.decode()
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if ">team-a<" in r)
    cells = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    util, memory = cells[7], cells[8]
    assert re.fullmatch(r"\d+%", util) and re.fullmatch(r"\d+ MiB", memory), cells
    assert int(memory.split()[0]) > 0
    (pod_usage,) = [u for pod, u in metrics.pod_usage().items() if pod.startswith(f"team-a/{job.k8s_name}")]
    ((_device_util, device_mem),) = pod_usage.values()
    assert int(memory.split()[0]) == round(device_mem)  # the simulator's memory is steady; utilisation moves
    line = ViewWorkspace.objects.get(namespace="team-a")
    assert 0 <= line.utilisation <= 100 and abs(int(util[:-1]) - line.utilisation) <= 0.5
    assert "not measured" not in text(row)
    # the seed's Workspaces have no pod: nothing to measure, said so (never 0%)
    idle = next(r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if ">ws-shared<" in r)
    assert "no pod" in text(idle) and "0%" not in text(idle)

    # the page itself asks Prometheus nothing: the feed did, on its interval
    asked = []
    real_query = metrics.query
    monkeypatch.setattr(metrics, "query", lambda q: asked.append(q) or real_query(q))
    assert admin_client.get(reverse("cluster_workspaces")).status_code == 200
    assert admin_client.get(reverse("cluster_workspace", args=["team-a"])).status_code == 200
    assert asked == []
    detail = text(admin_client.get(reverse("cluster_workspace", args=["team-a"])).content.decode())
    assert "is used up" not in detail  # the Job's pod holds none of the Workspace's quota
    assert re.search(
        # a Job's pod: outside the Workspace quota's scope, and marked so
        rf"{job.k8s_name}\S* Running dev-a1-ws04 nvidia.com/gpu 1 not counted in the quota "
        rf"dev-a1-ws04 · GPU 0 \(GPU-[^)]+\) \d+% \d+ MiB",
        detail,
    )
