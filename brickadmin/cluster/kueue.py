"""Elastic quota on Kueue: the objects Kueue reads, built from an approval's grant, and the
borrowing and lending arithmetic as Kueue computes it, for display. Pure.

Kueue (sigs.k8s.io/kueue v0.17, API ``kueue.x-k8s.io/v1beta2``, its storage version; field
names from apis/kueue/v1beta2/clusterqueue_types.go, resourceflavor_types.go,
localqueue_types.go) admits a Workload when its ClusterQueue has quota for it. A
ClusterQueue's ``nominalQuota`` is what it is guaranteed; in a cohort it may borrow what the
others leave idle, up to its ``borrowingLimit`` (absent: no limit), and lends at most its
``lendingLimit`` (absent: all of its nominal quota). With ``preemption.reclaimWithinCohort``
a queue that wants its nominal quota back preempts the Workloads that borrowed it.

What an approval grants (``Grant``): a guarantee (``nominalQuota``), a burst ceiling
(``borrowingLimit``) and a lend ceiling (``lendingLimit``). The product writes, per GPU type,
one ResourceFlavor and one cohort; per Workspace one ClusterQueue in that cohort and one
LocalQueue named ``default`` in its namespace (Kueue's LocalQueueDefaulting, GA in v0.17,
gives every Job and pod of the namespace without a ``kueue.x-k8s.io/queue-name`` label that
queue), and it labels the namespace so that Kueue's ``managedJobsNamespaceSelector`` picks it
(docs/operator-guide.md#elastic-quota). The Workspace's ResourceQuota stays the hard ceiling:
guarantee + burst.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from .vocabulary import MANAGED_BY, MANAGED_BY_LABEL, WORKSPACE_LABEL, KubeObject, quantity

API_GROUP = "kueue.x-k8s.io"
API_VERSION = "kueue.x-k8s.io/v1beta2"
# The kinds the product reads and writes, with whether each is cluster-scoped.
KINDS = {"ResourceFlavor": True, "ClusterQueue": True, "LocalQueue": False, "Workload": False}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants QueueLabel
LOCAL_QUEUE = "default"  # constants.DefaultLocalQueueName: the namespace's default queue
# On a Workspace namespace whose pods and Jobs Kueue manages: the selector the operator gives
# Kueue's Configuration (managedJobsNamespaceSelector) matches it.
MANAGED_NAMESPACE_LABEL = "brick.cloud/kueue"
MANAGED_NAMESPACE_VALUE = "managed"
QUEUE_PREFIX = "brick-ws-"  # ClusterQueue brick-ws-<Workspace>
FLAVOR_PREFIX = "brick-gpu-"  # ResourceFlavor and cohort brick-gpu-<GPU type>
ANY_NODE_FLAVOR = "brick-any-node"  # cpu and memory: no node labels
# Node labels that tell GPU types apart, when every node serving a type carries the same value.
FLAVOR_LABEL_KEYS = (
    "brick.cloud/gpu.type",
    "brick.cloud/gpu.sharing",
    "nvidia.com/gpu.present",
    "nvidia.com/mig.strategy",
    "nvidia.com/gpu.product",
)


@dataclass(frozen=True)
class Grant:
    """What an approval gives a Workspace of one GPU type: ``guarantee`` GPUs always, up to
    ``burst`` more borrowed from the cohort, and at most ``lend`` of its guarantee lent to
    the others while idle (None: all of it)."""

    guarantee: int
    burst: int
    lend: int | None = None

    @property
    def ceiling(self) -> int:
        """The ResourceQuota's hard amount: what the Workspace can ever hold."""
        return self.guarantee + self.burst

    def problem(self) -> str:
        """What Kueue's webhook would refuse ('' when nothing): a negative amount, or a lend
        ceiling above the guarantee (pkg/webhooks/clusterqueue_webhook.go validateLendingLimit)."""
        if self.guarantee < 0 or self.burst < 0 or (self.lend is not None and self.lend < 0):
            return "negative"
        if self.lend is not None and self.lend > self.guarantee:
            return "lend-above-guarantee"
        return ""


