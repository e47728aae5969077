"""What the resource quota controller writes in a ResourceQuota's status (brickadmin/cluster/quotausage.py).

The tables are Kubernetes' own: pkg/quota/v1/evaluator/core/pods_test.go (TestPodEvaluatorUsage,
TestPodEvaluatorUsageStats), with the GPU rows the console reads beside them.
"""

from datetime import UTC, datetime, timedelta

import pytest

from brickadmin.cluster import quotausage as qu
from brickadmin.cluster.vocabulary import parse_quantity

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
COUNT = {"count/pods": "1"}


def container(requests=None, limits=None, **extra):
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def pod(containers=(), init=(), phase="Running", **spec):
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": list(containers), "initContainers": list(init), **spec},
        "status": {"phase": phase},
    }


def values(usage):
    return {k: v[0] for k, v in usage.items()}


def expect(table):
    return {k: parse_quantity(v) for k, v in table.items()}


DONGLE = "example.com/dongle"
IMPLICIT = "deviceclass.resource.kubernetes.io/dongle"

# pods_test.go TestPodEvaluatorUsage (pod-level rows with the PodLevelResources gate on)
USAGE = {
    "init container CPU": (
        pod(init=[container({"cpu": "1m"}, {"cpu": "2m"})]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "pods": "1", "cpu": "1m", **COUNT},
    ),
    "init container MEM": (
        pod(init=[container({"memory": "1m"}, {"memory": "2m"})]),
        {"requests.memory": "1m", "limits.memory": "2m", "pods": "1", "memory": "1m", **COUNT},
    ),
    "init container local ephemeral storage": (
        pod(init=[container({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})]),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
            "pods": "1",
            **COUNT,
        },
    ),
    "init container hugepages": (
        pod(init=[container({"hugepages-2Mi": "100Mi"})]),
        {"hugepages-2Mi": "100Mi", "requests.hugepages-2Mi": "100Mi", "pods": "1", **COUNT},
    ),
    "init container extended resources": (
        pod(init=[container({DONGLE: "3"}, {DONGLE: "3"})]),
        {"requests." + DONGLE: "3", "pods": "1", **COUNT},
    ),
    "init container implicit extended resources": (
        pod(init=[container({IMPLICIT: "3"}, {IMPLICIT: "3"})]),
        {"requests." + IMPLICIT: "3", "pods": "1", **COUNT},
    ),
    "container CPU": (
        pod([container({"cpu": "1m"}, {"cpu": "2m"})]),
        {"requests.cpu": "1m", "limits.cpu": "2m", "pods": "1", "cpu": "1m", **COUNT},
    ),
    "container MEM": (
        pod([container({"memory": "1m"}, {"memory": "2m"})]),
        {"requests.memory": "1m", "limits.memory": "2m", "pods": "1", "memory": "1m", **COUNT},
    ),
    "container local ephemeral storage": (
        pod([container({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})]),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
            "pods": "1",
            **COUNT,
        },
    ),
    "container hugepages": (
        pod([container({"hugepages-2Mi": "100Mi"})]),
        {"hugepages-2Mi": "100Mi", "requests.hugepages-2Mi": "100Mi", "pods": "1", **COUNT},
    ),
    "container extended resources": (
        pod([container({DONGLE: "3"}, {DONGLE: "3"})]),
        {"requests." + DONGLE: "3", "pods": "1", **COUNT},
    ),
    "container implicit extended resources": (
        pod([container({IMPLICIT: "3"}, {IMPLICIT: "3"})]),
        {"requests." + IMPLICIT: "3", "pods": "1", **COUNT},
    ),
    "terminated generic count still appears": (
        pod([container({DONGLE: "3"}, {DONGLE: "3"})], phase="Succeeded"),
        COUNT,
    ),
    "init container maximums override sum of containers": (
        pod(
            [
                container({"cpu": "1", "memory": "50M", DONGLE: "1"}, {"cpu": "2", "memory": "100M", DONGLE: "1"}),
                container({"cpu": "2", "memory": "25M", DONGLE: "2"}, {"cpu": "5", "memory": "50M", DONGLE: "2"}),
            ],
            init=[
                container({"cpu": "4", "memory": "100M", DONGLE: "4"}, {"cpu": "8", "memory": "200M", DONGLE: "4"}),
                container({"cpu": "1", "memory": "50M", DONGLE: "2"}, {"cpu": "2", "memory": "100M", DONGLE: "2"}),
            ],
        ),
        {
            "requests.cpu": "4",
            "requests.memory": "100M",
            "limits.cpu": "8",
            "limits.memory": "200M",
            "pods": "1",
            "cpu": "4",
            "memory": "100M",
            "requests." + DONGLE: "4",
            **COUNT,
        },
    ),
    "pod deletion timestamp exceeded": (
        {
            **pod([container({"cpu": "1", "memory": "50M"}, {"cpu": "2", "memory": "100M"})], phase="Running"),
            "metadata": {
                "name": "p",
                "deletionTimestamp": (NOW - timedelta(seconds=60)).isoformat(),
                "deletionGracePeriodSeconds": 30,
            },
        },
        COUNT,
    ),
    "pod deletion timestamp not exceeded": (
        {
            **pod([container({"cpu": "1"}, {"cpu": "2"})]),
            "metadata": {"name": "p", "deletionTimestamp": NOW.isoformat(), "deletionGracePeriodSeconds": 30},
        },
        {"requests.cpu": "1", "limits.cpu": "2", "pods": "1", "cpu": "1", **COUNT},
    ),
    "count pod overhead as usage": (
        pod([container({"cpu": "1"}, {"cpu": "2"})], overhead={"cpu": "1"}),
        {"requests.cpu": "2", "limits.cpu": "3", "pods": "1", "cpu": "2", **COUNT},
    ),
    "pod-level CPU": (
        pod(resources={"requests": {"cpu": "1m"}, "limits": {"cpu": "2m"}}),
        {"requests.cpu": "1m", "limits.cpu": "2m", "pods": "1", "cpu": "1m", **COUNT},
    ),
    "pod-level Memory": (
        pod(resources={"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}}),
        {"requests.memory": "1Mi", "limits.memory": "2Mi", "pods": "1", "memory": "1Mi", **COUNT},
    ),
    "pod-level memory with container-level ephemeral storage": (
        pod(
            [container({"ephemeral-storage": "32Mi"}, {"ephemeral-storage": "64Mi"})],
            resources={"requests": {"memory": "1Mi"}, "limits": {"memory": "2Mi"}},
        ),
        {
            "ephemeral-storage": "32Mi",
            "requests.ephemeral-storage": "32Mi",
            "limits.ephemeral-storage": "64Mi",
            "pods": "1",
            "requests.memory": "1Mi",
            "limits.memory": "2Mi",
            "memory": "1Mi",
            **COUNT,
        },
    ),
    # the console's rows: a GPU pod, its request defaulted from its limit, Pending or Failed
    "GPU limit only: the request defaults to it": (
        pod([container(limits={"nvidia.com/gpu": "2"})]),
        {"requests.nvidia.com/gpu": "2", "pods": "1", **COUNT},
    ),
    "Pending GPU pod still pulling its image": (
        pod([container({"nvidia.com/gpu.shared": "1"}, {"nvidia.com/gpu.shared": "1"})], phase="Pending"),
        {"requests.nvidia.com/gpu.shared": "1", "pods": "1", **COUNT},
    ),
    "GPU pod the kubelet refused": (
        pod([container({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})], phase="Failed"),
        COUNT,
    ),
    "a sidecar adds to the containers": (
        pod(
            [container({"nvidia.com/gpu": "1", "cpu": "1"})],
            init=[container({"cpu": "500m"}, restartPolicy="Always"), container({"cpu": "1"})],
        ),
        {"requests.nvidia.com/gpu": "1", "requests.cpu": "1500m", "cpu": "1500m", "pods": "1", **COUNT},
    ),
}


@pytest.mark.parametrize("p, usage", USAGE.values(), ids=USAGE.keys())
def test_pod_evaluator_usage(p, usage):
    assert values(qu.pod_usage(p, NOW)) == expect(usage)


def quota(hard, scopes=None, selector=None, used=None):
    spec = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return {"metadata": {"name": "q", "namespace": "ns"}, "spec": spec, "status": {"used": used or {}}}


def make_pod(name, priority, cpu, phase):
    """pods_test.go makePod: cpu1 as request and limit of one container."""
    resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}} if cpu else {}
    spec = {"containers": [{"name": "c", "resources": resources}]}
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


