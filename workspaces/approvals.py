"""Workspace requests and their approval: limits, names, GPU choices, and the approval that
creates the Workspace through the gateway, all or nothing, then records the decision.

Views stay thin; everything that talks to the cluster or decides goes through here.

What an approved Workspace is, in Kubernetes terms (all created through the gateway):
- Namespace ``<name>`` labelled ``brick.cloud/workspace=true``, ``brick.cloud/owner=<user>`` and
  Pod Security ``baseline`` (``BRICK_WORKSPACE_POD_SECURITY``).
- ResourceQuota ``workspace-compute``: ``requests.<gpu resource>``, ``requests.cpu``,
  ``requests.memory``, scoped with ``PriorityClass NotIn [brick-job-priority]``. Every pod
  in the namespace counts against it (pods at ``brick-user-priority`` and pods with no
  class alike) except scavenging Jobs, which by design run outside Workspace
  quotas (docs/operator-guide.md#jobs). The scope also makes it a quota that "covers" brick-user-priority pods when the
  API server limits that class through ResourceQuota admission ``limitedResources``.
- ResourceQuota ``workspace-devices``, for a GPU type published through Dynamic Resource
  Allocation: ``<class>.deviceclass.resource.k8s.io/devices`` (no ``requests.`` prefix), what
  Kubernetes counts for each ResourceClaim (brickadmin.cluster.dra.claim_device_usage: each
  device a request asks for, "All" as 32). Unscoped: the quota evaluator of claims matches no
  scope, so in the scoped compute quota it would limit nothing.
- ResourceQuota ``workspace-storage``: ``requests.storage`` (PVCs; the API server refuses
  a PriorityClass scope on a storage quota, hence a second, unscoped quota).
- LimitRange ``workspace-defaults``: default cpu/memory requests for containers that
  state none, so pods are admitted under a quota that tracks cpu and memory.
- PriorityClass ``brick-user-priority`` (value > 0, cluster-wide) is ensured to exist;
  Workspace pods name it and may preempt Jobs (``brick-job-priority``, negative value,
  ``preemptionPolicy: Never``).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from brickadmin.cluster import ClusterError, Conflict, TransientClusterError
from brickadmin.cluster.gateway import get_gateway
from brickadmin.cluster.vocabulary import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NVIDIA_PREFIX,
    OWNER_LABEL,
    PLUGIN_NAMESPACE,
    WORKSPACE_LABEL,
)
from brickadmin.database import DATABASE_GONE, wait_for_database
from brickadmin.wording import said
from gpus.numbers import ledger as ledger_mod
from gpus.numbers.dra_lines import dra_lines, is_dra_resource
from gpus.view.live import LiveRead

from . import elastic, notices
from .labels import namespace_labels, owner_label_value
from .models import (
    COMPUTE_QUOTA,
    DEVICE_QUOTA,
    JOB_PRIORITY_CLASS,
    LIMIT_RANGE,
    STORAGE_QUOTA,
    USER_PRIORITY_CLASS,
    USER_PRIORITY_VALUE,
    Decision,
    JobSettings,
    ResourceLimit,
    WorkspaceRequest,
)

log = logging.getLogger(__name__)

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The only GPU resource names a Workspace quota can ever carry, as requests.<name>.
GPU_RESOURCE_RE = re.compile(rf"^{re.escape(NVIDIA_PREFIX)}(gpu|gpu\.shared|mig-[0-9]+g\.[0-9]+gb(\.me)?)$")
# The DeviceClasses of NVIDIA's DRA driver a Workspace quota can name, as the quota names them
# (<class>.deviceclass.resource.k8s.io/devices): whole GPUs (and their shares), MIG devices.
DRA_RESOURCE_RE = re.compile(r"^(gpu|mig)\.nvidia\.com\.deviceclass\.resource\.k8s\.io/devices$")
LIMIT_KEYS = ("gpu", "cpu", "memory_gib", "storage_gib")


def is_workspace_resource(resource: str) -> bool:
    """Whether a Workspace quota may name ``resource``: a device plugin's GPU resource or a DeviceClass's devices."""
    return bool(GPU_RESOURCE_RE.match(resource or "") or DRA_RESOURCE_RE.match(resource or ""))


def quota_key(resource: str) -> str:
    """The key a ResourceQuota's hard holds for a GPU resource: ``requests.<resource>`` for a
    device plugin's (the only form the API server enforces for extended resources), the
    resource itself for a DeviceClass's devices (<class>.deviceclass.resource.k8s.io/devices)."""
    return resource if is_dra_resource(resource) else "requests." + resource


def device_class_of(resource: str) -> str:
    """gpu.nvidia.com.deviceclass.resource.k8s.io/devices -> gpu.nvidia.com ('' for a device plugin's resource)."""
    return resource.split(".deviceclass.", 1)[0] if is_dra_resource(resource) else ""