def default_grant(guarantee: int, burst_percent: int, lend_percent: int) -> Grant:
    """The grant an approval form starts with: burst and lend as percentages of the guarantee,
    rounded up (a guarantee of 1 with 50 % burst bursts to 2)."""
    burst = -(-guarantee * max(0, burst_percent) // 100)
    lend = min(guarantee, -(-guarantee * max(0, lend_percent) // 100))
    return Grant(guarantee, burst, lend)


def flavor_name(gpu_type: str) -> str:
    return FLAVOR_PREFIX + gpu_type


def cohort_name(gpu_type: str) -> str:
    return FLAVOR_PREFIX + gpu_type


def queue_name(workspace: str) -> str:
    return QUEUE_PREFIX + workspace


def workspace_of(queue: str) -> str:
    """The Workspace a product ClusterQueue is for ('' for any other queue)."""
    return queue[len(QUEUE_PREFIX) :] if queue.startswith(QUEUE_PREFIX) else ""


def _serves(node: KubeObject, resource: str) -> bool:
    alloc = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    return alloc is not None and quantity(alloc) > 0


def flavor_node_labels(nodes: Iterable[KubeObject], resource: str) -> dict[str, str]:
    """The node labels of a GPU type's ResourceFlavor: those of FLAVOR_LABEL_KEYS that every
    node serving ``resource`` carries with one value ({} when no node serves it: the flavor
    then matches any node, and the resource name alone places the pods)."""
    common: dict[str, str] | None = None
    for node in nodes:
        if not _serves(node, resource):
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        mine = {k: str(labels[k]) for k in FLAVOR_LABEL_KEYS if k in labels}
        common = mine if common is None else {k: v for k, v in common.items() if mine.get(k) == v}
    return common or {}


def _meta(name: str, namespace: str = "", workspace: str = "") -> KubeObject:
    labels = {MANAGED_BY_LABEL: MANAGED_BY}
    if workspace:
        labels[WORKSPACE_LABEL] = workspace
    meta: KubeObject = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return meta


def resource_flavor(gpu_type: str, node_labels: Mapping[str, str]) -> KubeObject:
    # nodeLabels always, even empty: applied over a flavor that had labels, an empty spec leaves
    # it null once they are removed, and Kueue's CRD refuses that (spec must be an object)
    spec: KubeObject = {"nodeLabels": dict(node_labels)}
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(flavor_name(gpu_type)), "spec": spec}


def any_node_flavor() -> KubeObject:
    """The flavor of cpu and memory: every node (Kueue admits a Workload only when its
    ClusterQueue covers each resource the pods request)."""
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": _meta(ANY_NODE_FLAVOR), "spec": {}}


def _gpu_quota(resource: str, grant: Grant) -> KubeObject:
    out: KubeObject = {"name": resource, "nominalQuota": str(grant.guarantee), "borrowingLimit": str(grant.burst)}
    if grant.lend is not None:
        out["lendingLimit"] = str(grant.lend)
    return out


def cluster_queue(
    workspace: str, gpu_type: str, resource: str, grant: Grant, *, cpu: str = "", memory: str = ""
) -> KubeObject:
    """The Workspace's ClusterQueue in its GPU type's cohort. Its pods' cpu and memory are
    covered too (``brick-any-node``, never borrowed): the ResourceQuota limits them already.
    A pending Workload takes back what it lent from any borrower (``reclaimWithinCohort:
    Any``) and preempts the Workspace's own Jobs, of lower priority (``withinClusterQueue:
    LowerPriority``)."""
    groups: list[KubeObject] = [
        {
            "coveredResources": [resource],
            "flavors": [{"name": flavor_name(gpu_type), "resources": [_gpu_quota(resource, grant)]}],
        }
    ]
    if cpu and memory:
        groups.append(
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": ANY_NODE_FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu, "borrowingLimit": "0"},
                            {"name": "memory", "nominalQuota": memory, "borrowingLimit": "0"},
                        ],
                    }
                ],
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": _meta(queue_name(workspace), workspace=workspace),
        "spec": {
            "cohortName": cohort_name(gpu_type),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": workspace}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": groups,
        },
    }


