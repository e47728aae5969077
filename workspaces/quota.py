"""A Workspace's GPU quota changed by an admin: the one path for a plain edit, an undo and a
reclaim. A preview first (the quota before and after, the pods that run and what they
request, the capacity per GPU type after), never below what the Workspace's pods request,
then a run of "Set a Workspace's GPU quota" (workspaces/procedures.py): audited step by step
like every run, with the quota before it recorded, so that another run can put it back."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from brickadmin.cluster import dra
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import pod_gpu_requests
from brickadmin.cluster.gateway import get_gateway
from brickadmin.wording import Said, record_of, said
from gpus.models import ProcedureRun, RunStatus
from gpus.numbers import capacity as capacity_mod
from gpus.numbers.dra_lines import is_dra_resource
from gpus.procedures import service
from gpus.procedures.catalogue.common import CAPACITY_ACK, CAPACITY_PARAM, over_total_check
from gpus.view.live import LiveRead

SET_QUOTA = "Q"  # the procedure's code


class QuotaError(Exception):
    pass


@dataclass(frozen=True)
class PodRequest:
    name: str
    phase: str
    amount: int


@dataclass
class QuotaPreview:
    workspace: str
    owner: str
    resource: str  # the GPU resource of the quota ("" when the Workspace holds none)
    quota_name: str
    before: int
    after: int
    pods: list[PodRequest] = field(default_factory=list)  # pods requesting the resource, not finished
    capacity: list = field(default_factory=list)  # gpus.numbers.capacity.CapacityLine per GPU type

    @property
    def is_dra(self) -> bool:
        """Whether the quota names a DeviceClass's devices (its claims count, not its pods)."""
        return is_dra_resource(self.resource)

    @property
    def requested(self) -> int:
        return sum(p.amount for p in self.pods)

    @property
    def problem(self) -> str:
        return quota_problem(self.resource, self.after, self.requested)

    @property
    def changes(self) -> bool:
        return self.after != self.before

    @property
    def over_total(self):
        """The plans' acknowledgement when this change takes a GPU type over its Total (a
        gpus.procedures Check: its ``ack_label`` and ``ack_count``), else None."""
        return over_total_check(self.capacity) if self.changes else None


def quota_problem(resource: str, after: int, requested: int) -> Said | str:
    """Why a quota of ``after`` cannot be set ('' when it can): never below what the pods
    request (the API server would keep them, but the Workspace could start none again). A
    message, so a run that records it reads in each reader's language."""
    if not resource:
        return said("workspace_precheck.no_gpu_quota")
    if after < 0:
        return said("workspace_precheck.negative_quota")
    if after < requested:
        return said("workspace_precheck.below_requests", r=requested, res=resource)
    return ""


def gpu_quota(quotas: list[dict], resource: str = "") -> tuple[str, str, int]:
    """(quota name, resource, hard amount) of the namespace's GPU quota (the first one holding
    ``resource``, or any nvidia.com resource, or any DeviceClass's devices:
    <class>.deviceclass.resource.k8s.io/devices); ('', '', 0) when there is none."""
    for q in quotas:
        hard = (q.get("spec") or {}).get("hard") or {}
        for key in sorted(hard):
            if key.startswith("requests." + vocab.NVIDIA_PREFIX):
                res = key[len("requests.") :]
            elif is_dra_resource(key):
                res = key
            else:
                continue
            if not resource or res == resource:
                return q["metadata"]["name"], res, vocab.quantity(hard[key])
    return "", "", 0


def claim_requests(claims: list[dict], resource: str) -> list[PodRequest]:
    """The namespace's ResourceClaims as the quota counts them for a DeviceClass's devices
    (brickadmin.cluster.dra.claim_device_usage: each device a request asks for, "All" as 32):
    every claim counts until it is deleted, whether a pod runs or not."""
    out = []
    for c in claims:
        amount = dra.claim_device_usage(c).get(resource, 0)
        if amount:
            allocated = bool((c.get("status") or {}).get("allocation"))
            out.append(PodRequest(c["metadata"]["name"], _("claim, allocated") if allocated else _("claim"), amount))
    return sorted(out, key=lambda r: r.name)


def workload_requests(gateway, workspace: str, resource: str) -> list[PodRequest]:
    """What counts against the Workspace's quota of ``resource``, read live: its pods' requests
    of a device plugin's resource, or its ResourceClaims' devices of a DeviceClass."""
    live = LiveRead.of(gateway)
    if is_dra_resource(resource):
        claims = [c for c in live.snapshot().resource_claims if c["metadata"].get("namespace") == workspace]
        return claim_requests(claims, resource)
    return pod_requests(live.list_pods(namespace=workspace), resource)


def pod_requests(pods: list[dict], resource: str) -> list[PodRequest]:
    out = []
    for p in pods:
        if vocab.is_terminal(p):
            continue
        amount = pod_gpu_requests(p).get(resource, 0)
        if amount:
            out.append(PodRequest(p["metadata"]["name"], (p.get("status") or {}).get("phase") or "", amount))
    return sorted(out, key=lambda r: r.name)


