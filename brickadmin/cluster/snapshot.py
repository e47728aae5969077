"""A cluster snapshot: the plain Kubernetes-shaped objects the ledger and the health
checks read, plus the physical GPU facts from Prometheus (DCGM) or the twin."""

from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from . import deviceplugin as dp
from . import projection
from .base import Forbidden, NotFound

OPERATOR_NAMESPACE = "gpu-operator"


@dataclass
class Snapshot:
    nodes: list[dict]
    gpu_pods: list[dict]
    quotas: list[dict]
    plugin_pods: list[dict] = field(default_factory=list)
    plugin_configmaps: list[dict] = field(default_factory=list)
    plugin_daemonsets: list[dict] = field(default_factory=list)  # for the managed manifest's drift
    # the GPU Operator's ConfigMaps (its time-slicing config, for the conformance evidence)
    operator_configmaps: list[dict] = field(default_factory=list)
    # node name -> physical GPUs [{"uuid", "model", "mig": [...], "pods": ["ns/name", ...]}]
    devices: dict[str, list[dict]] = field(default_factory=dict)
    # "dcgm": measured by the DCGM exporter through Prometheus; "twin": the simulated
    # cluster's facts; "labels": nvidia.com/gpu.count labels or derived from allocatable.
    device_source: str = "labels"
    device_note: str = ""
    taken_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    source: str = "twin"
    # GPU-requesting pods in phase Failed (projected), for diagnosis; the cluster watcher
    # fills it, a one-off read (take_snapshot) leaves it empty
    failed_gpu_pods: list[dict] = field(default_factory=list)
    namespaces: list[dict] = field(default_factory=list)  # name and labels (the Workspace owner)
    # the Jobs the product made (projected: name, namespace, status), for the Jobs pages
    jobs: list[dict] = field(default_factory=list)
    # DCGM per pod ("ns/pod" -> utilisation, memory_mib, devices), when Prometheus answered;
    # None: not measured (the pages say so, never 0)
    usage: dict | None = None
    # Dynamic Resource Allocation (resource.k8s.io; projected as projection.py says; empty where
    # the cluster does not serve the kind): what brickadmin/cluster/dra.py counts
    resource_slices: list[dict] = field(default_factory=list)
    resource_claims: list[dict] = field(default_factory=list)
    device_classes: list[dict] = field(default_factory=list)
    resource_claim_templates: list[dict] = field(default_factory=list)
    device_taint_rules: list[dict] = field(default_factory=list)
    # non-terminal pods that use ResourceClaims (spec.resourceClaims), whether or not they also
    # request an nvidia.com/* resource (those are in gpu_pods as well)
    claim_pods: list[dict] = field(default_factory=list)
    # the GPU Operator's mig-manager pods (projected), for a node whose GPUs DRA partitions
    mig_manager_pods: list[dict] = field(default_factory=list)
    # Kueue's ClusterQueues and Workloads (projected; KUEUE_FIELDS), and whether the cluster
    # serves Kueue: None when not looked at (a one-off read leaves Kueue to workspaces/elastic.py)
    kueue_served: bool | None = None
    kueue_cluster_queues: list[dict] = field(default_factory=list)
    kueue_workloads: list[dict] = field(default_factory=list)
    # the pods of gpu_pods and claim_pods whose devices' health the kubelet reports
    # (projection.reports_device_health): the watcher keeps the list as pods change, so the
    # health checks do not walk 150,000 pods per change; None: not listed, read from those two
    health_pods: list[dict] | None = None
    # (driver, pool) -> the claims allocated a device of that pool, in resource_claims' order
    # (projection.claim_pools): the watcher keeps them as claims change, so counting one node's
    # DRA GPUs does not walk 150,000 claims; None: not grouped, read from resource_claims
    claims_by_pool: dict[tuple[str, str], tuple[dict, ...]] | None = None


# Snapshot field -> the watched kind it holds
DRA_FIELDS = {
    "resource_slices": "ResourceSlice",
    "resource_claims": "ResourceClaim",
    "device_classes": "DeviceClass",
    "resource_claim_templates": "ResourceClaimTemplate",
    "device_taint_rules": "DeviceTaintRule",
}

# Snapshot field -> the watched Kueue kind it holds
KUEUE_FIELDS = {"kueue_cluster_queues": "ClusterQueue", "kueue_workloads": "Workload"}


_cache_lock = threading.Lock()
_cache: dict = {}
_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = True


@contextmanager
def without_gc_pauses():
    """Build a large acyclic structure (tens of thousands of dicts) without the cyclic
    garbage collector rescanning it at every allocation threshold: that is nearly half
    the time of a cold snapshot + ledger at 5,000 nodes. Reference counting still frees
    everything; the collector's state is restored when the last holder (any thread) leaves."""
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


