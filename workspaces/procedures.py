"""The procedures about a Workspace: "Re-create a Workspace's namespace and quotas" (W), the
Fix of the Workspace findings (workspaces/health.py). They read the Workspace's approval
record and send what its approval sent (workspaces/approvals.py); registered with the
procedures from ``WorkspacesConfig.ready()``, so gpus never imports Workspaces."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.wording import said
from gpus.procedures.base import Check, Outcome, Param, ProcedureDef, Step, StepFailed
from gpus.procedures.catalogue.common import CAPACITY_PARAM, Fix, PrecheckStep, name_field, over_total_check
from gpus.view.live import LiveRead

from . import approvals
from .labels import namespace_labels
from .models import WorkspaceRequest


def quota_reason(params):
    """Why a quota changed, as recorded: the product's own reason as a message (said in each
    reader's language), else the words a person typed."""
    record = params.get("reason_said")
    return record if isinstance(record, dict) and "code" in record else params.get("reason", "")


def _owner_words(ctx, req, resource, before, after):
    """What the owner reads of a quota change: "You released 4 GPUs" when it was their own
    answer, else who changed it and why."""
    own = bool(req) and ctx.run.actor_name == req.requester_name
    if own and before is not None and int(before) > int(after):
        return said("notice.you_released", n=int(before) - int(after), res=resource, a=before, b=after)
    return said(
        "notice.quota_changed", who=ctx.run.actor_name, res=resource, a=before, b=after, why=quota_reason(ctx.params)
    )


def _approved_workspace(name):
    """The approval record of an approved Workspace (its namespace is its name), or None."""
    return WorkspaceRequest.objects.filter(name=name, status=WorkspaceRequest.Status.APPROVED).first()


def _namespace_present(gateway, name) -> bool:
    return any(ns["metadata"]["name"] == name for ns in gateway.list_namespaces())


def _quota_names(gateway, name) -> set[str]:
    return {q["metadata"]["name"] for q in gateway.list_resource_quotas(name)}


def _expected_quotas(req) -> list[dict]:
    return [m for m in approvals.workspace_manifests(req, req.gpu_resource) if m["kind"] == "ResourceQuota"]


class RecreateNamespace(Step):
    key = "recreate-namespace"

    def title(self, run):
        return _("Re-create the namespace %(ns)s with its owner label") % {"ns": run.params.get("workspace")}

    def kubectl(self, run):
        ns = run.params.get("workspace")
        return (
            f"kubectl create namespace {ns} && kubectl label namespace {ns} {vocab.WORKSPACE_LABEL}=true "
            f"{vocab.OWNER_LABEL}=<owner>"
        )

    def ensure(self, ctx):
        name = ctx.params["workspace"]
        if _namespace_present(ctx.gateway, name):
            return Outcome(None, said("workspace_step.namespace_exists", ns=name))
        req = _approved_workspace(name)
        if req is None:
            raise StepFailed(said("workspace_step.no_workspace", ws=name))
        approvals.ensure_priority_class(
            ctx.gateway,
            approvals.USER_PRIORITY_CLASS,
            approvals.USER_PRIORITY_VALUE,
            "BRICK Workspace workloads; may preempt Jobs (brick-job-priority).",
            "PreemptLowerPriority",
        )
        labels = namespace_labels(req.requester_name)
        ctx.gateway.create_namespace(name, labels)
        return Outcome({"namespace": name, "labels": labels}, f"namespace/{name} created")

    def verify(self, ctx):
        ok = _namespace_present(ctx.gateway, ctx.params["workspace"])
        return Check(ok, said("workspace_step.namespace_present") if ok else said("workspace_step.namespace_missing"))


class RecreateQuotas(Step):
    key = "recreate-quotas"

    def title(self, run):
        return _("Re-create the quotas of %(ns)s from its approval record") % {"ns": run.params.get("workspace")}

    def kubectl(self, run):
        return f"kubectl -n {run.params.get('workspace')} apply -f <the Workspace's ResourceQuotas and LimitRange>"

    def ensure(self, ctx):
        name = ctx.params["workspace"]
        req = _approved_workspace(name)
        if req is None:
            raise StepFailed(said("workspace_step.no_workspace", ws=name))
        have = _quota_names(ctx.gateway, name)
        sent, lines = [], []
        for manifest in approvals.workspace_manifests(req, req.gpu_resource):
            kind, obj = manifest["kind"], manifest["metadata"]["name"]
            if kind == "ResourceQuota" and obj in have:
                continue
            if kind == "LimitRange" and not ctx.sent_before(RecreateNamespace.key):
                continue  # it went only with the namespace; apply is kept for a namespace this run re-created
            if kind == "ResourceQuota" and "scopeSelector" not in manifest["spec"]:
                ctx.gateway.create_resource_quota(name, obj, manifest["spec"]["hard"])
            else:
                ctx.gateway.apply(manifest)
            sent.append(f"{kind}/{obj}")
            lines.append(f"{kind.lower()}/{obj} created")
        if not sent:
            return Outcome(None, said("workspace_step.quotas_exist", ns=name))
        return Outcome({"created": sent}, "\n".join(lines))

    def verify(self, ctx):
        name = ctx.params["workspace"]
        req = _approved_workspace(name)
        have = {
            q["metadata"]["name"]: (q.get("spec") or {}).get("hard") or {}
            for q in ctx.gateway.list_resource_quotas(name)
        }
        wanted = _expected_quotas(req) if req else []
        missing = [m["metadata"]["name"] for m in wanted if m["metadata"]["name"] not in have]
        lines = [f"{q}: {', '.join(f'{k}={v}' for k, v in sorted(h.items()))}" for q, h in sorted(have.items())]
        return Check(not missing, "\n".join(lines), said("workspace_step.missing_quotas", q=", ".join(missing)))


