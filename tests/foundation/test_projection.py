"""What the cluster watcher keeps (brickadmin/cluster/projection.py): the slim projection
gives the same ledger, health findings and evidence as the full objects."""

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from brickadmin.cluster import projection, scenarios
from brickadmin.cluster.snapshot import OPERATOR_NAMESPACE, Snapshot, take_snapshot
from brickadmin.cluster.vocabulary import PLUGIN_NAMESPACE
from brickadmin.cluster.watch import ClusterWatcher
from gpus.numbers import evidence as ev_mod
from gpus.numbers import health
from gpus.numbers import ledger as L
from tests import dra_objects

SCENARIOS = ["seed-example", "qks", "demo", "waiting"]
AT = datetime(2026, 12, 1, tzinfo=UTC)


def _key(o):
    return o["metadata"].get("namespace", ""), o["metadata"]["name"]


def snapshot_of(objects, hardware, project=False):
    """A Snapshot from a list of objects, selected as snapshot._read selects them."""
    by_kind = {}
    for o in sorted(objects, key=_key):
        if project:
            o = projection.project(o["kind"], o)
            if o is None:
                continue
        by_kind.setdefault(o["kind"], []).append(o)
    pods = by_kind.get("Pod", [])
    ns = lambda o: o["metadata"].get("namespace", "")  # noqa: E731
    return Snapshot(
        nodes=by_kind.get("Node", []),
        gpu_pods=[p for p in pods if projection.is_gpu_pod(p) and not projection.is_terminal(p)],
        quotas=by_kind.get("ResourceQuota", []),
        plugin_pods=[p for p in pods if projection.is_plugin_pod(p)],
        plugin_configmaps=[c for c in by_kind.get("ConfigMap", []) if ns(c) == PLUGIN_NAMESPACE],
        operator_configmaps=[c for c in by_kind.get("ConfigMap", []) if ns(c) == OPERATOR_NAMESPACE],
        plugin_daemonsets=[d for d in by_kind.get("DaemonSet", []) if ns(d) == PLUGIN_NAMESPACE],
        devices=hardware,
        device_source="twin",
        taken_at=AT,
    )


def ledger_facts(led):
    """Everything the ledger says, with the raw objects replaced by what is read of them."""
    nodes = []
    for n in led.nodes:
        d = {f.name: getattr(n, f.name) for f in dataclasses.fields(n) if not f.name.startswith("raw_")}
        d.update(
            pods=sorted(n.pods, key=lambda p: (p.namespace, p.name)),
            plugin_pods=sorted(n.plugin_pods, key=lambda p: (p.namespace, p.name)),
            taints=n.taints,
            devices=n.devices,
        )
        nodes.append(d)
    return nodes, led.by_type, led.by_resource, led.allocated_by_namespace, led.device_source


def everything(snap):
    led = L.compute(snap)
    problems = health.problems(health.HealthInputs(ledger=led, snapshot=snap, drift=None))
    ev = ev_mod.as_markdown(ev_mod.build(snap, led, snap.plugin_configmaps + snap.operator_configmaps))
    return ledger_facts(led), [dataclasses.astuple(p) for p in problems], ev


@pytest.mark.parametrize("name", SCENARIOS)
def test_projection_gives_the_same_ledger_health_and_evidence_as_the_full_objects(name):
    objects, hardware, _ = scenarios.read(name)
    full, slim = snapshot_of(objects, hardware), snapshot_of(objects, hardware, project=True)
    assert slim.nodes and len(slim.gpu_pods) == len(full.gpu_pods) and len(slim.plugin_pods) == len(full.plugin_pods)
    assert everything(slim) == everything(full)


@pytest.mark.parametrize("name", SCENARIOS)
def test_watcher_snapshot_of_the_twin_equals_a_full_read(load_scenario, name):
    gw = load_scenario(name)
    full = take_snapshot(gw, use_prometheus=False)
    w = ClusterWatcher(gw)
    w.prime()
    slim = w.snapshot()
    full.taken_at = slim.taken_at = AT
    full.gpu_pods = sorted(full.gpu_pods, key=_key)
    assert everything(slim) == everything(full)
    # the device-plugin objects the drift compares are kept whole
    assert [d["spec"] for d in slim.plugin_daemonsets] == [d["spec"] for d in full.plugin_daemonsets]
    assert [c["data"] for c in slim.plugin_configmaps] == [c["data"] for c in full.plugin_configmaps]


