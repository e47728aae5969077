"""Utilisation over time: Prometheus range queries (brickadmin/metrics.py) drawn by
gpus/pictures.py, through the lazily loaded chart fragment.

Against a real Prometheus (Debian's): two hours of the lab's simulated DCGM exporter
(lab/gpusim.py, whose utilisation moves per pod over time) are backfilled with promtool,
as they would have been scraped, so an hour's range query has a full hour of points."""

import importlib.util
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from django.urls import reverse

from brickadmin import metrics
from tests.conftest import require_service
from workspaces.models import WorkspaceRequest

REPO = Path(__file__).resolve().parents[2]
NOW = time.time()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_gpusim():
    spec = importlib.util.spec_from_file_location("lab_gpusim", REPO / "lab" / "gpusim.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pod(ns, name, node, resource, created):
    return {
        "metadata": {"name": name, "namespace": ns, "uid": name, "creationTimestamp": created},
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": {resource: "1"}}}]},
        "status": {"phase": "Running"},
    }


def simulator():
    """gpusim with the state its sync would have read: an exclusive node with one trainer,
    a time-slicing node (replicas 2) whose one GPU two notebooks share, an idle GPU."""
    gpusim = load_gpusim()
    sim = gpusim.Simulator(api=None, hardware_path=Path("/nonexistent"), state_path=None, interval=1)
    sim.hardware = {
        "node-ex": [
            {"uuid": "GPU-ex-0", "model": "NVIDIA A100", "memoryMiB": 40960},
            {"uuid": "GPU-ex-1", "model": "NVIDIA A100", "memoryMiB": 40960},
        ],
        "node-ts": [{"uuid": "GPU-ts-0", "model": "NVIDIA A30", "memoryMiB": 24576}],
    }
    sim.advertised = {"node-ex": {"nvidia.com/gpu": 2}, "node-ts": {"nvidia.com/gpu.shared": 2}}
    sim.pods = [
        _pod("ws-train", "trainer", "node-ex", "nvidia.com/gpu", "2026-01-01T00:00:00Z"),
        _pod("ws-nb", "nb-1", "node-ts", "nvidia.com/gpu.shared", "2026-01-01T00:00:01Z"),
        _pod("ws-nb", "nb-2", "node-ts", "nvidia.com/gpu.shared", "2026-01-01T00:00:02Z"),
    ]
    return sim


def openmetrics(sim, start, end, step):
    """What Prometheus would have scraped from gpusim every ``step`` seconds, plus the
    kube-state-metrics node labels, as OpenMetrics with timestamps (for promtool)."""
    util, labels = [], []
    for t in range(int(start), int(end), step):
        for line in sim.metrics(now=t).splitlines():
            if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
                util.append(f"{line} {t}")
        labels.append(f'kube_node_labels{{node="node-ex",label_brick_cloud_gpu_sharing="none"}} 1 {t}')
        labels.append(f'kube_node_labels{{node="node-ts",label_brick_cloud_gpu_sharing="timeslicing"}} 1 {t}')

    def by_series(lines):  # OpenMetrics wants each series' samples together, in time order
        return sorted(lines, key=lambda s: (s.rsplit(" ", 2)[0], int(s.rsplit(" ", 1)[1])))

    return "\n".join(
        [
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
            *by_series(util),
            "# TYPE kube_node_labels gauge",
            *by_series(labels),
            "# EOF",
            "",
        ]
    )


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    require_service(binary is not None and promtool is not None, "Prometheus and promtool (Debian package prometheus)")
    tmp = tmp_path_factory.mktemp("prom-range")
    # up to now, not only to NOW (import time): the chart page asks for the hour before the
    # request, which in a long run comes many minutes after this module was collected
    (tmp / "data.om").write_text(openmetrics(simulator(), NOW - 2 * 3600, max(NOW, time.time()), 30))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "data.om"), str(tmp / "data")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    from prometheus_api_client import PrometheusConnect

    deadline = time.monotonic() + 60
    while True:
        try:
            if PrometheusConnect(url=url).custom_query(f"count(DCGM_FI_DEV_GPU_UTIL @ {int(NOW) - 60})"):
                break
        except Exception:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("Prometheus did not load the backfilled blocks within 60 s")
        time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def measured(prometheus, settings):
    settings.PROMETHEUS_URL = prometheus
    from django.core.cache import cache

    cache.clear()
    return prometheus


