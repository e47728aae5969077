"""Which watch events are worth a new generation of the cluster view: a synthetic minute of a
2,000-node cluster's own writes (what its kubelets and controllers send while nobody changes
anything) plus a few label changes, applied to a real ClusterWatcher's store; a generation is
counted the way ``ClusterWatcher.run`` publishes (a change after a quiet spell at once, then at
most one per debounce window). Prints events in, projection changes and generations out,
per kind. Nothing here talks to a cluster: the events are made here, as the API server
would send them (with managedFields, resourceVersion, condition times).

    .venv/bin/python bench/watch_changes.py [--nodes 2000] [--seconds 60] [--heartbeat-seconds 10]

What one simulated second holds (the defaults; each a flag):
* node status heartbeats: every node's status written every --heartbeat-seconds (a kubelet
  without node leases; KWOK's heartbeat stage): the conditions' lastHeartbeatTime, the
  resourceVersion, the managedFields time;
* --ds-status-per-second DaemonSet status writes (the DaemonSet controller recounting the
  plugin pods: numberReady, observedGeneration, metadata.generation unchanged or not);
* --pod-rewrites-per-second writes of a device-plugin pod that change only its resourceVersion,
  managedFields and its conditions' lastProbeTime (a kubelet status sync);
* --quota-rewrites-per-second ResourceQuota writes with the same status (a resync);
* --label-changes node label changes over the whole run (what the pages must show).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from brickadmin.cluster.vocabulary import PLUGIN_NAMESPACE  # noqa: E402
from brickadmin.cluster.watch import ClusterWatcher  # noqa: E402

TS = "2026-12-03T10:00:00Z"


def managed(t: float) -> list[dict]:
    return [
        {"manager": "kubelet", "operation": "Update", "time": f"2026-12-03T10:{int(t) // 60:02d}:{int(t) % 60:02d}Z"}
    ]


def node(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gpu-{i:05d}",
            "uid": f"u-node-{i}",
            "resourceVersion": "1",
            "creationTimestamp": TS,
            "labels": {"kubernetes.io/hostname": f"gpu-{i:05d}", "brick.ai/gpu-type": "exclusive"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "managedFields": managed(0),
        },
        "spec": {"providerID": f"kwok://gpu-{i:05d}"},
        "status": {
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": "kubelet is posting ready status" if t == "Ready" else "ok",
                    "lastHeartbeatTime": TS,
                    "lastTransitionTime": TS,
                }
                for t, s, r in (
                    ("Ready", "True", "KubeletReady"),
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    ("PIDPressure", "False", "KubeletHasSufficientPID"),
                )
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.34.0", "osImage": "kwok", "architecture": "amd64"},
        },
    }


def plugin_pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"nvidia-device-plugin-{i:05d}",
            "namespace": PLUGIN_NAMESPACE,
            "uid": f"u-pod-{i}",
            "resourceVersion": "1",
            "creationTimestamp": TS,
            "labels": {"app.kubernetes.io/component": "default"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "plugin", "uid": "ds"}],
            "managedFields": managed(0),
        },
        "spec": {"nodeName": f"gpu-{i:05d}", "containers": [{"name": "plugin", "image": "nvidia/k8s-device-plugin"}]},
        "status": {
            "phase": "Running",
            "startTime": TS,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": TS}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {"name": "plugin", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": TS}}}
            ],
        },
    }


def daemonset(n_nodes: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "plugin",
            "namespace": PLUGIN_NAMESPACE,
            "uid": "ds",
            "resourceVersion": "1",
            "generation": 1,
            "labels": {"app.kubernetes.io/name": "brick-nvidia-device-plugin"},
            "managedFields": managed(0),
        },
        "spec": {"selector": {"matchLabels": {"app": "p"}}, "template": {"spec": {"containers": [{"name": "plugin"}]}}},
        "status": {
            "desiredNumberScheduled": n_nodes,
            "currentNumberScheduled": n_nodes,
            "numberReady": n_nodes,
            "numberAvailable": n_nodes,
            "updatedNumberScheduled": n_nodes,
            "observedGeneration": 1,
        },
    }


def quota(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "gpu",
            "namespace": f"ws-{i:05d}",
            "uid": f"u-q-{i}",
            "resourceVersion": "1",
            "creationTimestamp": TS,
            "managedFields": managed(0),
        },
        "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "1"}},
    }


class StreamGateway:
    """The cluster as lists plus one batch of pending watch events per kind."""

    name = "synthetic"

    def __init__(self, lists: dict):
        self.lists = lists
        self.pending: dict[str, list] = {}

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        items = [keep(o) if keep else o for o in self.lists.get(kind, [])]
        return [o for o in items if o is not None], "1"

    def watch(self, kind, namespace=None, *, resource_version, timeout_seconds=300, worth=None):
        return self.pending.pop(kind, [])


def the_minute(args, nodes, pods, ds, quotas) -> list[tuple[float, str, dict]]:
    """(time, kind, event) for the whole run, in time order."""
    events = []
    rv = 1
    per_second_nodes = len(nodes) / args.heartbeat_seconds
    label_every = args.seconds / max(1, args.label_changes)
    labels_due = [(j * label_every, j) for j in range(args.label_changes)]
    for second in range(args.seconds):
        # the label changes of this second first: the node's later heartbeats carry them
        for at, j in [d for d in labels_due if second <= d[0] < second + 1]:
            rv += 1
            i = (j * 97) % len(nodes)
            n = copy.deepcopy(nodes[i])
            n["metadata"]["resourceVersion"] = str(rv)
            n["metadata"]["labels"]["brick.test/change"] = str(j)
            nodes[i] = n
            events.append((at, "Node", {"type": "MODIFIED", "object": n}))
        beats = int(per_second_nodes * (second + 1)) - int(per_second_nodes * second)
        for k in range(beats):
            rv += 1
            i = (int(per_second_nodes * second) + k) % len(nodes)
            n = copy.deepcopy(nodes[i])
            n["metadata"]["resourceVersion"] = str(rv)
            n["metadata"]["managedFields"] = managed(second)
            for c in n["status"]["conditions"]:
                c["lastHeartbeatTime"] = f"2026-12-03T10:{second // 60:02d}:{second % 60:02d}Z"
            nodes[i] = n
            events.append((second + k / max(1, beats), "Node", {"type": "MODIFIED", "object": n}))
        for k in range(args.ds_status_per_second):
            rv += 1
            d = copy.deepcopy(ds)
            d["metadata"]["resourceVersion"] = str(rv)
            d["metadata"]["managedFields"] = managed(second)
            d["status"]["numberReady"] = len(nodes) - (rv % 3)  # plugin pods flapping ready
            d["status"]["numberAvailable"] = d["status"]["numberReady"]
            events.append(
                (second + (k + 0.5) / args.ds_status_per_second, "DaemonSet", {"type": "MODIFIED", "object": d})
            )
        for k in range(args.pod_rewrites_per_second):
            rv += 1
            i = (second * args.pod_rewrites_per_second + k) % len(pods)
            p = copy.deepcopy(pods[i])
            p["metadata"]["resourceVersion"] = str(rv)
            p["metadata"]["managedFields"] = managed(second)
            for c in p["status"]["conditions"]:
                c["lastProbeTime"] = f"2026-12-03T10:{second // 60:02d}:{second % 60:02d}Z"
            events.append((second + (k + 0.3) / args.pod_rewrites_per_second, "Pod", {"type": "MODIFIED", "object": p}))
        for k in range(args.quota_rewrites_per_second):
            rv += 1
            q = copy.deepcopy(quotas[(second * args.quota_rewrites_per_second + k) % len(quotas)])
            q["metadata"]["resourceVersion"] = str(rv)
            q["metadata"]["managedFields"] = managed(second)
            events.append(
                (
                    second + (k + 0.7) / args.quota_rewrites_per_second,
                    "ResourceQuota",
                    {"type": "MODIFIED", "object": q},
                )
            )
    events.sort(key=lambda e: e[0])
    return events


def run(args) -> dict:
    nodes = [node(i) for i in range(args.nodes)]
    pods = [plugin_pod(i) for i in range(args.nodes)]
    ds = daemonset(args.nodes)
    quotas = [quota(i) for i in range(max(1, args.quotas))]
    gw = StreamGateway({"Node": nodes, "Pod": pods, "DaemonSet": [ds], "ResourceQuota": quotas})
    watcher = ClusterWatcher(gw)
    watcher.prime()
    events = the_minute(args, list(nodes), pods, ds, quotas)
    events_in, changes, generations = Counter(), Counter(), 0
    last_published, pending = float("-inf"), False
    started = time.process_time()
    for at, kind, ev in events:
        if pending and at >= last_published + args.debounce:  # the window closed: its changes publish
            generations, last_published, pending = generations + 1, last_published + args.debounce, False
        w = next(w for w in watcher._streams if w[0] == kind)
        events_in[kind] += 1
        if watcher._apply(w, ev):
            changes[kind] += 1
            if at - last_published >= args.debounce:
                generations, last_published = generations + 1, at
            else:
                pending = True
    generations += pending
    return {
        "events_in": events_in,
        "changes": changes,
        "generations": generations,
        "cpu_s": time.process_time() - started,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--heartbeat-seconds", type=float, default=10)
    ap.add_argument("--ds-status-per-second", type=int, default=2)
    ap.add_argument("--pod-rewrites-per-second", type=int, default=5)
    ap.add_argument("--quota-rewrites-per-second", type=int, default=1)
    ap.add_argument("--quotas", type=int, default=500)
    ap.add_argument("--label-changes", type=int, default=20)
    ap.add_argument("--debounce", type=float, default=0.5)
    args = ap.parse_args()
    r = run(args)
    print(
        f"{args.nodes} nodes, {args.seconds} s of the cluster's own writes + {args.label_changes} label changes "
        f"(debounce {args.debounce} s)"
    )
    print(f"{'kind':<15}{'events in':>12}{'changes':>10}")
    for kind in sorted(r["events_in"]):
        print(f"{kind:<15}{r['events_in'][kind]:>12}{r['changes'][kind]:>10}")
    total_in, total_changes = sum(r["events_in"].values()), sum(r["changes"].values())
    print(f"{'all':<15}{total_in:>12}{total_changes:>10}")
    print(
        f"generations out: {r['generations']} in {args.seconds} s "
        f"({r['generations'] / args.seconds:.2f}/s); applying the events took {r['cpu_s']:.2f} s CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