class WorkspaceError(Exception):
    """A decision that could not be carried out; the message is shown to the admin."""


# --- limits -------------------------------------------------------------------


def limits_for(user) -> dict[str, int]:
    """The user's own limit, else the largest of their groups' (per field), else defaults."""
    own = ResourceLimit.objects.filter(user=user).first()
    if own:
        return own.as_dict()
    group_limits = list(ResourceLimit.objects.filter(group__in=user.groups.all()))
    if group_limits:
        return {k: max(getattr(g, k) for g in group_limits) for k in LIMIT_KEYS}
    return {k: int(settings.BRICK_DEFAULT_LIMITS[k]) for k in LIMIT_KEYS}


# --- names ----------------------------------------------------------------------


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Workspace namespace name, or None."""
    if len(name) > 63:
        return _("At most 63 characters.")
    if not DNS1123_LABEL.match(name):
        return _(
            "Use lowercase letters, digits and '-', starting and ending with a letter or digit "
            "(a Kubernetes namespace name)."
        )
    if name.startswith("kube-") or name in ("default", PLUGIN_NAMESPACE, "gpu-operator"):
        return _("This name is reserved for the system.")
    return None


def name_taken(name: str) -> str | None:
    """Why the name is taken (a request holds it, or the namespace exists), or None.
    Raises ClusterError when the cluster cannot be read."""
    if WorkspaceRequest.objects.filter(name=name, status__in=["pending", "approving", "approved"]).exists():
        return _("A Workspace with this name already exists or is waiting for approval.")
    if any(ns["metadata"]["name"] == name for ns in LiveRead().list_namespaces()):
        return _("A namespace with this name already exists in the cluster.")
    return None


def create_request(user, *, name, gpu, cpu, memory_gib, storage_gib, purpose="") -> WorkspaceRequest:
    try:
        with transaction.atomic():
            return WorkspaceRequest.objects.create(
                name=name,
                requester=user,
                requester_name=user.get_username(),
                gpu=gpu,
                cpu=cpu,
                memory_gib=memory_gib,
                storage_gib=storage_gib,
                purpose=(purpose or "").strip(),
            )
    except IntegrityError:
        raise WorkspaceError(_("A Workspace with this name already exists or is waiting for approval.")) from None


# --- GPU choices for the approval queue ----------------------------------------------


@dataclass
class GpuChoice:
    resource: str
    gpu_type: str  # exclusive | shared | mig-<profile>
    total: int
    allocated: int
    replicas: list[int] = field(default_factory=list)  # shared only
    # GPU Operator: where this resource is time-sliced replicas ([node, replicas, logical]),
    # and how much of the Total they give (ledger ResourceRow.shared_on / shared_logical).
    shared_on: list = field(default_factory=list)
    shared_logical: int = 0
    # MIG strategy single: where this plain resource is MIG instances ([node, profile, logical]).
    mig_on: list = field(default_factory=list)
    # Where its replicas are MPS clients, not time-slices ([node, replicas, logical]; among
    # shared_on on a GPU Operator cluster), and how the whole resource is shared (ledger
    # ResourceRow.sharing_strategy: "mps" when every replica of it is an MPS one).
    mps_on: list = field(default_factory=list)
    sharing_strategy: str = ""
    # Published through DRA: the DeviceClass, the GPU models behind it and the GPU types of its
    # devices (exclusive, shared, mig-<profile>, mig-dynamic), from the nodes' DRA lines.
    device_class: str = ""
    models: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    @property
    def is_dra(self) -> bool:
        return bool(self.device_class)

    @property
    def kinds_text(self) -> str:
        """'whole GPUs, shared GPUs (consumable shares)': what the DeviceClass's devices are."""
        words = {
            ledger_mod.EXCLUSIVE: _("whole GPUs"),
            ledger_mod.SHARED: _("shared GPUs (consumable shares)"),
            "mig-dynamic": _("MIG devices made on demand (dynamic MIG)"),
        }
        out: list[str] = []
        for kind in self.kinds:
            word = words.get(kind) or (_("MIG devices") if kind.startswith("mig-") else kind)
            if word not in out:
                out.append(word)
        return ", ".join(out)

    @property
    def label(self) -> str:
        """How the approval queue names a DRA choice: 'NVIDIA A100 80GB PCIe · DRA gpu.nvidia.com (whole GPUs)'."""
        return _("%(models)s · DRA %(cls)s (%(kinds)s)") % {
            "models": ", ".join(self.models) or _("GPUs"),
            "cls": self.device_class,
            "kinds": self.kinds_text,
        }

    @property
    def mig_nodes_text(self) -> str:
        """'qcs08 (MIG 1g.10gb: 14 of 20)' for the nodes whose plain resource is MIG instances."""
        return ", ".join(
            _("%(node)s (MIG %(p)s: %(n)s of %(t)s)") % {"node": node, "p": p, "n": n, "t": self.total}
            for node, p, n in self.mig_on
        )

    @property
    def by_mps(self) -> bool:
        """Every replica of this resource is an MPS client (NVIDIA's MPS, not time-slicing)."""
        return self.sharing_strategy == ledger_mod.MPS

    @property
    def time_sliced_on(self) -> list:
        """shared_on without the nodes that share by MPS."""
        mps = {node for node, _r, _n in self.mps_on}
        return [entry for entry in self.shared_on if entry[0] not in mps]

    def _nodes_text(self, entries) -> str:
        return ", ".join(
            _("%(node)s (replicas %(r)s: %(n)s of %(t)s)") % {"node": node, "r": r, "n": n, "t": self.total}
            for node, r, n in entries
        )

    @property
    def shared_nodes_text(self) -> str:
        """'qcs05 (replicas 5: 5 of 6)' for the nodes whose plain resource is time-sliced."""
        return self._nodes_text(self.time_sliced_on)

    @property
    def mps_nodes_text(self) -> str:
        """'qcs07 (replicas 4: 8 of 10)' for the nodes that share the resource by MPS."""
        return self._nodes_text(self.mps_on)

    @property
    def available(self) -> int:
        return self.total - self.allocated

    @property
    def profile(self) -> str:
        return self.gpu_type[4:] if self.gpu_type.startswith("mig-") else ""

    def leaves(self, amount: int) -> int:
        return self.available - amount

    def physical_text(self, amount: int) -> str:
        if self.is_dra:
            return self._dra_physical_text(amount)
        if self.gpu_type == ledger_mod.SHARED:
            if len(set(self.replicas)) == 1:
                r = self.replicas[0]
                phys = amount / r
                phys_s = f"{phys:g}"
                return _("%(n)s shared = %(p)s physical GPU (replicas %(r)s)") % {"n": amount, "p": phys_s, "r": r}
            if self.replicas:
                return _("%(n)s shared = %(lo)s–%(hi)s physical GPU (replicas %(rs)s by node)") % {
                    "n": amount,
                    "lo": f"{amount / max(self.replicas):g}",
                    "hi": f"{amount / min(self.replicas):g}",
                    "rs": "/".join(str(r) for r in sorted(set(self.replicas))),
                }
            return _("%(n)s shared GPU (replicas unknown)") % {"n": amount}
        if self.gpu_type == ledger_mod.EXCLUSIVE:
            return _("%(n)s physical GPU, whole") % {"n": amount}
        if self.gpu_type == ledger_mod.MIXED:
            parts = [_("%(n)s physical GPU on nodes with whole GPUs") % {"n": amount}]
            if self.time_sliced_on:
                low = amount / max(r for _node, r, _n in self.time_sliced_on)
                parts.append(
                    _("%(p)s physical GPU where it is time-sliced (%(nodes)s)")
                    % {"p": f"{low:g}", "nodes": self.shared_nodes_text}
                )
            if self.mps_on:
                low = amount / max(r for _node, r, _n in self.mps_on)
                parts.append(
                    _("%(p)s physical GPU where it is shared by MPS (%(nodes)s)")
                    % {"p": f"{low:g}", "nodes": self.mps_nodes_text}
                )
            if self.mig_on:
                parts.append(
                    _("%(n)s MIG instance(s) where it is MIG (%(nodes)s)") % {"n": amount, "nodes": self.mig_nodes_text}
                )
            return _("%(n)s %(res)s = %(ways)s: a quota cannot tell them apart") % {
                "n": amount,
                "res": self.resource,
                "ways": _(", or ").join(parts),
            }
        return _("%(n)s MIG instance(s) %(p)s: hardware partitions of a physical GPU") % {
            "n": amount,
            "p": self.profile,
        }

    def _dra_physical_text(self, amount: int) -> str:
        if self.device_class.startswith("mig."):
            return _("%(n)s MIG device(s) of any profile: hardware partitions of a physical GPU") % {"n": amount}
        if set(self.kinds) == {ledger_mod.EXCLUSIVE}:
            return _("%(n)s physical GPU, whole") % {"n": amount}
        return _(
            "%(n)s device(s): a physical GPU each where the devices are whole GPUs; where a GPU is shared "
            "(consumable shares) each claim counts one device, whatever share of it the claim holds"
        ) % {"n": amount}


