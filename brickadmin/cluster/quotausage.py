"""What kube-controller-manager's resource quota controller writes in a ResourceQuota's status,
measured from the namespace's pods (and ResourceClaims). Pure.

The twin plays the controller with it (brickadmin/cluster/twin_controllers.py): every write of
a pod, a claim or a quota leaves each quota of the namespace with ``status.hard`` equal to its
``spec.hard`` and ``status.used`` as the controller would write it, so the pages read quota use
where the lab's control plane fills it.

Ported from Kubernetes (tests: tests/foundation/test_quota_usage.py, from pods_test.go):
- pkg/quota/v1/evaluator/core/pods.go: the pod evaluator. ``MatchingResources`` (podResources,
  the hugepages prefixes, ``isExtendedResourceNameForQuota``: a ``requests.`` key of a
  non-native resource or of a device class's implicit extended resource), ``PodUsageFunc``
  (``count/pods`` for every pod in storage; nothing else for a pod ``QuotaV1Pod`` leaves out:
  Succeeded or Failed, or deleted and past its grace period), ``podComputeUsageHelper``
  (cpu, memory and ephemeral-storage as the bare name, ``requests.`` and ``limits.``;
  hugepages as the bare name and ``requests.``; an extended resource as ``requests.`` only).
  A Pending pod is charged as a Running one.
- staging/src/k8s.io/component-helpers/resource/helpers.go: ``PodRequests``/``PodLimits``
  (containers summed; a regular init container counts as the largest one, with the sidecars
  started before it; a sidecar, an init container with ``restartPolicy: Always``, adds to the
  sum; pod-level cpu and memory replace the containers'; the pod's overhead added, to a limit
  only where one is set), after pkg/apis/core/v1/defaults.go (a container's request of a
  resource defaults to its limit).
- staging/src/k8s.io/apiserver/pkg/quota/v1/generic/evaluator.go ``CalculateUsageStats``
  (each tracked resource starts at 0; a pod counts when every scope of the quota selects it:
  quotascope.py) and resources.go ``CalculateUsage``, ``Add``, ``Mask``.
- pkg/controller/resourcequota/resource_quota_controller.go ``syncResourceQuota``: the last
  ``status.used`` updated with what the evaluators measured, masked to the keys of ``hard``.
- k8s.io/apimachinery/pkg/api/resource/quantity.go ``Quantity.Add``: a sum printed in the
  format of what was first added to zero (``64Gi``, not bytes).
- pkg/quota/v1/evaluator/core/persistent_volume_claims.go and resource_claims.go: the
  storage keys (the twin stores no PersistentVolumeClaim: 0) and ResourceClaims' devices
  (brickadmin/cluster/dra.py ``claim_device_usage``; a claim matches no quota scope).
Keys no evaluator here measures (object counts of other kinds, services) keep what the
status said.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from . import dra, quotascope
from .vocabulary import KubeObject, format_quantity, parse_quantity_format

Amount = tuple[decimal.Decimal, str]  # a resource.Quantity: its value and the format it prints in
ResourceList = dict[str, Amount]

REQUESTS_PREFIX = "requests."
LIMITS_PREFIX = "limits."
HUGEPAGES_PREFIX = "hugepages-"
POD_OBJECT_COUNT = "count/pods"
COMPUTE = ("cpu", "memory", "ephemeral-storage")
# pods.go podResources
POD_RESOURCES = frozenset(
    {
        POD_OBJECT_COUNT,
        "pods",
        *COMPUTE,
        *(REQUESTS_PREFIX + r for r in COMPUTE),
        *(LIMITS_PREFIX + r for r in COMPUTE),
    }
)
POD_RESOURCE_PREFIXES = (HUGEPAGES_PREFIX, REQUESTS_PREFIX + HUGEPAGES_PREFIX)  # podResourcePrefixes
POD_LEVEL_RESOURCES = ("cpu", "memory")  # helpers.go IsSupportedPodLevelResource
# persistent_volume_claims.go pvcResources and its storage-class keys
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
PVC_RESOURCES = frozenset({"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"})
PVC_CLASS_KEYS = ("requests.storage", "persistentvolumeclaims")
ZERO: Amount = (decimal.Decimal(0), "DecimalSI")


def _amount(value: Any) -> Amount:
    try:
        return parse_quantity_format(str(value))
    except ValueError:
        return ZERO


def _add(a: Amount, b: Amount) -> Amount:
    """Quantity.Add: a sum that was zero takes the format of what is added."""
    return (a[0] + b[0], b[1] if a[0] == 0 else a[1])


def add(a: Mapping[str, Amount], b: Mapping[str, Amount]) -> ResourceList:
    """resources.go Add."""
    out = dict(a)
    for key, value in b.items():
        out[key] = _add(out[key], value) if key in out else value
    return out


def _add_into(total: ResourceList, more: Mapping[str, Amount]) -> None:
    for key, value in more.items():
        total[key] = _add(total[key], value) if key in total else value


def _max_into(total: ResourceList, more: Mapping[str, Amount]) -> None:
    for key, value in more.items():
        if key not in total or value[0] > total[key][0]:
            total[key] = value


# --- what one pod asks for ----------------------------------------------------------------


def _container(c: KubeObject) -> tuple[ResourceList, ResourceList]:
    """A container's requests and limits, its requests defaulted to its limits (defaults.go)."""
    res = c.get("resources") or {}
    limits = {k: _amount(v) for k, v in (res.get("limits") or {}).items()}
    requests = {**limits, **{k: _amount(v) for k, v in (res.get("requests") or {}).items()}}
    return requests, limits


