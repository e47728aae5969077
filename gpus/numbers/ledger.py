"""The GPU ledger: pure functions from a cluster snapshot to the numbers.

Terms (docs/operator-guide.md#physical-and-logical-counts): physical, physical_used, logical (kubelet allocatable),
allocated (ResourceQuota ``requests.<resource>`` hard), requested (non-terminal pod
requests), available (logical - allocated).

Both cluster conventions are understood:
- BRICK: ``brick.cloud/gpu.sharing=none|timeslicing``; shared GPUs are
  ``nvidia.com/gpu.shared`` (renameByDefault).
- GPU Operator: ``nvidia.com/device-plugin.config`` / GFD labels; shared GPUs are
  advertised as plain ``nvidia.com/gpu`` on a node whose sharing strategy is time-slicing.
Stale resources (the other mode's, left by kubelet) are never counted as logical;
they are reported separately, as are cordoned nodes and missing device plugins.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from brickadmin.cluster import mig as mig_geometry
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import pod_gpu_requests, sharing_strategy
from brickadmin.cluster.vocabulary import (
    DEVICE_PLUGIN_CONFIG_LABEL as OPERATOR_CONFIG_LABEL,
)
from brickadmin.cluster.vocabulary import (
    GPU,
    GPU_SHARED,
    GPU_TYPE_LABEL,
    MIG_PREFIX,
    SHARING_LABEL,
    UNSCHEDULABLE_TAINT_KEY,
    KubeObject,
    configmap_replicas,
    label_int,
    mps_configmap_replicas,
    quantity,
)
from brickadmin.cluster.vocabulary import NVIDIA_PREFIX as NVIDIA
from gpus.numbers.dra_lines import (
    CONSUMABLE_SHARES,
    DraNode,
    dra_lines,
    dra_node,
    inputs_by_node,
    is_dra_resource,
    stack_of,
)

if TYPE_CHECKING:
    from brickadmin.cluster.snapshot import Snapshot

# A physical GPU as the snapshot gives it: {"uuid", "model", "mig": [profile, ...], "pods": [...]}.
RawDevice: TypeAlias = dict[str, Any]

EXCLUSIVE, SHARED = "exclusive", "shared"
# How a replicated resource is shared: GFD's nvidia.com/<resource>.sharing-strategy values
# (api/config/v1/sharing.go). MPS is a strategy of its own, never shown as time-slicing.
SHARING_NONE, TIME_SLICING, MPS = "none", "time-slicing", "mps"
SHARING_STRATEGIES = (SHARING_NONE, TIME_SLICING, MPS)
# A node's modes in which the device plugin replicates whole GPUs: time-slicing, or MPS (each
# replica an MPS client with its share of the GPU's memory and compute).
MODE_TIMESLICING, MODE_MPS = "timeslicing", "mps"
REPLICATED_MODES = (MODE_TIMESLICING, MODE_MPS)
SHARED_SUFFIX = ".shared"  # renameByDefault: <resource>.shared (api/config/v1 DefaultSharedRename)
MIXED = "mixed"  # plain nvidia.com/gpu that is whole on some nodes and time-sliced on others (GPU Operator)
# The conventional GPU taint keeps CPU pods off GPU nodes, and cordon's own taint is
# shown as "cordoned" (DaemonSets tolerate it): neither is news on a GPU node.
IGNORED_TAINTS = {GPU, UNSCHEDULABLE_TAINT_KEY}


def gpu_type_of(resource: str, node_shared_plain: bool = False) -> str:
    """'exclusive', 'shared' or 'mig-<profile>' for a resource name on a node. A MIG
    resource renamed by renameByDefault (nvidia.com/mig-<profile>.shared) is still its profile."""
    if resource == GPU_SHARED:
        return SHARED
    if resource.startswith(MIG_PREFIX):
        return "mig-" + resource[len(MIG_PREFIX) :].removesuffix(SHARED_SUFFIX)
    if resource == GPU:
        return SHARED if node_shared_plain else EXCLUSIVE
    return ""


def type_label(model: str, gpu_type: str, sharing_strategy: str = "") -> str:
    """How the Dashboard names a row: 'NVIDIA A30', 'NVIDIA A30 (Shared)', 'NVIDIA A30 (MPS)',
    'NVIDIA A30 MIG 1g.5gb', 'NVIDIA A30 MIG 1g.5gb (Shared)' (time-sliced MIG devices)."""
    suffix = {MPS: " (MPS)", CONSUMABLE_SHARES: " (Consumable shares)"}.get(sharing_strategy, " (Shared)")
    if gpu_type == SHARED:
        return model + suffix
    if gpu_type.startswith("mig-"):
        shared = sharing_strategy in (TIME_SLICING, MPS)
        return f"{model} MIG {gpu_type[4:]}" + (suffix if shared else "")
    return model


@dataclass(slots=True)
class ResourceLine:
    resource: str
    gpu_type: str
    capacity: int
    allocatable: int
    requested: int = 0
    stale: bool = False  # the other mode's resource, left behind by kubelet
    # Devices the plugin makes of each GPU or MIG device it replicates (1: not replicated),
    # and how it shares them (SHARING_NONE, TIME_SLICING or MPS).
    replicas: int = 1
    sharing_strategy: str = SHARING_NONE
    # Consumable shares without a limit (DRA): each GPU takes any number of claims; allocatable
    # then counts the claims held, and the pages show the capacity as unlimited.
    unlimited: bool = False

    @property
    def stale_severity(self) -> str:
        """'' | 'capacity' (harmless, clean up) | 'allocatable' (mis-scheduling risk)."""
        if not self.stale:
            return ""
        return "allocatable" if self.allocatable > 0 else "capacity"


@dataclass(slots=True)
class Device:
    uuid: str
    model: str
    mig: list[str] = field(default_factory=list)
    in_use: bool = False
    users: list[str] = field(default_factory=list)  # pods, when known (DCGM)


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(slots=True, frozen=True)
class PodLine:
    """A pod on a node, as the node page shows it: no Kubernetes JSON past the ledger."""

    namespace: str
    name: str
    phase: str
    gpu_requests: dict[str, int]
    component: str = ""  # app.kubernetes.io/component (or app) label, for device-plugin pods

    @property
    def running(self) -> bool:
        return self.phase == "Running"

    @property
    def requests_text(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.gpu_requests.items())


def pod_line(pod: KubeObject) -> PodLine:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return PodLine(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        phase=(pod.get("status") or {}).get("phase") or "",
        gpu_requests=pod_gpu_requests(pod),
        component=labels.get(vocab.COMPONENT_LABEL) or labels.get("app", ""),
    )


@dataclass(slots=True)
class NodeLedger:
    name: str
    model: str
    convention: str  # "brick" | "operator" | "none"
    # "exclusive" | "timeslicing" | "mps" | "mig" (MIG strategy mixed) | "mig-single" | "dra" | "unlabelled"
    mode: str
    sharing_label: str
    replicas: int  # effective: what the running plugin advertises per physical GPU
    configured_replicas: int  # what the time-slicing config says now
    ready: bool
    cordoned: bool
    tainted: bool
    plugin_state: str  # "running" | "crashlooping" | "pending" | "missing" | "unknown"
    resources: dict[str, ResourceLine]
    raw_devices: list[RawDevice]  # as the snapshot gives them; Device rows are built on demand
    in_use: frozenset[int]  # indexes into raw_devices
    physical: int
    physical_used: int
    physical_source: str  # "dcgm" | "twin" | "labels" | "derived"
    labels: dict[str, str]
    # As the snapshot gives them (shared, not copied); the rows below are built on demand.
    raw_taints: list[KubeObject] = field(default_factory=list)
    raw_pods: list[KubeObject] = field(default_factory=list)  # GPU pods on the node, any phase
    raw_plugin_pods: list[KubeObject] = field(default_factory=list)  # device-plugin pods on the node
    # MIG strategy single: the profile every nvidia.com/gpu of the node is, and why the
    # device plugin refuses the node's layout ("" when it does not).
    mig_profile: str = ""
    mig_error: str = ""
    # How the node's plugin shares what it replicates: SHARING_NONE, TIME_SLICING or MPS.
    sharing_strategy: str = SHARING_NONE
    # Which stack publishes its GPUs: device-plugin, dra, both (a finding) or '' (none yet)
    stack: str = ""
    dra: DraNode | None = None  # its GPUs published through DRA, when it has any

    @property
    def shared_replicas(self) -> int:
        """The most replicas any resource the node serves has (1: nothing is replicated)."""
        return max([r.replicas for r in self.served if r.sharing_strategy != SHARING_NONE] or [1])

    @property
    def taints(self) -> list[Taint]:
        return [Taint(t.get("key", ""), t.get("value") or "", t.get("effect", "")) for t in self.raw_taints]

    @property
    def pods(self) -> list[PodLine]:
        return [pod_line(p) for p in self.raw_pods]

    @property
    def plugin_pods(self) -> list[PodLine]:
        return [pod_line(p) for p in self.raw_plugin_pods]

    @property
    def devices(self) -> list[Device]:
        return [
            Device(
                uuid=d.get("uuid", ""),
                model=d.get("model", ""),
                mig=list(d.get("mig") or []),
                in_use=i in self.in_use,
                users=list(d.get("pods") or []),
            )
            for i, d in enumerate(self.raw_devices)
        ]

    @property
    def logical(self) -> int:
        return sum(r.allocatable for r in self.resources.values() if not r.stale)

    @property
    def requested(self) -> int:
        return sum(r.requested for r in self.resources.values() if not r.stale)

    @property
    def stale(self) -> list[ResourceLine]:
        return [r for r in self.resources.values() if r.stale]

    @property
    def served(self) -> list[ResourceLine]:
        return [r for r in self.resources.values() if not r.stale]


@dataclass(slots=True)
class TypeRow:
    """One Dashboard detail row: a GPU model and type."""

    model: str
    gpu_type: str
    resource: str
    logical: int = 0
    requested: int = 0
    physical: int = 0
    cordoned_logical: int = 0
    nodes: int = 0
    sharing_strategy: str = SHARING_NONE  # how the row's GPUs are shared (MPS is a row of its own)
    # Of the row, what DRA nodes publish (the rest is the device plugin's): one row per model
    # and type whichever stack serves it, with the split shown.
    dra_logical: int = 0
    dra_physical: int = 0
    unlimited: bool = False  # consumable shares without a limit are among its GPUs

    @property
    def label(self) -> str:
        return type_label(self.model, self.gpu_type, self.sharing_strategy)


@dataclass(slots=True)
class ResourceRow:
    """One Workspace-creation availability row: a resource name.

    On a GPU Operator cluster, time-sliced GPUs are advertised as plain ``nvidia.com/gpu``
    (no rename): ``shared_logical`` is how much of this row's Total such nodes give, and
    ``shared_on`` names them ([node, replicas, logical]). A quota of the resource cannot tell
    whole from shared GPUs, so the row's type says so (SHARED, or MIXED beside whole GPUs)."""

    resource: str
    logical: int = 0
    allocated: int = 0
    requested: int = 0
    shared_logical: int = 0
    shared_on: list[list[Any]] = field(default_factory=list)
    # MIG strategy single: nodes where this plain resource is MIG devices ([node, profile, logical]).
    mig_on: list[list[Any]] = field(default_factory=list)
    # Nodes that share this resource by MPS, not time-slicing ([node, replicas, logical]).
    mps_on: list[list[Any]] = field(default_factory=list)

    @property
    def available(self) -> int:
        return self.logical - self.allocated

    @property
    def mig_logical(self) -> int:
        return sum(n for _node, _p, n in self.mig_on)

    @property
    def gpu_type(self) -> str:
        mig = self.mig_logical
        profiles: set[str] = {p for _node, p, _n in self.mig_on}
        if mig and mig >= self.logical and len(profiles) == 1 and not self.shared_logical:
            return "mig-" + profiles.pop()
        if self.shared_logical and self.shared_logical >= self.logical:
            return SHARED
        if self.shared_logical or mig:
            return MIXED
        return gpu_type_of(self.resource)

    @property
    def shared_replicas(self) -> list[int]:
        """The replicas of the nodes where this resource is time-sliced."""
        return sorted({int(r) for _n, r, _l in self.shared_on})

    @property
    def time_sliced_on(self) -> list[list[Any]]:
        """shared_on without the nodes that share by MPS."""
        mps = {node for node, _r, _l in self.mps_on}
        return [entry for entry in self.shared_on if entry[0] not in mps]

    @property
    def parts(self) -> list[tuple[str, int]]:
        """What the resource's Total is made of, as the Availability page breaks it down:
        [(kind, units)] of whole GPUs, time-sliced replicas, MPS replicas and MIG instances under
        MIG strategy single, the kinds it has, in that order; [] when it is of one kind only."""
        time_sliced = sum(n for _node, _r, n in self.time_sliced_on)
        mps = sum(n for _node, _r, n in self.mps_on)
        mig = self.mig_logical
        whole = max(0, self.logical - time_sliced - mps - mig)
        kinds = (("whole", whole), (TIME_SLICING, time_sliced), (MPS, mps), ("mig-single", mig))
        parts = [(k, n) for k, n in kinds if n]
        return parts if len(parts) > 1 else []

    @property
    def sharing_strategy(self) -> str:
        """MPS when every replica of this resource is an MPS one; else time-slicing when it is
        replicated anywhere; else none."""
        mps = sum(n for _node, _r, n in self.mps_on)
        if mps and mps >= self.logical:
            return MPS
        if self.gpu_type in (SHARED, MIXED) or self.shared_logical:
            return TIME_SLICING
        return SHARING_NONE


