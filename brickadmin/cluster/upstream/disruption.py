"""PodDisruptionBudgets: the status the disruption controller gives a budget and the Eviction
API's decision.

Sources (Kubernetes v1.35): pkg/controller/disruption/disruption.go,
pkg/registry/core/pod/storage/eviction.go and
staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go (GetScaledValueFromIntOrPercent).
Tests: tests/foundation/test_disruption.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeGuard

from .names import KubeObject
from .pods import being_deleted, controller_of, pod_ready
from .selectors import selector_matches

# --- PodDisruptionBudgets ----------------------------------------------------------
# What a real control plane decides, ported from Kubernetes v1.35: the disruption controller's
# status arithmetic (pkg/controller/disruption/disruption.go), the Eviction API's decision
# (pkg/registry/core/pod/storage/eviction.go) and intstr.GetScaledValueFromIntOrPercent
# (staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go).

# The Eviction API's refusals, word for word.
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
EVICTION_MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
UNHEALTHY_POD_ALWAYS_ALLOW = "AlwaysAllow"
UNHEALTHY_POD_IF_HEALTHY_BUDGET = "IfHealthyBudget"  # the default
DISRUPTION_DELETION_TIMEOUT_SECONDS = 120  # an evicted pod not deleted by then counts again
MAX_DISRUPTED_POD_SIZE = 2000
DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"

_PERCENT_RE = re.compile(r"^[+-]?[0-9]+%$")  # strconv.Atoi's digits, then '%'
# Workloads whose scale the API server serves (the scale finder's REST mapping), by group.
_SCALE_SUBRESOURCE = {
    ("", "ReplicationController"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
}


def pdb_selects(pdb: KubeObject, pod: KubeObject) -> bool:
    """policy/v1: same namespace and the selector matches; an empty selector selects every
    pod of the namespace, a missing one selects none."""
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return selector_matches((pod.get("metadata") or {}).get("labels") or {}, selector)


def pdbs_for(pod: KubeObject, pdbs: list[KubeObject]) -> list[KubeObject]:
    """The budgets that guard this pod."""
    return [b for b in pdbs if pdb_selects(b, pod)]


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an integer as it is, "N%" of ``total`` rounded
    up or down; any other string is an error (ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _PERCENT_RE.match(value):
        scaled = float(int(value[:-1])) * float(total) / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    if isinstance(value, str):
        raise ValueError(f"invalid value for IntOrString: invalid type: string is not a percentage ({value!r})")
    raise ValueError(f"invalid value for IntOrString: invalid type: neither int nor percentage ({value!r})")


def _api_group(api_version: str | None) -> str:
    return (api_version or "").rpartition("/")[0]


def _workload(workloads: Sequence[KubeObject], kind: str | None, name: str | None, namespace: str) -> KubeObject | None:
    for w in workloads:
        md = w.get("metadata") or {}
        if w.get("kind") == kind and md.get("name") == name and md.get("namespace", namespace) == namespace:
            return w
    return None


def _replicas(workload: KubeObject) -> int:
    replicas = (workload.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)  # the API server defaults spec.replicas to 1


def controller_scale(ref: KubeObject, namespace: str, workloads: Sequence[KubeObject]) -> tuple[str | None, int] | None:
    """The controller a pod's controller reference leads to, as (uid, spec.replicas): the
    disruption controller's finders in their order (ReplicationController; the Deployment of a
    ReplicaSet; a ReplicaSet no Deployment controls; StatefulSet; any other scale subresource).
    None when none is found; ValueError when the owner's kind has no scale (a Job, a DaemonSet).
    ``workloads``: the objects the owner chain may name, as read from the cluster. A custom
    resource with a scale subresource is given with its scale as ``spec.replicas``."""
    kind: str | None = ref.get("kind")
    name: str | None = ref.get("name")
    uid: str | None = ref.get("uid")
    group = _api_group(ref.get("apiVersion"))

    def same(obj: KubeObject | None) -> TypeGuard[KubeObject]:
        return obj is not None and (obj.get("metadata") or {}).get("uid") == uid

    if kind == "ReplicationController" and group == "":
        rc = _workload(workloads, kind, name, namespace)
        if same(rc):
            return uid, _replicas(rc)
    if kind == "ReplicaSet" and group in ("apps", "extensions"):
        rs = _workload(workloads, kind, name, namespace)
        if same(rs):
            owner = controller_of(rs)
            if owner and owner.get("kind") == "Deployment":
                if _api_group(owner.get("apiVersion")) in ("apps", "extensions"):
                    d = _workload(workloads, "Deployment", owner.get("name"), namespace)
                    if d is not None and (d.get("metadata") or {}).get("uid") == owner.get("uid"):
                        return owner.get("uid"), _replicas(d)
            else:
                return uid, _replicas(rs)
    if kind == "StatefulSet" and group == "apps":
        ss = _workload(workloads, kind, name, namespace)
        if same(ss):
            return uid, _replicas(ss)
    # the scale subresource (also a ReplicaSet whose Deployment is gone)
    obj = _workload(workloads, kind, name, namespace)
    if (group, kind) in _SCALE_SUBRESOURCE:
        return (uid, _replicas(obj)) if same(obj) else None
    if (
        obj is not None
        and _api_group(obj.get("apiVersion")) == group
        and isinstance((obj.get("spec") or {}).get("replicas"), int)
    ):
        return (uid, _replicas(obj)) if same(obj) else None
    raise ValueError(f"{kind}.{group or 'core'} does not implement the scale subresource")


def expected_scale(pods: list[KubeObject], workloads: Sequence[KubeObject]) -> tuple[int, list[str | None]]:
    """getExpectedScale: the sum of the scales of the pods' controllers, and the pods that
    have none (left out, not an error). ValueError when a pod's controller is not found."""
    scales: dict[str | None, int] = {}
    unmanaged: list[str | None] = []
    for pod in pods:
        md = pod.get("metadata") or {}
        ref = controller_of(pod)
        if ref is None:
            unmanaged.append(md.get("name"))
            continue
        if ref.get("uid") in scales:
            continue
        found = controller_scale(ref, md.get("namespace", ""), workloads)
        if found is None:
            raise ValueError(f'found no controllers for pod "{md.get("name")}"')
        scales[found[0]] = found[1]
    return sum(scales.values()), unmanaged