def test_node_projection_drops_what_nothing_reads():
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "labels": {"a": "b"},
            "annotations": {"big": "x" * 1000},
            "managedFields": [{"manager": "kubelet"}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"},
        "status": {
            "capacity": {"cpu": "4", "nvidia.com/gpu": "2"},
            "allocatable": {"nvidia.com/gpu": "2"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "m", "lastHeartbeatTime": "t"}
            ],
            "images": [{"names": ["x"] * 50}],
            "nodeInfo": {"kubeletVersion": "v1.34", "osImage": "x"},
        },
    }
    slim = projection.node(node)
    assert slim == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "4", "nvidia.com/gpu": "2"},
            "allocatable": {"nvidia.com/gpu": "2"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.34"},
        },
    }


def pod(ns, name, *, gpu=None, labels=None, phase="Running"):
    c = {
        "name": "main",
        "image": "x",
        "env": [{"name": "A", "value": "1"}],
        "resources": {"requests": {"cpu": "1", **(gpu or {})}, "limits": {**(gpu or {})}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"nodeName": "n1", "containers": [c], "volumes": [{"name": "v", "emptyDir": {}}]},
        "status": {
            "phase": phase,
            "reason": "OutOfnvidia.com/gpu" if phase == "Failed" else None,
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": False,
                    "restartCount": 3,
                    "image": "x",
                    "state": {"terminated": {"reason": "Error", "exitCode": 1, "startedAt": "t"}},
                }
            ],
        },
    }


def test_which_pods_are_kept():
    assert projection.keeps_pod(pod("ws", "a", gpu={"nvidia.com/gpu": "1"}))
    assert projection.keeps_pod(pod("ws", "a", gpu={"nvidia.com/mig-1g.5gb": "1"}, phase="Succeeded"))
    assert not projection.keeps_pod(pod("ws", "cpu-only"))
    assert projection.keeps_pod(pod(PLUGIN_NAMESPACE, "plugin-x"))
    assert projection.keeps_pod(pod(OPERATOR_NAMESPACE, "p", labels={"app": "nvidia-device-plugin-daemonset"}))
    assert not projection.keeps_pod(pod(OPERATOR_NAMESPACE, "p", labels={"app": "gpu-feature-discovery"}))
    assert projection.keeps_pod(pod(OPERATOR_NAMESPACE, "m", labels={"app": "nvidia-mig-manager"}))
    assert not projection.keeps_pod(pod("ws", "m", labels={"app": "nvidia-mig-manager"}))  # not the operator's
    assert projection.project("Pod", pod("ws", "cpu-only")) is None


def watch_line(type_, obj, rv="4711"):
    """A watch event as the API server writes it: compact JSON, metadata first and in it
    resourceVersion before labels."""
    meta = obj["metadata"]
    ordered = {
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "uid": "u-1",
        "resourceVersion": rv,
        **{k: v for k, v in meta.items() if k not in ("name", "namespace")},
    }
    body = {
        "kind": obj["kind"],
        "apiVersion": obj["apiVersion"],
        "metadata": ordered,
        **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")},
    }
    return json.dumps({"type": type_, "object": body}, separators=(",", ":")).encode()


def test_every_pod_the_watcher_keeps_is_decoded_from_its_raw_event():
    """A pod event refused before decoding is lost to the view: every pod the scenarios hold
    that the projection keeps (GPU pods, plugin pods) must be worth decoding, in each event type."""
    pods = [o for name in SCENARIOS for o in scenarios.read(name)[0] if o["kind"] == "Pod"]
    worth = projection.worth_decoding("Pod")
    kept = [p for p in pods if projection.keeps_pod(p)]
    assert any(projection.is_gpu_pod(p) for p in kept) and any(projection.is_plugin_pod(p) for p in kept)
    for p in kept:
        for type_ in ("ADDED", "MODIFIED", "DELETED"):
            assert worth(watch_line(type_, p)), (type_, p["metadata"]["name"])