def test_the_simulated_exporter_moves_per_pod_over_time():
    sim = simulator()

    def util(t, pod):
        line = next(
            x for x in sim.metrics(now=t).splitlines() if x.startswith("DCGM_FI_DEV_GPU_UTIL{") and f'pod="{pod}"' in x
        )
        return float(line.rsplit(" ", 1)[1])

    trainer = [util(NOW - k * 600, "trainer") for k in range(12)]
    assert len(set(trainer)) > 3 and all(1 <= v <= 100 for v in trainer)
    assert util(NOW, "trainer") == util(NOW, "trainer")  # deterministic
    # one time-sliced GPU: both pods' series carry the device's figure
    assert util(NOW, "nb-1") == util(NOW, "nb-2")
    idle = [
        x for x in sim.metrics(now=NOW).splitlines() if 'UUID="GPU-ex-1"' in x and x.startswith("DCGM_FI_DEV_GPU_UTIL")
    ]
    assert idle and idle[0].endswith(" 0")


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_a_range_query_returns_at_most_120_points_of_real_data(measured):
    for range_key in ("hour", "day", "week"):
        series = metrics.utilisation("cluster", "", range_key, now=NOW)
        assert series.measured and len(series.points) <= metrics.MAX_POINTS
    hour = metrics.utilisation("cluster", "", "hour", now=NOW)
    assert len(hour.points) >= 110, len(hour.points)  # a point every 30 s, over the whole hour
    values = [v for _t, v in hour.points]
    assert max(values) - min(values) > 3 and all(0 < v < 100 for v in values)
    assert hour.step == 30
    day = metrics.utilisation("cluster", "", "day", now=NOW)
    assert 5 <= len(day.points) <= 12  # two hours of data, a point every 12 min


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_each_scope_asks_for_its_own_gpus(measured):
    def mean(scope, subject):
        pts = metrics.utilisation(scope, subject, "hour", now=NOW).points
        assert pts, (scope, subject)
        return sum(v for _t, v in pts) / len(pts)

    cluster = mean("cluster", "")
    node_ex, node_ts = mean("node", "node-ex"), mean("node", "node-ts")
    # node-ex: one busy GPU and one idle one; node-ts: one GPU; the cluster: all three
    assert cluster == pytest.approx((2 * node_ex + node_ts) / 3, rel=0.02)
    assert mean("type", "nvidia.com/gpu") == pytest.approx(node_ex, rel=0.01)
    assert mean("type", "nvidia.com/gpu.shared") == pytest.approx(node_ts, rel=0.01)
    assert mean("workspace", "ws-nb") == pytest.approx(node_ts, rel=0.01)
    assert mean("workspace", "ws-train") == pytest.approx(2 * node_ex, rel=0.02)
    assert metrics.utilisation("workspace", "ws-nobody", "hour", now=NOW).points == []


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_the_chart_draws_the_points_prometheus_returned(measured, admin_client, twin):
    resp = admin_client.get(reverse("utilisation_chart", args=["cluster"]), {"range": "hour"})
    html = resp.content.decode()
    assert resp.status_code == 200
    n = len(metrics.utilisation("cluster", "", "hour").points)
    assert n >= 100
    assert f'data-points="{n}"' in html and 'class="pic-line"' in html and 'role="img"' in html
    assert "Not measured" not in html
    assert 'data-testid="utilisation-summary"' in html and "over the last hour" in html
    assert html.count("<tr><td>") == n  # the table equivalent: one row per point
    # the period buttons reload the fragment in place
    assert 'hx-get="/charts/utilisation/cluster/?range=week"' in html and 'aria-pressed="true">Last hour<' in html