def expected_pod_count(pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject]) -> tuple[int, int]:
    """getExpectedPodCount: (expectedPods, desiredHealthy) for the pods the budget selects.
    maxUnavailable and a percentage minAvailable count from the controllers' scale, rounding
    up; an integer minAvailable counts the selected pods."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected, _ = expected_scale(pods, workloads)
        desired = max(expected - scaled_value(spec["maxUnavailable"], expected, True), 0)
        return expected, desired
    min_available = spec.get("minAvailable")
    if min_available is None:
        return 0, 0
    if isinstance(min_available, str):
        expected, _ = expected_scale(pods, workloads)
        return expected, scaled_value(min_available, expected, True)
    return len(pods), scaled_value(min_available, len(pods), True)


def _parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def disrupted_pods(pdb: KubeObject, pods: list[KubeObject], now: datetime) -> dict[str, str]:
    """buildDisruptedPodMap: the evictions still expected to show up as deletions (pods the
    Eviction API let go less than two minutes ago that are not yet being deleted)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    for pod in pods:
        name: str | None = (pod.get("metadata") or {}).get("name")
        if being_deleted(pod) or name is None or name not in recorded:
            continue
        if (now - _parse_time(recorded[name])).total_seconds() <= DISRUPTION_DELETION_TIMEOUT_SECONDS:
            kept[name] = recorded[name]
    return kept


def count_healthy(pods: list[KubeObject], disrupted: dict[str, str], now: datetime) -> int:
    """countHealthyPods: Ready pods not being deleted and not just evicted."""
    healthy = 0
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        if being_deleted(pod):
            continue
        if (
            name in disrupted
            and (now - _parse_time(disrupted[name])).total_seconds() < DISRUPTION_DELETION_TIMEOUT_SECONDS
        ):
            continue
        if pod_ready(pod):
            healthy += 1
    return healthy


def pdb_status(
    pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject] = (), now: datetime | None = None
) -> KubeObject:
    """The status the disruption controller writes for this budget (trySync, updatePdbStatus,
    failSafe). ``pods``: the pods of the budget's namespace (it selects among them);
    ``workloads``: the controllers their owner references lead to (see controller_scale)."""
    now = now or datetime.now(UTC)
    selected = [p for p in pods if pdb_selects(pdb, p)]
    generation = (pdb.get("metadata") or {}).get("generation", 0)
    try:
        expected, desired = expected_pod_count(pdb, selected, list(workloads))
    except ValueError as e:
        # failSafe: no disruption allowed, the rest of the status left as it was
        status = dict(pdb.get("status") or {}, disruptionsAllowed=0)
        status["conditions"] = [
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "False",
                "reason": "SyncFailed",
                "message": str(e),
                "observedGeneration": status.get("observedGeneration", 0),
            }
        ]
        return status
    disrupted = disrupted_pods(pdb, selected, now)
    healthy = count_healthy(selected, disrupted, now)
    # expectedPods must be > 0, so a budget whose pods are not seen yet stays safe
    allowed = healthy - desired if expected > 0 and healthy - desired > 0 else 0
    status = {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "observedGeneration": generation,
        "conditions": [
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "observedGeneration": generation,
            }
        ],
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


