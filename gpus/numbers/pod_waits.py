"""Why a GPU pod waits (Pending) or was refused (Failed): pure, no Django.

The watcher keeps, of each GPU pod that is not Running, what the scheduler and the kubelet
wrote on it (``facts``: its PodScheduled condition's message, which is what the scheduler's
FailedScheduling event says; the pod's reason and message; its containers' waiting
reasons). The cluster view stores, beside the ledger, what each GPU resource offers now
(``capacity``: how much exists, how much is free on nodes a pod can use, how much only on
tainted or cordoned nodes). ``classify`` names the cause of one pod line from both;
``quota_used_up`` finds the Workspace quotas whose pods hold all of them (the API server
then refuses new pods, so those never exist to wait). The words are the pages'
(workspaces/waits.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from brickadmin.cluster.vocabulary import GPU_SHARED

# The causes, most specific first. The pages word them.
QUOTA_FULL = "quota-full"  # the Workspace's quota of the resource is held by its pods
SHARED_MANY = "shared-many"  # more than one time-sliced GPU in one pod: the device plugin refuses it
NO_SUCH_TYPE = "no-such-type"  # no node offers the resource at all
CORDONED_ONLY = "cordoned-only"  # only cordoned nodes have room for it
TAINT = "taint"  # room only on nodes with a taint the pod does not tolerate
NO_FREE = "no-free"  # not enough free on any one node
ADMISSION = "admission"  # the kubelet refused it (UnexpectedAdmissionError)
CONTAINER = "container"  # scheduled; a container waits (image pull, ...)
FAILED = "failed"  # ended in failure for another reason
SCHEDULER = "scheduler"  # the scheduler gave another reason (node selector, CPU, memory, ...)
CLAIMS = "claims"  # on DRA ResourceClaims the scheduler cannot allocate (or fails to: a selector's error)
STARTING = "starting"  # nothing wrong seen yet: room exists, the scheduler has not placed it yet

ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class Wait:
    """One pod's cause. ``facts``: the figures the words need (resource, counts, names)."""

    kind: str
    pod: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


# --- what the watcher keeps of a waiting pod ---------------------------------------------


def facts(pod: dict[str, Any]) -> dict[str, Any] | None:
    """What a Pending or Failed pod line keeps of why it is so (None for other phases)."""
    status = pod.get("status") or {}
    phase = status.get("phase") or ""
    if phase not in ("Pending", "Failed"):
        return None
    out = {k: status[k] for k in ("reason", "message") if status.get(k)}
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            out["unschedulable"] = c.get("reason") or "Unschedulable"
            if c.get("message"):
                out["scheduler"] = c["message"]
    containers = []
    for cs in status.get("containerStatuses") or []:
        for state in ("waiting", "terminated"):
            detail = (cs.get("state") or {}).get(state)
            if detail is not None and (detail.get("reason") or detail.get("message")):
                containers.append(
                    {
                        "name": cs.get("name", ""),
                        "state": state,
                        "reason": detail.get("reason", ""),
                        "message": detail.get("message", ""),
                        **({"exitCode": detail["exitCode"]} if "exitCode" in detail else {}),
                    }
                )
    if containers:
        out["containers"] = containers
    return out


# --- what each GPU resource offers now (stored with the view) -----------------------------


def capacity(nodes: Iterable[Any], ignored_taints: Iterable[str]) -> dict[str, dict[str, Any]]:
    """resource -> {"exist", "free", "most_free", "tainted_most_free", "taints", "tainted_nodes",
    "cordoned", "cordoned_most_free", "cordoned_nodes"} from the ledger's node lines.

    ``free``/``most_free``: unrequested on Ready, uncordoned nodes without a NoSchedule or
    NoExecute taint other than ``ignored_taints`` (the GPU taint every GPU pod tolerates);
    a pod's GPUs come from one node, so ``most_free`` (the most on one node) says whether it
    fits. The tainted and cordoned nodes' room is counted apart: room there is the cause."""
    out: dict[str, dict[str, Any]] = {}
    for n in nodes:
        taints = sorted(
            {
                f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                for t in n.taints
                if t.effect in ("NoSchedule", "NoExecute") and t.key not in ignored_taints
            }
        )
        for res, line in n.resources.items():
            if line.stale or line.allocatable <= 0:
                continue
            row = out.setdefault(
                res,
                {
                    "exist": 0,
                    "free": 0,
                    "most_free": 0,
                    "tainted_most_free": 0,
                    "taints": [],
                    "tainted_nodes": [],
                    "cordoned": 0,
                    "cordoned_most_free": 0,
                    "cordoned_nodes": [],
                },
            )
            room = max(0, line.allocatable - line.requested)
            row["exist"] += line.allocatable
            if n.cordoned:
                row["cordoned"] += line.allocatable
                row["cordoned_most_free"] = max(row["cordoned_most_free"], room)
                row["cordoned_nodes"].append(n.name)
            elif not n.ready:
                continue
            elif taints:
                row["tainted_most_free"] = max(row["tainted_most_free"], room)
                row["tainted_nodes"].append(n.name)
                row["taints"] = sorted(set(row["taints"]) | set(taints))
            else:
                row["free"] += room
                row["most_free"] = max(row["most_free"], room)
    return out