class ProcedureRecreateWorkspace(Fix):
    code = "W"
    label = gettext_lazy("Re-create a Workspace's namespace and quotas")
    description = gettext_lazy(
        "An approved Workspace whose namespace or quota was removed from the cluster gets them "
        "back as its approval record says (owner label, GPU, CPU, memory and storage quotas)."
    )
    needs_node = False
    fixes = ("workspace-namespace-missing", "workspace-quota-missing")
    subject_param = "workspace"  # those findings name the Workspace as their subject
    params = (Param("workspace", name_field(gettext_lazy("Workspace"))),)

    def lock_key(self, node):
        return "workspaces"  # one Workspace repair at a time (the approval record is read, not locked)

    def fixes_finding(self, kind, params):
        return kind in self.fixes and bool(params.get("workspace"))

    def confirm_sentence(self, node, params):
        return _("Re-create Workspace %(ws)s in the cluster from its approval record?") % {
            "ws": params.get("workspace")
        }

    def steps(self, params):
        return [PrecheckStep(self), RecreateNamespace(), RecreateQuotas()]

    def precheck_kubectl(self, run):
        return (
            f"kubectl get namespace {run.params.get('workspace')}; "
            f"kubectl -n {run.params.get('workspace')} get resourcequota"
        )

    def nothing_to_do(self, gateway, node, params):
        live = LiveRead.of(gateway)
        name = params.get("workspace") or ""
        req = _approved_workspace(name)
        if req is None or not _namespace_present(live, name):
            return ""
        wanted = {m["metadata"]["name"] for m in _expected_quotas(req)}
        if wanted <= _quota_names(live, name):
            return _("Workspace %(ws)s has its namespace and quotas in the cluster.") % {"ws": name}
        return ""

    def fix_prechecks(self, gateway, node, params):
        name = params["workspace"]
        req = _approved_workspace(name)
        if req is None:
            return [
                Check(
                    False,
                    _("No approved Workspace named %(ws)s: there is no record to re-create it from.") % {"ws": name},
                )
            ]
        hard = "; ".join(
            f"{m['metadata']['name']}: " + ", ".join(f"{k}={v}" for k, v in m["spec"]["hard"].items())
            for m in _expected_quotas(req)
        )
        present = _namespace_present(LiveRead.of(gateway), name)
        return [
            Check(
                True,
                _("Approved by %(who)s on %(when)s for %(owner)s: %(hard)s.")
                % {
                    "who": req.decided_by_name or "?",
                    "when": req.decided_at.strftime("%Y-%m-%d %H:%M") if req.decided_at else "?",
                    "owner": req.requester_name,
                    "hard": hard,
                },
            ),
            Check(
                True,
                _("The namespace exists; only the missing quotas are created.")
                if present
                else _(
                    "The namespace is gone: its pods and data were deleted with it. It is created empty, with its "
                    "quotas; the owner must start their workloads again."
                ),
                level="info" if present else "warn",
            ),
        ]


# --- Q: an admin sets a Workspace's GPU quota (a plain edit, an undo, a reclaim) ---------------