def local_queue(workspace: str) -> KubeObject:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": _meta(LOCAL_QUEUE, namespace=workspace, workspace=workspace),
        "spec": {"clusterQueue": queue_name(workspace)},
    }


def with_grant(queue: KubeObject, resource: str, grant: Grant) -> KubeObject:
    """The ClusterQueue with its ``resource`` quota set to ``grant`` (the rest unchanged)."""
    out = {**queue, "spec": dict(queue.get("spec") or {})}
    groups = []
    for group in out["spec"].get("resourceGroups") or []:
        flavors = []
        for flavor in group.get("flavors") or []:
            resources = [
                _gpu_quota(resource, grant) if r.get("name") == resource else r for r in flavor.get("resources") or []
            ]
            flavors.append({**flavor, "resources": resources})
        groups.append({**group, "flavors": flavors})
    out["spec"]["resourceGroups"] = groups
    return {
        "apiVersion": queue.get("apiVersion", API_VERSION),
        "kind": "ClusterQueue",
        "metadata": {"name": queue["metadata"]["name"]},
        "spec": out["spec"],
    }


# --- what Kueue reports, for display ---------------------------------------------------------


def _limit(value: object) -> int | None:
    return None if value is None else quantity(str(value))


def _usage(status: KubeObject, field: str, flavor: str, resource: str) -> tuple[int, int] | None:
    for f in status.get(field) or []:
        if f.get("name") != flavor:
            continue
        for r in f.get("resources") or []:
            if r.get("name") == resource:
                return quantity(str(r.get("total") or "0")), quantity(str(r.get("borrowed") or "0"))
    return None


@dataclass(frozen=True)
class QueueLine:
    """One ClusterQueue's quota of one GPU resource, as Kueue holds it: the spec's guarantee
    and limits, and the status's quota reserved (``flavorsReservation``, what Kueue's own
    accounting and preemption read; ``flavorsUsage`` where it reports no reservation) with
    the part of it over the guarantee, ``borrowed``."""

    queue: str
    workspace: str
    cohort: str
    flavor: str
    resource: str
    guarantee: int
    burst: int | None  # borrowingLimit; None: no limit (never shown as 0)
    lend: int | None  # lendingLimit; None: all of the guarantee
    in_use: int = 0
    borrowed: int = 0
    pending: int = 0  # Workloads waiting in the queue (status.pendingWorkloads)
    lent: int = 0  # filled by cohort_lines

    @property
    def ceiling(self) -> int | None:
        return None if self.burst is None else self.guarantee + self.burst

    @property
    def lendable(self) -> int:
        return self.guarantee if self.lend is None else min(self.lend, self.guarantee)

    @property
    def idle_lendable(self) -> int:
        """What others may borrow from it now: its idle guarantee, up to its lend ceiling."""
        return min(self.lendable, max(0, self.guarantee - (self.in_use - self.borrowed)))


