"""Dynamic Resource Allocation on the lab, for real: gpusim publishes the DRA nodes' slices as
NVIDIA's kubelet plugin does, kube-scheduler allocates the dra scenario's claims (submitted
without status) and binds their pods, KWOK runs them; the product's ledger, from a snapshot
through the real gateway, counts what the devices say."""

from __future__ import annotations

import pytest

from brickadmin.cluster import dra, dra_publish, scenarios
from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger as ledger_mod

from .conftest import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.django_db]

V1 = "/apis/resource.k8s.io/v1"


def items(lab, path):
    return lab.admin._request("GET", path).get("items") or []


@pytest.fixture(scope="module")
def dra_lab(lab):
    lab.load("dra")
    return lab


def test_the_scheduler_allocates_every_claim_on_its_pods_node(dra_lab):
    objects, _, _ = scenarios.read("dra")
    recorded = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceClaim"}
    claims = {c["metadata"]["name"]: c for c in items(dra_lab, f"{V1}/resourceclaims")}
    assert len(claims) == len(recorded)
    for name, claim in claims.items():
        rec = recorded.get(name) or next(
            r for r in recorded.values() if r["metadata"].get("ownerReferences") and name.startswith("tmpl-0-gpu")
        )
        results = claim["status"]["allocation"]["devices"]["results"]
        want = rec["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {want[0]["pool"]}, name
        assert len(results) == len(want), name
        assert [bool(r.get("adminAccess")) for r in results] == [bool(r.get("adminAccess")) for r in want], name
        assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == sorted(
            r["name"] for r in rec["status"]["reservedFor"]
        ), name
    shares = [claims[n]["status"]["allocation"]["devices"]["results"][0] for n in ("share-1", "share-2")]
    assert [r["consumedCapacity"]["shares"] for r in shares] == ["1", "2"]
    pods = [p for p in dra_lab.admin.list_pods(namespace="ws-dra") if p["spec"].get("resourceClaims")]
    assert pods and all(p["status"]["phase"] == "Running" for p in pods)


def test_gpusim_publishes_the_pools_as_the_driver_does(dra_lab):
    slices = [s for s in items(dra_lab, f"{V1}/resourceslices") if s["spec"]["driver"] == dra.DRIVER_NAME]
    for s in slices:
        assert s["spec"]["pool"]["name"] == s["spec"]["nodeName"]
        assert s["metadata"]["ownerReferences"][0]["kind"] == "Node"
    # dynamic MIG from 1.35 as the driver publishes it there: a slice of counter sets, one of the
    # devices that consume them, both counted in the pool's resourceSliceCount
    dyn = sorted(
        (s for s in slices if s["spec"]["nodeName"] == "dra-h100-dyn-01"), key=lambda s: bool(s["spec"].get("devices"))
    )
    assert len(dyn) == 2 and {s["spec"]["pool"]["resourceSliceCount"] for s in dyn} == {2}
    assert dyn[0]["spec"]["sharedCounters"] and not dyn[0]["spec"].get("devices")
    assert dyn[1]["spec"]["devices"] and not dyn[1]["spec"].get("sharedCounters")
    # a republish raises the pool's generation
    gen = dyn[0]["spec"]["pool"]["generation"]
    dra_lab.admin._request("DELETE", f"{V1}/resourceslices/{dyn[1]['metadata']['name']}")

    def republished():
        now = [s for s in items(dra_lab, f"{V1}/resourceslices") if s["spec"]["nodeName"] == "dra-h100-dyn-01"]
        return len(now) == 2 and all(s["spec"]["pool"]["generation"] == gen + 1 for s in now)

    wait_until(republished, 30, "gpusim to republish the pool")
    assert dra_publish.PLUGIN_NODE_LABEL in dra_lab.admin.get_node("dra-h100-dyn-01")["metadata"]["labels"]


def test_the_ledger_counts_the_devices_ground_truth(dra_lab, settings):
    settings.BRICK_SNAPSHOT_CACHE_SECONDS = 0
    snap = take_snapshot(dra_lab.admin, use_prometheus=False)
    led = ledger_mod.compute(snap)
    slices = [s for s in snap.resource_slices if s["spec"]["driver"] == dra.DRIVER_NAME]
    claims = [c for c in snap.resource_claims if c["metadata"]["namespace"] in ("ws-dra", "gpu-monitoring")]
    truth_physical = dra.physical_gpus_by_node(slices)
    used = dra.used_devices(claims)
    for n in led.nodes:
        if n.dra is None:
            continue
        assert n.dra.physical == truth_physical.get(n.name, 0), n.name  # a pool seen in part: none
        held = {d.device for d in used if d.pool == n.name}
        assert sum(len(d.claims) > 0 for d in n.dra.devices) == len(held), n.name
    # the figures the scenario shows, allocated by the scheduler instead of written down
    by_node = {n.name: n for n in led.nodes}
    assert by_node["dra-a100-01"].physical == 2 and by_node["dra-a100-01"].physical_used == 2
    assert by_node["dra-a100-mig-01"].physical == 2
    assert by_node["dra-h100-dyn-01"].physical == 1 and by_node["dra-h100-dyn-01"].physical_used == 1
    assert by_node["dra-l40s-shares-01"].physical_used == 1
    assert by_node["dra-incomplete-01"].dra.physical == 0  # a pool seen in part is not counted
    assert by_node["dra-stranded-01"].dra.physical == 1  # MIG on without MIG devices: one GPU published
