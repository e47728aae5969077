"""How to use an approved Workspace: the example pod its owner can copy, and how many GPUs
one pod of it can ask for. Pure: the resource names are the vocabulary's, the amounts the
Workspace's record and the nodes' from the cluster view (gpus.view.reading.nodes_serving)."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from brickadmin.cluster.vocabulary import GPU, GPU_SHARED

# The conventional taint of GPU nodes: the product's Jobs tolerate it, so the example does too.
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
EXAMPLE_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


@dataclass(frozen=True)
class PodPlan:
    """How the Workspace's GPU quota is used by pods: ``per_pod`` GPUs in each of ``pods`` pods."""

    resource: str
    quota: int
    per_pod: int
    pods: int
    # Why one pod cannot ask for the whole quota: "shared" (at most one time-sliced GPU a
    # pod), "node" (no node serves that many), or "".
    split_by: str = ""


def pod_plan(resource: str, quota: int, largest_node: int) -> PodPlan:
    """How to spend ``quota`` of ``resource`` in pods. A pod's GPUs come from one node, so
    it asks for at most what the largest serving node has (``largest_node``; 0 when unknown,
    then the quota). Time-sliced GPUs: one per pod (the device plugin refuses more with
    failRequestsGreaterThanOne, the product's time-slicing config)."""
    if not resource or quota <= 0:
        return PodPlan(resource, 0, 0, 0)
    if resource == GPU_SHARED:
        return PodPlan(resource, quota, 1, quota, "shared" if quota > 1 else "")
    per_pod = min(quota, largest_node) if largest_node > 0 else quota
    pods = -(-quota // per_pod)
    return PodPlan(resource, quota, per_pod, pods, "node" if per_pod < quota else "")


def example_pod(namespace: str, plan: PodPlan, priority_class: str, *, name: str = "gpu-check") -> str:
    """A pod manifest (YAML) that runs nvidia-smi once with ``plan.per_pod`` of the
    Workspace's GPU resource; without GPU quota, a CPU-only pod."""
    container: dict = {
        "name": "main",
        "image": EXAMPLE_IMAGE,
        "command": ["nvidia-smi"] if plan.per_pod else ["sh", "-c", "echo hello"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
    }
    spec: dict = {"restartPolicy": "Never", "priorityClassName": priority_class, "containers": [container]}
    if plan.per_pod:
        # Extended resources are asked for in limits (the request follows them).
        container["resources"]["limits"][plan.resource] = plan.per_pod
        spec["tolerations"] = [GPU_TOLERATION]
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False)
