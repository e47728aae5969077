"""What the cluster watcher keeps of each object: pure functions, no Django.

The watcher holds the whole cluster in memory (5,000 nodes, 150,000 pods), so it keeps
only the pods the product looks at and, of every object, only the fields that the
ledger (gpus/ledger.py), the health checks (gpus/health.py), the conformance evidence
(gpus/evidence.py), the node pages and the procedures' node choices read. The objects
stay Kubernetes-shaped, so the ledger cannot tell a projection from the full object
(tests/cluster/test_projection.py checks that on every scenario).

- Node: name, labels, creationTimestamp (no object keeps its resourceVersion); spec.unschedulable and taints; status
  capacity, allocatable, the conditions' type/status/reason, nodeInfo.kubeletVersion.
  Not kept: annotations, managedFields, images, addresses, daemonEndpoints.
- Pod (only GPU-requesting pods, pods using DRA ResourceClaims, device-plugin pods and the GPU
  Operator's mig-manager pods):
  name, namespace, uid (not of a pod whose only GPU tie is a claim: nothing reads it), labels,
  ownerReferences, creation/deletion timestamps; spec.nodeName
  and, per container, its name, nvidia.com/* requests and limits and the claims it uses
  (resources.claims); spec.resourceClaims; what quota scopes read (spec.priorityClassName,
  activeDeadlineSeconds, the cross-namespace pod affinity terms, status.qosClass: the API
  server's, else computed as it computes it); status phase, reason, message,
  the Ready and PodScheduled conditions (the latter's message while the pod is not
  scheduled: why it waits) and each container's state summary (for failed-pod diagnosis
  and a waiting container's reason, and its allocatedResourcesStatus: the health the kubelet
  reports of the devices it was given, DRA's and the device plugin's); of each init container
  only that health; status.resourceClaimStatuses and extendedResourceClaimStatus (the
  claims made for the pod and for its extended resources).
- ResourceQuota: name, namespace; spec and status whole (a few keys).
- Namespace: name and labels (a Workspace's owner).
- DaemonSet and ConfigMap of the device plugin / the GPU Operator: whole (the manifest
  drift compares their spec and data), except ``metadata.managedFields``, the metadata that
  every write changes (resourceVersion, generation) and a DaemonSet's status (its controller
  rewrites the pod counts whenever a plugin pod comes or goes; the pods themselves are kept).
- Dynamic Resource Allocation (resource.k8s.io, counted by brickadmin/cluster/dra.py):
  ResourceSlice: name, uid, ownerReferences and spec whole; ResourceClaim: name, namespace,
  annotations, ownerReferences, spec.devices, status.allocation (not its allocationTimestamp
  nor its results' shareID), reservedFor (the pods by name, not their uids) and devices; not
  its uid (nothing reads a claim's own uid);
  DeviceClass and DeviceTaintRule: name and spec; ResourceClaimTemplate: name, namespace, spec.
- Kueue (where the cluster runs it): ClusterQueue: name, labels, spec whole, status's reservation,
  usage, Workload counts and conditions; Workload: name, namespace, uid, ownerReferences, queue,
  priority, podSets' counts and GPU requests, status conditions (with lastTransitionTime and
  message), schedulingStats.evictions and admission.clusterQueue.

Sharing (``compact``): a kept Pod, Node, ResourceSlice or ResourceClaim is rebuilt with its
keys and strings interned (not uids: no two objects hold one alike) and every sub-structure that
holds no identity (no uid or claim name) shared with the equal ones already kept: the requests of
150,000 alike claims, the node selector of an allocation, a device's attributes, a pod's
containers are one object each. Each dict kept is one of a shape's (its keys in their order)
whose keys table CPython shares (``_shaped``), each list is no longer than its items.
Readers never write into the view, so one object can serve many; equality is unchanged.

What the view keeps is what decides whether an event is worth a new generation: the watcher
compares an object's projection before and after each event and publishes only when it
differs, so a kubelet's heartbeat (a condition's lastHeartbeatTime), a resourceVersion-only
write or a managedFields timestamp changes nothing.
"""

from __future__ import annotations

import sys

from . import quotascope
from .base import DRA_KINDS, KUEUE_API_VERSION
from .deviceplugin import is_mps_control_daemon, pod_gpu_requests
from .vocabulary import MANAGED_BY, MANAGED_BY_LABEL, NVIDIA_PREFIX, PLUGIN_NAMESPACE

OPERATOR_NAMESPACE = "gpu-operator"
TERMINAL_PHASES = ("Succeeded", "Failed")