ALL = {k: "100" for k in ("pods", "count/pods", "cpu", "requests.cpu", "limits.cpu")}
HIGH = [{"scopeName": "PriorityClass", "operator": "In", "values": ["high-priority"]}]

# pods_test.go TestPodEvaluatorUsageStats, through a quota naming every resource those rows measure
STATS = {
    "nil case": ([], quota(ALL), {k: "0" for k in ALL}),
    "all pods in running state": (
        [make_pod("p1", "", "1", "Running"), make_pod("p2", "", "1", "Running")],
        quota(ALL),
        {"pods": "2", "count/pods": "2", "cpu": "2", "requests.cpu": "2", "limits.cpu": "2"},
    ),
    "one pods in terminal state": (
        [make_pod("p1", "", "1", "Running"), make_pod("p2", "", "1", "Succeeded")],
        quota(ALL),
        {"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"},
    ),
    "partial pods matching quotaScopeSelector": (
        [
            make_pod("p1", "high-priority", "1", "Running"),
            make_pod("p2", "high-priority", "1", "Succeeded"),
            make_pod("p3", "low-priority", "1", "Running"),
        ],
        quota(ALL, selector=HIGH),
        {"pods": "1", "count/pods": "2", "cpu": "1", "requests.cpu": "1", "limits.cpu": "1"},
    ),
    "partial pods matching quotaScopeSelector - w/ multiple scopeNames specified": (
        [
            make_pod("p1", "high-priority", "1", "Running"),
            make_pod("p2", "high-priority", "1", "Succeeded"),
            make_pod("p3", "low-priority", "1", "Running"),
            make_pod("p4", "high-priority", None, "Failed"),
        ],
        quota(ALL, scopes=["PriorityClass", "BestEffort"], selector=HIGH),
        {"pods": "0", "count/pods": "1", "cpu": "0", "requests.cpu": "0", "limits.cpu": "0"},
    ),
}


