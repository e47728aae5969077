"""The Fixes on one node or pod: one audited click from a health finding.

Unlisted procedures (never on the procedure index), each declaring the finding kinds it
fixes (``fixes``): the Health page offers "Fix" on such a finding, with the finding's
facts as parameters. Each says, read live when its run starts, when the finding has gone
(``nothing_to_do``): the run then ends as "nothing to do" without a write. Their base is
``common.Fix``; the device plugin's Fixes (P, T) are in plugin.py, the Workspaces' in
workspaces/procedures.py."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.wording import said
from gpus.view.live import LiveRead

from .. import notices
from ..base import Check, Outcome, Param, Step
from ..steps import GPU_SHARED, SHARING_LABEL, RemoveStale, Uncordon, nvidia_resources, status_patch
from .common import Fix, PrecheckStep, name_field


class RemoveStaleResource(RemoveStale):
    """Step 6 of A/B on its own: the named stale resource out of node status."""

    def __init__(self, resource):
        self._resource = resource

    @property
    def resource(self):
        return self._resource

    def title(self, run):
        return _("Remove the stale %(res)s from the status of %(node)s (JSON patch)") % {
            "res": self.resource,
            "node": run.node,
        }


class ProcedureRemoveStale(Fix):
    code = "S"
    label = gettext_lazy("Remove a stale resource from node status")
    description = gettext_lazy(
        "The previous mode's GPU resource left in a node's capacity and allocatable is removed "
        "with a JSON patch on the status subresource (step 6 of A/B)."
    )
    fixes = ("stale-allocatable", "stale-capacity")
    params = (
        Param(
            "stale_resource",
            lambda: forms.ChoiceField(
                label=gettext_lazy("Stale resource"), choices=[(vocab.GPU, vocab.GPU), (GPU_SHARED, GPU_SHARED)]
            ),
        ),
    )

    def steps(self, params):
        return [PrecheckStep(self), RemoveStaleResource(params.get("stale_resource") or vocab.GPU)]

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node} -o jsonpath='{{.status.allocatable}}'"

    def nothing_to_do(self, gateway, node, params):
        raw = LiveRead.of(gateway).get_node(node)
        res = params.get("stale_resource") or ""
        sharing = (raw["metadata"].get("labels") or {}).get(SHARING_LABEL, "")
        if not vocab.is_stale_resource(sharing, res):
            return said("precheck.stale_serves_now", res=res, node=node, label=SHARING_LABEL, v=sharing or "-")
        if not status_patch(raw.get("status") or {}, res):
            return said("precheck.stale_gone", res=res, node=node)
        return ""

    def fix_prechecks(self, gateway, node, params):
        raw = LiveRead.of(gateway).get_node(node)
        res = params["stale_resource"]
        cap, alloc = nvidia_resources(raw).get(res, ("-", "-"))
        return [
            Check(
                True,
                said("precheck.stale_found", node=node, res=res, c=cap, a=alloc),
            )
        ]


class TellOwner(Step):
    """A notice on the Workspace page of the pod's owner, before the pod is deleted."""

    key = "tell-owner"

    def title(self, run):
        return _("Tell the owner of Workspace %(ns)s what happened to pod %(pod)s") % {
            "ns": run.params.get("pod_namespace"),
            "pod": run.params.get("pod_name"),
        }

    def kubectl(self, run):
        return _("(in brickadmin) a notice on the Workspace page of %(ns)s") % {"ns": run.params.get("pod_namespace")}

    def ensure(self, ctx):
        from ...models import OwnerNotice

        ns, name = ctx.params["pod_namespace"], ctx.params["pod_name"]
        subject = f"{ns}/{name}"
        if OwnerNotice.objects.filter(run_id=ctx.run.pk, subject=subject).exists():
            return Outcome(None, said("step.owner_already_told"))
        pods = ctx.gateway.list_pods(namespace=ns, field_selector=f"metadata.name={name}")
        status = (pods[0].get("status") or {}) if pods else {}
        owner = LiveRead(ctx.gateway).owners().get(ns, "")
        why = status.get("message") or status.get("reason") or said("notice.it_failed")
        # kept as a message: the owner's page says it in its reader's language, the mail in theirs
        message = said("notice.failed_pod_deleted", pod=subject, node=ctx.node, why=why, who=ctx.run.actor_name)
        OwnerNotice.objects.create(
            namespace=ns,
            owner_name=owner,
            subject=subject,
            message=message,
            run_id=ctx.run.pk,
            actor_name=ctx.run.actor_name,
        )
        notices.tell_owner(ns, owner, subject, message, ctx.run.actor_name)
        return Outcome(None, said("step.notice_recorded", owner=owner or "?", ns=ns))

    def verify(self, ctx):
        from ...models import OwnerNotice

        subject = f"{ctx.params['pod_namespace']}/{ctx.params['pod_name']}"
        ok = OwnerNotice.objects.filter(run_id=ctx.run.pk, subject=subject).exists()
        return Check(ok, said("step.notice_shown") if ok else said("step.no_notice_recorded"))