def _aggregate(spec: KubeObject, part: int) -> ResourceList:
    """AggregateContainerRequests (part 0) or AggregateContainerLimits (part 1)."""
    total: ResourceList = {}
    for c in spec.get("containers") or []:
        _add_into(total, _container(c)[part])
    sidecars: ResourceList = {}
    init: ResourceList = {}
    for c in spec.get("initContainers") or []:
        own = _container(c)[part]
        if c.get("restartPolicy") == "Always":
            _add_into(total, own)
            _add_into(sidecars, own)
            effective = dict(sidecars)
        else:
            effective = add(own, sidecars)
        _max_into(init, effective)
    _max_into(total, init)
    return total


def pod_requests(pod: KubeObject) -> ResourceList:
    """helpers.go PodRequests."""
    spec = pod.get("spec") or {}
    total = _aggregate(spec, 0)
    level = (spec.get("resources") or {}).get("requests") or {}
    for name in POD_LEVEL_RESOURCES:
        if name in level:
            total[name] = _amount(level[name])
    _add_into(total, {k: _amount(v) for k, v in (spec.get("overhead") or {}).items()})
    return total


def pod_limits(pod: KubeObject) -> ResourceList:
    """helpers.go PodLimits: the overhead is added only to a resource that has a limit."""
    spec = pod.get("spec") or {}
    total = _aggregate(spec, 1)
    level = (spec.get("resources") or {}).get("limits") or {}
    for name in POD_LEVEL_RESOURCES:
        if name in level:
            total[name] = _amount(level[name])
    for name, value in (spec.get("overhead") or {}).items():
        if name in total:
            total[name] = _add(total[name], _amount(value))
    return total


def is_native_resource(name: str) -> bool:
    """v1 helper IsNativeResource: no domain, or a kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """v1 helper IsExtendedResourceName, or a device class's implicit extended resource
    (scheduler util IsDRAExtendedResourceName)."""
    if name.startswith(dra.RESOURCE_DEVICE_CLASS_PREFIX):
        return True
    return not is_native_resource(name) and not name.startswith(REQUESTS_PREFIX)


def is_extended_resource_name_for_quota(key: str) -> bool:
    """pods.go isExtendedResourceNameForQuota: ``requests.`` of a non-native resource, or of
    a device class's implicit extended resource."""
    implicit = key.startswith(REQUESTS_PREFIX + dra.RESOURCE_DEVICE_CLASS_PREFIX)
    return (not is_native_resource(key) or implicit) and key.startswith(REQUESTS_PREFIX)


def pod_matching_resources(keys: Iterable[str]) -> list[str]:
    """pods.go MatchingResources: the keys of a quota's hard the pod evaluator measures."""
    return [
        k
        for k in keys
        if k in POD_RESOURCES or k.startswith(POD_RESOURCE_PREFIXES) or is_extended_resource_name_for_quota(k)
    ]