def queue_lines(queue: KubeObject) -> list[QueueLine]:
    """Each GPU resource quota of a ClusterQueue (the product's covers one)."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    name = (queue.get("metadata") or {}).get("name", "")
    cohort = spec.get("cohortName") or spec.get("cohort") or ""  # v1beta1 said "cohort"
    out = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                res = r.get("name", "")
                if not res.startswith("nvidia.com/"):
                    continue
                used = _usage(status, "flavorsReservation", flavor.get("name", ""), res)
                if used is None:
                    used = _usage(status, "flavorsUsage", flavor.get("name", ""), res) or (0, 0)
                out.append(
                    QueueLine(
                        queue=name,
                        workspace=workspace_of(name),
                        cohort=cohort,
                        flavor=flavor.get("name", ""),
                        resource=res,
                        guarantee=quantity(str(r.get("nominalQuota") or "0")),
                        burst=_limit(r.get("borrowingLimit")) if cohort else 0,
                        lend=_limit(r.get("lendingLimit")),
                        in_use=used[0],
                        borrowed=used[1],
                        pending=int(status.get("pendingWorkloads") or 0),
                    )
                )
    return out


@dataclass(frozen=True)
class Cohort:
    name: str
    resource: str
    lines: tuple[QueueLine, ...]

    @property
    def guaranteed(self) -> int:
        return sum(x.guarantee for x in self.lines)

    @property
    def borrowed(self) -> int:
        return sum(x.borrowed for x in self.lines)

    @property
    def lent(self) -> int:
        return sum(x.lent for x in self.lines)

    @property
    def idle_lendable(self) -> int:
        """Idle guarantee that may still be borrowed (after what is borrowed now)."""
        return max(0, sum(x.idle_lendable for x in self.lines) - self.borrowed)

    def may_use_now(self, line: QueueLine) -> int:
        """What the queue of ``line`` may hold right now: its guarantee, plus what it borrows and
        what the others' idle lendable guarantee still offers, up to its burst ceiling."""
        others = sum(x.idle_lendable for x in self.lines if x.queue != line.queue)
        free = max(0, others - self.borrowed)  # what the cohort borrows now comes out of it
        more = line.borrowed + free
        return line.guarantee + (more if line.burst is None else min(line.burst, more))