def gpu_choices(ledger) -> list[GpuChoice]:
    """Exclusive, Shared and each MIG profile the cluster serves or has allocated,
    in the ledger's order. Only resource names matching GPU_RESOURCE_RE can appear."""
    if ledger is None:
        return []
    replicas = ledger.timeslicing_replicas
    out = []
    for row in ledger.by_resource:
        if not GPU_RESOURCE_RE.match(row.resource) or not (row.logical or row.allocated):
            continue
        gtype = row.gpu_type  # plain nvidia.com/gpu time-sliced by the GPU Operator is not Exclusive
        shared_replicas = row.shared_replicas if row.shared_on else replicas
        out.append(
            GpuChoice(
                row.resource,
                gtype,
                row.logical,
                row.allocated,
                shared_replicas if gtype == ledger_mod.SHARED else [],
                shared_on=list(row.shared_on),
                shared_logical=row.shared_logical,
                mig_on=list(row.mig_on),
                mps_on=list(row.mps_on),
                sharing_strategy=row.sharing_strategy,
            )
        )
    return out + _dra_choices(ledger)


def _dra_choices(ledger) -> list[GpuChoice]:
    """One choice per DeviceClass of NVIDIA's DRA driver the cluster's nodes publish devices of
    (or a quota holds): named by the GPU models behind it and what its devices are."""
    models: dict[str, list[str]] = {}
    kinds: dict[str, list[str]] = {}
    for n in ledger.nodes:
        for line in dra_lines(n.dra) if n.dra is not None else []:
            if n.model and n.model not in models.setdefault(line.resource, []):
                models[line.resource].append(n.model)
            if line.gpu_type not in kinds.setdefault(line.resource, []):
                kinds[line.resource].append(line.gpu_type)
    out = []
    for row in ledger.by_resource:
        if not DRA_RESOURCE_RE.match(row.resource) or not (row.logical or row.allocated):
            continue
        kind = ledger_mod.EXCLUSIVE
        if row.resource.startswith("mig."):
            kind = "mig"
        elif set(kinds.get(row.resource, [])) - {ledger_mod.EXCLUSIVE}:
            kind = ledger_mod.MIXED
        out.append(
            GpuChoice(
                row.resource,
                kind,
                row.logical,
                row.allocated,
                device_class=device_class_of(row.resource),
                models=sorted(models.get(row.resource, [])),
                kinds=sorted(kinds.get(row.resource, [])),
            )
        )
    return out