class SetGpuQuota(Step):
    """The Workspace's GPU quota set to the run's amount: the ResourceQuota in the cluster,
    the approval record (what "Re-create" and the health checks compare with) and a notice
    to the owner. Reads the pods again first: never below what they request."""

    key = "set-quota"

    def title(self, run):
        return _("Set the %(res)s quota of Workspace %(ws)s from %(a)s to %(b)s") % {
            "res": run.params.get("resource"),
            "ws": run.params.get("workspace"),
            "a": run.params.get("before"),
            "b": run.params.get("gpu"),
        }

    def kubectl(self, run):
        return (
            f"kubectl -n {run.params.get('workspace')} patch resourcequota <its GPU quota> --type=merge "
            f'-p \'{{"spec":{{"hard":{{"{approvals.quota_key(run.params.get("resource") or "")}":'
            f'"{run.params.get("gpu")}"}}}}}}\''
        )

    def _quota(self, ctx):
        from . import quota as quota_mod

        quotas = ctx.gateway.list_resource_quotas(ctx.params["workspace"])
        name, _res, now = quota_mod.gpu_quota(quotas, ctx.params["resource"])
        return next((q for q in quotas if q["metadata"]["name"] == name), None), now

    def ensure(self, ctx):
        from . import quota as quota_mod

        name, resource, after = ctx.params["workspace"], ctx.params["resource"], int(ctx.params["gpu"])
        current, now = self._quota(ctx)
        if current is None:
            raise StepFailed(said("workspace_step.no_quota_any_more", ws=name, res=resource))
        requested = sum(p.amount for p in quota_mod.workload_requests(ctx.gateway, name, resource))
        problem = quota_mod.quota_problem(resource, after, requested)
        if problem:
            raise StepFailed(problem, said("workspace_step.pods_request_too_much"))
        if now == after:
            self._record(ctx, name, resource, after)
            return Outcome(None, said("workspace_step.quota_already", n=after))
        spec = dict(current.get("spec") or {})
        spec["hard"] = {**(spec.get("hard") or {}), approvals.quota_key(resource): str(after)}
        manifest = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": current["metadata"]["name"], "namespace": name},
            "spec": spec,
        }
        ctx.gateway.apply(manifest)
        self._record(ctx, name, resource, after)
        return Outcome(
            {"resourcequota": current["metadata"]["name"], "hard": {approvals.quota_key(resource): str(after)}},
            f"resourcequota/{current['metadata']['name']} configured",
        )

    def _record(self, ctx, name, resource, after):
        """The approval record follows the cluster (and a decision row says who and why); the
        owner is told on their Workspace page. Once per run."""
        from gpus.models import OwnerNotice

        from .models import Decision

        subject = f"quota:{name}"
        if OwnerNotice.objects.filter(run_id=ctx.run.pk, subject=subject).exists():
            return
        WorkspaceRequest.objects.filter(
            name=name, status=WorkspaceRequest.Status.APPROVED, gpu_resource=resource
        ).update(gpu=after)
        req = _approved_workspace(name)
        before = ctx.params.get("before")
        Decision.objects.create(
            actor=ctx.run.actor,
            actor_name=ctx.run.actor_name,
            action=Decision.Action.QUOTA,
            workspace=req,
            subject=name,
            gpu_resource=resource,
            amount=after,
            detail=said("decision.quota_changed", a=before, b=after, id=ctx.run.pk, why=quota_reason(ctx.params)),
        )
        OwnerNotice.objects.create(
            namespace=name,
            owner_name=req.requester_name if req else "",
            subject=subject,
            run_id=ctx.run.pk,
            actor_name=ctx.run.actor_name,
            message=_owner_words(ctx, req, resource, before, after),
        )

    def verify(self, ctx):
        _current, now = self._quota(ctx)
        want = int(ctx.params["gpu"])
        return Check(
            now == want,
            said("workspace_step.quota", res=ctx.params["resource"], n=now),
            said("workspace_step.fix_quota_by_hand", cmd=self.kubectl(ctx.run)),
        )


class SetElasticQuota(Step):
    """A Kueue Workspace's ClusterQueue set to the run's guarantee, burst and lend ceilings
    (workspaces/elastic.py); its ResourceQuota, the ceiling, was set by the step before."""

    key = "set-elastic-quota"

    def _grant(self, params):
        from brickadmin.cluster.kueue import Grant

        return Grant(int(params["guarantee"]), int(params["burst"]), params.get("lend"))

    def title(self, run):
        g = self._grant(run.params)
        return _("Set the ClusterQueue of %(ws)s: guarantee %(g)s, burst ceiling %(b)s, lend ceiling %(l)s") % {
            "ws": run.params.get("workspace"),
            "g": g.guarantee,
            "b": g.burst,
            "l": g.guarantee if g.lend is None else g.lend,
        }

    def kubectl(self, run):
        from brickadmin.cluster.kueue import queue_name

        return f"kubectl edit clusterqueue {queue_name(run.params.get('workspace', ''))}"

    def ensure(self, ctx):
        from . import elastic

        name, resource = ctx.params["workspace"], ctx.params["resource"]
        grant = self._grant(ctx.params)
        if elastic.grant_now(ctx.gateway, name, resource) == grant:
            return Outcome(None, said("workspace_step.elastic_already", ws=name))
        manifest = elastic.set_grant(ctx.gateway, name, resource, grant)
        if manifest is None:
            raise StepFailed(said("workspace_step.no_cluster_queue", ws=name))
        elastic.read_kueue(ctx.gateway)  # the pages show it at once
        return Outcome(
            {"clusterqueue": manifest["metadata"]["name"]}, f"clusterqueue/{manifest['metadata']['name']} configured"
        )

    def verify(self, ctx):
        from . import elastic

        now = elastic.grant_now(ctx.gateway, ctx.params["workspace"], ctx.params["resource"])
        ok = now == self._grant(ctx.params)
        g, b, lend = (now.guarantee, now.burst, now.lend) if now else ("-", "-", "-")
        return Check(
            ok,
            said("workspace_step.elastic_now", ws=ctx.params["workspace"], g=g, b=b, l=lend),
            said("workspace_step.fix_quota_by_hand", cmd=self.kubectl(ctx.run)),
        )


