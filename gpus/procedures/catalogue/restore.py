"""R: restore a node after a run that stopped: its GPU labels as they were before that run
(recorded by its pre-check), mig-manager's layout among them, the DeviceTaintRules it created
deleted, and uncordon. A layout put back
is waited for with M's own step (``MigConfigApplied``)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.wording import said
from gpus.view.live import LiveRead

from ..base import Check, Outcome, Param, ProcedureDef, Step
from ..steps import SHARING_LABEL, TYPE_LABEL, Skipped, Uncordon
from .common import PrecheckStep, node_state
from .dra import DeleteTaintRules
from .mig import MigConfigApplied


class RestoreLabels(Step):
    key = "restore-labels"

    def __init__(self, labels: dict):
        self.labels = labels

    def _text(self):
        return ", ".join(f"{k}={v}" if v is not None else _("%(k)s absent") % {"k": k} for k, v in self.labels.items())

    def title(self, run):
        return _("Put back the labels of %(node)s as they were before run #%(id)s: %(labels)s") % {
            "node": run.node,
            "id": run.params.get("restore_of"),
            "labels": self._text() or _("none recorded"),
        }

    def kubectl(self, run):
        args = " ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in self.labels.items())
        return f"kubectl label node {run.node} {args} --overwrite" if args else ""

    def _differs(self, ctx):
        have = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        return {k: v for k, v in self.labels.items() if have.get(k) != v}

    def ensure(self, ctx):
        change = self._differs(ctx)
        if not change:
            return Outcome(None, said("step.labels_already_restored"))
        ctx.gateway.label_node(ctx.node, change)
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        left = self._differs(ctx)
        return Check(
            not left,
            self._text() or said("step.no_label_to_put_back"),
            said("step.fix_labels_by_hand", cmd=self.kubectl(ctx)),
        )


class RestoreMigConfig(RestoreLabels):
    """The labels back, mig-manager's layout among them: the state it reported for the layout
    being undone goes in the same patch (as procedure M sets a layout)."""

    def ensure(self, ctx):
        change = self._differs(ctx)
        if not change:
            return Outcome(None, said("step.labels_already_restored"))
        if vocab.MIG_CONFIG_LABEL in change:
            change[vocab.MIG_CONFIG_STATE_LABEL] = None
        ctx.gateway.label_node(ctx.node, change)
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")


class RestoreUncordon(Uncordon):
    def title(self, run):
        return _("Uncordon %(node)s") % {"node": run.node}


class ProcedureRestore(ProcedureDef):
    """Undo what a stopped node run left behind: its node's labels as they were before that
    run (recorded at its pre-check), and uncordon (unless the node was cordoned before it).
    Started from the stopped run's page, never from the procedure index."""

    code = "R"
    label = gettext_lazy("R. Restore a node")
    description = gettext_lazy(
        "Put a node's GPU labels back as they were before a run that stopped, and "
        "uncordon it. Offered on the page of a failed, cancelled or interrupted run."
    )
    listed = False
    restores = True
    fixes = ("run-left-cordoned",)  # the Fix of that finding: its params are completed by service.fix_params
    params = (
        Param("restore_of", lambda: forms.IntegerField(min_value=1, required=False, label=gettext_lazy("Run to undo"))),
    )
    param_words = {
        "labels": gettext_lazy("GPU labels put back"),
        "uncordon": gettext_lazy("Uncordon"),
        "delete_rules": gettext_lazy("DeviceTaintRules to delete"),
    }

    def confirm_sentence(self, node, params):
        return _(
            "Restore %(node)s? A new run puts its GPU labels back as they were before run #%(id)s and uncordons "
            "it, so pods can be scheduled there again."
        ) % {"node": node, "id": params.get("restore_of")}

    def nothing_to_do(self, gateway, node, params):
        labels = params.get("labels") or {}
        now = node_state(LiveRead.of(gateway).get_node(node), tuple(labels))
        relabelled = any(now["labels"].get(k) != v for k, v in labels.items())
        if relabelled or (params.get("uncordon") and now["unschedulable"]):
            return ""
        if params.get("delete_rules"):
            there = {r["metadata"]["name"] for r in LiveRead.of(gateway).gateway.list_device_taint_rules()}
            if there & set(params["delete_rules"]):
                return ""
        return said("precheck.nothing_to_restore", node=node, id=params.get("restore_of"))

    def steps(self, params):
        labels = params.get("labels") or {}
        steps = [PrecheckStep(self), RestoreLabels(labels)]
        if labels.get(vocab.MIG_CONFIG_LABEL):  # mig-manager repartitions the GPUs back before pods come
            steps = [
                PrecheckStep(self),
                RestoreMigConfig(labels),
                MigConfigApplied(labels[vocab.MIG_CONFIG_LABEL], offer_back=False),
            ]
        if params.get("delete_rules"):  # the DeviceTaintRules the run created (G)
            steps.append(DeleteTaintRules(names=params["delete_rules"]))
        if params.get("uncordon", True):
            steps.append(RestoreUncordon())
        else:
            steps.append(Skipped("uncordon", _("Uncordon"), said("step.stays_cordoned")))
        return steps

    def node_choices(self, ledger, snapshot):
        return []

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node} -L {TYPE_LABEL},{SHARING_LABEL}"

    def prechecks(self, gateway, node, params):
        from brickadmin.cluster import NotFound

        if not params.get("restore_of"):
            return [
                Check(
                    False,
                    said("precheck.restore_from_run"),
                    said("precheck.fix_restore_from_run"),
                )
            ]
        live = LiveRead.of(gateway)
        try:
            raw = live.get_node(node)
        except NotFound:
            return [Check(False, said("precheck.no_such_node", node=node))]
        now = node_state(raw, tuple(params.get("labels") or ()))
        labels = ", ".join(f"{k}={v if v is not None else '-'}" for k, v in now["labels"].items())
        if "labels" in params:  # the parameters are complete (from the run's page or a Fix)
            reason = self.nothing_to_do(live, node, params)
            if reason:
                return [
                    Check(
                        True,
                        said("precheck.nothing_to_do_now", why=reason),
                        level="info",
                    )
                ]
        return [
            Check(
                True,
                said(
                    "precheck.restore_node_now",
                    node=node,
                    labels=labels,
                    state=said("step.cordoned") if now["unschedulable"] else said("step.schedulable"),
                    id=params["restore_of"],
                ),
            )
        ]
