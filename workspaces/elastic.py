"""Elastic quota on Kueue: the approval's Kueue part, and what pages know of Kueue.

With Kueue served (the gateway's discovery; the twin: BRICK_TWIN_KUEUE or a scenario's
CustomResourceDefinition), approving a GPU Workspace also writes what brickadmin/cluster/kueue.py
builds from the grant: the GPU type's ResourceFlavor (kept: other Workspaces share it), the
Workspace's ClusterQueue in the type's cohort, its LocalQueue ``default``, and the namespace label
that Kueue's ``managedJobsNamespaceSelector`` selects; its ResourceQuota holds guarantee + burst.
Each write is idempotent (server-side apply) and an approval that fails deletes the ClusterQueue
with the namespace (workspaces/approvals.py ``_create_with_undo``). Without Kueue nothing of this
is written and the approval is what it always was.

Pages read ``facts()``, one query, never the API server: the Kueue part of the published cluster
view (the watcher lists and watches ClusterQueues and Workloads, so the pages follow Kueue within
a publication) or, when newer, the row (``KueueFacts``) the beat refreshes every minute as a
catch-up (``read_kueue``, workspaces.tasks.read_kueue) and an approval or a quota change writes.
Each eviction is recorded once from either: after each publication (``record_from_view``) and by
the beat (a Workload evicted and deleted between two publications).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from brickadmin.cluster import ClusterError, NotFound, kueue
from brickadmin.cluster.gateway import get_gateway
from brickadmin.wording import said
from gpus.numbers.ledger import gpu_type_of

from .models import Decision, KueueFacts

log = logging.getLogger(__name__)


# --- what pages read ----------------------------------------------------------------------


@dataclass
class Facts:
    """Kueue as last read: ``served`` None when not read lately (the beat is not running)."""

    served: bool | None
    read_at: datetime | None = None
    queues: list[dict] = field(default_factory=list)
    waiting: list[dict] = field(default_factory=list)  # Workloads not admitted (kueue.waiting_in_queues)

    @property
    def cohorts(self) -> list[kueue.Cohort]:
        return kueue.cohort_lines(self.queues)

    def lines_of(self, workspace: str) -> list[kueue.QueueLine]:
        """The Workspace's ClusterQueue lines, each with what it lends now (from its cohort)."""
        return [line for c in self.cohorts for line in c.lines if line.workspace == workspace]

    def cohort_of(self, line: kueue.QueueLine) -> kueue.Cohort | None:
        return next((c for c in self.cohorts if c.name == line.cohort and c.resource == line.resource), None)


@dataclass
class WorkspaceElastic:
    """A Workspace's elastic quota as a page shows it: each of its queue lines with its cohort."""

    served: bool | None
    read_at: datetime | None
    lines: list[tuple[kueue.QueueLine, kueue.Cohort | None, int]] = field(
        default_factory=list
    )  # line, cohort, may use now


def of_workspace(workspace: str) -> WorkspaceElastic:
    """One query (facts), never the API server."""
    seen = facts()
    out = WorkspaceElastic(served=seen.served, read_at=seen.read_at)
    cohorts = seen.cohorts
    for cohort in cohorts:
        for line in cohort.lines:
            if line.workspace == workspace:
                out.lines.append((line, cohort, cohort.may_use_now(line)))
    return out


def _decoded(value):
    return json.loads(value) if isinstance(value, str) else value  # a database whose JSON comes back as text


def _view_current_at(row: dict):
    """Until when the view is known to hold Kueue as it is: its projection's time, or the watcher's
    last beat when the watcher said it was following every kind (nothing published: nothing changed)."""
    as_of, seen = row.get("view_as_of"), row.get("view_seen_at")
    if seen is not None and _decoded(row.get("view_behind")) is False and (as_of is None or seen > as_of):
        return seen
    return as_of