@pytest.mark.slow  # starts a real Prometheus and waits for its scrape
def test_a_workspace_chart_is_for_its_owner_and_admins(measured, client, alice, charlie, admin_user, twin):
    WorkspaceRequest.objects.create(
        name="ws-nb",
        requester=alice,
        requester_name="alice",
        gpu=1,
        cpu=1,
        memory_gib=1,
        storage_gib=1,
        status=WorkspaceRequest.Status.APPROVED,
    )
    url = reverse("utilisation_chart", args=["workspace"])
    client.force_login(alice)
    html = client.get(url, {"of": "ws-nb", "range": "hour"}).content.decode()
    assert "GPU utilisation of Workspace ws-nb" in html and 'class="pic-line"' in html
    assert client.get(url, {"of": "ws-train"}).status_code == 404  # not hers
    assert client.get(reverse("utilisation_chart", args=["node"]), {"of": "node-ts"}).status_code == 403
    client.force_login(charlie)
    assert client.get(url, {"of": "ws-nb"}).status_code == 404
    client.force_login(admin_user)
    assert client.get(url, {"of": "ws-train"}).status_code == 200


@pytest.mark.parametrize("scope,subject", [("nope", ""), ("type", "nvidia.com/something"), ("node", "")])
def test_unknown_charts_are_404(admin_client, scope, subject):
    assert admin_client.get(reverse("utilisation_chart", args=[scope]), {"of": subject}).status_code == 404


def test_without_prometheus_the_chart_says_not_measured_and_draws_nothing(settings, alice_client):
    settings.PROMETHEUS_URL = ""
    html = alice_client.get(reverse("utilisation_chart", args=["cluster"])).content.decode()
    assert 'data-testid="not-measured"' in html and "Not measured" in html and "Prometheus is not configured" in html
    assert "<svg" not in html and "0%" not in html


def test_with_prometheus_unreachable_the_chart_says_not_measured(settings, alice_client):
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.PROMETHEUS_TIMEOUT = 1
    html = alice_client.get(reverse("utilisation_chart", args=["type"]), {"of": "nvidia.com/gpu"}).content.decode()
    assert "Not measured" in html and "Prometheus query failed" in html and "<svg" not in html


def test_the_recorded_series_is_read_first_and_the_dcgm_series_otherwise(settings, monkeypatch):
    settings.PROMETHEUS_URL = "http://prometheus.invalid"
    from django.core.cache import cache

    asked = []

    def fake(promql, start, end, step):
        asked.append(promql)
        return [(end, 42.0)] if promql.startswith("brick:gpu_utilisation:avg_by_type") else []

    monkeypatch.setattr(metrics, "query_range", fake)
    cache.clear()
    assert metrics.utilisation("type", "nvidia.com/gpu.shared", "hour").points == [(metrics.window("hour")[1], 42.0)]
    assert asked == ['brick:gpu_utilisation:avg_by_type{gpu_type="shared"}']
    asked.clear()
    assert metrics.utilisation("cluster", "", "hour").points == []  # no recorded series: computed from DCGM
    assert asked == ["brick:gpu_utilisation:avg", metrics.utilisation_query("cluster")]
    asked.clear()
    metrics.utilisation("workspace", "ws-a", "hour")  # nothing recorded per Workspace
    assert asked == [metrics.utilisation_query("workspace", "ws-a")]


def test_the_recording_rules_match_the_queries():
    rules = (REPO / "deploy" / "chart" / "files" / "brickadmin-rules.yaml").read_text()
    for record in (
        "brick:gpu_utilisation:avg",
        "brick:gpu_utilisation:avg_by_type",
        "brick:gpu_utilisation:avg_by_mig_profile",
    ):
        assert f"record: {record}\n" in rules
    assert "avg(max by (UUID, GPU_I_ID) (DCGM_FI_DEV_GPU_UTIL))" in rules
    assert metrics.utilisation_query("cluster") == "avg(max by (UUID, GPU_I_ID) (DCGM_FI_DEV_GPU_UTIL))"