class ProcedureSetQuota(ProcedureDef):
    """Started from a Workspace's quota page (workspaces/quota.py), never from the index."""

    code = "Q"
    label = gettext_lazy("Set a Workspace's GPU quota")
    description = gettext_lazy(
        "An admin lowers, raises, reclaims or puts back a Workspace's GPU quota: never below "
        "what its pods request; the quota before is recorded, so the change can be undone."
    )
    needs_node = False
    listed = False
    # the quota page asks the plans' acknowledgement when a raise takes a GPU type over its Total
    params = (Param("workspace", name_field(gettext_lazy("Workspace"))), CAPACITY_PARAM)
    param_words = {
        "resource": gettext_lazy("GPU resource"),
        "gpu": gettext_lazy("New GPU quota"),
        "before": gettext_lazy("Quota before"),
        "reason": gettext_lazy("Why"),
        "undo_of": gettext_lazy("Undoes run"),
        "guarantee": gettext_lazy("Guarantee"),
        "burst": gettext_lazy("Burst ceiling"),
        "lend": gettext_lazy("Lend ceiling"),
        "before_grant": gettext_lazy("Guarantee, burst and lend before"),
    }
    unnamed_params = ("reason_said",)  # the reason again, as a message: shown as "Why"

    def lock_key(self, node):
        return "workspaces"

    def headline(self, run):
        p = run.params or {}
        return _("Quota of %(ws)s: %(a)s → %(b)s") % {"ws": p.get("workspace"), "a": p.get("before"), "b": p.get("gpu")}

    def run_links(self, run):
        from urllib.parse import urlencode

        from django.urls import reverse

        from . import quota as quota_mod

        ws = (run.params or {}).get("workspace")
        if not ws:
            return []
        page = reverse("workspace_quota", args=[ws])
        links = [(page, _("GPU quota of %(ws)s") % {"ws": ws}, "what-next-quota")]
        back = quota_mod.undo_target(run)
        if back is not None:
            query = {"gpu": back, "undo_of": run.pk, "reason": _("Undo of run #%(id)s") % {"id": run.pk}}
            links.append((f"{page}?{urlencode(query)}", _("Undo: back to %(n)s") % {"n": back}, "what-next-undo"))
        return links

    def steps(self, params):
        if "guarantee" in params:  # a Kueue Workspace: its ClusterQueue too
            return [PrecheckStep(self), SetGpuQuota(), SetElasticQuota()]
        return [PrecheckStep(self), SetGpuQuota()]

    def precheck_kubectl(self, run):
        return f"kubectl -n {run.params.get('workspace')} get resourcequota,pods"

    def prechecks(self, gateway, node, params):
        from gpus.procedures.catalogue.common import capacity_line_text

        from . import quota as quota_mod

        try:
            seen = quota_mod.preview(
                gateway, params.get("workspace", ""), int(params.get("gpu", 0)), params.get("resource", "")
            )
        except quota_mod.QuotaError as exc:
            return [Check(False, str(exc))]
        checks = [
            Check(
                True,
                said(
                    "workspace_precheck.quota_change",
                    ws=seen.workspace,
                    owner=seen.owner or "?",
                    res=seen.resource,
                    a=seen.before,
                    b=seen.after,
                    r=seen.requested,
                ),
                items=[f"{p.name} ({p.phase}): {p.amount}" for p in seen.pods],
            )
        ]
        if seen.problem:
            checks.append(Check(False, seen.problem))
        guard = over_total_check(seen.capacity)
        if guard is not None:
            checks.append(guard)  # step 0 holds the run to the count the admin acknowledged
        elif seen.capacity:
            checks.append(
                Check(
                    True,
                    said("workspace_precheck.capacity_after"),
                    level="info",
                    capacity=seen.capacity,
                    items=[capacity_line_text(line) for line in seen.capacity if line.changes],
                )
            )
        return checks