def preview(gateway, workspace: str, after: int, resource: str = "") -> QuotaPreview:
    """What setting the Workspace's GPU quota to ``after`` would do, read live."""
    live = LiveRead.of(gateway)
    namespaces = {ns["metadata"]["name"]: ns for ns in live.list_namespaces()}
    if workspace not in namespaces:
        raise QuotaError(_("No namespace %(ns)s in the cluster.") % {"ns": workspace})
    owner = (namespaces[workspace]["metadata"].get("labels") or {}).get(vocab.OWNER_LABEL, "")
    name, res, before = gpu_quota(live.list_resource_quotas(workspace), resource)
    pods = workload_requests(live, workspace, res) if res else []
    lines = []
    if res:
        lines = capacity_mod.capacity_after(live.ledger(), allocated_change={res: after - before})
    return QuotaPreview(
        workspace=workspace,
        owner=owner,
        resource=res,
        quota_name=name,
        before=before,
        after=after,
        pods=pods,
        capacity=lines,
    )


def change_quota(
    workspace: str,
    after: int,
    *,
    actor,
    reason,
    resource: str = "",
    undo_of: int | None = None,
    gateway=None,
    dispatch=True,
    grant=None,
    acknowledged: int | None = None,
) -> ProcedureRun:
    """Start the audited run that sets the Workspace's GPU quota to ``after`` (the preview's
    checks again first: QuotaError says why not). ``undo_of``: the quota run it reverts.
    ``grant`` (a Kueue Workspace, workspaces/elastic.py): its guarantee, burst and lend ceilings
    too, ``after`` being guarantee + burst; the run then sets its ClusterQueue as well.
    ``acknowledged``: how many GPUs over the Total the admin acknowledged, as a plan asks when
    the change takes a GPU type over its Total; the run's pre-check holds it to that count."""
    gateway = gateway or get_gateway()
    record = record_of(reason)  # a reason the product wrote: each reader reads it in their language
    if record is not None:
        with translation.override(settings.LANGUAGE_CODE):
            reason = str(reason)
    reason = (reason or "").strip()
    if not reason:
        raise QuotaError(_("Say why the quota changes: the owner and the audit log read it."))
    seen = preview(gateway, workspace, after, resource)
    if seen.problem:
        raise QuotaError(seen.problem)
    if not seen.changes and grant is None:
        raise QuotaError(_("The quota is %(n)d already.") % {"n": after})
    guard = seen.over_total
    if guard is not None and not guard.acknowledged(acknowledged):
        raise QuotaError(str(CAPACITY_PARAM.refusal))
    params = {
        "workspace": workspace,
        "resource": seen.resource,
        "gpu": after,
        "before": seen.before,
        "reason": reason[:500],
        CAPACITY_ACK: acknowledged or 0,
    }
    if record is not None:
        params["reason_said"] = record
    if undo_of:
        params["undo_of"] = undo_of
    if grant is not None:
        params.update(elastic_params(gateway, workspace, seen.resource, grant))
    try:
        return service.start_run(SET_QUOTA, "", params, actor=actor, source="web", dispatch=dispatch)
    except service.RunRefused as exc:
        raise QuotaError(exc.message) from None


def history(workspace: str):
    """The runs that changed the Workspace's GPU quota, newest first."""
    return ProcedureRun.objects.filter(procedure=SET_QUOTA, params__workspace=workspace).order_by("-pk")


def undo_target(run: ProcedureRun) -> int | None:
    """The quota an undo of this run puts back, or None when it is not offered: only for a
    succeeded quota run that is still the latest one on its Workspace."""
    if run.procedure != SET_QUOTA or run.status != RunStatus.SUCCEEDED:
        return None
    latest = history(run.params.get("workspace", "")).filter(status=RunStatus.SUCCEEDED).first()
    if latest is None or latest.pk != run.pk:
        return None
    return int(run.params.get("before", 0))


def grant_undone(workspace: str, undo_of: int | None):
    """The grant an undo of quota run ``undo_of`` puts back (brickadmin.cluster.kueue.Grant):
    the guarantee, burst and lend ceilings before it, when it changed them; None otherwise."""
    from brickadmin.cluster.kueue import Grant

    if not undo_of:
        return None
    run = history(workspace).filter(pk=undo_of).first()
    before = (run.params.get("before_grant") if run is not None else None) or None
    if before is None:
        return None
    guarantee, burst, lend = before
    return Grant(int(guarantee), int(burst), None if lend is None else int(lend))


def elastic_params(gateway, workspace: str, resource: str, grant) -> dict:
    """A quota run's Kueue part: the grant it sets and the one before (for an undo)."""
    from . import elastic

    before = elastic.grant_now(gateway, workspace, resource)
    if before is None:
        raise QuotaError(_("This Workspace has no ClusterQueue: its quota is fixed."))
    if grant.problem():
        raise QuotaError(_("The lend ceiling is at most the guarantee, and nothing is negative."))
    return {
        "guarantee": grant.guarantee,
        "burst": grant.burst,
        "lend": grant.lend,
        "before_grant": [before.guarantee, before.burst, before.lend],
    }