@pytest.mark.parametrize("pods, q, used", STATS.values(), ids=STATS.keys())
def test_pod_evaluator_usage_stats(pods, q, used):
    assert values(qu.measured_usage(q, pods, NOW)) == expect(used)


def gpu_pod(name, resource, n, phase="Running", priority=""):
    p = pod([container({resource: str(n), "cpu": "2", "memory": "8Gi"}, {resource: str(n)})], phase=phase)
    p["metadata"]["name"] = name
    if priority:
        p["spec"]["priorityClassName"] = priority
    return p


def test_the_controller_writes_used_for_every_hard_key_it_measures_and_keeps_the_rest():
    """syncResourceQuota: used is masked to hard; Pending pods count, finished ones do not; a
    Workspace quota's scope leaves the product's Jobs out; a key no evaluator here measures
    keeps what the status said."""
    hard = {
        "requests.nvidia.com/gpu": "8",
        "requests.cpu": "64",
        "requests.memory": "256Gi",
        "requests.storage": "1Ti",
        "count/configmaps": "10",
    }
    q = quota(
        hard,
        selector=[{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["brick-job-priority"]}],
        used={"count/configmaps": "3", "limits.cpu": "9"},
    )
    pods = [
        gpu_pod("train", "nvidia.com/gpu", 2),
        gpu_pod("pulling", "nvidia.com/gpu", 1, phase="Pending"),
        gpu_pod("done", "nvidia.com/gpu", 4, phase="Succeeded"),
        gpu_pod("refused", "nvidia.com/gpu", 1, phase="Failed"),
        gpu_pod("job", "nvidia.com/gpu", 4, priority="brick-job-priority"),
        gpu_pod("shared", "nvidia.com/gpu.shared", 1),  # a resource this quota does not name
    ]
    status = qu.quota_status(q, pods, NOW)
    assert status == {
        "hard": hard,
        "used": {
            "requests.nvidia.com/gpu": "3",
            "requests.cpu": "6",  # train, pulling and shared: 2 each
            "requests.memory": "24Gi",  # the format of the pods' requests, as Quantity.Add keeps it
            "requests.storage": "0",  # no PersistentVolumeClaim
            "count/configmaps": "3",  # not measured here: as the status said
        },
    }


def test_an_unscoped_quota_counts_every_live_pod_and_claims_count_their_devices():
    claim = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    q = quota({"requests.nvidia.com/gpu": "4", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2"})
    status = qu.quota_status(q, [gpu_pod("a", "nvidia.com/gpu", 1), gpu_pod("b", "nvidia.com/gpu", 2)], NOW, [claim])
    assert status["used"] == {"requests.nvidia.com/gpu": "3", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}
