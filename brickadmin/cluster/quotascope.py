"""Which ResourceQuota of a namespace counts a pod's GPUs, as the API server decides it. Pure.

A ResourceQuota counts a pod's ``nvidia.com/*`` resource only when its ``hard`` names
``requests.<resource>`` (the one form Kubernetes accepts for an extended resource) and every
one of its scopes (``spec.scopes`` and ``spec.scopeSelector``, ANDed) matches the pod. A GPU
resource no quota of the namespace names is neither counted nor limited there: an approved
Workspace's ``workspace-compute`` quota names only the resource it was approved for
(workspaces/services.py ``quota_hard``), so a pod of that namespace asking for another GPU
resource is outside it. Its scope (``PriorityClass NotIn [brick-job-priority]``) leaves the
product's Jobs out as well.

Ported from Kubernetes: ``podMatchesScopeFunc``, ``podMatchesSelector``, ``isTerminating``,
``usesCrossNamespacePodAffinity`` (pkg/quota/v1/evaluator/core/pods.go),
``getScopeSelectorsFromQuota`` and ``Matches`` (staging/src/k8s.io/apiserver/pkg/quota/v1/
generic/evaluator.go) and the QoS class's BestEffort rule (pkg/apis/core/v1/helper/qos).
A pod is reduced to the few facts these read (``pod_facts``), small enough to be stored with
the Workspace's line of the cluster view.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .vocabulary import NVIDIA_PREFIX, QUOTA_REQUESTS_PREFIX, KubeObject, parse_quantity, quantity

# Scope names (k8s.io/api/core/v1 ResourceQuotaScope)
TERMINATING = "Terminating"
NOT_TERMINATING = "NotTerminating"
BEST_EFFORT = "BestEffort"
NOT_BEST_EFFORT = "NotBestEffort"
PRIORITY_CLASS = "PriorityClass"
CROSS_NAMESPACE_POD_AFFINITY = "CrossNamespacePodAffinity"

# What a pod's GPU request is to the namespace's quotas
COUNTED = "counted"  # a quota names the resource and its scopes match the pod
NOT_CAPPED = "not-capped"  # no quota of the namespace names the resource
OUT_OF_SCOPE = "out-of-scope"  # quotas name it, but each one's scope leaves the pod out


def pod_facts(pod: KubeObject) -> dict[str, Any]:
    """What the quota scopes read of a pod: its priority class, whether it is terminating
    (``activeDeadlineSeconds`` >= 0), of BestEffort QoS, or has a cross-namespace pod
    (anti-)affinity term."""
    spec = pod.get("spec") or {}
    deadline = spec.get("activeDeadlineSeconds")
    qos = (pod.get("status") or {}).get("qosClass") or qos_class(spec)
    return {
        "priority_class": spec.get("priorityClassName") or "",
        "terminating": isinstance(deadline, int) and deadline >= 0,
        "best_effort": qos == "BestEffort",
        "cross_namespace_affinity": bool(cross_namespace_affinity(spec)),
    }


QOS_RESOURCES = ("cpu", "memory")  # the only resources a QoS class reads (GPUs do not count)


def qos_class(spec: KubeObject) -> str:
    """The QoS class the API server writes into ``status.qosClass`` (ComputePodQOS,
    pkg/apis/core/v1/helper/qos/qos.go; pod-level resources left out): BestEffort without
    any positive cpu or memory request or limit, Guaranteed when every container limits cpu
    and memory and the requests equal the limits, Burstable otherwise. A container's
    request defaults to its limit, as the API server defaults it before."""
    requests: dict[str, decimal.Decimal] = {}
    limits: dict[str, decimal.Decimal] = {}
    guaranteed = True
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = c.get("resources") or {}
        lim = {k: _amount(v) for k, v in (res.get("limits") or {}).items() if k in QOS_RESOURCES}
        req = {**lim, **{k: _amount(v) for k, v in (res.get("requests") or {}).items() if k in QOS_RESOURCES}}
        for name, amount in req.items():
            if amount > 0:
                requests[name] = requests.get(name, decimal.Decimal(0)) + amount
        found = set()
        for name, amount in lim.items():
            if amount > 0:
                found.add(name)
                limits[name] = limits.get(name, decimal.Decimal(0)) + amount
        if not found.issuperset(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == amount for name, amount in requests.items()):
        if len(requests) == len(limits):
            return "Guaranteed"
    return "Burstable"


def _amount(value: Any) -> decimal.Decimal:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return decimal.Decimal(0)


def _cross_namespace(term: KubeObject) -> bool:
    return bool(term.get("namespaces")) or term.get("namespaceSelector") is not None


def cross_namespace_affinity(spec: KubeObject) -> KubeObject:
    """The pod (anti-)affinity terms of ``spec`` that reach other namespaces (``namespaces``
    or ``namespaceSelector`` set: usesCrossNamespacePodAffinity), cut to those two fields,
    in the shape of ``spec.affinity``; {} when there is none."""
    out: KubeObject = {}
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        part = affinity.get(kind) or {}
        kept: KubeObject = {}
        required = [
            {k: t[k] for k in ("namespaces", "namespaceSelector") if k in t}
            for t in part.get("requiredDuringSchedulingIgnoredDuringExecution") or []
            if _cross_namespace(t)
        ]
        preferred = [
            {"podAffinityTerm": {k: t[k] for k in ("namespaces", "namespaceSelector") if k in t}}
            for t in (
                w.get("podAffinityTerm") or {}
                for w in part.get("preferredDuringSchedulingIgnoredDuringExecution") or []
            )
            if _cross_namespace(t)
        ]
        if required:
            kept["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred:
            kept["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if kept:
            out[kind] = kept
    return out


def scope_selectors(quota_spec: KubeObject) -> list[dict[str, Any]]:
    """A quota's scopes as selector requirements: each of ``spec.scopes`` as ``Exists``, then
    ``spec.scopeSelector.matchExpressions`` (getScopeSelectorsFromQuota)."""
    out: list[dict[str, Any]] = [
        {"scopeName": s, "operator": "Exists", "values": []} for s in quota_spec.get("scopes") or []
    ]
    for e in (quota_spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        out.append(
            {
                "scopeName": e.get("scopeName", ""),
                "operator": e.get("operator", ""),
                "values": list(e.get("values") or []),
            }
        )
    return out


def matches_scope(selector: Mapping[str, Any], facts: Mapping[str, Any]) -> bool:
    """Whether the pod (its ``pod_facts``) matches one scope selector (podMatchesScopeFunc).
    An unknown scope name matches nothing."""
    name = selector.get("scopeName")
    if name == TERMINATING:
        return bool(facts.get("terminating"))
    if name == NOT_TERMINATING:
        return not facts.get("terminating")
    if name == BEST_EFFORT:
        return bool(facts.get("best_effort"))
    if name == NOT_BEST_EFFORT:
        return not facts.get("best_effort")
    if name == CROSS_NAMESPACE_POD_AFFINITY:
        return bool(facts.get("cross_namespace_affinity"))
    if name == PRIORITY_CLASS:
        klass = facts.get("priority_class") or ""
        op, values = selector.get("operator"), list(selector.get("values") or [])
        # podMatchesSelector: the label set {PriorityClass: name}, empty without a class
        if op == "Exists":
            return bool(klass)
        if op == "DoesNotExist":
            return not klass
        if op == "In":
            return bool(klass) and klass in values
        if op == "NotIn":
            return not klass or klass not in values
    return False


@dataclass(frozen=True)
class QuotaScope:
    """A ResourceQuota as the decision reads it: its name, the GPU resources its ``hard``
    names (``requests.<resource>`` -> amount) and its scope selectors."""

    name: str
    gpu_hard: Mapping[str, int]
    selectors: Sequence[Mapping[str, Any]] = ()

    def in_scope(self, facts: Mapping[str, Any]) -> bool:
        return all(matches_scope(s, facts) for s in self.selectors)

    def leaving_out(self, facts: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The first scope selector that leaves the pod out (None: all match)."""
        return next((s for s in self.selectors if not matches_scope(s, facts)), None)