def quota_hard(req: WorkspaceRequest, resource: str) -> dict[str, str]:
    """The compute quota's hard amounts. A device plugin's GPU key is always
    ``requests.<resource>`` (the only form the API server enforces for extended resources);
    a DeviceClass's devices go in the devices quota instead (device_quota_hard)."""
    hard = {"requests.cpu": str(req.cpu), "requests.memory": f"{req.memory_gib}Gi"}
    if req.gpu:
        if not is_workspace_resource(resource):
            raise WorkspaceError(_("Not a GPU resource a Workspace can be given: %(r)s") % {"r": resource})
        if not is_dra_resource(resource):
            hard[quota_key(resource)] = str(req.gpu)
    return hard


def device_quota_hard(req: WorkspaceRequest, resource: str) -> dict[str, str]:
    """The devices quota's hard amounts: ``<class>.deviceclass.resource.k8s.io/devices``, for
    a Workspace given GPUs of a DRA DeviceClass ({} otherwise)."""
    if req.gpu and is_dra_resource(resource or "") and is_workspace_resource(resource):
        return {quota_key(resource): str(req.gpu)}
    return {}


def all_quota_hard(req: WorkspaceRequest, resource: str) -> dict[str, str]:
    """What every quota of the Workspace holds, as the audit log records it."""
    return {
        **quota_hard(req, resource),
        **device_quota_hard(req, resource),
        "requests.storage": f"{req.storage_gib}Gi",
    }


def workspace_manifests(req: WorkspaceRequest, resource: str) -> list[dict]:
    """The namespaced objects of an approved Workspace, in creation order."""
    ns = req.namespace
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": COMPUTE_QUOTA, "namespace": ns, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {
                "hard": quota_hard(req, resource),
                "scopeSelector": {
                    "matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "NotIn", "values": [JOB_PRIORITY_CLASS]}
                    ]
                },
            },
        },
        *(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": DEVICE_QUOTA, "namespace": ns, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
                    "spec": {"hard": device_quota_hard(req, resource)},
                }
            ]
            if device_quota_hard(req, resource)
            else []
        ),
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": STORAGE_QUOTA, "namespace": ns, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"hard": {"requests.storage": f"{req.storage_gib}Gi"}},
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": LIMIT_RANGE, "namespace": ns, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "256Mi"}}]},
        },
    ]


def ensure_priority_class(gw, name: str, value: int, description: str, preemption_policy: str):
    """Create the PriorityClass unless it exists (cluster infrastructure, never rolled back)."""
    if any(pc["metadata"]["name"] == name for pc in gw.list_priority_classes()):
        return False
    try:
        gw.create_priority_class(name, value, description, preemption_policy=preemption_policy)
    except Conflict:
        return False
    return True