@dataclass(slots=True)
class Ledger:
    nodes: list[NodeLedger]
    by_type: list[TypeRow]
    by_resource: list[ResourceRow]
    allocated_by_namespace: dict[str, dict[str, int]]
    device_source: str

    @property
    def logical(self) -> int:
        return sum(r.logical for r in self.by_type)

    @property
    def requested(self) -> int:
        return sum(r.requested for r in self.by_type)

    @property
    def physical(self) -> int:
        return sum(n.physical for n in self.nodes)

    @property
    def physical_used(self) -> int:
        return sum(n.physical_used for n in self.nodes)

    def resource(self, name: str) -> ResourceRow:
        for row in self.by_resource:
            if row.resource == name:
                return row
        return ResourceRow(resource=name)

    def node(self, name: str) -> NodeLedger | None:
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    @property
    def timeslicing_replicas(self) -> list[int]:
        """The replicas the nodes replicating whole GPUs (time-slicing or MPS) give each GPU,
        each once, ascending."""
        return sorted({n.replicas for n in self.nodes if n.mode in REPLICATED_MODES and n.replicas})

    @property
    def cordoned_nodes(self) -> list[NodeLedger]:
        return [n for n in self.nodes if n.cordoned]

    @property
    def stale_nodes(self) -> list[NodeLedger]:
        return [n for n in self.nodes if n.stale]

    @property
    def plugin_down_nodes(self) -> list[NodeLedger]:
        return [n for n in self.nodes if n.plugin_state in PLUGIN_DOWN]


