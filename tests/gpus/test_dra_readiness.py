"""Readiness for DRA: the workloads still asking for nvidia.com/*, the quotas that stop binding,
DCGM's attribution of pods that use claims (not measured, never 0) and each node's stack; the
page for admins, on the dra scenario."""

import re

import pytest
from django.urls import reverse

from gpus.numbers import dra_readiness as r

GPU_CLASS = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def pod(ns, name, phase="Running", job=""):
    md = {"namespace": ns, "name": name}
    if job:
        md["ownerReferences"] = [{"kind": "Job", "name": job}]
    return {"metadata": md, "status": {"phase": phase}}


def test_pods_asking_for_nvidia_resources_are_counted_per_namespace_with_their_jobs():
    asks = [
        r.pod_ask(pod("a", "j1-x", job="j1"), {"nvidia.com/gpu": 2}),
        r.pod_ask(pod("a", "j1-y", job="j1"), {"nvidia.com/gpu": 1}),
        r.pod_ask(pod("a", "solo"), {"nvidia.com/gpu.shared": 1}),
        r.pod_ask(pod("b", "done", phase="Succeeded"), {"nvidia.com/gpu": 1}),  # finished: none
        r.pod_ask(pod("b", "cpu"), {"cpu": 1}),  # asks for no GPU
        r.pod_ask(pod("a", "solo"), {"nvidia.com/gpu.shared": 1}),  # seen twice: once
    ]
    (a,) = r.plugin_workloads(x for x in asks if x is not None)
    assert (a.namespace, a.pods, a.jobs) == ("a", 3, 1)
    assert a.resources == {"nvidia.com/gpu": 3, "nvidia.com/gpu.shared": 1}


@pytest.mark.parametrize(
    "hard, at_risk",
    [
        ({"requests.nvidia.com/gpu": "4", "requests.cpu": "8"}, True),
        ({"requests.nvidia.com/mig-1g.10gb": "2"}, True),
        ({"requests.nvidia.com/gpu": "4", GPU_CLASS: "4"}, False),  # names the DeviceClass too
        ({GPU_CLASS: "8"}, False),
        ({"requests.cpu": "8"}, False),  # no GPU at all
    ],
)
def test_a_quota_of_nvidia_resources_alone_stops_binding(hard, at_risk):
    assert bool(r.quotas_at_risk([("ns", "q", hard)])) is at_risk


def test_dcgm_attribution_is_not_measured_never_zero_without_readings_or_claim_pods():
    running = [pod("ws", "a"), pod("ws", "b"), pod("ws", "c", phase="Pending")]
    assert r.dcgm_attribution(running, None).attributed is None  # DCGM not read
    assert r.dcgm_attribution([], {"ws/x": {"GPU-1": [1]}}).attributed is None  # no pod to check
    assert r.dcgm_attribution(None, {}).wired is None  # the pods are not known
    partly = r.dcgm_attribution(running, {"ws/a": {"GPU-1": [50.0, 100.0]}})
    assert (partly.claim_pods, partly.attributed, partly.wired) == (2, 1, False)
    assert r.dcgm_attribution(running, {"ws/a": {"g": [1]}, "ws/b": {"h": [1]}}).wired is True
    assert r.dcgm_attribution(running, {}).attributed == 0  # DCGM read and names none of them: not wired


# --- the page ---------------------------------------------------------------------------------

SHARES_SLICES = ("dra-l40s-shares-01-gpu.nvidia.com-s4r3d", "dra-l40s-unlimited-01-gpu.nvidia.com-s4r3d")


def text(html):
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html.decode(), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


@pytest.fixture
def dra_cluster(load_scenario):
    """The dra scenario (without its consumable-shares nodes' slices: the stored view's model ×
    type row holds a sharing strategy of at most 16 characters), plus a team on the device plugin:
    a quota of requests.nvidia.com/gpu alone and a Job's pod asking for nvidia.com/gpu."""
    gw = load_scenario("dra")
    for name in SHARES_SLICES:
        gw.delete("resource.k8s.io/v1", "ResourceSlice", name)
    gw.create_namespace("team-old", {"brick.cloud/workspace": "true", "brick.cloud/owner": "bob"})
    gw.create_resource_quota("team-old", "gpu-quota", {"requests.nvidia.com/gpu": "2"})
    resources = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    gw.create_job(
        "team-old",
        {
            "metadata": {"name": "train"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": "gpu-a100-01"},
                        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                    }
                }
            },
        },
    )
    return gw


@pytest.mark.django_db
def test_the_readiness_page_gives_the_clusters_figures(dra_cluster, admin_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    admin_client.get(reverse("dra_readiness"))  # the twin's view published once
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(reverse("dra_readiness"))
    assert page.status_code == 200
    body = text(page.content)
    # stacks: two device-plugin nodes, one served by both, the DRA nodes whose pools are seen
    assert "Nodes on the device plugin: 2" in body and "Nodes on both stacks (a finding): 1" in body
    assert "dra-a100-01 NVIDIA A100 80GB PCIe Published through DRA" in body
    assert "gpu-a100-01 NVIDIA A100 80GB PCIe Published by the device plugin" in body
    # workloads: team-old's Job pod, and ws-dra's pod on the device plugin's side of dra-both-01
    assert "team-old 1 1 nvidia.com/gpu 1" in body and "ws-dra 1 0 nvidia.com/gpu 1" in body
    # quotas: team-old's alone; ws-dra's names gpu.nvidia.com's devices
    assert "team-old gpu-quota requests.nvidia.com/gpu 2" in body and "ws-dra workspace-quota" not in body
    # DCGM attribution of the claim pods: not measured, never 0
    assert "Not measured" in body and "0 of" not in body
    assert len(queries) < 30


@pytest.mark.django_db
def test_the_readiness_page_is_for_admins(dra_cluster, alice_client, client):
    assert alice_client.get(reverse("dra_readiness")).status_code == 403
    assert client.get(reverse("dra_readiness")).status_code in (302, 403)