def quota_scope(name: str, hard: Mapping[str, Any], selectors: Sequence[Mapping[str, Any]]) -> QuotaScope:
    """A QuotaScope from a quota's ``hard`` (as stored: strings or numbers) and its selectors."""
    gpu = {
        k[len(QUOTA_REQUESTS_PREFIX) :]: quantity(v)
        for k, v in hard.items()
        if k.startswith(QUOTA_REQUESTS_PREFIX + NVIDIA_PREFIX)
    }
    return QuotaScope(name, gpu, tuple(selectors))


@dataclass(frozen=True)
class Counting:
    """What one GPU resource a pod asks for is to its namespace's quotas."""

    resource: str
    amount: int
    verdict: str  # COUNTED, NOT_CAPPED or OUT_OF_SCOPE
    quotas: tuple[str, ...] = ()  # COUNTED: the quotas counting it; OUT_OF_SCOPE: those naming it
    capped: tuple[str, ...] = ()  # the GPU resources the namespace's quotas name
    # OUT_OF_SCOPE: the scope selector of the first naming quota that leaves the pod out
    left_out_by: Mapping[str, Any] = field(default_factory=dict)


def counting(requests: Mapping[str, int], facts: Mapping[str, Any], quotas: Iterable[QuotaScope]) -> list[Counting]:
    """For each GPU resource ``requests`` names (sorted), whether the namespace's quotas count it."""
    quotas = list(quotas)
    capped = tuple(sorted({r for q in quotas for r in q.gpu_hard}))
    out = []
    for resource in sorted(requests):
        amount = requests[resource]
        naming = [q for q in quotas if resource in q.gpu_hard]
        if not naming:
            out.append(Counting(resource, amount, NOT_CAPPED, capped=capped))
            continue
        counting_quotas = tuple(q.name for q in naming if q.in_scope(facts))
        if counting_quotas:
            out.append(Counting(resource, amount, COUNTED, counting_quotas, capped))
        else:
            out.append(
                Counting(
                    resource,
                    amount,
                    OUT_OF_SCOPE,
                    tuple(q.name for q in naming),
                    capped,
                    dict(naming[0].leaving_out(facts) or {}),
                )
            )
    return out


def uncounted(lines: Iterable[Counting]) -> int:
    """The GPUs of ``lines`` no quota of the namespace counts."""
    return sum(c.amount for c in lines if c.verdict != COUNTED)
