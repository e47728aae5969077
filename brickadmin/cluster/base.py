"""The cluster gateway: one protocol, two implementations (kube.py, twin.py).

Everything handed out is a plain dict shaped exactly as the Kubernetes API server
returns it (camelCase keys, ``metadata``/``spec``/``status``), so the ledger, the
health checks and the procedures never know where the data came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class ClusterError(Exception):
    """An API failure. ``transient`` says whether retrying can help."""

    transient = False

    def __init__(self, message: str, *, status: int | None = None, reason: str = ""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class TransientClusterError(ClusterError):
    """429, 5xx, timeouts, connection refused: retry with backoff."""

    transient = True


class PermanentClusterError(ClusterError):
    """403, 422, invalid input: retrying will not help."""


class NotFound(PermanentClusterError):
    pass


class Forbidden(PermanentClusterError):
    pass


class Conflict(PermanentClusterError):
    """409 AlreadyExists / conflicting write."""


class ClusterUnreachable(TransientClusterError):
    """The API server did not answer at all."""


class Gone(PermanentClusterError):
    """410 Gone / Expired: the resourceVersion a watch (or a list's continue token) starts
    from has been compacted away. Retrying the same request cannot help; list again."""

    def __init__(self, message: str, *, status: int | None = 410, reason: str = "Expired"):
        super().__init__(message, status=status, reason=reason)


@dataclass
class DrainResult:
    evicted: list[str] = field(default_factory=list)  # "ns/name"
    skipped: list[str] = field(default_factory=list)  # DaemonSet / mirror pods
    blocked: dict[str, str] = field(default_factory=dict)  # "ns/name" -> why (PDB, emptyDir)
    done: bool = False  # True when no evictable pod is left on the node


@dataclass
class RolloutStatus:
    done: bool
    message: str
    desired: int = 0
    updated: int = 0
    available: int = 0


@runtime_checkable
class ClusterGateway(Protocol):
    """What brickadmin needs from a cluster. Lists return every item (the real
    gateway pages through ``limit``/``continue`` itself)."""

    name: str  # "twin" or "kube"

    # --- reads -----------------------------------------------------------
    def list_nodes(self, label_selector: str | None = None) -> list[dict]: ...
    def get_node(self, name: str) -> dict: ...  # raises NotFound
    def list_pods(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict]: ...
    def list_gpu_pods(self) -> list[dict]:
        """Non-terminal pods (phase not Succeeded/Failed) whose containers request any
        ``nvidia.com/*`` resource, in every namespace: the ledger's input. The real
        gateway lists with a phase field selector and filters client-side."""
        ...

    def list_priority_classes(self) -> list[dict]: ...
    def list_cluster_policies(self) -> list[dict]:
        """The GPU Operator's ClusterPolicy objects; [] where its CRD is not installed or not readable."""
        ...

    def list_resource_quotas(self, namespace: str | None = None) -> list[dict]: ...
    def list_daemonsets(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]: ...
    def get_daemonset(self, namespace: str, name: str) -> dict: ...
    def list_configmaps(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]: ...
    def get_configmap(self, namespace: str, name: str) -> dict: ...
    def list_namespaces(self, label_selector: str | None = None) -> list[dict]: ...
    def list_pod_disruption_budgets(self, namespace: str | None = None) -> list[dict]: ...
    def list_jobs(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]: ...
    def list_resource_slices(self, node: str | None = None) -> list[dict]:
        """ResourceSlices (resource.k8s.io/v1), those published for ``node`` when given; [] where
        the cluster does not serve DRA."""
        ...

    def list_device_taint_rules(self) -> list[dict]:
        """DeviceTaintRules; [] where the cluster does not serve them."""
        ...

    def gpu_devices(self) -> dict[str, list[dict]] | None:
        """Physical GPU facts per node name, if this gateway knows them (the twin
        does; a real cluster does not: use metrics.py). Each device:
        {"uuid", "model", "memoryMiB", "mig": [profile, ...]}"""
        ...

    # --- writes (each idempotent where Kubernetes allows) ----------------
    def cordon(self, node: str) -> None: ...
    def uncordon(self, node: str) -> None: ...
    def drain(self, node: str, *, delete_emptydir_data: bool = True, timeout_seconds: float = 60) -> DrainResult: ...
    def label_node(self, node: str, labels: dict[str, str | None]) -> dict: ...
    def remove_node_status_resources(self, node: str, resources: list[str]) -> dict: ...
    def apply(self, manifest: dict, *, field_manager: str = "brickadmin") -> dict: ...
    def apply_device_taint_rule(self, rule: dict) -> dict:
        """Create or update a DeviceTaintRule (server-side apply)."""
        ...

    def delete_device_taint_rule(self, name: str) -> None:
        """Delete a DeviceTaintRule; one already gone is a no-op."""
        ...

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None: ...
    def rollout_restart_daemonset(self, namespace: str, name: str) -> None: ...
    def daemonset_rollout_status(self, namespace: str, name: str) -> RolloutStatus: ...
    def create_namespace(self, name: str, labels: dict[str, str]) -> dict: ...
    def create_resource_quota(self, namespace: str, name: str, hard: dict[str, str]) -> dict: ...
    def create_priority_class(
        self, name: str, value: int, description: str = "", preemption_policy: str = "PreemptLowerPriority"
    ) -> dict: ...
    def create_job(self, namespace: str, manifest: dict) -> dict: ...

    # --- list-then-watch (the cluster watcher, brickadmin/cluster/watch.py) ---
    # ``kind`` is one of WATCHED_KINDS. Objects are the API server's JSON.
    def list_with_version(
        self, kind: str, namespace: str | None = None, *, keep=None, worth=None
    ) -> tuple[list[dict], str]:
        """Every object of ``kind`` (streamed or paginated) and the version the list
        reflects. ``keep(obj) -> obj | None``, when given, is applied to each item as it
        arrives (a projection; None drops the item), so a huge list is never held whole.
        ``worth`` is as for ``watch``: a streamed list skips the objects it refuses."""
        ...

    def watch(
        self, kind: str, namespace: str | None = None, *, resource_version: str, timeout_seconds: int = 300, worth=None
    ) -> WatchStream:
        """Events after ``resource_version``: an iterable of ``{"type": ADDED|MODIFIED|
        DELETED|BOOKMARK, "object": {...}}`` that ends when the server closes the stream
        (``timeoutSeconds``). Raises ``Gone`` when the version was compacted (410, or an
        ERROR event with code 410); other failures as the usual errors. ``close()`` ends it
        from another thread. ``worth(raw event bytes) -> bool`` may let a gateway that reads
        bytes skip decoding an event the watcher would drop: it then yields ``{"type":
        "SKIPPED", "object": {"metadata": {"resourceVersion": ...}}}`` (a gateway that
        holds objects already ignores it)."""
        ...

    # --- Leases (coordination.k8s.io/v1), for leader election (lease.py) --
    def get_lease(self, namespace: str, name: str) -> dict: ...  # raises NotFound
    def create_lease(self, namespace: str, body: dict) -> dict: ...  # raises Conflict if it exists
    def update_lease(self, namespace: str, body: dict) -> dict:
        """PUT with the body's metadata.resourceVersion: raises Conflict when someone
        else wrote the Lease since it was read (optimistic concurrency)."""
        ...

    # --- Kueue (kueue.x-k8s.io; brickadmin/cluster/kueue.py), where the cluster serves it ---
    def kueue_served(self) -> bool:
        """Whether the API server serves Kueue's ClusterQueue in KUEUE_API_VERSION (discovery;
        the twin: a setting or a scenario's CustomResourceDefinition says so)."""
        ...

    def list_kueue(self, kind: str, namespace: str | None = None) -> list[dict]:
        """Every object of one of KUEUE_KINDS; [] where Kueue is not served or not readable.
        Writes go through ``apply`` and ``delete`` with KUEUE_API_VERSION."""
        ...


KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
# Kueue's kinds the watcher follows: what the quota pages and the eviction records read.
KUEUE_WATCHED = ("ClusterQueue", "Workload")

# The kinds the cluster watcher lists and watches, with their API version.
WATCHED_KINDS = {
    "Node": "v1",
    "Pod": "v1",
    "ResourceQuota": "v1",
    "DaemonSet": "apps/v1",
    "ConfigMap": "v1",
    "Namespace": "v1",
    "Job": "batch/v1",
    # Dynamic Resource Allocation (brickadmin/cluster/dra.py counts them). A cluster may not
    # serve them (no DRA, or DRA without DeviceTaintRule): the watcher then keeps them empty.
    "ResourceSlice": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    "DeviceTaintRule": "resource.k8s.io/v1alpha3",
    # Kueue, where the cluster runs it (a cluster without it answers 404: kept empty)
    **{k: KUEUE_API_VERSION for k in KUEUE_WATCHED},
}

# The DRA kinds (apiVersion per kind), and those of them that are cluster-scoped.
DRA_KINDS = {k: v for k, v in WATCHED_KINDS.items() if v.startswith("resource.k8s.io/")}
DRA_CLUSTER_SCOPED = frozenset({"ResourceSlice", "DeviceClass", "DeviceTaintRule"})
# Kinds whose API a cluster may not serve (404) or not let the product read (403): listed
# as empty, never a failure, so a cluster without them works as one without the objects.
OPTIONAL_KINDS = frozenset(DRA_KINDS) | frozenset(KUEUE_WATCHED)


# Kueue's kinds the product reads and writes (brickadmin/cluster/kueue.py), in the version Kueue
# v0.17 stores (KUEUE_API_VERSION, above); the cluster-scoped ones. ClusterQueues and Workloads
# are watched (KUEUE_WATCHED): the pages follow Kueue from the view (workspaces/elastic.py).
KUEUE_KINDS = {k: KUEUE_API_VERSION for k in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload")}
KUEUE_CLUSTER_SCOPED = frozenset({"ResourceFlavor", "ClusterQueue"})
KUEUE_CRD = "clusterqueues.kueue.x-k8s.io"  # what a twin scenario holds to serve Kueue


class WatchStream(Protocol):
    def __iter__(self): ...
    def close(self) -> None: ...