def record_decision(actor, action, *, workspace=None, job=None, subject="", **kw) -> Decision:
    return Decision.objects.create(
        actor=actor, actor_name=actor.get_username(), action=action, workspace=workspace, job=job, subject=subject, **kw
    )


def _approval_lock() -> None:
    """Serialise Workspace approvals: call inside transaction.atomic(); held until it ends.

    The lock is the JobSettings singleton row (SELECT ... FOR UPDATE). On SQLite, where
    FOR UPDATE does not exist, the transaction's BEGIN IMMEDIATE (settings) already
    serialises writers."""
    JobSettings.load()
    JobSettings.objects.select_for_update().get(pk=1)


def _approved_since(last_approval: int, resource: str, seen: set[str]) -> int:
    """The ``resource`` GPUs of the Workspaces approved after the approval ``last_approval``
    (a Decision id) whose quota the cluster read did not show (namespaces in ``seen`` did).
    Read under _approval_lock: every approval before it has committed."""
    return sum(
        amount
        for subject, amount in Decision.objects.filter(
            action=Decision.Action.APPROVE, pk__gt=last_approval, gpu_resource=resource
        ).values_list("subject", "amount")
        if subject not in seen
    )


def _quota_namespaces(quotas: list[dict], resource: str) -> set[str]:
    key = quota_key(resource)
    return {q["metadata"].get("namespace", "") for q in quotas if key in ((q.get("spec") or {}).get("hard") or {})}


def _left_by_an_interrupted_approval(gw, req: WorkspaceRequest, owner: str, resource: str) -> bool:
    """Whether the namespace in the way is what an approval of this request created before it
    was cut short (the web process or the database went away between the cluster's answer and
    the commit, so the request is still pending): labelled a Workspace of the same owner,
    created after the request was made, and no other Workspace record holds the name. Anything
    else in the way (a namespace the owner already had, say) is never taken over."""
    if (
        WorkspaceRequest.objects.filter(name=req.name)
        .exclude(pk=req.pk)
        .filter(status__in=(WorkspaceRequest.Status.APPROVED, WorkspaceRequest.Status.APPROVING))
        .exists()
    ):
        return False
    mine = gw.list_namespaces(label_selector=f"{WORKSPACE_LABEL}=true,{OWNER_LABEL}={owner}")
    asked = req.created_at.replace(microsecond=0)  # the API server's stamps are whole seconds
    if not any(
        ns["metadata"]["name"] == req.namespace and _created(ns) is not None and _created(ns) >= asked for ns in mine
    ):
        return False
    # and nothing but what this approval makes is in it: no pods, only its own quotas
    ours = {m["metadata"]["name"] for m in workspace_manifests(req, resource) if m["kind"] == "ResourceQuota"}
    if gw.list_pods(namespace=req.namespace):
        return False
    return all(q["metadata"]["name"] in ours for q in gw.list_resource_quotas(req.namespace))


def _created(obj) -> datetime | None:
    stamp = obj["metadata"].get("creationTimestamp") or ""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


class _Retrying:
    """The transient API failures of one approval (TransientClusterError: 429, 5xx, timeouts,
    connection refused or reset, as a run's steps classify them), retried with backoff for at
    most BRICK_APPROVAL_RETRY_SECONDS from the first one. Each retry is recorded on the request
    as a decision ("Workspace approval retried", with the error and the wait) before the wait."""

    def __init__(self, actor: Any, req: WorkspaceRequest) -> None:
        self.actor, self.req = actor, req
        self.retries = 0
        self.deadline: float | None = None

    def again(self, exc: TransientClusterError) -> bool:
        """Record the retry and wait for it; False (nothing recorded) once the time is up."""
        window = float(settings.BRICK_APPROVAL_RETRY_SECONDS)
        backoff = float(settings.BRICK_APPROVAL_RETRY_BACKOFF)
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + window
        delay = min(backoff * 2**self.retries, APPROVAL_RETRY_MAX_WAIT * backoff)
        if now + delay > self.deadline:
            return False
        self.retries += 1
        record_decision(
            self.actor,
            Decision.Action.APPROVE_RETRY,
            workspace=self.req,
            subject=self.req.name,
            detail=said("decision.approval_retry", err=str(exc)[:300], d=delay, a=self.retries, s=round(window)),
        )
        time.sleep(delay)
        return True


APPROVAL_RETRY_MAX_WAIT = 5  # backoffs: 1, 2, 4, 5, 5... seconds: an API server back is found within 5 s


@dataclass
class _Made:
    """What this approval's attempts made or may have made, so that a retry recognises it as
    its own: the namespace (created, or continued from an interrupted approval), and the
    quotas it created or whose create got no answer (it may have been carried out)."""

    namespace: bool = False
    continued: bool = False
    quotas: set[str] = field(default_factory=set)
    kueue: Any = None  # the approval's Kueue part (elastic.Part), where Kueue is served