def _spread(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` spread over ``weights`` in proportion, whole numbers (largest remainder,
    ties to the first), never above a weight."""
    whole = sum(weights)
    if not whole or not total:
        return [0] * len(weights)
    total = min(total, whole)
    shares = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def cohort_lines(queues: Iterable[KubeObject]) -> list[Cohort]:
    """The cohorts of these ClusterQueues, per GPU resource, with what each queue lends now.

    Kueue reports what a queue borrows, not whom from: the cohort's borrowed GPUs come out of
    its queues' idle lendable guarantee, so the page spreads them over those in proportion
    (with two Workspaces in a cohort, exactly what the lender lends)."""
    groups: dict[tuple[str, str], list[QueueLine]] = {}
    for q in queues:
        for line in queue_lines(q):
            if line.cohort:
                groups.setdefault((line.cohort, line.resource), []).append(line)
    out = []
    for (name, resource), lines in sorted(groups.items()):
        lines.sort(key=lambda x: x.queue)
        borrowed = sum(x.borrowed for x in lines)
        lent = _spread(borrowed, [x.idle_lendable for x in lines])
        out.append(
            Cohort(
                name,
                resource,
                tuple(replace(line, lent=n) for line, n in zip(lines, lent, strict=True)),
            )
        )
    return out


def borrowing_while_waiting(cohorts: Iterable[Cohort]) -> list[tuple[QueueLine, QueueLine]]:
    """(borrower, waiting) pairs: a queue borrowing from its cohort while another queue of the
    cohort has Workloads waiting. Kueue takes borrowed quota back only for a Workload that
    fits its queue's guarantee; one that needs to borrow itself waits."""
    out: list[tuple[QueueLine, QueueLine]] = []
    for cohort in cohorts:
        waiting = [x for x in cohort.lines if x.pending]
        for borrower in (x for x in cohort.lines if x.borrowed):
            out.extend((borrower, w) for w in waiting if w.queue != borrower.queue)
    return out


# --- what Kueue did to a Workload: evictions and preemptions, and why it waits ---------------
#
# Condition types and reasons from apis/kueue/v1beta2/workload_types.go (v0.17); the message
# of a preemption from pkg/scheduler/preemption/preemption.go (preemptionMessage): "Preempted
# to accommodate a workload (UID: …, JobUID: …) due to …; preemptor path: /<cohort>/<queue>;
# preemptee path: …".

QUOTA_RESERVED = "QuotaReserved"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
ADMITTED = "Admitted"
FINISHED = "Finished"
# The reasons of the Preempted condition.
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
# Preempted because it held quota borrowed from the cohort, which another queue took back.
BORROWED_REASONS = frozenset({IN_COHORT_RECLAMATION, IN_COHORT_RECLAIM_WHILE_BORROWING, IN_COHORT_FAIR_SHARING})
PREEMPTOR_PATH = "preemptor path: "


def condition(workload: KubeObject, kind: str) -> KubeObject | None:
    """The Workload's condition of type ``kind`` (None when it has none)."""
    for c in (workload.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _true(workload: KubeObject, kind: str) -> KubeObject | None:
    c = condition(workload, kind)
    return c if c is not None and c.get("status") == "True" else None


def _gpus_of_pod_spec(spec: KubeObject) -> dict[str, int]:
    out: dict[str, int] = {}
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        amounts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, value in amounts.items():
            if str(name).startswith("nvidia.com/"):
                out[name] = out.get(name, 0) + quantity(str(value))
    return out


def workload_gpus(workload: KubeObject) -> dict[str, int]:
    """The GPUs a Workload holds when admitted: its podSets' counts times what each pod's
    containers request (Kueue clears ``status.admission`` on an eviction, so the spec is read)."""
    out: dict[str, int] = {}
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        count = int(pod_set.get("count", 1) or 0)
        spec = (pod_set.get("template") or {}).get("spec") or {}
        for name, n in _gpus_of_pod_spec(spec).items():
            out[name] = out.get(name, 0) + n * count
    return out


def workload_owner(workload: KubeObject) -> str:
    """What the Workload admits, as ``Kind/name`` (its owner reference), else ``Workload/name``."""
    meta = workload.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") or len(meta.get("ownerReferences") or []) == 1:
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return f"Workload/{meta.get('name', '')}"


def preemptor_queue(message: str) -> str:
    """The ClusterQueue of the Workload a preemption made room for ('' when the message does
    not say: Kueue before its preemptor path)."""
    if PREEMPTOR_PATH not in message:
        return ""
    path = message.split(PREEMPTOR_PATH, 1)[1].split(";", 1)[0].strip()
    return path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Eviction:
    """One eviction of a Workload by Kueue, once: ``key`` is the same however often it is read
    (the Workload's uid and when the eviction happened)."""

    key: str
    namespace: str
    workload: str
    owner: str  # Kind/name of what it admits
    at: str  # RFC 3339, the condition's lastTransitionTime
    reason: str  # the Preempted condition's reason, else the Evicted condition's
    preempted: bool
    message: str
    gpus: tuple[tuple[str, int], ...]
    by_queue: str = ""  # the preemptor's ClusterQueue

    @property
    def borrowed(self) -> bool:
        """Borrowed quota taken back by the cohort (Kueue asks nobody); otherwise the Workload
        lost quota of its own queue (a higher priority in its queue, a timeout, a stop)."""
        return self.preempted and self.reason in BORROWED_REASONS

    @property
    def by_workspace(self) -> str:
        return workspace_of(self.by_queue)


def eviction(workload: KubeObject) -> Eviction | None:
    """The Workload's current eviction (Evicted or Preempted True), or None."""
    evicted, preempted = _true(workload, EVICTED), _true(workload, PREEMPTED)
    if evicted is None and preempted is None:
        return None
    times = [str(c.get("lastTransitionTime") or "") for c in (evicted, preempted) if c is not None]
    at = min(t for t in times if t) if any(times) else ""
    main = preempted or evicted or {}
    message = str(main.get("message") or "")
    return _eviction_of(
        workload,
        at,
        reason=str(main.get("reason") or ""),
        preempted=preempted is not None or (evicted or {}).get("reason") == PREEMPTED,
        message=message,
        by_queue=preemptor_queue(message),
    )


def _eviction_of(
    workload: KubeObject, at: str, *, reason: str, preempted: bool, message: str, by_queue: str
) -> Eviction:
    """An Eviction of ``workload`` at ``at``, keyed by the Workload (its uid, else its name) and that time."""
    meta = workload.get("metadata") or {}
    return Eviction(
        key=f"{meta.get('uid') or meta.get('namespace', '') + '/' + meta.get('name', '')}@{at}",
        namespace=str(meta.get("namespace") or ""),
        workload=str(meta.get("name") or ""),
        owner=workload_owner(workload),
        at=at,
        reason=reason,
        preempted=preempted,
        message=message,
        gpus=tuple(sorted(workload_gpus(workload).items())),
        by_queue=by_queue,
    )


# Once a Workload holds quota again, Kueue sets its Evicted and Preempted conditions False with
# the reason QuotaReserved and the message "Previously: <the eviction's message>"
# (pkg/workload/workload.go resetActiveCondition), and counts every eviction in
# status.schedulingStats.evictions by reason and underlying cause (workloadEvictionStateInc, in the
# same status patch as the Evicted condition). A reader that polls sees an eviction that ended
# between two reads through them.
PREVIOUSLY = "Previously: "
# pkg/scheduler/preemption/preemption.go HumanReadablePreemptionReasons: how a preemption's message
# says its reason ("... due to <words>; preemptor path: ..."), read back once the reason is reset.
PREEMPTION_REASON_WORDS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}
_REASON_OF_WORDS = {words: reason for reason, words in PREEMPTION_REASON_WORDS.items()}


def eviction_counts(workload: KubeObject) -> list[tuple[str, str, int]]:
    """(reason, underlying cause, count) of every eviction Kueue counted for the Workload; a
    preemption is reason ``Preempted`` with the preemption's reason as its cause."""
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    return [
        (str(e.get("reason") or ""), str(e.get("underlyingCause") or ""), int(e.get("count") or 0))
        for e in stats.get("evictions") or []
    ]


def preemption_reason(message: str) -> str:
    """The Preempted reason a preemption's message names ('' when it names none)."""
    if " due to " not in message:
        return ""
    words = message.split(" due to ", 1)[1].split(";", 1)[0].strip()
    return _REASON_OF_WORDS.get(words, "")


def ended_eviction(workload: KubeObject) -> Eviction | None:
    """The Workload's last eviction once it holds quota again (its Evicted condition False,
    "Previously: ..."), or None. Its time is when it got quota back: Kueue keeps no other."""
    evicted = condition(workload, EVICTED)
    if evicted is None or evicted.get("status") != "False":
        return None
    message = str(evicted.get("message") or "")
    if not message.startswith(PREVIOUSLY):
        return None
    message = message[len(PREVIOUSLY) :]
    preempted = condition(workload, PREEMPTED) or {}
    # the Preempted condition is the same eviction's when it says the same (an older
    # preemption's stays behind it when a later eviction had another cause)
    was_preempted = str(preempted.get("message") or "") == PREVIOUSLY + message
    reason = preemption_reason(message) if was_preempted else ""
    if not reason:
        # the one kind of eviction it counted, of this kind (preemption or not), if one
        kinds = {
            cause or why for why, cause, n in eviction_counts(workload) if n and (why == PREEMPTED) == was_preempted
        }
        reason = kinds.pop() if len(kinds) == 1 else ""
    return _eviction_of(
        workload,
        str(evicted.get("lastTransitionTime") or ""),
        reason=reason,
        preempted=was_preempted,
        message=message,
        by_queue=preemptor_queue(message) if was_preempted else "",
    )


def evictions_of(workload: KubeObject) -> list[Eviction]:
    """Every eviction of the Workload Kueue has counted, each once, keyed ``<uid>#<n>`` (the
    n-th): the last with what its condition says, whether it lasts or ended; earlier ones whose
    condition Kueue has since overwritten with what its counts say (reason and cause; their
    order among themselves is not kept, their time is at the latest that of the last). Without
    counts (Kueue before v0.13) the current eviction only, keyed by its time."""
    counts = eviction_counts(workload)
    total = sum(n for _r, _c, n in counts)
    current = eviction(workload)
    if not total:
        return [current] if current is not None else []
    last = current or ended_eviction(workload)
    meta = workload.get("metadata") or {}
    base = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    earlier = sorted((cause or why, why == PREEMPTED) for why, cause, n in counts for _ in range(n))
    if last is not None:
        mine = (last.reason, last.preempted)
        if mine in earlier:
            earlier.remove(mine)
        else:
            earlier.pop()
    out = [
        Eviction(
            key=f"{base}#{i}",
            namespace=str(meta.get("namespace") or ""),
            workload=str(meta.get("name") or ""),
            owner=workload_owner(workload),
            at=last.at if last is not None else "",
            reason=reason,
            preempted=preempted,
            message="",
            gpus=tuple(sorted(workload_gpus(workload).items())),
        )
        for i, (reason, preempted) in enumerate(earlier, start=1)
    ]
    if last is not None:
        out.append(replace(last, key=f"{base}#{total}"))
    return out


def evictions(workloads: Iterable[KubeObject]) -> list[Eviction]:
    """Every eviction of the Workloads Kueue has counted (``evictions_of``), oldest first."""
    out = [e for w in workloads for e in evictions_of(w)]
    return sorted(out, key=lambda e: (e.at, e.key))


@dataclass(frozen=True)
class Waiting:
    """Why Kueue has not admitted a Workload: its QuotaReserved condition false, with Kueue's
    message, and its place among the Workloads waiting in its queue (``queue_positions``)."""

    namespace: str
    workload: str
    owner: str
    reason: str
    message: str
    position: int | None = None


def waiting(workload: KubeObject) -> Waiting | None:
    """None for a Workload that holds quota or has finished."""
    if _true(workload, FINISHED) is not None or _true(workload, QUOTA_RESERVED) is not None:
        return None
    reserved = condition(workload, QUOTA_RESERVED) or {}
    meta = workload.get("metadata") or {}
    return Waiting(
        namespace=str(meta.get("namespace") or ""),
        workload=str(meta.get("name") or ""),
        owner=workload_owner(workload),
        reason=str(reserved.get("reason") or ""),
        message=str(reserved.get("message") or ""),
    )


def waiting_in_queues(workloads: Iterable[KubeObject]) -> list[Waiting]:
    """The Workloads Kueue has not admitted, each with its place in its queue (1: next). The
    Workload's status does not say it (Kueue's visibility API does); the product's queues are one
    LocalQueue per Workspace namespace, ordered as ``BestEffortFIFO`` orders them: higher
    ``spec.priority`` first, then older first."""
    pending: list[tuple[KubeObject, Waiting]] = []
    for w in workloads:
        seen = waiting(w)
        if seen is not None:
            pending.append((w, seen))
    out: list[Waiting] = []
    queues: dict[tuple[str, str], list[tuple[KubeObject, Waiting]]] = {}
    for w, seen in pending:
        queues.setdefault((seen.namespace, str((w.get("spec") or {}).get("queueName") or "")), []).append((w, seen))
    for members in queues.values():
        members.sort(
            key=lambda m: (
                -int((m[0].get("spec") or {}).get("priority") or 0),
                str((m[0].get("metadata") or {}).get("creationTimestamp") or ""),
                m[1].workload,
            )
        )
        out.extend(replace(seen, position=i) for i, (_w, seen) in enumerate(members, start=1))
    return sorted(out, key=lambda x: (x.namespace, x.position or 0))


def waiting_rows(workloads: Iterable[KubeObject]) -> list[KubeObject]:
    """What the pages keep of the Workloads Kueue has not admitted (``waiting_in_queues``), as rows."""
    return [
        {
            "namespace": w.namespace,
            "workload": w.workload,
            "owner": w.owner,
            "reason": w.reason,
            "message": w.message[:2000],
            "position": w.position,
        }
        for w in waiting_in_queues(workloads)
    ]


def view_part(served: bool, queues: Iterable[KubeObject], workloads: Iterable[KubeObject]) -> KubeObject:
    """What the published cluster view holds of Kueue for the pages: whether it is served, the
    ClusterQueues (projected: spec and status) and the Workloads that wait."""
    return {"served": served, "queues": list(queues) if served else [], "waiting": waiting_rows(workloads)}
