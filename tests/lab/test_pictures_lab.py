"""The utilisation charts on the lab: gpusim's DCGM series, scraped by the lab's Prometheus
(every 2 s, with deploy/chart/files/brickadmin-rules.yaml loaded), drawn by the chart fragment."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from brickadmin import metrics

from .conftest import make_namespace, make_pod, wait_until

pytestmark = pytest.mark.lab

NS = "lab-util"


@pytest.fixture(scope="module")
def busy(lab):
    lab.load("seed-example")
    make_namespace(lab, NS)
    make_pod(lab, NS, "trainer", "dev-a1-ws04", gpu={"nvidia.com/gpu": "1"})
    yield lab
    lab.admin.delete("v1", "Namespace", NS)


def _points(scope, subject=""):
    cache.clear()
    return metrics.utilisation(scope, subject, "hour").points


def test_charts_draw_what_prometheus_scraped_from_gpusim(busy, settings, admin_client):
    settings.PROMETHEUS_URL = busy.prometheus_url
    # an hour's chart has a point every 30 s once the series exists: wait for two
    points = wait_until(
        lambda: len(_points("workspace", NS)) >= 2 and _points("workspace", NS),
        180,
        "two points of the Workspace's GPU utilisation",
    )
    assert all(1 <= v <= 100 for _t, v in points)  # a busy GPU: never drawn as idle
    html = admin_client.get(
        reverse("utilisation_chart", args=["workspace"]), {"of": NS, "range": "hour"}
    ).content.decode()
    drawn = int(re.search(r'data-points="(\d+)"', html).group(1))
    assert drawn >= 2 and 'class="pic-line"' in html and "Not measured" not in html


def test_the_recording_rules_give_the_cluster_and_type_charts(busy, settings, admin_client):
    settings.PROMETHEUS_URL = busy.prometheus_url
    for recorded in (
        "brick:gpu_utilisation:avg",
        'brick:gpu_utilisation:avg_by_type{gpu_type="exclusive"}',
        'brick:gpu_utilisation:avg_by_type{gpu_type="shared"}',
    ):
        wait_until(lambda recorded=recorded: busy.prom(recorded), 90, recorded)
    wait_until(lambda: len(_points("cluster")) >= 2, 180, "two points of the cluster's utilisation")
    wait_until(lambda: len(_points("type", "nvidia.com/gpu")) >= 2, 180, "two points of nvidia.com/gpu")
    for scope, subject in (
        ("cluster", ""),
        ("type", "nvidia.com/gpu"),
        ("type", "nvidia.com/gpu.shared"),
        ("node", "dev-a1-ws04"),
    ):
        html = admin_client.get(
            reverse("utilisation_chart", args=[scope]), {"of": subject, "range": "hour"}
        ).content.decode()
        assert 'class="pic-line"' in html, (scope, subject, html[:400])