def charged(pod: KubeObject, now: datetime) -> bool:
    """pods.go QuotaV1Pod: not Succeeded or Failed, and not deleted past its grace period
    (a pod stuck terminating on a lost node is not charged)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    md = pod.get("metadata") or {}
    deleted, grace = md.get("deletionTimestamp"), md.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        try:
            at = datetime.fromisoformat(str(deleted).replace("Z", "+00:00"))
        except ValueError:
            return True
        if now > at + timedelta(seconds=int(grace)):
            return False
    return True


def pod_usage(pod: KubeObject, now: datetime) -> ResourceList:
    """pods.go PodUsageFunc with podComputeUsageHelper."""
    out: ResourceList = {POD_OBJECT_COUNT: (decimal.Decimal(1), "DecimalSI")}
    if not charged(pod, now):
        return out
    requests, limits = pod_requests(pod), pod_limits(pod)
    usage: ResourceList = {"pods": (decimal.Decimal(1), "DecimalSI")}
    for name in COMPUTE:
        if name in requests:
            usage[name] = usage[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            usage[LIMITS_PREFIX + name] = limits[name]
    for name, amount in requests.items():
        if name.startswith(HUGEPAGES_PREFIX):
            usage[name] = usage[REQUESTS_PREFIX + name] = amount
        if is_extended_resource_name(name):
            usage[REQUESTS_PREFIX + name] = amount
    return add(out, usage)


# --- what the controller writes ---------------------------------------------------------------


def _in_scope(selectors: Sequence[Mapping[str, Any]], pod: KubeObject) -> bool:
    if not selectors:
        return True
    facts = quotascope.pod_facts(pod)
    return all(quotascope.matches_scope(s, facts) for s in selectors)


def _usage_stats(resources: Sequence[str], items: Iterable[ResourceList]) -> ResourceList:
    """CalculateUsageStats: every tracked resource starts at 0, then the matching items add."""
    total: ResourceList = {r: ZERO for r in resources}
    for usage in items:
        _add_into(total, usage)
    return total


def _pvc_matching_resources(keys: Iterable[str]) -> list[str]:
    return [
        k
        for k in keys
        if k in PVC_RESOURCES or (STORAGE_CLASS_SUFFIX in k and k.split(STORAGE_CLASS_SUFFIX, 1)[1] in PVC_CLASS_KEYS)
    ]


def _claim_matching_resources(keys: Iterable[str]) -> list[str]:
    return [k for k in keys if k == dra.CLAIM_OBJECT_COUNT_NAME or k.endswith(dra.RESOURCE_CLAIMS_PER_CLASS)]


def measured_usage(
    quota: KubeObject, pods: Sequence[KubeObject], now: datetime, claims: Sequence[KubeObject] = ()
) -> ResourceList:
    """resources.go CalculateUsage over the evaluators the twin has: what the quota's hard
    keys measure now, each key an evaluator tracks present (0 when nothing counts)."""
    spec = quota.get("spec") or {}
    keys = list((spec.get("hard") or {}).keys())
    selectors = quotascope.scope_selectors(spec)
    new: ResourceList = {}
    tracked = pod_matching_resources(keys)
    if tracked:
        used = [pod_usage(p, now) for p in pods if _in_scope(selectors, p)]
        new = add(new, _usage_stats(tracked, used))
    storage = _pvc_matching_resources(keys)
    if storage:  # the twin stores no PersistentVolumeClaim
        new = add(new, _usage_stats(storage, []))
    devices = _claim_matching_resources(keys)
    if devices:
        # resource_claims.go: its scope function matches no scope, so a scoped quota counts no claim
        counted = [] if selectors else claims
        new = add(
            new,
            _usage_stats(
                devices,
                ({k: (decimal.Decimal(v), "DecimalSI") for k, v in dra.claim_device_usage(c).items()} for c in counted),
            ),
        )
    wanted = set(tracked) | set(storage) | set(devices)
    return {k: v for k, v in new.items() if k in wanted}


def quota_status(
    quota: KubeObject, pods: Sequence[KubeObject], now: datetime, claims: Sequence[KubeObject] = ()
) -> KubeObject:
    """syncResourceQuota: ``hard`` as the spec says, ``used`` the last status's with what the
    evaluators measure now, masked to the hard keys; quantities printed as the API server prints them."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    used: dict[str, Any] = dict((quota.get("status") or {}).get("used") or {})
    for key, (value, fmt) in measured_usage(quota, pods, now, claims).items():
        used[key] = format_quantity(value, fmt)
    return {"hard": hard, "used": {k: str(v) for k, v in used.items() if k in hard}}
