"""The Fixes on one node or pod: one audited click from a health finding.

Unlisted procedures (never on the procedure index), each declaring the finding kinds it
fixes (``fixes``): the Health page offers "Fix" on such a finding, with the finding's
facts as parameters (N stops mig-manager on a node whose GPUs NVIDIA's DRA driver
partitions). Each says, read live when its run starts, when the finding has gone
(``nothing_to_do``): the run then ends as "nothing to do" without a write. Their base is
``common.Fix``; the device plugin's Fixes (P, T) are in plugin.py, the Workspaces' in
workspaces/procedures.py."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.projection import is_mig_manager_pod
from brickadmin.wording import said
from gpus.numbers.device_health import mig_manager_signs
from gpus.numbers.dra_lines import DYNAMIC_MIG
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
        if not vocab.is_stale_resource(sharing, res, raw.get("status") or {}):
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


# --- mig-manager off a node whose GPUs DRA partitions when claimed --------------------------


def _mig_manager_pods(gateway, node):
    pods = gateway.list_pods(namespace=vocab.GPU_OPERATOR_NAMESPACE, field_selector=f"spec.nodeName={node}")
    return [p for p in pods if is_mig_manager_pod(p)]


class MigManagerOff(Step):
    """The GPU Operator's deploy label of mig-manager set to false: its DaemonSet no longer selects the node."""

    key = "mig-manager-off"

    def title(self, run):
        return _("Label %(node)s %(label)s=false, so the GPU Operator stops mig-manager there") % {
            "node": run.node,
            "label": vocab.MIG_MANAGER_DEPLOY_LABEL,
        }

    def kubectl(self, run):
        return f"kubectl label node {run.node} {vocab.MIG_MANAGER_DEPLOY_LABEL}=false --overwrite"

    def ensure(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        if labels.get(vocab.MIG_MANAGER_DEPLOY_LABEL) == "false":
            return Outcome(None, said("mig_manager.label_already", label=vocab.MIG_MANAGER_DEPLOY_LABEL))
        change = {vocab.MIG_MANAGER_DEPLOY_LABEL: "false"}
        ctx.gateway.label_node(ctx.node, change)
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        value = (ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}).get(vocab.MIG_MANAGER_DEPLOY_LABEL)
        return Check(
            value == "false",
            f"{vocab.MIG_MANAGER_DEPLOY_LABEL}={value or '-'}",
            said("mig_manager.fix_label", cmd=self.kubectl(ctx)),
        )


class MigManagerGone(Step):
    """Wait until no mig-manager pod is left on the node (its DaemonSet controller deletes it)."""

    key = "mig-manager-gone"
    waits = True

    def title(self, run):
        return _("Verify no mig-manager pod runs on %(node)s any more") % {"node": run.node}

    def kubectl(self, run):
        return (
            f"kubectl -n {vocab.GPU_OPERATOR_NAMESPACE} get pods -l app=nvidia-mig-manager "
            f"--field-selector spec.nodeName={run.node}"
        )

    def verify(self, ctx):
        left = [vocab.pod_key(p) for p in _mig_manager_pods(ctx.gateway, ctx.node)]
        return Check(
            not left,
            said("mig_manager.pods_left", pods=", ".join(left)) if left else said("mig_manager.gone", node=ctx.node),
            said("mig_manager.fix_pods_left", label=vocab.MIG_MANAGER_DEPLOY_LABEL, ns=vocab.GPU_OPERATOR_NAMESPACE),
        )


class ProcedureStopMigManager(Fix):
    code = "N"
    label = gettext_lazy("Stop mig-manager on a node DRA partitions")
    description = gettext_lazy(
        "On a node whose GPUs NVIDIA's DRA driver partitions when claimed (dynamic MIG), the GPU Operator's "
        "mig-manager is stopped by labelling the node nvidia.com/gpu.deploy.mig-manager=false, so only the DRA "
        "driver changes its MIG layout. No pod is evicted."
    )
    fixes = ("dra-mig-manager",)

    def confirm_sentence(self, node, params):
        return _(
            "Stop mig-manager on %(node)s? The node is labelled %(label)s=false; the MIG devices claims hold stay."
        ) % {"node": node, "label": vocab.MIG_MANAGER_DEPLOY_LABEL}

    def steps(self, params):
        return [PrecheckStep(self), MigManagerOff(), MigManagerGone()]

    def precheck_kubectl(self, run):
        return (
            f"kubectl get node {run.node} -L {vocab.MIG_MANAGER_DEPLOY_LABEL},{vocab.MIG_CONFIG_LABEL}; "
            f"kubectl -n {vocab.GPU_OPERATOR_NAMESPACE} get pods --field-selector spec.nodeName={run.node}"
        )

    def _signs(self, live, node):
        labels = live.get_node(node)["metadata"].get("labels") or {}
        return labels, mig_manager_signs(labels, _mig_manager_pods(live, node))

    def nothing_to_do(self, gateway, node, params):
        live = LiveRead.of(gateway)
        n = live.ledger().node(node)
        if n is None or n.dra is None or not any(g.mode == DYNAMIC_MIG for g in n.dra.gpus):
            return said("mig_manager.not_dynamic_mig", node=node)
        _labels, signs = self._signs(live, node)
        if not signs:
            return said("mig_manager.already_off", node=node, label=vocab.MIG_MANAGER_DEPLOY_LABEL)
        return ""

    def fix_prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        labels, signs = self._signs(live, node)
        checks = [
            Check(
                True,
                said("mig_manager.runs", node=node, signs=", ".join(signs), label=vocab.MIG_MANAGER_DEPLOY_LABEL),
            )
        ]
        if labels.get(vocab.MIG_CONFIG_LABEL):
            checks.append(
                Check(
                    True,
                    said(
                        "mig_manager.config_stays", label=vocab.MIG_CONFIG_LABEL, value=labels[vocab.MIG_CONFIG_LABEL]
                    ),
                    level="info",
                )
            )
        return checks