def facts() -> Facts:
    """One query; never the API server. The newer of the watcher's view (it follows Kueue's
    ClusterQueues and Workloads as they change) and the beat's last read (the catch-up, and
    what a one-off read or a stopped watcher leaves)."""
    from gpus.view import reading

    row = (
        KueueFacts.objects.filter(pk=1)
        .annotate(**reading.kueue_view_columns())
        .values("served", "read_at", "cluster_queues", "waiting", *reading.KUEUE_VIEW_FIELDS)
        .first()
    )
    if row is None:  # the beat has not read Kueue yet: the view alone
        row = reading.kueue_view()
    read_at, served = row.get("read_at"), row.get("served")
    queues, waiting = row.get("cluster_queues") or [], row.get("waiting") or []
    part, as_of = _decoded(row.get("view_kueue")), _view_current_at(row)
    if isinstance(part, dict) and as_of is not None and (read_at is None or as_of >= read_at):
        read_at, served = as_of, bool(part.get("served"))
        queues, waiting = part.get("queues") or [], part.get("waiting") or []
    if read_at is None:
        return Facts(served=None)
    if timezone.now() - read_at > timedelta(seconds=settings.BRICK_KUEUE_FACTS_SECONDS):
        return Facts(served=None, read_at=read_at)
    return Facts(served=served, read_at=read_at, queues=list(queues), waiting=list(waiting))


def _slim(queue: dict) -> dict:
    return {
        "metadata": {"name": queue["metadata"]["name"], "labels": queue["metadata"].get("labels") or {}},
        "spec": queue.get("spec") or {},
        "status": queue.get("status") or {},
    }


def _slim_workload(w: dict) -> dict:
    meta = w.get("metadata") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "creationTimestamp", "ownerReferences") if k in meta
        },
        "spec": {k: v for k, v in (w.get("spec") or {}).items() if k in ("queueName", "priority", "podSets")},
        "status": {k: v for k, v in (w.get("status") or {}).items() if k in ("conditions", "schedulingStats")},
    }


def read_kueue(gateway=None) -> Facts:
    """Read whether Kueue is served, its ClusterQueues and Workloads, and keep them for the
    pages; each eviction of a Workspace's Workload becomes one audited row (``record_evictions``)."""
    gateway = gateway or get_gateway()
    try:
        served = gateway.kueue_served()
        queues = [_slim(q) for q in gateway.list_kueue("ClusterQueue")] if served else []
        workloads = [_slim_workload(w) for w in gateway.list_kueue("Workload")] if served else []
    except ClusterError as exc:
        log.info("Kueue could not be read: %s", exc)
        KueueFacts.objects.update_or_create(pk=1, defaults={"error": str(exc)[:500]})
        return facts()
    now = timezone.now()
    waiting = kueue.waiting_rows(workloads)
    KueueFacts.objects.update_or_create(
        pk=1,
        defaults={"served": served, "read_at": now, "cluster_queues": queues, "waiting": waiting, "error": ""},
    )
    record_evictions(kueue.evictions(workloads))
    return Facts(served=served, read_at=now, queues=queues, waiting=waiting)


# --- what Kueue took back: one audited row per eviction -----------------------------------

# The Workloads of the last publication this process recorded evictions from (held, so that
# their identities stay theirs): a publication whose Workloads are the same objects (the
# watcher keeps an unchanged object as it is) has nothing new to record.
_recorded_from: dict = {"workloads": ()}


def record_from_view(snapshot) -> int:
    """After each publication of the cluster view (gpus.view.publish.PUBLISHED): the evictions
    of its Workloads recorded, each once, as the beat records them. Returns how many were new."""
    workloads = tuple(snapshot.kueue_workloads) if snapshot.kueue_served else ()
    before = _recorded_from["workloads"]
    if len(before) == len(workloads) and all(a is b for a, b in zip(before, workloads, strict=True)):
        return 0
    new = record_evictions(kueue.evictions(workloads))
    _recorded_from["workloads"] = workloads
    return new


def _when(text: str):
    at = parse_datetime(text) if text else None
    return at if at is not None else timezone.now()


def _detail(e: kueue.Eviction):
    n = sum(n for _r, n in e.gpus)
    res = ", ".join(r for r, _n in e.gpus) or "-"
    if e.borrowed:
        return said(
            "decision.kueue_reclaimed",
            what=e.owner,
            wl=e.workload,
            n=n,
            res=res,
            by=e.by_workspace or e.by_queue or "?",
            reason=e.reason,
        )
    if e.preempted and e.reason == kueue.IN_CLUSTER_QUEUE:
        return said("decision.kueue_preempted_in_queue", what=e.owner, wl=e.workload, n=n, res=res)
    return said("decision.kueue_evicted", what=e.owner, wl=e.workload, n=n, res=res, reason=e.reason, msg=e.message)


