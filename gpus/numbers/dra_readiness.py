"""How ready a cluster is to move its GPUs from NVIDIA's device plugin to Dynamic Resource
Allocation: what still asks for the device plugin's resources, which quotas stop binding,
whether DCGM's figures reach the pods that use claims, and which stack each node runs. Pure.

- Workloads: pods that request ``nvidia.com/*`` (a device plugin's extended resource), and the
  Jobs they belong to, per namespace. On a node moved to DRA nothing advertises those
  resources: such a pod waits until it asks for a claim instead.
- Quotas: every ResourceQuota that limits ``requests.nvidia.com/*`` and names no DeviceClass's
  devices (``<class>.deviceclass.resource.k8s.io/devices``). A pod that uses a claim requests
  no ``nvidia.com/*``, so once its Workspace's GPUs come through DRA such a quota limits nothing.
- DCGM attribution: NVIDIA's dcgm-exporter names the pod of a GPU from the kubelet's
  pod-resources API; for a GPU a claim gave, it names the pod only when the exporter's DRA
  support is on. Measured as the running pods that use claims and have a DCGM reading of their
  own; when DCGM was not read, or no such pod runs, it is not measured (``None``), never 0.
- Stacks: per GPU node, which stack publishes its GPUs (device-plugin, dra, both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brickadmin.cluster.vocabulary import NVIDIA_PREFIX, KubeObject
from gpus.numbers.dra_lines import is_dra_resource

# A pod that asks for a device plugin's GPUs: (namespace, pod, the Job it belongs to or '', {resource: amount})
PodAsk = tuple[str, str, str, Mapping[str, int]]
# A quota: (namespace, name, its hard amounts)
QuotaHard = tuple[str, str, Mapping[str, Any]]

DEVICE_PLUGIN, DRA, BOTH = "device-plugin", "dra", "both"


@dataclass(slots=True)
class NamespaceWorkloads:
    """A namespace's pods (and their Jobs) that still ask for ``nvidia.com/*``."""

    namespace: str
    pods: int = 0
    jobs: int = 0
    resources: dict[str, int] = field(default_factory=dict)  # what they ask for, summed


@dataclass(slots=True)
class QuotaAtRisk:
    """A quota of ``requests.nvidia.com/*`` with no DeviceClass key: it stops binding under DRA."""

    namespace: str
    name: str
    resources: dict[str, str] = field(default_factory=dict)  # requests.nvidia.com/* -> hard


@dataclass(slots=True)
class DcgmAttribution:
    """Whether DCGM's figures name the pods that use claims. ``attributed`` None: not measured."""

    claim_pods: int  # running pods that use claims
    attributed: int | None  # of them, those DCGM has a reading for; None: not measured
    measured: bool  # DCGM was read

    @property
    def wired(self) -> bool | None:
        """True: every such pod is named; False: some are not; None: not measured."""
        if self.attributed is None:
            return None
        return self.attributed == self.claim_pods


@dataclass(slots=True)
class NodeStack:
    name: str
    stack: str  # device-plugin | dra | both
    model: str = ""


@dataclass(slots=True)
class Readiness:
    workloads: list[NamespaceWorkloads]
    quotas: list[QuotaAtRisk]
    dcgm: DcgmAttribution
    nodes: list[NodeStack]

    @property
    def pods(self) -> int:
        return sum(w.pods for w in self.workloads)

    @property
    def jobs(self) -> int:
        return sum(w.jobs for w in self.workloads)

    def nodes_on(self, stack: str) -> int:
        return sum(1 for n in self.nodes if n.stack == stack)


def pod_ask(pod: KubeObject, requests: Mapping[str, int]) -> PodAsk | None:
    """A pod's ask of the device plugin's GPUs (None when it asks for none, or has finished)."""
    if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
        return None
    asked = {r: n for r, n in requests.items() if r.startswith(NVIDIA_PREFIX) and n > 0}
    if not asked:
        return None
    md = pod.get("metadata") or {}
    job = next((str(o.get("name", "")) for o in md.get("ownerReferences") or [] if o.get("kind") == "Job"), "")
    return str(md.get("namespace", "")), str(md.get("name", "")), job, asked


def plugin_workloads(asks: Iterable[PodAsk]) -> list[NamespaceWorkloads]:
    """Per namespace (by name), the pods asking for ``nvidia.com/*`` and their distinct Jobs; a
    pod seen twice counts once."""
    seen: set[tuple[str, str]] = set()
    jobs: dict[str, set[str]] = {}
    out: dict[str, NamespaceWorkloads] = {}
    for namespace, pod, job, asked in asks:
        if (namespace, pod) in seen:
            continue
        seen.add((namespace, pod))
        line = out.setdefault(namespace, NamespaceWorkloads(namespace))
        line.pods += 1
        for res, n in asked.items():
            line.resources[res] = line.resources.get(res, 0) + n
        if job:
            jobs.setdefault(namespace, set()).add(job)
    for namespace, names in jobs.items():
        out[namespace].jobs = len(names)
    return [out[k] for k in sorted(out)]


def quotas_at_risk(quotas: Iterable[QuotaHard]) -> list[QuotaAtRisk]:
    """The quotas that limit ``requests.nvidia.com/*`` and no DeviceClass's devices."""
    out = []
    for namespace, name, hard in quotas:
        plugin = {k: str(v) for k, v in hard.items() if k.startswith("requests." + NVIDIA_PREFIX)}
        if plugin and not any(is_dra_resource(k) for k in hard):
            out.append(QuotaAtRisk(namespace, name, plugin))
    return sorted(out, key=lambda q: (q.namespace, q.name))


def dcgm_attribution(claim_pods: Sequence[KubeObject] | None, usage: Mapping[str, Any] | None) -> DcgmAttribution:
    """Of the running pods that use claims, those DCGM's readings name (``usage``: "ns/pod" ->
    readings, None when DCGM was not read). ``claim_pods`` None: the pods are not known here."""
    if claim_pods is None:
        return DcgmAttribution(0, None, usage is not None)
    running = [p for p in claim_pods if (p.get("status") or {}).get("phase") == "Running"]
    keys = [
        f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}" for p in running
    ]
    if usage is None or not keys:
        return DcgmAttribution(len(keys), None, usage is not None)
    return DcgmAttribution(len(keys), sum(1 for k in keys if usage.get(k)), True)


def node_stacks(nodes: Iterable[tuple[str, str, str]]) -> list[NodeStack]:
    """(name, stack, model) of the GPU nodes -> their stacks, by name; nodes of no stack left out."""
    return sorted((NodeStack(name, stack, model) for name, stack, model in nodes if stack), key=lambda n: n.name)


def readiness(
    asks: Iterable[PodAsk],
    quotas: Iterable[QuotaHard],
    dcgm: DcgmAttribution,
    nodes: Iterable[tuple[str, str, str]],
) -> Readiness:
    return Readiness(plugin_workloads(asks), quotas_at_risk(quotas), dcgm, node_stacks(nodes))