class DeletePod(Step):
    key = "delete-pod"

    def title(self, run):
        return _("Delete the failed pod %(ns)s/%(pod)s") % {
            "ns": run.params.get("pod_namespace"),
            "pod": run.params.get("pod_name"),
        }

    def kubectl(self, run):
        return f"kubectl -n {run.params.get('pod_namespace')} delete pod {run.params.get('pod_name')}"

    def _pods(self, ctx):
        return ctx.gateway.list_pods(
            namespace=ctx.params["pod_namespace"], field_selector=f"metadata.name={ctx.params['pod_name']}"
        )

    def ensure(self, ctx):
        if not self._pods(ctx):
            return Outcome(None, said("step.pod_already_gone"))
        ctx.gateway.delete("v1", "Pod", ctx.params["pod_name"], ctx.params["pod_namespace"])
        return Outcome(
            {"delete": f"pod/{ctx.params['pod_namespace']}/{ctx.params['pod_name']}"},
            f'pod "{ctx.params["pod_name"]}" deleted',
        )

    def verify(self, ctx):
        left = self._pods(ctx)
        return Check(
            not left,
            said("step.pod_gone") if not left else said("step.pod_still_there"),
            said("step.fix_delete_pod", cmd=self.kubectl(ctx)),
        )


class ProcedureDeleteFailedPod(Fix):
    code = "F"
    label = gettext_lazy("Delete a failed pod after telling its owner")
    description = gettext_lazy(
        "A GPU pod the kubelet refused stays Failed until deleted. The owner is told on their "
        "Workspace page what happened, then the pod is deleted."
    )
    fixes = ("pod-admission-failed",)
    params = (
        Param("pod_namespace", name_field(gettext_lazy("the pod's namespace"))),
        Param("pod_name", name_field(gettext_lazy("the pod's name"))),
    )

    def fixes_finding(self, kind, params):
        return kind in self.fixes and bool(params.get("pod_name"))

    def confirm_sentence(self, node, params):
        return _(
            "Delete pod %(ns)s/%(pod)s? Its owner is told on their Workspace page first; a deleted pod cannot be "
            "brought back, only recreated."
        ) % {"ns": params.get("pod_namespace"), "pod": params.get("pod_name")}

    def steps(self, params):
        return [PrecheckStep(self), TellOwner(), DeletePod()]

    def precheck_kubectl(self, run):
        return f"kubectl -n {run.params.get('pod_namespace')} get pod {run.params.get('pod_name')} -o wide"

    def _pod(self, gateway, params):
        return LiveRead.of(gateway).pod(params.get("pod_namespace"), params.get("pod_name"))

    def nothing_to_do(self, gateway, node, params):
        pod = self._pod(gateway, params)
        key = f"{params.get('pod_namespace')}/{params.get('pod_name')}"
        if pod is None:
            return said("precheck.pod_gone", pod=key)
        if (pod.get("status") or {}).get("phase") != "Failed":
            return said("precheck.pod_not_failed", pod=key, phase=(pod.get("status") or {}).get("phase") or "?")
        return ""

    def fix_prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        pod = self._pod(live, params)
        status = pod.get("status") or {}
        ns = params["pod_namespace"]
        workspaces = live.list_namespaces(label_selector=f"{vocab.WORKSPACE_LABEL}=true")
        if ns not in {n["metadata"]["name"] for n in workspaces}:
            # The chart lets the console delete pods in Workspace namespaces only.
            return [
                Check(
                    False,
                    said("precheck.pod_not_in_workspace", pod=vocab.pod_key(pod), ns=ns),
                    said("step.fix_delete_pod", cmd=f"kubectl -n {ns} delete pod {params['pod_name']}"),
                )
            ]
        owner = live.owners().get(ns, "")
        return [
            Check(
                True,
                said(
                    "precheck.pod_failed",
                    pod=vocab.pod_key(pod),
                    node=node,
                    reason=status.get("reason") or "",
                    message=status.get("message") or "",
                ),
            ),
            Check(
                True,
                said("precheck.owner_will_see", owner=owner or "?", ns=ns),
                level="warn",
            ),
        ]


class ProcedureUncordon(Fix):
    code = "U"
    label = gettext_lazy("Uncordon a node")
    description = gettext_lazy(
        "A cordoned node takes no new pods. Uncordoning it lets the scheduler place pods on "
        "its GPUs again; pods already there are not touched."
    )
    fixes = ("cordoned",)

    def confirm_sentence(self, node, params):
        return _("Uncordon %(node)s? New pods can then be scheduled on its GPUs.") % {"node": node}

    def steps(self, params):
        return [PrecheckStep(self), Uncordon()]

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node}"

    def nothing_to_do(self, gateway, node, params):
        if (gateway.get_node(node).get("spec") or {}).get("unschedulable"):
            return ""
        return said("precheck.not_cordoned", node=node)

    def fix_prechecks(self, gateway, node, params):
        n = LiveRead.of(gateway).ledger().node(node)
        held = n.logical if n is not None else 0
        return [
            Check(
                True,
                said("precheck.cordoned_holds", node=node, n=held),
                level="warn",
            )
        ]