def test_a_pod_that_requests_no_gpu_is_skipped_with_its_resource_version():
    from brickadmin.cluster.kube import _resource_version

    worth = projection.worth_decoding("Pod")
    cpu = pod("ws", "cpu-only", labels={"note": '"resourceVersion":"1"'})  # a lookalike inside a label value
    for type_ in ("ADDED", "MODIFIED", "DELETED"):
        line = watch_line(type_, cpu, rv="90210")
        assert not worth(line)
        assert _resource_version(line) == "90210"
    assert worth(watch_line("ADDED", pod("ws", "g", gpu={"nvidia.com/gpu": "1"})))
    assert worth(watch_line("ADDED", pod(PLUGIN_NAMESPACE, "plugin-x")))
    # bookmarks and errors are never read from their bytes (they are decoded)
    assert _resource_version(b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"5"}}}') is None
    assert _resource_version(b'{"type":"ERROR","object":{"kind":"Status","code":410}}') is None
    # other kinds are always decoded
    assert projection.worth_decoding("Node") is None and projection.worth_decoding("ResourceQuota") is None


def test_a_bookmark_or_an_error_among_skipped_pods_is_never_lost():
    """Runs of skipped pod events become one SKIPPED event; a bookmark inside such a run (the
    streaming list's initial-events-end among them) still comes through, in order, and so
    does an ERROR (a 410 raises Gone)."""
    from brickadmin.cluster.base import Gone
    from brickadmin.cluster.kube import KubeGateway, _KubeWatch

    stream = _KubeWatch(KubeGateway, None, "GET", "/api/v1/pods", "v1", "Pod", projection.worth_decoding("Pod"))
    cpu = pod("ws", "cpu-only")
    end = (
        b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12",'
        b'"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}}'
    )
    lines = [
        watch_line("ADDED", cpu, rv="10"),
        watch_line("ADDED", cpu, rv="11"),
        end,
        watch_line("MODIFIED", cpu, rv="13"),
    ]
    events = list(stream._events(lines))
    assert [(e["type"], e.get("skipped"), e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("SKIPPED", 2, "11"),
        ("BOOKMARK", None, "12"),
        ("SKIPPED", 1, "13"),
    ]
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    gone = (
        b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",'
        b'"status":"Failure","reason":"Expired","code":410}}'
    )
    with pytest.raises(Gone):
        list(stream._events([watch_line("ADDED", cpu, rv="14"), gone, watch_line("ADDED", cpu, rv="15")]))


def test_pod_projection_keeps_gpu_requests_and_the_failure_summary():
    slim = projection.pod(pod("ws", "a", gpu={"nvidia.com/gpu": "2"}, phase="Failed"))
    assert slim["spec"] == {
        "nodeName": "n1",
        "containers": [
            {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}
        ],
    }
    assert slim["status"]["phase"] == "Failed" and slim["status"]["reason"] == "OutOfnvidia.com/gpu"
    assert slim["status"]["containerStatuses"] == [
        {"name": "main", "ready": False, "restartCount": 3, "state": {"terminated": {"reason": "Error", "exitCode": 1}}}
    ]
    assert L.pod_line(slim) == L.pod_line(pod("ws", "a", gpu={"nvidia.com/gpu": "2"}, phase="Failed"))


def test_pod_projection_keeps_the_health_of_the_devices_its_containers_and_init_containers_hold():
    full = pod("ws", "a", gpu={"nvidia.com/gpu": "1"})
    health = [{"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-1", "health": "Unhealthy"}]}]
    claim = [{"name": "claim:gpu/gpu", "resources": [{"resourceID": "gpu.nvidia.com/n1/gpu-0", "health": "Unknown"}]}]
    full["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = health
    full["status"]["initContainerStatuses"] = [
        {"name": "sidecar", "image": "y", "ready": True, "allocatedResourcesStatus": claim},
        {"name": "setup", "image": "z", "state": {"terminated": {"reason": "Completed"}}},
    ]
    slim = projection.pod(full)
    assert slim["status"]["containerStatuses"][0]["allocatedResourcesStatus"] == health
    assert slim["status"]["initContainerStatuses"] == [{"name": "sidecar", "allocatedResourcesStatus": claim}]
    from gpus.numbers.device_health import held_devices

    assert held_devices(slim) == held_devices(full) and len(held_devices(slim)) == 2


def test_daemonsets_and_configmaps_are_kept_whole_but_managed_fields():
    ds = {
        "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": PLUGIN_NAMESPACE, "managedFields": [{}], "labels": {"x": "y"}},
        "spec": {"template": {"spec": {}}},
    }
    slim = projection.project("DaemonSet", ds)
    assert slim == {
        "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": PLUGIN_NAMESPACE, "labels": {"x": "y"}},
        "spec": {"template": {"spec": {}}},
    }