def _make_workspace(gw: Any, req: WorkspaceRequest, resource: str, made: _Made) -> None:
    """The approval's cluster writes, each idempotent, so a retry after a transient failure
    goes through them again: what an earlier attempt made is found and kept, never made twice.
    A namespace in the way is continued only when it is what an approval of this request left
    (_left_by_an_interrupted_approval); a quota in the way only in such a namespace or when
    this approval created it, or sent its create and got no answer, in an earlier attempt."""
    ensure_priority_class(
        gw,
        USER_PRIORITY_CLASS,
        USER_PRIORITY_VALUE,
        "BRICK Workspace workloads; may preempt Jobs (brick-job-priority).",
        "PreemptLowerPriority",
    )
    if not made.namespace:
        owner = owner_label_value(req.requester_name)
        try:
            gw.create_namespace(req.namespace, {**namespace_labels(req.requester_name), **elastic.labels(made.kueue)})
        except Conflict:
            if not _left_by_an_interrupted_approval(gw, req, owner, resource):
                raise
            made.continued = True  # this request's earlier approval (or attempt) made it
        made.namespace = True
    manifests = workspace_manifests(req, resource)
    if made.kueue is not None:
        manifests = made.kueue.quota_manifests(manifests)  # the ResourceQuota at guarantee + burst
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        if manifest["kind"] == "ResourceQuota" and "scopeSelector" not in manifest["spec"]:
            try:
                gw.create_resource_quota(req.namespace, name, manifest["spec"]["hard"])
            except Conflict:
                if not (made.continued or name in made.quotas):
                    raise
                gw.apply(manifest)  # made by the interrupted approval: set to what this one says
            except TransientClusterError:
                made.quotas.add(name)  # sent: it may have been carried out
                raise
            made.quotas.add(name)
        else:
            gw.apply(manifest)
    if made.kueue is not None:
        made.kueue.ensure(gw)


def approve(
    req_id: int, actor, resource: str, *, overcommit: bool = False, ledger=None, grant=None
) -> WorkspaceRequest:
    """Create the Workspace in the cluster, all or nothing, then record the decision (below).

    A transient API failure (the API server restarting, 429, 5xx, a timeout) is retried with
    backoff for up to BRICK_APPROVAL_RETRY_SECONDS (30), each retry recorded on the request;
    what an attempt made is recognised as this approval's own and kept (_make_workspace).
    After that the approval stops with the API server's error, nothing kept, as for a refusal.

    ``grant`` (brickadmin.cluster.kueue.Grant): the guarantee, burst and lend ceilings where the
    cluster serves Kueue (workspaces/elastic.py; None: the defaults); ignored where it does not.

    A database that goes away during it (restarted, failed over) is waited for, up to
    BRICK_APPROVAL_DATABASE_WAIT_SECONDS, and the approval made again: its transaction was
    rolled back whole, and a namespace it had created is continued. If the decision had
    committed before the error, it is not made twice. After that wait the error is raised
    (the page says the database is unavailable and nothing was saved)."""
    wait = float(settings.BRICK_APPROVAL_DATABASE_WAIT_SECONDS)
    deadline = time.monotonic() + wait
    while True:
        try:
            return _approve_once(req_id, actor, resource, overcommit=overcommit, ledger=ledger, grant=grant)
        except DATABASE_GONE:
            if connection.in_atomic_block or not wait_for_database(max(0.0, deadline - time.monotonic())):
                raise
            status = WorkspaceRequest.objects.filter(pk=req_id).values_list("status", flat=True).first()
            if status == WorkspaceRequest.Status.APPROVED:
                return WorkspaceRequest.objects.get(pk=req_id)
            if status != WorkspaceRequest.Status.PENDING:
                raise


def _approve_once(
    req_id: int, actor, resource: str, *, overcommit: bool = False, ledger=None, grant=None
) -> WorkspaceRequest:
    """Create the Workspace in the cluster, all or nothing, then record the decision.

    The cluster and Prometheus are read first (gpus.view.live.LiveRead), without the lock, so an
    approval never makes the others wait on the cluster (``_choose``). Then approvals are serialised
    (_approval_lock) and each one claims its request (pending -> approving, a conditional
    UPDATE) before anything else (``_claim``): a second approval of the same request is told it was
    already decided and writes nothing. Under the lock only the database is read again: the
    approvals recorded since the cluster read whose quota that read did not show are
    taken off what it found available (``_weigh``); a namespace an interrupted approval of this request
    left behind is continued, not refused (``_create_with_undo``), so an approval sees every approval
    committed before it (``ledger`` overrides the read, for tests against a cluster whose nodes are
    not the point). What came of it is recorded (``_record_refusal``, ``_record_approval``).

    Raises WorkspaceError (nothing created, request still pending, reason in the message)."""
    req = _pending(req_id)
    gw = get_gateway()
    retrying = _Retrying(actor, req)
    chosen = _choose(gw, req, resource, retrying, ledger)
    chosen.kueue = _kueue_part(gw, req, chosen.resource, grant, retrying)
    with transaction.atomic():
        _claim(req)
        # Until the cluster is written to, a WorkspaceError rolls the claim back with the transaction.
        _weigh(chosen, req, overcommit)
        refused = _create_with_undo(gw, req, chosen.resource, retrying, chosen.kueue)
        failure = _record_refusal(req, actor, chosen, refused) if refused else _record_approval(gw, req, actor, chosen)
        if failure is None:
            elastic.recorded(req, actor, chosen.kueue)
    if failure is not None:
        raise WorkspaceError(failure[0]) from failure[1]
    req.refresh_from_db()
    notices.workspace_decided(req)
    return req


