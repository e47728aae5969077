"""Plain in-memory snapshots for the pure tests: Kubernetes-shaped dicts, no database, no twin."""

from brickadmin.cluster.snapshot import Snapshot

GPU, SHARED = "nvidia.com/gpu", "nvidia.com/gpu.shared"


def node(name, *, sharing="none", physical=4, resources=None, unschedulable=False, taints=(), labels=None, gpu=True):
    """A BRICK-convention GPU node (or a plain node with gpu=False). ``resources``:
    name -> (capacity, allocatable); by default physical whole GPUs of its mode's resource."""
    meta_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    status = {"conditions": [{"type": "Ready", "status": "True"}]}
    if gpu:
        meta_labels.update(
            {
                "brick.cloud/gpu.type": "nvidia",
                "brick.cloud/gpu.sharing": sharing,
                "nvidia.com/gpu.count": str(physical),
                "nvidia.com/gpu.product": "NVIDIA-A30",
            }
        )
        if resources is None:
            resources = {(SHARED if sharing == "timeslicing" else GPU): (physical, physical)}
        status["capacity"] = {k: str(c) for k, (c, _a) in resources.items()}
        status["allocatable"] = {k: str(a) for k, (_c, a) in resources.items()}
    spec = {"taints": [dict(t) for t in taints]} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": meta_labels}, "spec": spec, "status": status}


def plugin_pod(node_name, *, phase="Running", mode="default"):
    name = f"nvidia-device-plugin-{mode}-{node_name}"
    return {
        "metadata": {
            "namespace": "brick-nvidia",
            "name": name,
            "labels": {"app.kubernetes.io/component": f"device-plugin-{mode}"},
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": phase},
    }


def gpu_pod(namespace, name, node_name, resource=GPU, amount=1, phase="Running"):
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "main", "resources": {"limits": {resource: str(amount)}, "requests": {resource: str(amount)}}}
            ],
        },
        "status": {"phase": phase},
    }


def ts_config(replicas):
    """The BRICK time-slicing ConfigMap with ``replicas``."""
    config = (
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n"
    )
    return {
        "metadata": {"namespace": "brick-nvidia", "name": "nvidia-device-plugin-config-timeslicing"},
        "data": {"config.yaml": config},
    }


def quota(namespace, hard):
    """A Workspace quota: ``hard`` is resource name -> amount."""
    return {
        "metadata": {"namespace": namespace, "name": "workspace-compute"},
        "spec": {"hard": {f"requests.{k}": str(v) for k, v in hard.items()}},
    }


def snapshot(nodes, *, gpu_pods=(), plugin_pods=None, quotas=(), replicas=4):
    """A Snapshot; by default every GPU node has a Running plugin pod of its mode."""
    if plugin_pods is None:
        plugin_pods = [
            plugin_pod(
                n["metadata"]["name"],
                mode="timeslicing"
                if n["metadata"]["labels"].get("brick.cloud/gpu.sharing") == "timeslicing"
                else "default",
            )
            for n in nodes
            if "brick.cloud/gpu.type" in n["metadata"]["labels"]
        ]
    return Snapshot(
        nodes=list(nodes),
        gpu_pods=list(gpu_pods),
        quotas=list(quotas),
        plugin_pods=list(plugin_pods),
        plugin_configmaps=[ts_config(replicas)],
        source="test",
    )