def _share_claim(name: str, uid: str, share: str, pod: str) -> dict:
    consumed = {"memory": "0", "shares": "1"}
    result = dra_objects.res("gpu", "node-a", "gpu-3", share=share, consumed=consumed)
    return dra_objects.claim(
        name, "team-a", [dra_objects.exact("gpu", "gpu.nvidia.com")], [result], [pod], "node-a", uid
    )


def test_claims_given_shares_of_one_device_keep_one_copy_of_what_they_hold_alike():
    raw = [
        _share_claim("w-1", "c0000000-0000-4000-8000-000000000001", "s-1", "p-1"),
        _share_claim("w-2", "c0000000-0000-4000-8000-000000000002", "s-2", "p-2"),
    ]
    one, two = (projection.project("ResourceClaim", json.loads(json.dumps(c))) for c in raw)
    # what they ask for and what they were given is one object; who they are and whom they serve is their own
    assert one["spec"] is two["spec"]
    assert one["status"]["allocation"] is two["status"]["allocation"]
    assert one["metadata"]["name"] == "w-1" and two["metadata"]["name"] == "w-2"
    assert [r["name"] for r in two["status"]["reservedFor"]] == ["p-2"]
    # the same content as a projection holding its own copies, less what nothing reads
    assert one == projection.project_unshared("ResourceClaim", raw[0])
    allocation = one["status"]["allocation"]
    assert "allocationTimestamp" not in allocation
    assert allocation["devices"]["results"] == [
        {
            "device": "gpu-3",
            "driver": "gpu.nvidia.com",
            "pool": "node-a",
            "request": "gpu",
            "consumedCapacity": {"memory": "0", "shares": "1"},
        }
    ]
    assert (
        raw[0]["status"]["allocation"]["devices"]["results"][0]["shareID"] == "s-1"
    )  # the object read is left as it was


def test_what_no_kept_object_holds_any_more_is_forgotten():
    projection.forget_shared()
    kept = [
        projection.compact(
            {"spec": {"nodeName": f"node-{i}", "containers": [{"name": "main"}]}, "status": {"phase": "Running"}}
        )
        for i in range(3000)
    ]
    assert all(k["status"] is kept[0]["status"] for k in kept)
    held = len(projection._shared)
    del kept
    # objects of another shape made later: the table is pruned as it grows, and keeps none of the first
    later = [projection.compact({"metadata": {"labels": {"app": f"a-{i}"}}}) for i in range(7000)]
    assert len(projection._shared) < held + len(later) * 3
    first = {"spec", "nodeName", "phase"}
    assert not any(k[1] in first for k in projection._shared if isinstance(k, tuple) and len(k) > 1)
    assert later[0]["metadata"]["labels"] == {"app": "a-0"}


def test_a_pod_on_a_claim_and_its_claim_keep_no_uid_nothing_reads_and_stay_plain_dicts():
    """What the watcher keeps of a pod whose only GPU tie is a claim, and of its claim: no uid
    (nothing reads either; the claim names its pods in reservedFor); a GPU pod keeps its uid (an
    extended-resource claim is checked against it). Every kept dict is a plain dict (its keys'
    table shared with its shape's), equal to the projection with its own copies."""
    raw = _share_claim("w-1", "c0000000-0000-4000-8000-000000000001", "s-1", "p-1")
    raw["status"]["reservedFor"][0]["uid"] = "p0000000-0000-4000-8000-000000000001"
    claim = projection.project("ResourceClaim", json.loads(json.dumps(raw)))
    assert "uid" not in claim["metadata"]
    assert claim["status"]["reservedFor"] == [{"name": "p-1", "resource": "pods"}]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p-1"]

    def on_claim(name):
        p = pod("team-a", name)
        p["metadata"]["uid"] = f"u-{name}"
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        return p

    full = [on_claim("p-1"), on_claim("p-2")]
    kept = [projection.project("Pod", json.loads(json.dumps(p))) for p in full]
    assert all("uid" not in k["metadata"] for k in kept)
    assert kept[0]["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "p-1"}]
    assert kept[0] == projection.project_unshared("Pod", full[0])
    assert type(kept[0]) is dict and type(kept[0]["metadata"]) is dict
    assert json.loads(json.dumps(kept[0])) == kept[0]

    gpu = pod("team-a", "trainer", gpu={"nvidia.com/gpu": "1"})
    gpu["metadata"]["uid"] = "u-trainer"
    gpu["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "trainer-gpu"}]
    assert projection.project("Pod", gpu)["metadata"]["uid"] == "u-trainer"