def record_evictions(found: list[kueue.Eviction]) -> int:
    """Each eviction of a Workload in a Workspace namespace kept once (``Decision.source``, the
    Workload's uid and when it was evicted): a row on the Workspace's history and in the audit
    log (who lost what, for whom, when), a notice on the owner's page and a notification.
    Returns how many were new."""
    from .directory import record_of

    new = 0
    sources = {e.key: f"kueue-eviction:{e.key}"[:300] for e in found}
    kept = set(Decision.objects.filter(source__in=sources.values()).values_list("source", flat=True))
    for e in found:
        source = sources[e.key]
        if source in kept:
            continue
        record = record_of(e.namespace)
        if record is None:
            continue  # not a Workspace: Kueue's own business
        detail = _detail(e)
        try:
            with transaction.atomic():
                Decision.objects.create(
                    at=_when(e.at),
                    actor=None,
                    actor_name="Kueue",
                    action=Decision.Action.KUEUE_EVICTED,
                    workspace=record,
                    subject=e.namespace,
                    gpu_resource=", ".join(r for r, _n in e.gpus)[:253],
                    amount=sum(n for _r, n in e.gpus),
                    detail=detail,
                    source=source,
                )
        except IntegrityError:
            continue  # another reader kept it first
        new += 1
        _tell_owner(e, record, detail)
    return new


def _tell_owner(e: kueue.Eviction, record, detail) -> None:
    from django.urls import reverse

    from brickadmin import notify
    from gpus.models import OwnerNotice

    OwnerNotice.objects.create(
        namespace=e.namespace,
        owner_name=record.requester_name,
        subject=f"kueue:{e.namespace}/{e.workload}"[:300],
        actor_name="Kueue",
        message=detail,
    )

    def words():
        return said("notify.kueue_evicted_subject", ws=e.namespace, what=e.owner), detail

    notify.notify_owner(
        e.namespace,
        "kueue-evicted",
        words,
        reverse("workspace_detail", args=[record.pk]),
        owner_name=record.requester_name,
    )


# --- the approval's Kueue part --------------------------------------------------------------


def default_grant(guarantee: int) -> kueue.Grant:
    return kueue.default_grant(guarantee, settings.BRICK_KUEUE_BURST_PERCENT, settings.BRICK_KUEUE_LEND_PERCENT)


@dataclass
class Part:
    """What an approval writes to Kueue for one Workspace."""

    workspace: str
    resource: str
    gpu_type: str
    grant: kueue.Grant
    cpu: str = ""
    memory: str = ""
    made: bool = False  # the ClusterQueue was sent (it may exist): an undo deletes it

    def quota_manifests(self, manifests: list[dict]) -> list[dict]:
        """The Workspace's manifests with the compute quota's GPU at the ceiling (guarantee + burst)."""
        key = "requests." + self.resource
        out = []
        for m in manifests:
            hard = (m.get("spec") or {}).get("hard") or {}
            if m["kind"] == "ResourceQuota" and key in hard:
                m = {**m, "spec": {**m["spec"], "hard": {**hard, key: str(self.grant.ceiling)}}}
            out.append(m)
        return out

    def manifests(self, nodes: list[dict]) -> list[dict]:
        """In creation order: the flavors, the ClusterQueue, then the LocalQueue."""
        return [
            kueue.resource_flavor(self.gpu_type, kueue.flavor_node_labels(nodes, self.resource)),
            kueue.any_node_flavor(),
            kueue.cluster_queue(
                self.workspace, self.gpu_type, self.resource, self.grant, cpu=self.cpu, memory=self.memory
            ),
            kueue.local_queue(self.workspace),
        ]

    def ensure(self, gw) -> None:
        """Each write idempotent (server-side apply), so a retried approval goes through them
        again. The namespace is labelled when created (``labels``); one an interrupted approval
        left without the label gets it here."""
        selector = f"{kueue.MANAGED_NAMESPACE_LABEL}={kueue.MANAGED_NAMESPACE_VALUE}"
        if not any(n["metadata"]["name"] == self.workspace for n in gw.list_namespaces(label_selector=selector)):
            gw.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": self.workspace, "labels": labels(self)},
                }
            )
        for manifest in self.manifests(gw.list_nodes()):
            if manifest["kind"] == "ClusterQueue":
                self.made = True  # sent: it may have been carried out
            gw.apply(manifest)

    def undo(self, gw) -> str:
        """The ClusterQueue deleted (the namespace takes the LocalQueue; flavors are shared and
        kept). '' or why it could not be."""
        if not self.made:
            return ""
        try:
            gw.delete(kueue.API_VERSION, "ClusterQueue", kueue.queue_name(self.workspace))
        except NotFound:
            pass
        except ClusterError as exc:
            return str(exc)
        return ""


