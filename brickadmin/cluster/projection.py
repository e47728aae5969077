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
  name, namespace, uid, labels, ownerReferences, creation/deletion timestamps; spec.nodeName
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
  uid, annotations, ownerReferences, spec.devices, status.allocation (not its allocationTimestamp
  nor its results' shareID), reservedFor and devices;
  DeviceClass and DeviceTaintRule: name and spec; ResourceClaimTemplate: name, namespace, spec.

Sharing (``compact``): a kept Pod, Node, ResourceSlice or ResourceClaim is rebuilt with its
keys and strings interned and every sub-structure that holds no identity (no uid or claim
name) shared with the equal ones already kept: the requests of 150,000 alike claims, the
node selector of an allocation, a device's attributes, a pod's containers are one object each.
Readers never write into the view, so one object can serve many; equality is unchanged.

What the view keeps is what decides whether an event is worth a new generation: the watcher
compares an object's projection before and after each event and publishes only when it
differs, so a kubelet's heartbeat (a condition's lastHeartbeatTime), a resourceVersion-only
write or a managedFields timestamp changes nothing.
"""

from __future__ import annotations

import sys

from . import quotascope
from .base import DRA_KINDS
from .deviceplugin import is_mps_control_daemon, pod_gpu_requests
from .vocabulary import MANAGED_BY, MANAGED_BY_LABEL, NVIDIA_PREFIX, PLUGIN_NAMESPACE

OPERATOR_NAMESPACE = "gpu-operator"
TERMINAL_PHASES = ("Succeeded", "Failed")

# Not resourceVersion: it changes with every write, also the ones that change nothing kept
# here (a kubelet's status heartbeat), and the view would then be published again for nothing.
_META_KEEP = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")


def _meta(obj: dict, *, labels: bool = True, owners: bool = False, annotations: bool = False) -> dict:
    src = obj.get("metadata") or {}
    out = {k: src[k] for k in _META_KEEP if k in src}
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
    return {**_head(obj, "Pod"), "metadata": _meta(obj, owners=True), "spec": s, "status": st}


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
        "metadata": _meta(obj, labels=False, owners=True, annotations=True),
        "spec": {"devices": spec["devices"]} if "devices" in spec else {},
    }
    out["status"] = {k: status[k] for k in ("allocation", "reservedFor", "devices") if k in status}
    allocation = out["status"].get("allocation")
    if isinstance(allocation, dict):
        out["status"]["allocation"] = _allocation(allocation)
    return out


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
            c, f = _canon(v)
            out[k] = c
            if f is _UNIQUE or k in _IDENTITY_KEYS:
                unique = True
            elif not unique:
                frozen.append(k)
                frozen.append(f)
        return _one(out, frozen, unique)
    if t is list:
        items, frozen, unique = [], ["["], False
        for v in value:
            c, f = _canon(v)
            items.append(c)
            if f is _UNIQUE:
                unique = True
            elif not unique:
                frozen.append(f)
        return _one(items, frozen, unique)
    if value is None or t is bool or t is int or t is float:
        return value, (t, value)  # 1, 1.0 and True are equal keys otherwise
    return value, _UNIQUE


def _one(made, frozen: list, unique: bool):
    if unique:
        return made, _UNIQUE
    key = tuple(frozen)
    kept = _shared.get(key)
    if kept is None:
        if len(_shared) > 2 * _shared_pruned_at[0]:
            _prune_shared()
        kept = _shared.setdefault(key, made)
    return kept, key


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
    return whole(obj, kind)


def keeper(kind: str):
    """``keep`` for gateway.list_with_version: project, or drop."""
    return lambda obj: project(kind, obj)