# Not resourceVersion: it changes with every write, also the ones that change nothing kept
# here (a kubelet's status heartbeat), and the view would then be published again for nothing.
_META_KEEP = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")


def _meta(obj: dict, *, labels: bool = True, owners: bool = False, annotations: bool = False, uid: bool = True) -> dict:
    src = obj.get("metadata") or {}
    out = {k: src[k] for k in _META_KEEP if k in src and (uid or k != "uid")}
    if labels and src.get("labels"):
        out["labels"] = dict(src["labels"])
    if annotations and src.get("annotations"):
        out["annotations"] = dict(src["annotations"])
    if owners and src.get("ownerReferences"):
        out["ownerReferences"] = [
            {k: o[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in o}
            for o in src["ownerReferences"]
        ]
    return out


def _head(obj: dict, kind: str, api_version: str = "v1") -> dict:
    return {"apiVersion": obj.get("apiVersion") or api_version, "kind": obj.get("kind") or kind}


# --- which pods -------------------------------------------------------------------


def is_gpu_pod(pod: dict) -> bool:
    """Whether a pod's containers request any nvidia.com/* resource (any phase)."""
    return bool(pod_gpu_requests(pod))


def is_plugin_pod(pod: dict) -> bool:
    """A device-plugin pod: every pod of the BRICK plugin's namespace but NVIDIA's MPS
    control daemon's, and the GPU
    Operator's pods whose ``app`` label names the device plugin."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace", "")
    if ns == PLUGIN_NAMESPACE:
        return not is_mps_control_daemon(pod)  # the MPS server serves no resource: not a plugin
    return ns == OPERATOR_NAMESPACE and "device-plugin" in (meta.get("labels") or {}).get("app", "")


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def uses_claims(pod: dict) -> bool:
    """Whether a pod uses DRA ResourceClaims (spec.resourceClaims), whatever it requests."""
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def is_mig_manager_pod(pod: dict) -> bool:
    """A pod of the GPU Operator's mig-manager (app=nvidia-mig-manager in its namespace)."""
    meta = pod.get("metadata") or {}
    return meta.get("namespace") == OPERATOR_NAMESPACE and "mig-manager" in (meta.get("labels") or {}).get("app", "")


def reports_device_health(pod: dict) -> bool:
    """Whether the kubelet reports the health of a device the pod holds (allocatedResourcesStatus
    in a container's or an init container's status): few pods do, and the health checks read those."""
    status = pod.get("status") or {}
    return any(
        isinstance(cs, dict) and cs.get("allocatedResourcesStatus")
        for key in ("containerStatuses", "initContainerStatuses")
        for cs in status.get(key) or ()
    )


def keeps_pod(pod: dict) -> bool:
    return is_gpu_pod(pod) or is_plugin_pod(pod) or uses_claims(pod) or is_mig_manager_pod(pod)


# A pod the watcher keeps names an nvidia.com/ resource or one of the two namespaces in its
# JSON (the API server escapes neither "/" nor "-"); on a large cluster most pods request no
# GPU, and decoding their events was most of the watcher's work. GPU requests and a pod's
# namespace cannot change, so a kept pod's later events (and its DELETED) are decoded too.
# "nvidia" covers both "nvidia.com/" and "brick-nvidia"; a pod that merely mentions it (an
# image name, a toleration) is decoded and dropped, as before.
_NVIDIA = NVIDIA_PREFIX.split(".", 1)[0].encode()
_OPERATOR = f'"{OPERATOR_NAMESPACE}"'.encode()
# a pod using DRA claims names them in spec.resourceClaims (immutable, like its requests)
_CLAIMS = b'"resourceClaims"'
assert _NVIDIA in NVIDIA_PREFIX.encode() and _NVIDIA in PLUGIN_NAMESPACE.encode()


def _pod_line_worth_decoding(line: bytes) -> bool:
    return _NVIDIA in line or _OPERATOR in line or _CLAIMS in line


def worth_decoding(kind: str):
    """For the watch: ``(raw event bytes) -> False`` when the event's object is certainly
    one ``project`` drops (decoding it can be skipped), or None to decode everything."""
    return _pod_line_worth_decoding if kind == "Pod" else None


# --- the projections -----------------------------------------------------------------


def node(obj: dict) -> dict:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out = {**_head(obj, "Node"), "metadata": _meta(obj)}
    s = {}
    if spec.get("unschedulable"):
        s["unschedulable"] = True
    if spec.get("taints"):
        s["taints"] = [dict(t) for t in spec["taints"]]
    out["spec"] = s
    st = {}
    for section in ("capacity", "allocatable"):
        if section in status:
            st[section] = dict(status[section] or {})
    if "conditions" in status:
        st["conditions"] = [
            {k: c[k] for k in ("type", "status", "reason") if k in c} for c in status.get("conditions") or []
        ]
    version = (status.get("nodeInfo") or {}).get("kubeletVersion")
    if version:
        st["nodeInfo"] = {"kubeletVersion": version}
    out["status"] = st
    return out


def _container(c: dict) -> dict:
    out = {"name": c.get("name", "")}
    res = c.get("resources") or {}
    slim = {}
    for section in ("requests", "limits"):
        picked = {k: v for k, v in (res.get(section) or {}).items() if k.startswith(NVIDIA_PREFIX)}
        if picked:
            slim[section] = picked
    if res.get("claims"):
        slim["claims"] = [dict(c) for c in res["claims"]]
    if slim:
        out["resources"] = slim
    return out


def _container_status(cs: dict) -> dict:
    out = {k: cs[k] for k in ("name", "ready", "restartCount") if k in cs}
    for key in ("state", "lastState"):
        state = cs.get(key) or {}
        if state:
            ((which, detail),) = list(state.items())[:1]
            detail = detail or {}
            out[key] = {which: {k: detail[k] for k in ("reason", "message", "exitCode") if k in detail}}
    if cs.get("allocatedResourcesStatus"):  # the health of its devices (KEP-4680)
        out["allocatedResourcesStatus"] = cs["allocatedResourcesStatus"]
    return out


def _init_container_health(cs: dict) -> dict | None:
    """Of an init container (a sidecar may hold a GPU): its name and its devices' health, if reported."""
    if not cs.get("allocatedResourcesStatus"):
        return None
    return {"name": cs.get("name", ""), "allocatedResourcesStatus": cs["allocatedResourcesStatus"]}


def _condition(c: dict) -> dict:
    """Type, status, reason; and the message of a PodScheduled that is not True: the
    scheduler writes there what its FailedScheduling event says (why the pod waits)."""
    out = {k: c[k] for k in ("type", "status", "reason") if k in c}
    if c.get("type") == "PodScheduled" and c.get("status") != "True" and c.get("message"):
        out["message"] = c["message"][:2000]
    return out


def pod(obj: dict) -> dict:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    s = {"containers": [_container(c) for c in spec.get("containers") or []]}
    if spec.get("nodeName"):
        s["nodeName"] = spec["nodeName"]
    if spec.get("resourceClaims"):
        s["resourceClaims"] = [dict(c) for c in spec["resourceClaims"]]
    # what a ResourceQuota's scopes read of it (brickadmin/cluster/quotascope.py)
    for key in ("priorityClassName", "activeDeadlineSeconds"):
        if key in spec:
            s[key] = spec[key]
    affinity = quotascope.cross_namespace_affinity(spec)
    if affinity:
        s["affinity"] = affinity
    st = {k: status[k] for k in ("phase", "reason", "message") if k in status}
    st["qosClass"] = status.get("qosClass") or quotascope.qos_class(spec)  # the containers' cpu/memory are not kept
    ready = [_condition(c) for c in status.get("conditions") or [] if c.get("type") in ("Ready", "PodScheduled")]
    if ready:
        st["conditions"] = ready
    if status.get("containerStatuses"):
        st["containerStatuses"] = [_container_status(cs) for cs in status["containerStatuses"]]
    init = [h for h in map(_init_container_health, status.get("initContainerStatuses") or []) if h]
    if init:
        st["initContainerStatuses"] = init
    for key in ("resourceClaimStatuses", "extendedResourceClaimStatus"):
        if status.get(key):
            st[key] = status[key]
    # A pod whose only GPU tie is a claim keeps no uid: only an extended-resource claim's pod (one
    # asking nvidia.com/*) is read by it (dra.verified_pod_usage); every pod on DRA holds a claim.
    uid = bool(pod_gpu_requests(obj)) or not s.get("resourceClaims")
    return {**_head(obj, "Pod"), "metadata": _meta(obj, owners=True, uid=uid), "spec": s, "status": st}


def resource_quota(obj: dict) -> dict:
    out = {**_head(obj, "ResourceQuota"), "metadata": _meta(obj)}
    for key in ("spec", "status"):
        if key in obj:
            out[key] = obj[key]
    return out


def namespace(obj: dict) -> dict:
    """Name and labels (the Workspace owner): who holds a quota, whose pod failed."""
    return {**_head(obj, "Namespace"), "metadata": _meta(obj)}


def job(obj: dict) -> dict | None:
    """A Job the product made: its name and status (the Jobs pages show its state). Other
    Jobs of the cluster are not kept."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
        return None
    return {**_head(obj, "Job", "batch/v1"), "metadata": _meta(obj, labels=False), "status": obj.get("status") or {}}


# --- Dynamic Resource Allocation (resource.k8s.io) -----------------------------------


def resource_slice(obj: dict) -> dict:
    """A driver's published devices: name, uid, owner (the Node) and the spec whole."""
    return {
        **_head(obj, "ResourceSlice", DRA_KINDS["ResourceSlice"]),
        "metadata": _meta(obj, labels=False, owners=True),
        "spec": obj.get("spec") or {},
    }


def resource_claim(obj: dict) -> dict:
    """What a claim asks for (spec.devices) and what it was given: the scheduler's allocation,
    the pods it is reserved for, and the devices' status the driver writes."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    out = {
        **_head(obj, "ResourceClaim", DRA_KINDS["ResourceClaim"]),
        # not its uid: nothing reads it, and 150,000 claims each hold their own
        "metadata": _meta(obj, labels=False, owners=True, annotations=True, uid=False),
        "spec": {"devices": spec["devices"]} if "devices" in spec else {},
    }
    out["status"] = {k: status[k] for k in ("allocation", "reservedFor", "devices") if k in status}
    if isinstance(status.get("reservedFor"), list):  # the pods by name (claim_pods), not their uids
        out["status"]["reservedFor"] = [
            {k: v for k, v in r.items() if k != "uid"} if isinstance(r, dict) else r for r in status["reservedFor"]
        ]
    allocation = out["status"].get("allocation")
    if isinstance(allocation, dict):
        out["status"]["allocation"] = _allocation(allocation)
    return out


def claim_pools(claim: dict) -> set[tuple[str, str]]:
    """The (driver, pool) of every device a claim was allocated (status.allocation's results)."""
    allocation = (claim.get("status") or {}).get("allocation")
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    return {(str(r.get("driver", "")), str(r.get("pool", ""))) for r in results or () if isinstance(r, dict)}


def _allocation(allocation: dict) -> dict:
    """An allocation without what no page or count reads and each claim has its own of: when it
    was made and each result's shareID. Claims given shares of one device then hold one
    allocation alike, kept once (``compact``)."""
    out = {k: v for k, v in allocation.items() if k != "allocationTimestamp"}
    results = (out.get("devices") or {}).get("results") if isinstance(out.get("devices"), dict) else None
    if isinstance(results, list) and any(isinstance(r, dict) and "shareID" in r for r in results):
        slim = [{k: v for k, v in r.items() if k != "shareID"} if isinstance(r, dict) else r for r in results]
        out["devices"] = {**out["devices"], "results": slim}
    return out


def _named_spec(obj: dict, kind: str) -> dict:
    """DeviceClass, ResourceClaimTemplate, DeviceTaintRule: name (and namespace) and spec."""
    return {**_head(obj, kind, DRA_KINDS[kind]), "metadata": _meta(obj, labels=False), "spec": obj.get("spec") or {}}


# --- Kueue (kueue.x-k8s.io, brickadmin/cluster/kueue.py reads them) -----------------------


def _kueue_condition(c: dict) -> dict:
    """What the pages and the eviction records read of a Kueue condition: its message says why
    a Workload waits or who preempted it, and "Previously: ..." once it holds quota again."""
    out = {k: c[k] for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
    if c.get("message"):
        out["message"] = str(c["message"])[:2000]
    return out


_QUEUE_STATUS = ("flavorsReservation", "flavorsUsage", "pendingWorkloads", "reservingWorkloads", "admittedWorkloads")


def cluster_queue(obj: dict) -> dict:
    """A ClusterQueue: name, labels and spec whole (its quotas, cohort and limits); of its
    status what Kueue reserves and uses per flavor, the Workloads counted, and the conditions."""
    status = obj.get("status") or {}
    st = {k: status[k] for k in _QUEUE_STATUS if k in status}
    if status.get("conditions"):
        st["conditions"] = [_kueue_condition(c) for c in status["conditions"]]
    return {
        **_head(obj, "ClusterQueue", KUEUE_API_VERSION),
        "metadata": _meta(obj),
        "spec": obj.get("spec") or {},
        "status": st,
    }


def _pod_set(ps: dict) -> dict:
    """A podSet's name, count and its containers' GPUs (what an eviction took)."""
    spec = (ps.get("template") or {}).get("spec") or {}
    containers = [_container(c) for c in spec.get("containers") or []]
    return {k: ps[k] for k in ("name", "count") if k in ps} | {"template": {"spec": {"containers": containers}}}


def workload(obj: dict) -> dict:
    """A Workload: name, namespace, uid, owner; its queue, priority and podSets' GPUs; of its
    status the conditions (why it waits, its evictions), schedulingStats.evictions (every
    eviction counted) and which ClusterQueue admitted it."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    s = {k: spec[k] for k in ("queueName", "priority") if k in spec}
    s["podSets"] = [_pod_set(ps) for ps in spec.get("podSets") or []]
    st: dict = {}
    if status.get("conditions"):
        st["conditions"] = [_kueue_condition(c) for c in status["conditions"]]
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if evictions:
        st["schedulingStats"] = {"evictions": evictions}
    admitted_by = (status.get("admission") or {}).get("clusterQueue")
    if admitted_by:
        st["admission"] = {"clusterQueue": admitted_by}
    return {
        **_head(obj, "Workload", KUEUE_API_VERSION),
        "metadata": _meta(obj, labels=False, owners=True),
        "spec": s,
        "status": st,
    }


_KUEUE_PROJECTIONS = {"ClusterQueue": cluster_queue, "Workload": workload}


# Metadata every write changes (or the server's bookkeeping): never read from the view.
_WRITE_META = ("managedFields", "resourceVersion", "generation")


def whole(obj: dict, kind: str = "") -> dict:
    """DaemonSets and ConfigMaps: everything but managedFields (never read, often the bulk),
    the per-write metadata, and a DaemonSet's status (the drift compares spec and data; the
    pages read the plugin pods, not the DaemonSet's counts of them)."""
    meta = obj.get("metadata") or {}
    drop_status = (kind or obj.get("kind")) == "DaemonSet" and "status" in obj
    if not drop_status and not any(k in meta for k in _WRITE_META):
        return obj
    out = {k: v for k, v in obj.items() if not (drop_status and k == "status")}
    out["metadata"] = {k: v for k, v in meta.items() if k not in _WRITE_META}
    return out


# --- sharing what many kept objects hold alike -----------------------------------------

# A value under one of these keys names one object (or nearly: the second it was made), so what
# holds it is not looked up for sharing.
_IDENTITY_KEYS = frozenset({"uid", "resourceClaimName", "creationTimestamp", "uuid", "parentUUID"})
_UNIQUE = object()  # the key of what is not shared
# Values no two objects hold alike: not interned (an interned string costs a table entry)
_NOT_INTERNED = frozenset({"uid"})
# What each object holds for itself alone (the pods a claim is reserved for): not looked up for
# sharing (a table entry would cost more than it could save)
_OWN_KEYS = frozenset({"reservedFor"})
_shared: dict = {}  # frozen form -> the one kept instance
_shared_pruned_at = [1024]  # prune when the table doubles past this
_intern = sys.intern


def _canon(value):
    """(the instance to keep, its frozen form or _UNIQUE)."""
    t = type(value)
    if t is str:
        s = _intern(value)
        return s, s
    if t is dict:
        out, frozen, unique = {}, ["{"], False
        for k, v in value.items():
            k = _intern(k) if type(k) is str else k
            if k in _NOT_INTERNED and type(v) is str:
                c, f = v, _UNIQUE  # one object's own: interning it would only add a table entry
            elif k in _OWN_KEYS:
                c, f = _own(v), _UNIQUE
            else:
                c, f = _canon(v)
            out[k] = c
            if f is _UNIQUE or k in _IDENTITY_KEYS:
                unique = True
            elif not unique:
                frozen.append(k)
                frozen.append(f)
        return _one(out, frozen, unique)
    if t is list:
        items, frozen, unique = [None] * len(value), ["["], False  # no room to grow: kept as is
        for i, v in enumerate(value):
            c, f = _canon(v)
            items[i] = c
            if f is _UNIQUE:
                unique = True
            elif not unique:
                frozen.append(f)
        return _one(items, frozen, unique)
    if value is None or t is bool or t is int or t is float:
        return value, (t, value)  # 1, 1.0 and True are equal keys otherwise
    return value, _UNIQUE


def _own(value):
    """``value`` compacted as ``_canon`` does (its strings interned, what it holds shared), itself
    not looked up for sharing."""
    t = type(value)
    if t is list:
        items = [None] * len(value)
        for i, v in enumerate(value):
            items[i] = _own(v)
        return items
    if t is dict:
        return _shaped({(_intern(k) if type(k) is str else k): _canon(v)[0] for k, v in value.items()})
    return _canon(value)[0]


def _one(made, frozen: list, unique: bool):
    if unique:
        return _shaped(made), _UNIQUE
    key = tuple(frozen)
    kept = _shared.get(key)
    if kept is None:
        if len(_shared) > 2 * _shared_pruned_at[0]:
            _prune_shared()
        kept = _shared.setdefault(key, _shaped(made))
    # Its parent's key names it by identity: equal structures are this one instance, which lives
    # as long as any kept parent holds it (a parent is pruned first). Nested keys would hold a
    # copy of every child's key: at 5,000 DRA nodes more than the shared structures themselves.
    return kept, id(kept)


# Dicts of one shape (the same keys in the same order) kept as the attribute dicts of one class's
# instances: CPython shares their keys table, so each holds only its values, about 60 bytes less a
# dict (a third of a small one). They are plain dicts to every reader. A shape per key tuple, up to
# _SHAPES_MAX; keys like "__dict__" would be the class's own attributes, so such dicts stay plain.
_shapes: dict[tuple, type] = {}
_SHAPES_MAX = 2048
_SHAPE_KEYS_MAX = 30  # CPython shares at most this many keys


def _shaped(made):
    if type(made) is not dict or not made:
        return made
    keys = tuple(made)
    cls = _shapes.get(keys)
    if cls is None:
        if (
            len(_shapes) >= _SHAPES_MAX
            or len(keys) > _SHAPE_KEYS_MAX
            or not all(type(k) is str and not k.startswith("__") for k in keys)
        ):
            return made
        cls = _shapes.setdefault(keys, type("KeptShape", (), {}))
    holder = cls()
    for k, v in made.items():
        setattr(holder, k, v)
    return holder.__dict__


def _prune_shared() -> None:
    """Forget the shared instances no kept object holds any more (the table holds the only
    reference); a parent goes first, so its children go on a later pass. What a reference
    count reads for an instance held by the table alone is measured on a probe, the same way."""
    probe = ("prune probe",)
    _shared[probe] = []
    alone = sys.getrefcount(_shared[probe])
    del _shared[probe]
    for _ in range(32):  # deeper than any kept object
        gone = [k for k in list(_shared) if sys.getrefcount(_shared.get(k)) <= alone]
        for k in gone:
            _shared.pop(k, None)
        if not gone:
            break
    _shared_pruned_at[0] = max(1024, len(_shared))


def forget_shared() -> None:
    """Start the sharing table afresh (the benchmarks measure each kind alone)."""
    _shared.clear()
    _shared_pruned_at[0] = 1024


def compact(obj: dict) -> dict:
    """``obj`` with its strings interned and what it holds alike with other kept objects shared."""
    return _canon(obj)[0]


_COMPACTED = frozenset({"Pod", "Node", "ResourceSlice", "ResourceClaim"})


def project(kind: str, obj: dict) -> dict | None:
    """The projection of ``obj`` (of ``kind``), or None when the watcher does not keep it."""
    slim = project_unshared(kind, obj)
    return None if slim is None else kept(kind, slim)


def kept(kind: str, slim: dict) -> dict:
    """A projection as the watcher keeps it (compacted, for the kinds it keeps many of)."""
    return compact(slim) if kind in _COMPACTED else slim


def project_unshared(kind: str, obj: dict) -> dict | None:
    """The projection, each object holding its own copy of everything (what ``compact`` shares)."""
    if kind == "Pod":
        return pod(obj) if keeps_pod(obj) else None
    if kind == "Node":
        return node(obj)
    if kind == "ResourceQuota":
        return resource_quota(obj)
    if kind == "Namespace":
        return namespace(obj)
    if kind == "Job":
        return job(obj)
    if kind == "ResourceSlice":
        return resource_slice(obj)
    if kind == "ResourceClaim":
        return resource_claim(obj)
    if kind in DRA_KINDS:
        return _named_spec(obj, kind)
    if kind in _KUEUE_PROJECTIONS:
        return _KUEUE_PROJECTIONS[kind](obj)
    return whole(obj, kind)


def keeper(kind: str):
    """``keep`` for gateway.list_with_version: project, or drop."""
    return lambda obj: project(kind, obj)