@dataclass
class _Chosen:
    """What an approval gives: the GPU resource and its choice (none for a request of no GPU),
    the approvals the cluster read had seen (the last one's id, the namespaces with a quota of
    it), and, under the lock, what is available and whether the approval overcommits it."""

    resource: str
    choice: GpuChoice | None = None
    since: tuple[int, set[str]] | None = None
    available: int | None = None
    overcommitted: bool = False
    kueue: Any = None  # elastic.Part where the cluster serves Kueue


def _kueue_part(gw: Any, req: WorkspaceRequest, resource: str, grant, retrying: _Retrying):
    """The approval's Kueue part (elastic.for_approval: None without Kueue), read before the
    lock as the GPU choice is; a transient failure retried, any other refuses the approval."""
    while True:
        try:
            return elastic.for_approval(gw, req, resource, grant)
        except ClusterError as exc:
            if isinstance(exc, TransientClusterError) and retrying.again(exc):
                continue
            raise WorkspaceError(_("The cluster cannot be read; nothing was changed.")) from exc


def _pending(req_id: int) -> WorkspaceRequest:
    """The request, still pending (the claim's first look: no cluster read for a request already decided)."""
    req = WorkspaceRequest.objects.select_related("requester").get(pk=req_id)
    if req.status != WorkspaceRequest.Status.PENDING:
        raise WorkspaceError(_("This request was already decided."))
    return req


def _choose(gw: Any, req: WorkspaceRequest, resource: str, retrying: _Retrying, ledger) -> _Chosen:
    """The GPU type the admin chose, as the cluster offers it now (read live, without the lock;
    a transient failure retried); no resource for a request of no GPU."""
    if not req.gpu:
        return _Chosen(resource="")
    since = None
    while ledger is None:
        last_approval = Decision.objects.filter(action=Decision.Action.APPROVE).aggregate(last=Max("pk"))["last"]
        live = LiveRead(gw)
        try:
            ledger = live.ledger()
            since = (last_approval or 0, _quota_namespaces(live.snapshot().quotas, resource))
        except ClusterError as exc:
            ledger = None
            if isinstance(exc, TransientClusterError) and retrying.again(exc):
                continue
            log.warning("cluster unreachable: %s", exc)
            raise WorkspaceError(_("The cluster cannot be read; nothing was changed.")) from exc
    choice = next((c for c in gpu_choices(ledger) if c.resource == resource), None)
    if choice is None:
        raise WorkspaceError(_("Choose a GPU type the cluster offers."))
    return _Chosen(resource=resource, choice=choice, since=since)


def _claim(req: WorkspaceRequest) -> None:
    """Under the approval lock (inside the transaction), the request goes pending -> approving,
    or this approval stops: another decided it."""
    Status = WorkspaceRequest.Status
    _approval_lock()
    if not WorkspaceRequest.objects.filter(pk=req.pk, status=Status.PENDING).update(status=Status.APPROVING):
        raise WorkspaceError(_("This request was already decided."))


def _weigh(chosen: _Chosen, req: WorkspaceRequest, overcommit: bool) -> None:
    """What is available of the chosen resource, less what approvals since the cluster read
    took; more than that only with the explicit overcommit."""
    if chosen.choice is not None:
        since = chosen.since
        chosen.available = chosen.choice.available - (
            _approved_since(since[0], chosen.resource, since[1]) if since else 0
        )
        if req.gpu > chosen.available and not overcommit:
            raise WorkspaceError(
                _("Only %(a)s %(r)s available now; approving %(n)s needs the explicit overcommit box.")
                % {"a": chosen.available, "r": chosen.resource, "n": req.gpu}
            )
    chosen.overcommitted = bool(chosen.choice and req.gpu > chosen.available)