# --- per node ---------------------------------------------------------------


def is_gpu_node(node: KubeObject) -> bool:
    labels = node["metadata"].get("labels") or {}
    if labels.get(GPU_TYPE_LABEL) or labels.get(vocab.GPU_PRESENT_LABEL) == "true":
        return True
    status = node.get("status") or {}
    return any(k.startswith(NVIDIA) for k in (status.get("capacity") or {}))


def _operator_shared(labels: dict[str, str]) -> bool:
    """Whether plain nvidia.com/gpu is replicated on a GPU Operator node. GFD's labels say so
    when present; the config's name is only a guess for a node GFD has not labelled (a config
    named "mig-mixed-time-slicing" may replicate MIG devices only)."""
    if labels.get(vocab.GPU_SHARING_STRATEGY_LABEL) in (TIME_SLICING, MPS):
        return True
    if label_int(labels.get(vocab.GPU_REPLICAS_LABEL), 1) > 1:
        return True
    if vocab.GPU_SHARING_STRATEGY_LABEL in labels or vocab.GPU_REPLICAS_LABEL in labels:
        return False
    return "time-slicing" in labels.get(OPERATOR_CONFIG_LABEL, "")


def _operator_replicas(labels: dict[str, str]) -> int:
    if labels.get(vocab.GPU_REPLICAS_LABEL):
        return max(1, label_int(labels[vocab.GPU_REPLICAS_LABEL], 1))
    config = labels.get(OPERATOR_CONFIG_LABEL, "")
    tail = config.rsplit("-", 1)[-1]
    return max(1, label_int(tail, 1)) if config.startswith("time-slicing") else 1


def brick_replicas(configmaps: list[KubeObject]) -> int:
    """Replicas in the BRICK time-slicing ConfigMap (1 when absent)."""
    replicas = configmap_replicas(configmaps)
    return 1 if replicas is None else max(1, replicas)


def brick_mps_replicas(configmaps: list[KubeObject]) -> int:
    """Replicas in the BRICK MPS ConfigMap (1 when absent)."""
    replicas = mps_configmap_replicas(configmaps)
    return 1 if replicas is None else max(1, replicas)


def brick_sharing_strategy(configmaps: list[KubeObject]) -> str:
    """How the plugin of the BRICK time-slicing ConfigMap shares its GPUs: MPS when that
    config shares by MPS (sharing.mps, api/config/v1/sharing.go), else time-slicing."""
    for cm in configmaps:
        if cm.get("kind", "ConfigMap") == "ConfigMap" and cm["metadata"]["name"] == vocab.TS_CONFIGMAP:
            try:
                strategy = sharing_strategy((cm.get("data") or {}).get(vocab.PLUGIN_CONFIG_KEY) or "")
            except Exception:  # noqa: BLE001  (a config that is not YAML: the plugin refuses it, nothing is shared)
                return TIME_SLICING
            return MPS if strategy == MPS else TIME_SLICING
    return TIME_SLICING


# The plugin states in which no plugin serves the node's GPUs.
PLUGIN_DOWN = ("missing", "pending", "crashlooping")