def disruptions_allowed(
    pdb: KubeObject, pods: list[KubeObject], workloads: Sequence[KubeObject] = (), now: datetime | None = None
) -> int:
    """status.disruptionsAllowed as the disruption controller computes it (see pdb_status)."""
    allowed: int = pdb_status(pdb, pods, workloads, now)["disruptionsAllowed"]
    return allowed


class EvictionRefusal(NamedTuple):
    """The Eviction API's answer when it does not delete the pod (a NamedTuple: lab/lab.py
    loads this module by path, where a dataclass cannot find its module)."""

    status: int  # 429 (try again later), 403, or 500 (more than one budget)
    reason: str
    message: str
    cause: str = ""  # status.details.causes[0].message, naming the budget


def eviction_ignores_budgets(pod: KubeObject) -> bool:
    """canIgnorePDB: a finished, pending or terminating pod is deleted without asking a budget
    (its going disrupts nothing that is not disrupted already)."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or being_deleted(pod)


def unready_pod_passes(pod: KubeObject, pdb: KubeObject) -> bool:
    """An unready pod counts for nothing, so the Eviction API lets it go without touching the
    budget: always under AlwaysAllow; under IfHealthyBudget (the default) while the application
    is not disrupted (currentHealthy >= desiredHealthy > 0). Otherwise the budget decides."""
    if pod_ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == UNHEALTHY_POD_ALWAYS_ALLOW:
        return True
    status = pdb.get("status") or {}
    current, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    return bool(current >= desired and desired > 0)


def eviction_refusal(pod: KubeObject, pdbs: list[KubeObject]) -> EvictionRefusal | None:
    """The Eviction API's decision for ``pod`` (EvictionREST.Create, checkAndDecrement), from
    the budgets of its namespace with the status the disruption controller gave them. None:
    the pod is deleted; the budget that let it through is then decremented (status_after_eviction)
    unless the pod was an unready one (unready_pod_passes)."""
    if eviction_ignores_budgets(pod):
        return None
    guarding = pdbs_for(pod, pdbs)
    if len(guarding) > 1:
        return EvictionRefusal(500, "", EVICTION_MULTIPLE_BUDGETS)
    if not guarding:
        return None
    pdb = guarding[0]
    if unready_pod_passes(pod, pdb):
        return None
    name = (pdb.get("metadata") or {}).get("name", "")
    status = pdb.get("status") or {}
    current, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    if status.get("observedGeneration", 0) < (pdb.get("metadata") or {}).get("generation", 0):
        return EvictionRefusal(
            429,
            "TooManyRequests",
            EVICTION_REFUSED,
            f"The disruption budget {name} is still being processed by the server.",
        )
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        return EvictionRefusal(
            403, "Forbidden", f'poddisruptionbudget.policy "{name}" is forbidden: pdb disruptions allowed is negative'
        )
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        return EvictionRefusal(
            403,
            "Forbidden",
            f'poddisruptionbudget.policy "{name}" is forbidden: DisruptedPods '
            "map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        return EvictionRefusal(429, "TooManyRequests", EVICTION_REFUSED, _refusal_cause(name, status, current, desired))
    return None


def _refusal_cause(name: str, status: KubeObject, current: int, desired: int) -> str:
    """Why a budget allowing no disruption refuses, as the Eviction API words it since 1.35: a
    failed sync first (its healthy counts are not to be trusted then), then the counts, then
    the DisruptionAllowed condition's own words."""
    condition: KubeObject = next(
        (c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED_CONDITION), {}
    )
    message, reason = str(condition.get("message") or ""), str(condition.get("reason") or "")
    said = condition.get("status") == "False" and bool(message)
    if said and reason == "SyncFailed":
        return f"The disruption budget {name} does not allow evicting pods currently because it failed sync: {message}"
    if current <= desired:
        return f"The disruption budget {name} needs {desired} healthy pods and has {current} currently"
    if said:
        return f"The disruption budget {name} does not allow evicting pods currently ({reason}): {message}"
    return f"The disruption budget {name} does not allow evicting pods currently"


def status_after_eviction(status: KubeObject, pod_name: str, now: datetime | None = None) -> KubeObject:
    """checkAndDecrement's write when it lets an eviction through: one disruption fewer (the
    condition turns InsufficientPods at 0) and the pod remembered in disruptedPods, so the
    controller does not count it healthy until it sees it being deleted."""
    now = now or datetime.now(UTC)
    new = dict(status, disruptionsAllowed=status.get("disruptionsAllowed", 0) - 1)
    if new["disruptionsAllowed"] == 0:
        new["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != DISRUPTION_ALLOWED_CONDITION]
        new["conditions"].append(
            {
                "type": DISRUPTION_ALLOWED_CONDITION,
                "status": "False",
                "reason": "InsufficientPods",
                "observedGeneration": status.get("observedGeneration", 0),
            }
        )
    new["disruptedPods"] = {
        **(status.get("disruptedPods") or {}),
        pod_name: now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return new
