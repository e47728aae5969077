"""The twin allocates a pod's ResourceClaims as kube-scheduler's DRA plugin does: on the dra
scenario submitted without allocations, every claim lands on its pod's node, the shared claim
is reserved for its three pods, a template's claim is made for its pod, admin access is not
use, shares consume capacity, dynamic MIG devices take their GPU's counters; a claim that fits
nowhere leaves its pod Pending with the scheduler's message."""

from __future__ import annotations

import copy

import pytest

from brickadmin.cluster import dra_allocate, dra_publish, scenarios
from brickadmin.cluster.models import TwinObject
from brickadmin.cluster.twin import TwinGateway

pytestmark = pytest.mark.django_db


def _claims():
    return {
        c["metadata"]["name"]: c for c in TwinObject.objects.filter(kind="ResourceClaim").values_list("body", flat=True)
    }


def _pod(name):
    return TwinObject.objects.get(kind="Pod", name=name).body


@pytest.fixture
def twin():
    objects, hardware, plugin_configs = scenarios.read("dra")
    gw = TwinGateway()
    gw.load(dra_allocate.unallocated(objects), hardware, plugin_configs)
    return gw


def test_every_claim_is_allocated_on_its_pods_node(twin):
    objects, _, _ = scenarios.read("dra")
    recorded = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    claims = _claims()
    # the template's claim is made again by the resourceclaim controller, named <pod>-<claim>
    assert set(claims) == (set(recorded) - {"tmpl-0-gpu-q7w2x"}) | {"tmpl-0-gpu"}
    for name, claim in claims.items():
        rec = recorded.get(name) or recorded["tmpl-0-gpu-q7w2x"]
        want_pool = rec["status"]["allocation"]["devices"]["results"][0]["pool"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {want_pool}, name
        assert len(results) == len(rec["status"]["allocation"]["devices"]["results"]), name
        assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == sorted(
            r["name"] for r in rec["status"]["reservedFor"]
        )
        for ref in claim["status"]["reservedFor"]:
            pod = _pod(ref["name"])
            assert pod["spec"]["nodeName"] == want_pool and pod["status"]["phase"] == "Running"


def test_the_devices_chosen(twin):
    claims = _claims()
    device = {n: [r["device"] for r in c["status"]["allocation"]["devices"]["results"]] for n, c in claims.items()}
    # whole GPUs: one each, never the same device twice
    assert sorted(device["train-gpu"] + device["shared-gpu"]) == ["gpu-0", "gpu-1"]
    # static MIG: 2 + 1 distinct MIG devices of the 1g.10gb profile the template asks for
    mig = device["mig-small"] + device["tmpl-0-gpu"]
    assert len(set(mig)) == 3 and all("-mig-1g10gb-" in d for d in mig)
    assert _claims()["tmpl-0-gpu"]["metadata"]["ownerReferences"][0]["name"] == "tmpl-0"
    assert _pod("tmpl-0")["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": "tmpl-0-gpu"}]
    # admin access: a result marked so, beside the device's real user
    admin = claims["dcgm-admin"]["status"]["allocation"]["devices"]["results"]
    assert [r.get("adminAccess") for r in admin] == [True]
    # consumable shares: both claims on one device, with the shares they asked for
    shares = [claims[n]["status"]["allocation"]["devices"]["results"][0] for n in ("share-1", "share-2")]
    assert {r["device"] for r in shares} == {"gpu-0"}
    assert [r["consumedCapacity"]["shares"] for r in shares] == ["1", "2"]
    assert all(r["shareID"] for r in shares)
    # dynamic MIG: two MIG devices whose counters fit together on the one H100
    assert device["dyn-3g"] != device["dyn-1g"]


def test_a_claim_that_fits_nowhere_leaves_its_pod_pending(twin):
    objects, hardware, plugin_configs = scenarios.read("dra")
    objects = dra_allocate.unallocated(objects)
    extra = copy.deepcopy(
        next(o for o in objects if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "train-gpu")
    )
    extra["metadata"]["name"] = "third-gpu"
    pod = copy.deepcopy(next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "train-0"))
    pod["metadata"].update(name="train-1", uid="")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "third-gpu"}]
    gw = TwinGateway()
    gw.load([*objects, extra, pod], hardware, plugin_configs)
    got = _pod("train-1")
    assert got["status"]["phase"] == "Pending" and "nodeName" not in got["spec"]
    assert got["status"]["conditions"][0]["message"] == "0/1 nodes are available: 1 cannot allocate all claims."
    assert "status" not in _claims()["third-gpu"] or not _claims()["third-gpu"]["status"].get("allocation")


def test_a_job_on_a_claim_template_is_bound_where_its_claim_is_allocated(twin):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-mig-1g10gb"}],
                    "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                }
            }
        },
    }
    twin.create_job("ws-dra", job)
    (pod,) = twin.list_pods(namespace="ws-dra", label_selector="job-name=train")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "dra-a100-mig-01"
    claim = _claims()[f"{pod['metadata']['name']}-gpu"]
    assert "-mig-1g10gb-" in claim["status"]["allocation"]["devices"]["results"][0]["device"]


def test_before_1_35_a_gpus_counters_and_devices_share_one_slice():
    objects, _, _ = scenarios.read("dra")
    slices = [o for o in objects if o["kind"] == "ResourceSlice" and o["spec"]["nodeName"] == "dra-h100-dyn-01"]
    assert len(slices) == 2  # the scenario: as 1.35 wants them, counters apart
    assert dra_publish.slices_for_server(slices, 35) == slices
    (combined,) = dra_publish.slices_for_server(slices, 34)
    spec = combined["spec"]
    assert spec["pool"]["resourceSliceCount"] == 1
    assert [cs["name"] for cs in spec["sharedCounters"]] == ["gpu-0-counter-set"]
    assert len(spec["devices"]) == 19
    published = dra_publish.published("dra-h100-dyn-01", "uid-1", [combined], 7)[0]
    assert published["spec"]["pool"] == {"name": "dra-h100-dyn-01", "generation": 7, "resourceSliceCount": 1}
    assert published["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "dra-h100-dyn-01",
        "uid": "uid-1",
        "controller": True,
    }


def test_the_legacy_path_publishes_whole_gpus_or_their_mig_devices():
    gpus = scenarios.gpus("n1", "NVIDIA A100-SXM4-80GB", 2, 81920, mig=[[], ["1g.10gb", "1g.10gb"]])
    (s,) = dra_publish.hardware_slices("n1", gpus)
    kinds = [(d["name"], d["attributes"]["type"]["string"]) for d in s["spec"]["devices"]]
    # the driver's names: gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>
    assert kinds == [("gpu-0", "gpu"), ("gpu-1-mig-1g10gb-19-0", "mig"), ("gpu-1-mig-1g10gb-19-1", "mig")]
    assert s["spec"]["devices"][1]["attributes"]["parentUUID"]["string"] == gpus[1]["uuid"]