def _crash_looping(pod: KubeObject) -> bool:
    """A container kubelet keeps restarting (the plugin exits at start, e.g. on a config it
    refuses): the pod's phase stays Running but no plugin serves."""
    return any(
        ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _plugin_state(node_name: str, plugin_pods_by_node: dict[str, list[KubeObject]], convention: str) -> str:
    pods = plugin_pods_by_node.get(node_name, [])
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if any(not _crash_looping(p) for p in running):
        return "running"
    if running:
        return "crashlooping"
    if pods:
        return "pending"
    return "missing" if convention == "brick" else "unknown"


def node_ledger(
    node: KubeObject,
    pods_requests: dict[str, int],
    devices: list[RawDevice] | None,
    device_source: str,
    plugin_state: str,
    ts_replicas: int,
    *,
    pods: Sequence[KubeObject] = (),
    plugin_pods: Sequence[KubeObject] = (),
    brick_sharing: str = TIME_SLICING,
    dra_node: DraNode | None = None,
    mps_replicas: int = 1,
) -> NodeLedger:
    meta = node["metadata"]
    labels = meta.get("labels") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}

    sharing = labels.get(SHARING_LABEL, "")
    if sharing or labels.get(GPU_TYPE_LABEL):
        convention = "brick"
        shared_plain = False
        replicas = ts_replicas if sharing == MODE_TIMESLICING else 1
        if sharing == MODE_MPS:  # the BRICK MPS DaemonSet's plugin, with its own ConfigMap
            replicas, brick_sharing = mps_replicas, MPS
    elif OPERATOR_CONFIG_LABEL in labels or any(k.startswith(vocab.GFD_GPU_LABEL_PREFIX) for k in labels):
        convention = "operator"
        shared_plain = _operator_shared(labels)
        replicas = _operator_replicas(labels) if shared_plain else 1
    else:
        convention, shared_plain, replicas = "none", False, 1
    # MIG strategy single: GFD rewrites gpu.product to "<model>-MIG-<profile>" (or
    # "-MIG-INVALID") and gpu.count to the MIG devices; every nvidia.com/gpu is a MIG device.
    mig_profile = mig_error = ""
    if convention != "none" and labels.get(vocab.MIG_STRATEGY_LABEL) == "single":
        _model, mig_profile, _shared = vocab.split_gpu_product(labels.get(vocab.GPU_PRODUCT_LABEL, ""))
        if mig_profile == vocab.MIG_INVALID:
            mig_profile, mig_error = "", "not-uniform"

    resources: dict[str, ResourceLine] = {}
    for name in sorted(set(capacity) | set(allocatable)):
        if not name.startswith(NVIDIA):
            continue
        gtype = gpu_type_of(name, shared_plain)
        if mig_profile and name in (GPU, GPU_SHARED):
            gtype = "mig-" + mig_profile
        stale = (convention == "brick" and vocab.is_stale_resource(sharing, name, status)) or (
            convention == "operator" and name == GPU and vocab.left_by_mig(status)
        )
        line_replicas, line_sharing = _line_sharing(name, gtype, convention, labels, replicas, brick_sharing)
        resources[name] = ResourceLine(
            resource=name,
            gpu_type=gtype,
            capacity=quantity(capacity.get(name, 0)),
            allocatable=quantity(allocatable.get(name, 0)),
            requested=pods_requests.get(name, 0),
            stale=stale,
            replicas=line_replicas,
            sharing_strategy=line_sharing,
        )
    for name, amount in pods_requests.items():  # pods holding a resource the node no longer lists
        if name not in resources:
            resources[name] = ResourceLine(name, gpu_type_of(name, shared_plain), 0, 0, amount, stale=True)

    plugin_served = any(not r.stale and (r.capacity or r.allocatable) for r in resources.values())
    stack = stack_of(plugin_served, dra_node)

    has_mig = any(r.gpu_type.startswith("mig-") and r.allocatable > 0 for r in resources.values())
    if stack == "dra":
        mode = "dra"
    elif mig_profile or mig_error:
        mode = "mig-single"
    elif convention == "brick":
        mode = "timeslicing" if sharing == "timeslicing" else ("mig" if has_mig else "exclusive")
        if sharing == MODE_MPS:
            mode = MODE_MPS
        elif sharing not in vocab.SHARING_VALUES:
            mode = "unlabelled"
    elif convention == "operator":
        mode = "timeslicing" if shared_plain else ("mig" if has_mig else "exclusive")
    else:
        mode = "exclusive" if resources else "unlabelled"

    node_sharing = next(
        (r.sharing_strategy for r in resources.values() if not r.stale and r.sharing_strategy != SHARING_NONE),
        SHARING_NONE,
    )
    if mode == MODE_TIMESLICING and node_sharing == MPS:
        mode = MODE_MPS  # whole GPUs shared by MPS: a mode of its own (sharing.go SharingStrategyMPS)
    devs = devices or []
    model = _node_model(labels, devs) if devs or not dra_node else _dra_model(labels, dra_node)
    if devs:
        physical, source = len(devs), device_source
    elif stack == "dra" and dra_node is not None:
        physical, source = dra_node.physical, "dra"  # the driver's devices: distinct GPUs behind them
    elif mode == "mig-single":
        # gpu.count counts MIG devices here: physical GPUs come from the geometry instead.
        physical, source = _physical_from_mig(model, mig_profile, resources, replicas, labels), "derived"
    elif label_int(labels.get(vocab.GPU_COUNT_LABEL), None) is not None:  # a typed label that is no number: derived
        physical, source = label_int(labels[vocab.GPU_COUNT_LABEL], 0), "labels"
    else:
        physical = _physical_from_allocatable(resources, replicas)
        source = "derived"
    configured_replicas = replicas
    shared_line = next((r for r in resources.values() if r.gpu_type == SHARED and not r.stale), None)
    whole_gpus = sum(1 for d in devs if not d.get("mig")) if devs else physical
    if shared_line and shared_line.allocatable and whole_gpus:
        replicas = max(1, shared_line.allocatable // whole_gpus)
        shared_line.replicas = replicas  # what the running plugin serves, not what the config now says
    in_use = _devices_in_use(devs, resources, replicas, device_source)
    physical_used = len(in_use)
    if stack == "dra" and dra_node is not None:  # in use: a GPU some claim holds a device of
        held = {g.gpu for g in dra_node.gpus if g.used}
        in_use = frozenset(i for i, d in enumerate(devs) if d.get("uuid") in held)
        physical_used = sum(1 for g in dra_node.gpus if g.used)
    elif not devs:
        physical_used = _derived_physical_used(resources, replicas, physical)
    if dra_node is not None:  # after the device plugin's figures, which its lines alone make
        _add_dra_lines(resources, dra_node)

    return NodeLedger(
        name=meta["name"],
        model=model,
        convention=convention,
        mode=mode,
        sharing_label=sharing,
        replicas=replicas,
        configured_replicas=configured_replicas,
        ready=_ready(status),
        cordoned=bool(spec.get("unschedulable")),
        # Taints worth showing: ones a plugin DaemonSet may not tolerate (see IGNORED_TAINTS).
        tainted=any(
            t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") not in IGNORED_TAINTS
            for t in spec.get("taints") or []
        ),
        plugin_state=plugin_state,
        resources=resources,
        raw_devices=devs,
        in_use=in_use,
        physical=physical,
        physical_used=physical_used,
        physical_source=source,
        labels=labels,
        raw_taints=spec.get("taints") or [],
        raw_pods=list(pods),
        raw_plugin_pods=list(plugin_pods),
        mig_profile=mig_profile,
        mig_error=mig_error,
        sharing_strategy=node_sharing,
        stack=stack,
        dra=dra_node,
    )


def _add_dra_lines(resources: dict[str, ResourceLine], dra_node: DraNode) -> None:
    """A node's DRA GPUs as one line per DeviceClass, named as quota names them
    (<class>.deviceclass.resource.k8s.io/devices); a class of several types (MIG profiles)
    is one line of the first type (the Dashboard's rows are per type: see _contribution)."""
    for line in dra_lines(dra_node):
        r = resources.get(line.resource)
        if r is None:
            resources[line.resource] = ResourceLine(
                line.resource,
                line.gpu_type,
                line.logical,
                line.logical,
                line.used,
                sharing_strategy=line.sharing_strategy,
                unlimited=line.unlimited,
            )
        else:
            r.capacity += line.logical
            r.allocatable += line.logical
            r.requested += line.used
            r.unlimited = r.unlimited or line.unlimited


def _dra_model(labels: dict[str, str], dra_node: DraNode) -> str:
    """A DRA node's model: its devices' productName, named as DCGM's and GFD's are."""
    return _node_model(labels, [{"model": d.model} for d in dra_node.devices if d.model])


def _line_sharing(
    resource: str, gpu_type: str, convention: str, labels: dict[str, str], node_replicas: int, brick_sharing: str
) -> tuple[int, str]:
    """(replicas, sharing strategy) of one resource a node serves. GFD labels each resource
    under its own name, before any rename (internal/lm/resource.go): nvidia.com/mig-1g.5gb.shared
    is described by nvidia.com/mig-1g.5gb.replicas and .sharing-strategy. A renamed resource
    or a plain one on a time-sliced node is replicated even where GFD's labels are missing."""
    if gpu_type not in (SHARED,) and not gpu_type.startswith("mig-"):
        return 1, SHARING_NONE
    base = resource.removesuffix(SHARED_SUFFIX)
    renamed = base != resource
    if convention == "brick":
        return (max(node_replicas, 1), brick_sharing) if gpu_type == SHARED else (1, SHARING_NONE)
    labelled = label_int(labels.get(f"{base}.replicas"), 0)
    strategy = labels.get(f"{base}.sharing-strategy", "")
    whole_shared = gpu_type == SHARED or (resource in (GPU, GPU_SHARED) and node_replicas > 1)
    replicas = labelled if labelled > 1 else (node_replicas if whole_shared else 1)
    if not (replicas > 1 or renamed or gpu_type == SHARED):
        return 1, SHARING_NONE
    return max(replicas, 1), strategy if strategy in (TIME_SLICING, MPS) else TIME_SLICING


def _ready(status: KubeObject) -> bool:
    conditions: list[KubeObject] = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True  # a node with no conditions reported (simulated) is taken as ready


def _node_model(labels: dict[str, str], devs: list[RawDevice]) -> str:
    """The node's GPU model, one name whichever source gave it (vocab.gpu_model_name), so
    the Dashboard groups a model into one row."""
    models = [vocab.gpu_model_name(d["model"]) for d in devs if d.get("model")]
    if models:
        return max(sorted(set(models)), key=models.count)
    product = vocab.gpu_model_name(labels.get(vocab.GPU_PRODUCT_LABEL, ""))
    return product or "Unknown GPU"


def _physical_from_mig(
    model: str, profile: str, resources: dict[str, ResourceLine], replicas: int, labels: dict[str, str]
) -> int:
    """Physical GPUs under MIG strategy single: the MIG devices (the node's capacity, else
    GFD's overridden gpu.count) over the most one GPU of the model holds (mig.py), at least
    one GPU per device's share of the GPU's seven (or four) compute slices."""
    lines = [r for r in resources.values() if not r.stale and r.gpu_type == "mig-" + profile]
    # each line's own replicas: time-sliced MIG devices are replicas x devices
    served = sum(math.ceil(r.capacity / max(r.replicas if r.replicas > 1 else replicas, 1)) for r in lines)
    devices = served or label_int(labels.get(vocab.GPU_COUNT_LABEL), 0)
    if not devices or not profile:
        return 0
    per_gpu = mig_geometry.max_per_gpu(model, profile) or max(1, 7 // (mig_geometry.compute_slices(profile) or 7))
    return math.ceil(devices / per_gpu)


def _physical_from_allocatable(resources: dict[str, ResourceLine], replicas: int) -> int:
    whole = sum(r.capacity for r in resources.values() if not r.stale and r.gpu_type in (EXCLUSIVE, SHARED))
    return math.ceil(whole / replicas) if whole else 0


def _derived_physical_used(resources: dict[str, ResourceLine], replicas: int, physical: int) -> int:
    """Without per-device data: a lower bound from pod requests."""
    used = 0
    for r in resources.values():
        if r.gpu_type == EXCLUSIVE:
            used += r.requested
        elif r.gpu_type == SHARED:
            used += math.ceil(r.requested / max(r.replicas if r.replicas > 1 else replicas, 1))
        elif r.gpu_type.startswith("mig-") and r.requested:
            used += 1
    return min(used, physical)


def _devices_in_use(
    devs: list[RawDevice], resources: dict[str, ResourceLine], replicas: int, device_source: str
) -> frozenset[int]:
    """Indexes of the devices in use. DCGM names the pods per device; the twin has no
    such mapping, so requests are packed onto devices in order, as the plugin allocates."""
    if not devs:
        return frozenset()
    if device_source == "dcgm":
        return frozenset(i for i, d in enumerate(devs) if d.get("pods"))
    used: set[int] = set()
    whole = [i for i, d in enumerate(devs) if not d.get("mig")]
    for r in resources.values():
        if r.stale or not r.requested:
            continue
        if r.gpu_type == EXCLUSIVE:
            used.update(whole[: r.requested])
        elif r.gpu_type == SHARED:
            used.update(whole[: math.ceil(r.requested / max(replicas, 1))])
        elif r.gpu_type.startswith("mig-"):
            # replicated MIG devices: a device holds ``replicas`` requests
            profile, left = r.gpu_type[4:], math.ceil(r.requested / max(r.replicas, 1))
            for i, d in enumerate(devs):
                n = (d.get("mig") or []).count(profile)
                if n and left > 0:
                    used.add(i)
                    left -= n
    return frozenset(used)


# --- the whole cluster --------------------------------------------------------

# (model, GPU type, sharing strategy, renamed resource or ""): a Dashboard row. A resource the
# plugin renamed (renameByDefault: <resource>.shared) is a row of its own: a quota of it is not
# one of the plain resource, though both name the same GPUs.
RowKey: TypeAlias = tuple[str, str, str, str]
# One served resource of a node: (row, resource, allocatable, requested, cordoned,
# [node, replicas, logical] when time-sliced without a rename, [node, profile, logical] under MIG single)
Served: TypeAlias = tuple[RowKey, str, int, int, bool, tuple[str, int, int] | None, tuple[str, str, int] | None]
Contribution: TypeAlias = tuple[list[Served], list[tuple[RowKey, int]]]  # see _contribution
# compute's memo: node name -> (what the line is made of, the line, its contribution)
MemoEntry: TypeAlias = tuple[tuple[Any, ...], NodeLedger, Contribution]


def has_node(snapshot: Snapshot, name: str) -> bool:
    """Whether the cluster has a node of that name, GPU node or not."""
    return any(n["metadata"]["name"] == name for n in snapshot.nodes)


def allocated_by_namespace(quotas: list[KubeObject]) -> dict[str, dict[str, int]]:
    """Quota ceilings: hard ``requests.nvidia.com/*`` per namespace."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for q in quotas:
        ns = q["metadata"].get("namespace", "")
        hard = (q.get("spec") or {}).get("hard") or (q.get("status") or {}).get("hard") or {}
        for key, value in hard.items():
            if key.startswith("requests." + NVIDIA):
                res = key[len("requests.") :]
                out[ns][res] = out[ns].get(res, 0) + quantity(value)
            elif is_dra_resource(key):  # <class>.deviceclass.resource.k8s.io/devices: devices of a class
                out[ns][key] = out[ns].get(key, 0) + quantity(value)
    return dict(out)


def _node_requests(pods: Iterable[KubeObject]) -> dict[str, int]:
    """nvidia.com/* requested on a node by its pods that are not finished, of the device plugin:
    not what the scheduler gave a container through a DRA claim instead (below)."""
    out: dict[str, int] = defaultdict(int)
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for res, amount in _plugin_requests(pod).items():
            out[res] += amount
    return dict(out)


def _plugin_requests(pod: KubeObject) -> dict[str, int]:
    """A pod's nvidia.com/* requests less those served by DRA: with a DeviceClass's
    extendedResourceName (KEP-5004) the scheduler allocates such a request from a claim it makes
    for the pod and maps each container's resource to it in status.extendedResourceClaimStatus
    .requestMappings; the node need not list the resource at all."""
    mappings = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("requestMappings") or []
    served = {(m.get("containerName"), m.get("resourceName")) for m in mappings if isinstance(m, dict)}
    if not served:
        return pod_gpu_requests(pod)
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        kept = {
            k: v for k, v in pod_gpu_requests({"spec": {"containers": [c]}}).items() if (c.get("name"), k) not in served
        }
        for res, amount in kept.items():
            out[res] = out.get(res, 0) + amount
    return out


def renamed_apart(resource: str) -> str:
    """The part of a Dashboard row's key that keeps a renamed resource apart: its name when the
    device plugin renamed it (renameByDefault), else ""."""
    return resource if resource.endswith(SHARED_SUFFIX) and not is_dra_resource(resource) else ""


def _contribution(n: NodeLedger) -> Contribution:
    """What one node adds to the totals, worked out once per line: (served, physical).
    served: [((model, type), resource, allocatable, requested, cordoned, shared_on entry or
    None)] per resource it serves; physical: [((model, type), GPUs)], counted into a row
    only if that row exists once this node's resources are in."""
    served: list[Served] = []
    for r in n.served:
        if is_dra_resource(r.resource):
            continue  # per type below, from the driver's devices
        if not (r.capacity or r.allocatable or r.requested):
            continue  # e.g. "nvidia.com/gpu: 0" on a MIG node: nothing to show
        # time-sliced without a rename (GPU Operator): the resource row says where
        shared = (
            (n.name, n.replicas, r.allocatable)
            if (r.gpu_type == SHARED and gpu_type_of(r.resource) != SHARED and r.allocatable)
            else None
        )
        mig_on = (
            (n.name, n.mig_profile, r.allocatable)
            if (n.mig_profile and r.gpu_type.startswith("mig-") and r.resource in (GPU, GPU_SHARED) and r.allocatable)
            else None
        )
        row_key = (n.model, r.gpu_type, r.sharing_strategy, renamed_apart(r.resource))
        served.append((row_key, r.resource, r.allocatable, r.requested, n.cordoned, shared, mig_on))
    physical: dict[RowKey, int] = {}
    dra_physical: list[tuple[RowKey, int]] = []
    for line in dra_lines(n.dra) if n.dra is not None else []:
        row_key = (n.model, line.gpu_type, line.sharing_strategy, "")
        served.append((row_key, line.resource, line.logical, line.used, n.cordoned, None, None))
        if n.stack == "dra":
            dra_physical.append((row_key, line.gpus))
    if n.stack == "dra":
        return served, dra_physical
    if n.mig_error:  # the plugin refuses the node: its GPUs are of no type it offers
        return served, []
    sharing_of = _sharing_by_type(n)
    if not sharing_of:  # nothing served (the plugin refused its config): its GPUs are in no row
        return served, []
    for d in n.raw_devices:
        mig = d.get("mig")
        if mig:
            gtype = "mig-" + mig[0]
        else:
            whole = [t for t in (SHARED, EXCLUSIVE) if t in sharing_of]
            gtype = whole[0] if whole else (SHARED if n.mode in REPLICATED_MODES else EXCLUSIVE)
        sharing, renamed = sharing_of.get(gtype, (SHARING_NONE, ""))
        key = (n.model, gtype, sharing, renamed)
        physical[key] = physical.get(key, 0) + 1
    if not n.raw_devices:
        physical.update(_physical_by_type(n))
    return served, list(physical.items())


def _sharing_by_type(n: NodeLedger) -> dict[str, tuple[str, str]]:
    """GPU type -> (how the node shares it, its renamed resource or ""), for the types it serves."""
    out: dict[str, tuple[str, str]] = {}
    for r in n.served:
        if (r.capacity or r.allocatable) and not is_dra_resource(r.resource):
            out.setdefault(r.gpu_type, (r.sharing_strategy, renamed_apart(r.resource)))
    return out


def _physical_by_type(n: NodeLedger) -> dict[RowKey, int]:
    """A node's physical GPUs per model × type without per-device data: whole GPUs first
    (exclusive, or shared over the replicas), then each MIG profile's GPUs from the MIG
    geometry (its devices over the most one GPU holds), within the node's physical count."""
    plugin_lines = [r for r in n.served if not is_dra_resource(r.resource)]
    mig_lines = [r for r in plugin_lines if r.gpu_type.startswith("mig-") and r.capacity]
    if not mig_lines:
        whole_line = next((r for r in plugin_lines if r.gpu_type in (EXCLUSIVE, SHARED) and r.capacity), None)
        if whole_line is not None:
            key = (n.model, whole_line.gpu_type, whole_line.sharing_strategy, renamed_apart(whole_line.resource))
            return {key: n.physical}
        return {(n.model, SHARED if n.mode in REPLICATED_MODES else EXCLUSIVE, n.sharing_strategy, ""): n.physical}
    out: dict[RowKey, int] = {}
    left = n.physical
    for r in plugin_lines:
        if r.gpu_type in (EXCLUSIVE, SHARED) and r.capacity:
            per_gpu = max(r.replicas if r.replicas > 1 else (n.replicas if r.gpu_type == SHARED else 1), 1)
            whole = min(left, math.ceil(r.capacity / per_gpu))
            key = (n.model, r.gpu_type, r.sharing_strategy, renamed_apart(r.resource))
            out[key] = out.get(key, 0) + whole
            left -= whole
    for r in mig_lines:
        profile = r.gpu_type[4:]
        # replicated MIG devices (time-slicing or MPS, under single or mixed): replicas x devices
        per_device = r.replicas if r.replicas > 1 else (n.replicas if n.mig_profile else 1)
        devices = math.ceil(r.capacity / max(per_device, 1))
        need = mig_geometry.physical_from_mig_devices(n.model, profile, devices) or 1
        gpus = min(left, need)
        key = (n.model, r.gpu_type, r.sharing_strategy, renamed_apart(r.resource))
        out[key] = out.get(key, 0) + gpus
        left -= gpus
    if left > 0:  # GPUs no served resource accounts for (idle MIG GPUs): the first MIG row
        first = mig_lines[0]
        key = (n.model, first.gpu_type, first.sharing_strategy, renamed_apart(first.resource))
        out[key] = out.get(key, 0) + left
    return out


def compute(snapshot: Snapshot, memo: dict[str, MemoEntry] | None = None) -> Ledger:
    """The ledger for a snapshot (brickadmin.cluster.snapshot.Snapshot).

    ``memo``: a dict the caller keeps from one call to the next (the cluster view's
    publish). A node's line is then computed again only when the node or anything it is
    made of (its pods, plugin pods, devices, the time-slicing replicas) differs from the
    last call. A snapshot's objects are never changed in place (the watcher replaces an
    object when it changes), so comparing them is cheap: equal objects are mostly the
    same objects."""
    pods_by_node: dict[str, list[KubeObject]] = defaultdict(list)
    for pod in snapshot.gpu_pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            pods_by_node[node].append(pod)

    plugin_pods_by_node: dict[str, list[KubeObject]] = defaultdict(list)
    for p in snapshot.plugin_pods:
        plugin_pods_by_node[(p.get("spec") or {}).get("nodeName", "")].append(p)
    ts_replicas = brick_replicas(snapshot.plugin_configmaps)
    brick_sharing = brick_sharing_strategy(snapshot.plugin_configmaps)
    mps_replicas = brick_mps_replicas(snapshot.plugin_configmaps)
    dra_inputs = (
        inputs_by_node(
            snapshot.resource_slices,
            snapshot.resource_claims,
            snapshot.device_taint_rules,
            getattr(snapshot, "claims_by_pool", None),
        )
        if snapshot.resource_slices
        else {}
    )

    kept = {}
    for node in snapshot.nodes:
        name = node["metadata"]["name"]
        pods, plugin_pods = pods_by_node.get(name, []), plugin_pods_by_node.get(name, [])
        dra_in = dra_inputs.get(name)
        devices = snapshot.devices.get(name)
        key = (
            node,
            pods,
            plugin_pods,
            devices,
            snapshot.device_source,
            ts_replicas,
            brick_sharing,
            dra_in,
            mps_replicas,
        )
        last = memo.get(name) if memo is not None else None
        if last is not None and last[0] == key:
            entry = last
        elif not is_gpu_node(node) and dra_in is None:
            continue
        else:
            convention_guess = "brick" if (node["metadata"].get("labels") or {}).get(GPU_TYPE_LABEL) else "other"
            line = node_ledger(
                node,
                _node_requests(pods),
                snapshot.devices.get(name),
                snapshot.device_source,
                _plugin_state(name, plugin_pods_by_node, convention_guess),
                ts_replicas,
                pods=pods,
                plugin_pods=plugin_pods,
                brick_sharing=brick_sharing,
                dra_node=dra_node(dra_in) if dra_in is not None else None,
                mps_replicas=mps_replicas,
            )
            entry = (key, line, _contribution(line))
        kept[name] = entry
    if memo is not None:
        memo.clear()
        memo.update(kept)
    entries = sorted(kept.values(), key=lambda e: e[1].name)
    nodes = [e[1] for e in entries]

    # The totals: the nodes' contributions added up in the nodes' order (a model × type row
    # counts a node's physical GPUs only once some node served that type: see _contribution).
    by_type: dict[RowKey, TypeRow] = {}
    by_resource: dict[str, ResourceRow] = {}
    for _key, line, (served, physical) in entries:
        for row_key, resource, allocatable, requested, cordoned, shared_on, mig_on in served:
            row = by_type.get(row_key)
            if row is None:
                row = by_type[row_key] = TypeRow(row_key[0], row_key[1], resource, sharing_strategy=row_key[2])
            row.logical += allocatable
            row.requested += requested
            row.nodes += 1
            if is_dra_resource(resource):
                row.dra_logical += allocatable
                row.unlimited = row.unlimited or bool(line.resources[resource].unlimited)
            if cordoned:
                row.cordoned_logical += allocatable
            rrow = by_resource.get(resource)
            if rrow is None:
                rrow = by_resource[resource] = ResourceRow(resource)
            rrow.logical += allocatable
            rrow.requested += requested
            if shared_on:
                rrow.shared_logical += allocatable
                rrow.shared_on.append(list(shared_on))
            if mig_on:
                rrow.mig_on.append(list(mig_on))
            if row_key[2] == MPS and allocatable:
                rrow.mps_on.append([line.name, line.resources[resource].replicas, allocatable])
        for row_key, count in physical:
            if row_key in by_type:
                by_type[row_key].physical += count
                if line.stack == "dra":
                    by_type[row_key].dra_physical += count

    allocated = allocated_by_namespace(snapshot.quotas)
    for per_ns in allocated.values():
        for res, amount in per_ns.items():
            by_resource.setdefault(res, ResourceRow(res)).allocated += amount

    type_order = {EXCLUSIVE: 0, SHARED: 1}
    rows = sorted(
        by_type.values(),
        key=lambda r: (
            r.model,
            type_order.get(r.gpu_type, 2),
            r.gpu_type,
            SHARING_STRATEGIES.index(r.sharing_strategy) if r.sharing_strategy in SHARING_STRATEGIES else 3,
            renamed_apart(r.resource) != "",  # the plain resource's row first, its renamed one after
        ),
    )
    res_rows = sorted(by_resource.values(), key=lambda r: (r.resource != GPU, r.resource != GPU_SHARED, r.resource))
    return Ledger(
        nodes=nodes,
        by_type=rows,
        by_resource=res_rows,
        allocated_by_namespace=allocated,
        device_source=snapshot.device_source,
    )


# --- stored form (the materialised view, gpus/view_publish.py) ---------------------


def node_to_dict(n: NodeLedger) -> dict[str, Any]:
    """A node's ledger line as JSON-ready data; ``node_from_dict`` gives it back equal."""
    return {
        "name": n.name,
        "model": n.model,
        "convention": n.convention,
        "mode": n.mode,
        "sharing_label": n.sharing_label,
        "replicas": n.replicas,
        "configured_replicas": n.configured_replicas,
        "ready": n.ready,
        "cordoned": n.cordoned,
        "tainted": n.tainted,
        "plugin_state": n.plugin_state,
        "resources": [
            [
                r.resource,
                r.gpu_type,
                r.capacity,
                r.allocatable,
                r.requested,
                r.stale,
                r.replicas,
                r.sharing_strategy,
                r.unlimited,
            ]
            for r in n.resources.values()
        ],
        "raw_devices": n.raw_devices,
        "in_use": sorted(n.in_use),
        "physical": n.physical,
        "physical_used": n.physical_used,
        "physical_source": n.physical_source,
        "labels": n.labels,
        "raw_taints": n.raw_taints,
        "raw_pods": n.raw_pods,
        "raw_plugin_pods": n.raw_plugin_pods,
        "mig_profile": n.mig_profile,
        "mig_error": n.mig_error,
        "sharing_strategy": n.sharing_strategy,
        "stack": n.stack,
        "dra": n.dra.to_dict() if n.dra is not None else None,
    }


def node_from_dict(d: dict[str, Any]) -> NodeLedger:
    fields = dict(d)
    fields["resources"] = {r[0]: ResourceLine(*r) for r in d["resources"]}
    fields["in_use"] = frozenset(d["in_use"])
    fields["dra"] = DraNode.from_dict(d["dra"]) if d.get("dra") else None
    return NodeLedger(**fields)


# --- physical GPUs per logical unit (showback in physical GPU-hours) ----------------


def physical_share(n: NodeLedger, resource: str) -> float:
    """The physical GPUs one unit of ``resource`` is on node ``n``: an exclusive GPU 1, a
    time-sliced replica 1/replicas, a MIG instance its compute slices over its GPU's
    (mig.gpu_fraction), over the replicas too where a MIG-only node time-slices its devices.
    0 for a resource the node does not serve (stale: it holds no GPU)."""
    line = n.resources.get(resource)
    if line is None or line.stale:
        return 0.0
    if is_dra_resource(resource):
        return _dra_physical_share(n, resource)
    if line.gpu_type == EXCLUSIVE:
        return 1.0
    if line.gpu_type == SHARED:
        return 1.0 / max(n.replicas, 1)
    if line.gpu_type.startswith("mig-"):
        share = mig_geometry.gpu_fraction(n.model, line.gpu_type[4:])
        if line.replicas > 1:  # time-sliced or MPS MIG devices, under single or mixed
            return share / line.replicas
        replicated = bool(n.mig_profile) and resource in (GPU, GPU_SHARED) and n.replicas > 1
        return share / n.replicas if replicated else share
    return 0.0


def _dra_physical_share(n: NodeLedger, resource: str) -> float:
    """One unit of a DeviceClass on a DRA node: its GPUs over the units they offer (a whole GPU
    1, a static MIG device its GPU over the GPU's devices, a share 1/N); unlimited shares count
    the claims held as the units."""
    lines = [x for x in dra_lines(n.dra) if x.resource == resource] if n.dra is not None else []
    units = sum(x.logical for x in lines)
    return sum(x.gpus for x in lines) / units if units else 0.0


def physical_shares(nodes: Iterable[NodeLedger]) -> dict[str, float]:
    """Per resource, the physical GPUs one unit of a quota of it stands for: a quota names a
    resource, never a node, so it is the nodes' shares weighted by what each offers of it
    (allocatable). A resource no node offers is absent (its quota holds no GPU)."""
    units: dict[str, int] = defaultdict(int)
    physical: dict[str, float] = defaultdict(float)
    for n in nodes:
        for r in n.served:
            if r.allocatable > 0:
                units[r.resource] += r.allocatable
                physical[r.resource] += r.allocatable * physical_share(n, r.resource)
    return {res: physical[res] / units[res] for res in units}