def labels(part: Part | None) -> dict[str, str]:
    """The label by which Kueue's managedJobsNamespaceSelector picks a Workspace namespace ({} without Kueue)."""
    return {kueue.MANAGED_NAMESPACE_LABEL: kueue.MANAGED_NAMESPACE_VALUE} if part is not None else {}


def for_approval(gw, req, resource: str, grant: kueue.Grant | None) -> Part | None:
    """The approval's Kueue part: None for a request of no GPU or where Kueue is not served
    (the approval is then exactly what it is without Kueue). Reads discovery once."""
    if not req.gpu or not resource or not gw.kueue_served():
        return None
    grant = grant or default_grant(req.gpu)
    return Part(
        workspace=req.namespace,
        resource=resource,
        gpu_type=gpu_type_of(resource),
        grant=grant,
        cpu=str(req.cpu),
        memory=f"{req.memory_gib}Gi",
    )


def recorded(req, actor, part: Part | None) -> None:
    """After the approval is recorded: the grant recorded beside it (who, what Kueue holds),
    and the request's GPU follows its ResourceQuota (the ceiling), as a quota change keeps it,
    so the Workspace checks compare like with like."""
    if part is None:
        return
    type(req).objects.filter(pk=req.pk).update(gpu=part.grant.ceiling)
    Decision.objects.create(
        actor=actor,
        actor_name=actor.get_username(),
        action=Decision.Action.QUOTA,
        workspace=req,
        subject=req.name,
        gpu_resource=part.resource,
        amount=part.grant.ceiling,
        detail=said(
            "decision.elastic_granted",
            g=part.grant.guarantee,
            b=part.grant.burst,
            lend=part.grant.guarantee if part.grant.lend is None else part.grant.lend,
            q=kueue.queue_name(part.workspace),
            c=kueue.cohort_name(part.gpu_type),
        ),
    )


# --- a quota change's Kueue part (workspaces/procedures.py SetElasticQuota) -----------------


def queue_of(gw, workspace: str) -> dict | None:
    name = kueue.queue_name(workspace)
    return next((q for q in gw.list_kueue("ClusterQueue") if q["metadata"]["name"] == name), None)


def set_grant(gw, workspace: str, resource: str, grant: kueue.Grant) -> dict | None:
    """The Workspace's ClusterQueue with its GPU quota set to ``grant`` (None: it has none)."""
    queue = queue_of(gw, workspace)
    if queue is None:
        return None
    manifest = kueue.with_grant(queue, resource, grant)
    gw.apply(manifest)
    return manifest


def grant_now(gw, workspace: str, resource: str) -> kueue.Grant | None:
    queue = queue_of(gw, workspace)
    if queue is None:
        return None
    line = next((x for x in kueue.queue_lines(queue) if x.resource == resource), None)
    if line is None:
        return None
    return kueue.Grant(line.guarantee, line.burst if line.burst is not None else 0, line.lend)


def queued(gw, job: dict) -> dict:
    """A product Job with Kueue's queue-name label (the namespace's LocalQueue ``default``)
    when its Workspace's namespace is one Kueue manages; unchanged otherwise."""
    ns = job["metadata"].get("namespace", "")
    selector = f"{kueue.MANAGED_NAMESPACE_LABEL}={kueue.MANAGED_NAMESPACE_VALUE}"
    if not any(n["metadata"]["name"] == ns for n in gw.list_namespaces(label_selector=selector)):
        return job
    labels = {**(job["metadata"].get("labels") or {}), kueue.QUEUE_LABEL: kueue.LOCAL_QUEUE}
    return {**job, "metadata": {**job["metadata"], "labels": labels}}
