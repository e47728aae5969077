"""The watcher's cost per pod event on a real API server's stream, with and without reading
the event's bytes first (projection.worth_decoding): a stream of pod events as the API server
writes them (compact JSON, a Running pod with its managedFields, as KWOK's pods look), one in
ten requesting a GPU, read through the real gateway's stream reader (kube._KubeWatch) and
applied to a ClusterWatcher's store. Prints events per second and CPU per 10,000 events.

    .venv/bin/python bench/watch_decode.py [--events 60000]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")

import django  # noqa: E402

django.setup()

from brickadmin.cluster import projection  # noqa: E402
from brickadmin.cluster.kube import _KubeWatch  # noqa: E402
from brickadmin.cluster.watch import ClusterWatcher  # noqa: E402


def pod_event(i: int, rv: int) -> bytes:
    gpu = i % 10 == 0
    resources = (
        {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
        if gpu
        else {"requests": {"cpu": "10m", "memory": "16Mi"}}
    )
    ts = "2026-12-02T06:00:00Z"
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": f"w-{i:06d}",
            "namespace": f"bench-ws-{i % 200:04d}",
            "uid": f"uid-{i:012d}",
            "resourceVersion": str(rv),
            "creationTimestamp": ts,
            "labels": {"brickadmin-bench": "scale"},
            "managedFields": [
                {
                    "manager": "python-requests",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:brickadmin-bench": {}}},
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"main"}': {
                                    ".": {},
                                    "f:image": {},
                                    "f:name": {},
                                    "f:resources": {"f:requests": {}},
                                }
                            }
                        },
                    },
                },
                {
                    "manager": "kwok",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {
                        "f:status": {
                            "f:conditions": {},
                            "f:containerStatuses": {},
                            "f:hostIP": {},
                            "f:phase": {},
                            "f:podIP": {},
                            "f:startTime": {},
                        }
                    },
                },
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": resources,
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "dnsPolicy": "ClusterFirst",
            "nodeName": f"bench-scale-{i % 2000:05d}",
            "automountServiceAccountToken": False,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": False,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.0.1",
            "podIP": "10.0.0.2",
            "podIPs": [{"ip": "10.0.0.2"}],
            "startTime": ts,
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"running": {"startedAt": ts}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.k8s.io/pause:3.10",
                    "imageID": "",
                    "started": True,
                }
            ],
            "qosClass": "BestEffort",
        },
    }
    return json.dumps({"type": "MODIFIED", "object": pod}, separators=(",", ":")).encode() + b"\n"


class Response:
    """A watch response's body in 64 KiB chunks, as urllib3 hands it over."""

    def __init__(self, body: bytes):
        self.body = body

    def stream(self, size, decode_content=True):
        for i in range(0, len(self.body), size):
            yield self.body[i : i + size]

    def shutdown(self):
        pass

    def release_conn(self):
        pass


def run(body: bytes, worth) -> tuple[float, float, dict]:
    w = ClusterWatcher(gateway=None)
    key = ("Pod", None)
    w._streams[key].rv = "1"
    stream = _KubeWatch(None, Response(body), "GET", "/api/v1/pods", "v1", "Pod", worth)
    c0, t0 = time.process_time(), time.perf_counter()
    for ev in stream:
        w._apply(key, ev)
    return time.perf_counter() - t0, time.process_time() - c0, w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=60000)
    n = ap.parse_args().events
    body = b"".join(pod_event(i, 100 + i) for i in range(n))
    print(f"{n:,} pod events, {len(body) / n:.0f} bytes each, one in ten requesting a GPU")
    results = {}
    for label, worth in (
        ("decode every event", None),
        ("bytes first (worth_decoding)", projection.worth_decoding("Pod")),
    ):
        wall, cpu, w = run(body, worth)
        s = w._streams[("Pod", None)]
        results[label] = (len(s.items), s.rv)
        print(
            f"  {label:30s} {n / wall:9,.0f} events/s   CPU {cpu / n * 10000 * 1000:7.0f} ms per 10,000 events   "
            f"kept {len(s.items):,}, stream at version {s.rv}, skipped {w.counters['skipped']:,}"
        )
    assert len(set(results.values())) == 1, results  # the same store and version either way


if __name__ == "__main__":
    main()