# --- the scheduler's message ---------------------------------------------------------------

# kube-scheduler's FitError (pkg/scheduler/framework/types.go, FitError.Error):
#   "0/%d nodes are available: %s." with the reasons "<count> <reason>" sorted and joined by
#   ", ", then " preemption: ..." (the preemption's own summary, not a cause).
# The reasons the pages tell apart, by the plugin that writes them:
#   pkg/scheduler/framework/plugins/noderesources/fit.go: "Insufficient " + resource name
#   pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go:
#       "node(s) had untolerated taint {key: value}" (newer: "node(s) had untolerated taint(s)")
#   pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go: "node(s) were unschedulable"
#   pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go: "node(s) didn't match Pod's node affinity/selector"
_FIT_HEAD = re.compile(r"0/(\d+) nodes are available: ")
_REASON = re.compile(r"(\d+) (\S.*)")
_TAINT_KEY = re.compile(r"\{([^:{}]+):")
INSUFFICIENT = "Insufficient "
UNTOLERATED = "node(s) had untolerated taint"
UNSCHEDULABLE = "node(s) were unschedulable"


def scheduler_reasons(message: str) -> dict[str, Any]:
    """{"nodes": N, "reasons": [(count, text)], "insufficient": {resource: count},
    "taint_keys": [...], "untolerated": count, "unschedulable": count} of a FitError message;
    {} for any other message."""
    head = _FIT_HEAD.match(message or "")
    if head is None:
        return {}
    body = message[head.end() :].split(" preemption:", 1)[0].strip().rstrip(".")
    reasons = []
    for part in body.split(", "):
        m = _REASON.fullmatch(part.strip())
        if m:
            reasons.append((int(m.group(1)), m.group(2)))
    out: dict[str, Any] = {
        "nodes": int(head.group(1)),
        "reasons": reasons,
        "insufficient": {},
        "taint_keys": [],
        "untolerated": 0,
        "unschedulable": 0,
    }
    for count, text in reasons:
        if text.startswith(INSUFFICIENT):
            out["insufficient"][text[len(INSUFFICIENT) :]] = count
        elif text.startswith(UNTOLERATED):
            out["untolerated"] += count
            out["taint_keys"] += _TAINT_KEY.findall(text)
        elif text == UNSCHEDULABLE:
            out["unschedulable"] += count
    return out


# --- the causes ----------------------------------------------------------------------------


def _live(phase: str) -> bool:
    return phase not in ("Succeeded", "Failed")


def quota_used_up(
    gpu_quotas: dict[str, int], pods: list[dict[str, Any]], quotas: list[Any] | None = None
) -> list[Wait]:
    """The GPU quotas of a Workspace its pods hold whole: a new pod asking for that resource
    is refused by the API server (the ResourceQuota admission counts the requests of every
    pod not Succeeded or Failed, Pending ones included). With ``quotas`` (quotascope.QuotaScope,
    from the view's line) each quota counts only the pods its scope selects, as the API server
    does: a Job's pod, outside the Workspace quota's scope, holds none of it."""
    if quotas:
        limits = [(res, hard, q) for q in quotas for res, hard in sorted(q.gpu_hard.items())]
    else:
        limits = [(res, hard, None) for res, hard in sorted(gpu_quotas.items())]
    out = []
    for res, hard, quota in limits:
        if hard <= 0:
            continue
        holders = [
            (p.get("name", ""), int((p.get("requests") or {}).get(res, 0)))
            for p in pods
            if _live(p.get("phase") or "")
            and (p.get("requests") or {}).get(res)
            # a pod line stored before scope facts were kept is taken as in scope
            and (quota is None or p.get("scope") is None or quota.in_scope(p["scope"]))
        ]
        used = sum(n for _name, n in holders)
        if used >= hard:
            out.append(
                Wait(
                    QUOTA_FULL,
                    facts={"resource": res, "hard": hard, "used": used, "pods": [list(h) for h in sorted(holders)]},
                )
            )
    return out