def _create_with_undo(gw: Any, req: WorkspaceRequest, resource: str, retrying: _Retrying, kueue_part=None):
    """The Workspace made in the cluster (namespace, quotas, LimitRange, priority class; a
    transient failure retried): None. Refused: what was made is deleted, and (the message,
    the refusal) returned."""
    made = _Made(kueue=kueue_part)
    try:
        while True:
            try:
                _make_workspace(gw, req, resource, made)
                return None
            except TransientClusterError as exc:
                if not retrying.again(exc):
                    raise
    except ClusterError as exc:
        undo_error = made.kueue.undo(gw) if made.kueue is not None else ""  # cluster-scoped: not in the namespace
        if made.namespace:
            try:
                gw.delete("v1", "Namespace", req.namespace)  # takes the quotas and LimitRange with it
            except ClusterError as undo_exc:
                undo_error = str(undo_exc)
        msg = _("Kubernetes refused: %(e)s. Nothing was kept; the request is still pending.") % {"e": exc}
        if undo_error:
            msg = _(
                "Kubernetes refused: %(e)s. Removing the half-created namespace %(ns)s also failed "
                "(%(u)s): delete it by hand."
            ) % {"e": exc, "ns": req.namespace, "u": undo_error}
        return msg, exc


def _record_refusal(req: WorkspaceRequest, actor, chosen: _Chosen, refused):
    """The claim given back (only while this call holds it) and the refusal recorded: returns it."""
    Status = WorkspaceRequest.Status
    msg = refused[0]
    if WorkspaceRequest.objects.filter(pk=req.pk, status=Status.APPROVING).update(
        last_error=msg, status=Status.PENDING
    ):
        record_decision(
            actor,
            Decision.Action.APPROVE_FAILED,
            workspace=req,
            subject=req.name,
            gpu_resource=chosen.resource,
            amount=req.gpu,
            available_before=chosen.available,
            overcommit=chosen.overcommitted,
            detail=msg,
        )
    return refused


def _record_approval(gw: Any, req: WorkspaceRequest, actor, chosen: _Chosen):
    """The request approved and the decision recorded: None. Decided by someone else meanwhile:
    what this call created is taken back, and the failure returned."""
    Status = WorkspaceRequest.Status
    resource = chosen.resource
    updated = WorkspaceRequest.objects.filter(pk=req.pk, status=Status.APPROVING).update(
        status=Status.APPROVED,
        decided_at=timezone.now(),
        decided_by=actor,
        decided_by_name=actor.get_username(),
        gpu_type=chosen.choice.gpu_type if chosen.choice else "",
        gpu_resource=resource,
        overcommit=chosen.overcommitted,
        last_error="",
    )
    if updated:
        record_decision(
            actor,
            Decision.Action.APPROVE,
            workspace=req,
            subject=req.name,
            gpu_resource=resource,
            amount=req.gpu,
            available_before=chosen.available,
            overcommit=chosen.overcommitted,
            detail=said(
                "decision.approved",
                ns=req.namespace,
                quota=", ".join(f"{k}={v}" for k, v in all_quota_hard(req, resource).items()),
            ),
        )
        return None
    try:
        gw.delete("v1", "Namespace", req.namespace)
    except ClusterError:
        log.exception("could not remove namespace %s of a request decided meanwhile", req.namespace)
    if chosen.kueue is not None and chosen.kueue.undo(gw):
        log.error("could not remove the ClusterQueue of %s, a request decided meanwhile", req.namespace)
    return (_("This request was already decided."), None)


def reject(req_id: int, actor, reason: str) -> WorkspaceRequest:
    reason = (reason or "").strip()
    if not reason:
        raise WorkspaceError(_("A rejection needs a reason; the user will see it."))
    with transaction.atomic():
        req = WorkspaceRequest.objects.get(pk=req_id)
        updated = WorkspaceRequest.objects.filter(pk=req.pk, status=WorkspaceRequest.Status.PENDING).update(
            status=WorkspaceRequest.Status.REJECTED,
            decided_at=timezone.now(),
            decided_by=actor,
            decided_by_name=actor.get_username(),
            rejection_reason=reason,
        )
        if not updated:
            raise WorkspaceError(_("This request was already decided."))
        record_decision(actor, Decision.Action.REJECT, workspace=req, subject=req.name, amount=req.gpu, detail=reason)
    req.refresh_from_db()
    notices.workspace_decided(req)
    return req


def withdraw(req_id: int, user) -> WorkspaceRequest:
    """The requester takes back a request still waiting for an admin (its name is free again)."""
    with transaction.atomic():
        req = WorkspaceRequest.objects.get(pk=req_id, requester=user)
        updated = WorkspaceRequest.objects.filter(pk=req.pk, status=WorkspaceRequest.Status.PENDING).update(
            status=WorkspaceRequest.Status.WITHDRAWN,
            decided_at=timezone.now(),
            decided_by=user,
            decided_by_name=user.get_username(),
        )
        if not updated:
            raise WorkspaceError(_("This request was already decided."))
        record_decision(user, Decision.Action.WITHDRAW, workspace=req, subject=req.name, amount=req.gpu)
    req.refresh_from_db()
    return req