class GcClock:
    """How long this process has spent in the cyclic garbage collector, per generation
    (seconds, collections): a watcher holding millions of objects can pause for a second
    in one full collection, and its publication times should say so."""

    def __init__(self):
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._began = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            generation = min(int(info.get("generation", 0)), 2)
            self.seconds[generation] += time.perf_counter() - self._began
            self.collections[generation] += 1

    def total(self) -> float:
        return sum(self.seconds)


def gc_clock() -> GcClock:
    """The process's one GcClock, installed on first use."""
    with _gc_lock:
        for cb in gc.callbacks:
            if isinstance(cb, GcClock):
                return cb
        clock = GcClock()
        gc.callbacks.append(clock)
        return clock


def take_snapshot(gateway=None, *, use_prometheus: bool = True) -> Snapshot:
    """Read the cluster once. For the twin, reuse the last snapshot of this process
    while the twin's version is unchanged (an informer cache, in effect)."""
    from .gateway import get_gateway

    gateway = gateway or get_gateway()
    key = None
    live_metrics = use_prometheus and bool(settings.PROMETHEUS_URL)
    if gateway.name == "twin" and not live_metrics:  # DCGM readings change without the twin
        key = ("twin", gateway.version())
    elif settings.BRICK_SNAPSHOT_CACHE_SECONDS:
        key = ("kube", int(time.monotonic() // settings.BRICK_SNAPSHOT_CACHE_SECONDS))
    if key is not None:
        with _cache_lock:
            if _cache.get("key") == key:
                return _cache["snapshot"]

    with without_gc_pauses():
        snap = _read(gateway, use_prometheus)
    if key is not None:
        with _cache_lock:
            _cache.clear()
            _cache.update(key=key, snapshot=snap)
    return snap


def _read(gateway, use_prometheus: bool) -> Snapshot:
    from .. import metrics

    operator_pods = gateway.list_pods(namespace=OPERATOR_NAMESPACE)
    # the watcher's rule (projection.is_plugin_pod): NVIDIA's MPS control daemon is no plugin
    plugin_pods = [p for p in gateway.list_pods(namespace=dp.PLUGIN_NAMESPACE) if not dp.is_mps_control_daemon(p)] + [
        p for p in operator_pods if "device-plugin" in (p["metadata"].get("labels") or {}).get("app", "")
    ]
    snap = Snapshot(
        nodes=gateway.list_nodes(),
        gpu_pods=gateway.list_gpu_pods(),
        quotas=gateway.list_resource_quotas(),
        plugin_pods=plugin_pods,
        plugin_configmaps=gateway.list_configmaps(namespace=dp.PLUGIN_NAMESPACE),
        operator_configmaps=gateway.list_configmaps(namespace=OPERATOR_NAMESPACE),
        plugin_daemonsets=gateway.list_daemonsets(namespace=dp.PLUGIN_NAMESPACE),
        failed_gpu_pods=[p for p in gateway.list_pods(field_selector="status.phase=Failed") if dp.pod_gpu_requests(p)],
        namespaces=gateway.list_namespaces(),
        source=gateway.name,
        mig_manager_pods=[projection.pod(p) for p in operator_pods if projection.is_mig_manager_pod(p)],
    )
    _read_dra(gateway, snap)
    measured, usage = metrics.measure_devices() if use_prometheus else (None, None)
    if measured is not None:
        snap.devices, snap.device_source = measured, "dcgm"
        snap.usage = usage
    else:
        facts = gateway.gpu_devices()
        if facts is not None:
            snap.devices, snap.device_source = facts, "twin"
        else:
            snap.device_source = "labels"
        snap.device_note = metrics.last_error() or ""
    return snap


def _read_dra(gateway, snap: Snapshot) -> None:
    """The DRA objects, projected as the watcher keeps them; a kind the cluster does not
    serve (404) or lets the product not read (403) is empty. Pods using claims are listed
    only when there are claims (on a cluster without DRA, no extra list of every pod)."""
    for name, kind in DRA_FIELDS.items():
        try:
            items, _rv = gateway.list_with_version(kind, keep=projection.keeper(kind))
        except (NotFound, Forbidden):
            items = []
        setattr(snap, name, sorted(items, key=_ns_name))
    if snap.resource_claims:
        snap.claim_pods = [
            projection.pod(p)
            for p in gateway.list_pods(field_selector="status.phase!=Succeeded,status.phase!=Failed")
            if projection.uses_claims(p) and not projection.is_terminal(p)
        ]


def _ns_name(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")