def _resource_of(requests: dict[str, int]) -> tuple[str, int]:
    """The GPU resource a pod waits for (the most requested one) and how many it wants."""
    if not requests:
        return "", 0
    res = max(sorted(requests), key=lambda r: requests[r])
    return res, int(requests[res])


def classify(line: dict[str, Any], capacity_by_resource: dict[str, dict[str, Any]]) -> Wait | None:
    """The cause of one pod line (``name``, ``phase``, ``node``, ``requests``, ``wait``:
    ``facts``), or None for a pod that neither waits nor failed."""
    phase = line.get("phase") or ""
    if phase not in ("Pending", "Failed"):
        return None
    why = line.get("wait") or {}
    name = line.get("name", "")
    res, want = _resource_of(line.get("requests") or {})
    base = {"resource": res, "want": want}
    said = why.get("scheduler", "")
    if said:
        base["said"] = said
    if phase == "Failed":
        if why.get("reason") == ADMISSION_ERROR:
            if res == GPU_SHARED and want > 1:
                return Wait(SHARED_MANY, name, {**base, "refused": True})
            return Wait(ADMISSION, name, {**base, "node": line.get("node", ""), "message": why.get("message", "")})
        ended: dict[str, Any] = next((c for c in why.get("containers") or [] if c.get("state") == "terminated"), {})
        return Wait(
            FAILED,
            name,
            {
                **base,
                "reason": why.get("reason") or ended.get("reason", ""),
                "message": why.get("message") or ended.get("message", ""),
                **({"exitCode": ended["exitCode"]} if "exitCode" in ended else {}),
            },
        )
    if res == GPU_SHARED and want > 1:
        return Wait(SHARED_MANY, name, base)
    if line.get("node"):
        waiting = next((c for c in why.get("containers") or [] if c.get("state") == "waiting"), None)
        if waiting:
            return Wait(
                CONTAINER, name, {**base, "reason": waiting.get("reason", ""), "message": waiting.get("message", "")}
            )
        return Wait(STARTING, name, base)
    cap = capacity_by_resource.get(res)
    if not res and line.get("claims"):
        return Wait(CLAIMS, name, {**base, "claims": list(line["claims"])})
    if not res:
        return Wait(SCHEDULER, name, base) if said else Wait(STARTING, name, base)
    if not cap or not cap["exist"]:
        return Wait(NO_SUCH_TYPE, name, base)
    figures = {"exist": cap["exist"], "free": cap["free"], "most_free": cap["most_free"]}
    if cap["exist"] == cap["cordoned"]:
        return Wait(CORDONED_ONLY, name, {**base, **figures, "nodes": cap["cordoned_nodes"]})
    if cap["most_free"] >= want:
        # Room on a node the pod may use: the scheduler's own reason (a node selector, CPU,
        # memory), or none yet.
        return Wait(SCHEDULER, name, {**base, **figures}) if said else Wait(STARTING, name, {**base, **figures})
    reasons = scheduler_reasons(said)
    if cap["tainted_most_free"] >= want:
        taints = cap["taints"] or sorted(set(reasons.get("taint_keys", [])))
        return Wait(TAINT, name, {**base, **figures, "taints": taints, "nodes": cap["tainted_nodes"]})
    if cap["cordoned_most_free"] >= want:
        return Wait(CORDONED_ONLY, name, {**base, **figures, "nodes": cap["cordoned_nodes"], "partly": True})
    return Wait(NO_FREE, name, {**base, **figures})


def waits(
    pods: list[dict[str, Any]],
    gpu_quotas: dict[str, int],
    capacity_by_resource: dict[str, dict[str, Any]],
    quotas: list[Any] | None = None,
) -> list[Wait]:
    """A Workspace's causes: its quotas held whole, then each waiting or failed pod's."""
    found = quota_used_up(gpu_quotas, pods, quotas)
    for line in pods:
        w = classify(line, capacity_by_resource)
        if w is not None:
            found.append(w)
    return found
