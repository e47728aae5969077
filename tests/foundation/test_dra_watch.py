"""Dynamic Resource Allocation objects reach the Snapshot: the twin stores and serves them, the
watcher follows and projects them, the one-off read lists them, and a cluster that does not
serve them (no DRA, or DRA without DeviceTaintRule) sees them empty and works as before."""

from __future__ import annotations

import copy

import pytest

from brickadmin.cluster import NotFound, scenarios
from brickadmin.cluster import snapshot as snapshot_mod
from brickadmin.cluster.twin import TwinGateway
from brickadmin.cluster.watch import ClusterWatcher

DRA_FIELDS = ("resource_slices", "resource_claims", "device_classes", "resource_claim_templates", "device_taint_rules")


def names(objs):
    return sorted(o["metadata"]["name"] for o in objs)


def test_the_watcher_hands_the_dra_objects_of_a_scenario_to_the_snapshot_projected(load_scenario):
    gw = load_scenario("dra")
    w = ClusterWatcher(gw)
    w.prime()
    snap = w.snapshot()

    assert len(snap.resource_slices) == 9  # dynamic MIG: a counter slice and a device slice
    assert {s["spec"]["pool"]["name"] for s in snap.resource_slices} >= {
        "dra-a100-01",
        "dra-a100-mig-01",
        "dra-h100-dyn-01",
        "dra-l40s-shares-01",
        "dra-l40s-unlimited-01",
        "dra-incomplete-01",
        "dra-stranded-01",
        "dra-both-01",
    }
    a100 = next(s for s in snap.resource_slices if s["spec"]["pool"]["name"] == "dra-a100-01")
    assert [d["name"] for d in a100["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    assert a100["metadata"]["ownerReferences"][0]["kind"] == "Node"
    assert "managedFields" not in a100["metadata"] and "resourceVersion" not in a100["metadata"]

    shared = next(c for c in snap.resource_claims if c["metadata"]["name"] == "shared-gpu")
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["infer-0", "infer-1", "infer-2"]
    assert shared["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"
    admin = next(c for c in snap.resource_claims if c["metadata"]["name"] == "dcgm-admin")
    assert admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] is True
    from_template = next(c for c in snap.resource_claims if c["metadata"]["name"] == "tmpl-0-gpu-q7w2x")
    assert from_template["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert from_template["metadata"]["ownerReferences"][0]["name"] == "tmpl-0"

    assert names(snap.device_classes) == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert snap.device_classes[0]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert names(snap.resource_claim_templates) == ["one-mig-1g10gb"]
    assert snap.resource_claim_templates[0]["spec"]["spec"]["devices"]["requests"][0]["name"] == "gpu"
    assert [r["spec"]["taint"]["effect"] for r in snap.device_taint_rules] == ["None"]

    # pods that use claims and request no nvidia.com/* resource are kept, with their claims
    claim_pods = {p["metadata"]["name"]: p for p in snap.claim_pods}
    assert {"train-0", "infer-0", "infer-1", "infer-2", "dyn-0", "tmpl-0", "dcgm-exporter-dra-a100-01"} <= set(
        claim_pods
    )
    infer = claim_pods["infer-0"]
    assert infer["spec"]["nodeName"] == "dra-a100-01"
    assert infer["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    assert infer["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert claim_pods["tmpl-0"]["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "tmpl-0-gpu-q7w2x"}
    ]
    assert "infer-0" not in {p["metadata"]["name"] for p in snap.gpu_pods}  # it requests no nvidia.com/*
    assert "both-plugin-0" in {p["metadata"]["name"] for p in snap.gpu_pods}  # the device plugin's stack

    # a DRA node keeps the capacity its scenario gave it: the twin's device plugin does not serve it
    nodes = {n["metadata"]["name"]: n for n in snap.nodes}
    assert "nvidia.com/gpu" not in nodes["dra-a100-01"]["status"]["capacity"]
    assert nodes["dra-both-01"]["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert nodes["dra-a100-01"]["metadata"]["labels"]["nvidia.com/gpu.deploy.dra-driver"] == "true"
    assert len(snap.devices["dra-stranded-01"]) == 2  # the hardware: 2 GPUs, 1 advertised


def test_the_watcher_follows_dra_changes_and_the_one_off_read_sees_the_same(load_scenario):
    gw = load_scenario("dra")
    w = ClusterWatcher(gw)
    w.prime()
    gw.delete("resource.k8s.io/v1", "ResourceClaim", "train-gpu", "ws-dra")
    rule = copy.deepcopy(w.snapshot().device_taint_rules[0])
    rule["metadata"]["name"] = "dra-a100-01-gpu-0-drain"
    rule["spec"]["deviceSelector"]["device"] = "gpu-0"
    rule["spec"]["taint"]["effect"] = "NoExecute"
    gw.apply(rule)
    assert w.sync() is True
    snap = w.snapshot()
    assert "train-gpu" not in names(snap.resource_claims)
    assert names(snap.device_taint_rules) == ["dra-a100-01-gpu-0-drain", "dra-a100-01-gpu-1-maintenance"]

    snapshot_mod._cache.clear()
    once = snapshot_mod.take_snapshot(gw, use_prometheus=False)
    for field in DRA_FIELDS:
        assert getattr(once, field) == getattr(snap, field), field
    assert names(once.claim_pods) == names(snap.claim_pods)


def test_a_twin_without_dra_objects_gives_the_snapshot_as_before(load_scenario):
    gw = load_scenario("demo")
    w = ClusterWatcher(gw)
    w.prime()
    snap = w.snapshot()
    for field in (*DRA_FIELDS, "claim_pods"):
        assert getattr(snap, field) == [], field
    assert snap.gpu_pods and snap.nodes
    assert not w.status()["behind"]


class WithoutDra(TwinGateway):
    """A cluster that serves no resource.k8s.io (or not DeviceTaintRule): 404 for those kinds."""

    unserved = frozenset({"ResourceSlice", "ResourceClaim", "DeviceClass", "ResourceClaimTemplate", "DeviceTaintRule"})

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        if kind in self.unserved:
            raise NotFound(f"GET /apis/resource.k8s.io/...: 404 NotFound ({kind})", status=404)
        return super().list_with_version(kind, namespace, keep=keep, worth=worth)

    def watch(self, kind, namespace=None, **kwargs):
        assert kind not in self.unserved, f"{kind} is not served: it must not be watched"
        return super().watch(kind, namespace, **kwargs)


@pytest.mark.parametrize(
    "unserved", [WithoutDra.unserved, frozenset({"DeviceTaintRule"})], ids=["no DRA", "DRA without DeviceTaintRule"]
)
def test_a_kind_the_cluster_does_not_serve_is_empty_not_a_failure(load_scenario, unserved):
    load_scenario("dra")
    gw = WithoutDra()
    gw.unserved = unserved
    w = ClusterWatcher(gw)
    w.prime()
    assert w.sync() is False  # nothing changed, nothing watched for the unserved kinds
    snap = w.snapshot()
    assert snap.device_taint_rules == []
    assert bool(snap.resource_slices) == ("ResourceSlice" not in unserved)
    st = w.status()
    assert not st["behind"] and st["errors"] == 0
    assert "404" in st["streams"]["DeviceTaintRule"]["unserved"]
    assert w.as_of() >= w.primed_at  # the projection is current, not "never listed"
    snapshot_mod._cache.clear()
    once = snapshot_mod.take_snapshot(gw, use_prometheus=False)
    assert once.device_taint_rules == [] and bool(once.resource_claims) == ("ResourceClaim" not in unserved)


@pytest.mark.parametrize(
    ("obj", "said"),
    [
        (
            {"kind": "ResourceSlice", "metadata": {"name": "s1"}, "spec": {"pool": {"name": "n"}, "nodeName": "n"}},
            "(ResourceSlice s1): spec.driver is required",
        ),
        (
            {
                "kind": "ResourceSlice",
                "metadata": {"name": "s1"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "n"},
            },
            "(ResourceSlice s1): spec.pool is required",
        ),
        (
            {
                "kind": "ResourceSlice",
                "metadata": {"name": "s1"},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1}},
            },
            "(ResourceSlice s1): spec.pool.resourceSliceCount: None must be a whole number of at least 1",
        ),
        (
            {
                "kind": "ResourceSlice",
                "metadata": {"name": "s1"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "n",
                    "allNodes": True,
                    "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                },
            },
            "(ResourceSlice s1): spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection "
            "must be set (set: nodeName, allNodes)",
        ),
        (
            {
                "kind": "ResourceSlice",
                "metadata": {"name": "s1"},
                "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1}},
            },
            "must be set (set: none)",
        ),
        (
            {"kind": "ResourceClaim", "metadata": {"name": "c1"}, "spec": {"devices": {"requests": []}}},
            "(ResourceClaim c1): metadata.namespace is required (ResourceClaim is namespaced)",
        ),
        (
            {
                "kind": "DeviceTaintRule",
                "metadata": {"name": "r1"},
                "spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "PreferNoSchedule"}},
            },
            "(DeviceTaintRule r1): spec.taint.effect: 'PreferNoSchedule' is not NoSchedule, NoExecute or None",
        ),
    ],
)
def test_the_loader_refuses_a_dra_object_naming_the_object_and_the_field(obj, said):
    with pytest.raises(scenarios.ScenarioError) as e:
        scenarios.parse({"objects": [{"apiVersion": "resource.k8s.io/v1", **obj}]}, source="t.yaml")
    assert "t.yaml: objects[0]" in str(e.value) and said in str(e.value)


def test_dra_objects_as_kubectl_shows_them_load():
    """Server-set metadata (uid, resourceVersion, generation, managedFields) and status are accepted."""
    objects, _hw, _cfg = scenarios.read("dra")
    full = copy.deepcopy(next(o for o in objects if o["kind"] == "ResourceSlice"))
    full["metadata"].update(
        uid="0f1e2d3c-0000-4000-8000-000000000001",
        resourceVersion="1234",
        generation=1,
        creationTimestamp="2026-08-10T09:00:00Z",
        managedFields=[{"manager": "gpu-kubelet-plugin", "operation": "Update"}],
    )
    scenarios.parse({"objects": [full]}, source="t.yaml")


def test_load_scenario_dra_loads_it_on_the_twin_and_its_view_is_published(db):
    from django.core.management import call_command

    from gpus.view import publish as view_publish

    call_command("load_scenario", "dra")
    gw = TwinGateway()
    assert len(gw.list_with_version("ResourceSlice")[0]) == 9
    w = ClusterWatcher(gw)
    w.prime()
    snap = w.snapshot()
    assert view_publish.publish(snap) >= 1  # the ledger and the checks take the snapshot as it is


def test_a_claim_arriving_by_a_watch_event_is_kept_sharing_what_it_holds_alike(load_scenario):
    gw = load_scenario("dra")
    w = ClusterWatcher(gw)
    w.prime()
    first = w.snapshot().resource_claims[0]
    again = {
        "apiVersion": first["apiVersion"],
        "kind": "ResourceClaim",
        "metadata": {"name": first["metadata"]["name"] + "-again", "namespace": first["metadata"]["namespace"]},
        "spec": copy.deepcopy(first["spec"]),
    }
    gw.apply(again)
    assert w.sync() is True
    snap = w.snapshot()
    kept = {c["metadata"]["name"]: c for c in snap.resource_claims}
    assert kept[again["metadata"]["name"]]["spec"] == first["spec"]
    assert kept[again["metadata"]["name"]]["spec"] is kept[first["metadata"]["name"]]["spec"]
    assert kept[first["metadata"]["name"]] is first  # unchanged: the same object as before the event


def _full(gw, kind, name):
    items, _rv = gw.list_with_version(kind)
    return copy.deepcopy(next(o for o in items if o["metadata"]["name"] == name))


def _replace(gw, obj):
    """A write the twin's apply does not make (a status): the object deleted and made again."""
    meta = obj["metadata"]
    gw.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    obj = copy.deepcopy(obj)
    for key in ("uid", "resourceVersion", "managedFields"):
        meta.pop(key, None)
    gw.apply(obj)


def test_the_lists_the_watcher_patches_per_event_are_those_a_fresh_list_sorts(load_scenario):
    """The watcher patches its sorted lists, its pods' lists and its claims by pool where an
    object changed (it does not sort 150,000 objects per change): after claims moved, went
    and came, and pods changed list, every list and group is the one a fresh watcher makes, and
    the ledger and the findings read from them are those read from the plain lists."""
    import dataclasses

    from brickadmin.cluster import projection
    from gpus.numbers import health, ledger

    gw = load_scenario("dra")
    w = ClusterWatcher(gw)
    w.prime()
    before = w.snapshot()  # the sorted forms are made: from now on they are patched
    assert before.health_pods and before.claims_by_pool

    reporting = before.health_pods[0]["metadata"]
    pod = _full(gw, "Pod", reporting["name"])
    for cs in pod["status"]["containerStatuses"]:
        cs.pop("allocatedResourcesStatus", None)
    _replace(gw, pod)  # no longer reports its devices' health
    gpu_pod = _full(gw, "Pod", before.gpu_pods[0]["metadata"]["name"])
    gpu_pod["status"]["phase"] = "Failed"
    _replace(gw, gpu_pod)  # from the GPU pods to the failed ones
    moved = next(c for c in before.resource_claims if c["status"].get("reservedFor") and c["status"].get("allocation"))
    claim = _full(gw, "ResourceClaim", moved["metadata"]["name"])
    for r in claim["status"]["allocation"]["devices"]["results"]:
        r["pool"] = "dra-both-01"
    _replace(gw, claim)  # allocated on another node's pool
    gone = next(c for c in before.resource_claims if c["metadata"]["name"] != moved["metadata"]["name"])
    gw.delete(gone["apiVersion"], "ResourceClaim", gone["metadata"]["name"], gone["metadata"]["namespace"])
    assert w.sync() is True
    snap = w.snapshot()

    fresh = ClusterWatcher(gw)
    fresh.prime()
    again = fresh.snapshot()
    for name in ("nodes", "gpu_pods", "failed_gpu_pods", "plugin_pods", "claim_pods", "mig_manager_pods", *DRA_FIELDS):
        assert getattr(snap, name) == getattr(again, name), name
    assert snap.health_pods == again.health_pods
    assert reporting["name"] not in names(snap.health_pods)
    assert gpu_pod["metadata"]["name"] in names(snap.failed_gpu_pods)
    assert snap.claims_by_pool == again.claims_by_pool
    grouped: dict = {}
    for c in snap.resource_claims:
        for pool in projection.claim_pools(c):
            grouped.setdefault(pool, []).append(c)
    assert snap.claims_by_pool == {pool: tuple(found) for pool, found in grouped.items()}
    assert moved["metadata"]["name"] in names(snap.claims_by_pool[("gpu.nvidia.com", "dra-both-01")])
    assert gone["metadata"]["name"] not in names(snap.resource_claims)

    plain = dataclasses.replace(snap, health_pods=None, claims_by_pool=None)
    assert ledger.compute(snap) == ledger.compute(plain)
    found = health.problems(health.HealthInputs(ledger=ledger.compute(snap), snapshot=snap), reads="cluster")
    expected = health.problems(health.HealthInputs(ledger=ledger.compute(plain), snapshot=plain), reads="cluster")
    assert found == expected
    assert any(p.kind == "pod-device-unhealthy" for p in found) or any(
        p.kind == "pod-device-health-unknown" for p in found
    )
