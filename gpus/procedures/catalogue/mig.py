"""M: a node's MIG layout, the GPU Operator's mig-manager way.

The admin names one of mig-manager's layouts (the mig-parted ConfigMap) in the node label
nvidia.com/mig.config; mig-manager (a GPU Operator DaemonSet on the nodes labelled
nvidia.com/gpu.deploy.mig-manager=true) repartitions the GPUs, restarts the device plugin and
reports nvidia.com/mig.config.state: pending, then success or failed."""

from __future__ import annotations

from collections import Counter

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from brickadmin.cluster import ClusterError, migparted
from brickadmin.cluster import mig as mig_mod
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import advertised_resources
from brickadmin.cluster.gateway import get_gateway
from brickadmin.wording import joined, said
from gpus.numbers import capacity as capacity_mod
from gpus.numbers.dra_lines import DYNAMIC_MIG
from gpus.view.live import LiveRead

from ..base import Check, Outcome, Param, ProcedureDef, Step, StepFailed
from ..recording import remembered
from ..steps import Cordon, Drain, Uncordon
from .common import (
    CAPACITY_PARAM,
    EVICTIONS_PARAM,
    NODE_BEFORE,
    PrecheckStep,
    blast_radius,
    capacity_checks,
    quota_over,
)


def mig_manager_runs(labels: dict) -> bool:
    return (labels or {}).get(vocab.MIG_MANAGER_DEPLOY_LABEL) == "true"


def reason_said(reason):
    """A refusal of the pure MIG modules (brickadmin/cluster/mig.py ``Reason``) as a message, to
    be said in its reader's language; any other text as it is."""
    if isinstance(reason, mig_mod.Reason):
        return said(reason.code, **{k: reason_said(v) for k, v in reason.params.items()})
    return reason


def mig_parted_configmap_name(gateway) -> str:
    """The ConfigMap mig-manager reads its layouts from: the ClusterPolicy's
    spec.migManager.config.name, else the BRICK_MIG_PARTED_CONFIGMAP setting, else the GPU
    Operator's default-mig-parted-config (vocabulary.mig_parted_configmap)."""
    from django.conf import settings

    try:
        policies = LiveRead.of(gateway).list_cluster_policies()
    except ClusterError:  # unreadable here: the setting or the default
        policies = []
    return vocab.mig_parted_configmap(policies, settings.BRICK_MIG_PARTED_CONFIGMAP)


def mig_configs(gateway) -> tuple[dict, str]:
    """mig-manager's named layouts, or ({}, why they cannot be read)."""
    from brickadmin.cluster import NotFound

    name = mig_parted_configmap_name(gateway)
    where = {"ns": vocab.GPU_OPERATOR_NAMESPACE, "name": name}
    try:
        cm = LiveRead.of(gateway).get_configmap(vocab.GPU_OPERATOR_NAMESPACE, name)
    except NotFound:
        return {}, said("precheck.mig_configmap_missing", **where)
    try:
        return migparted.parse((cm.get("data") or {}).get(vocab.MIG_PARTED_CONFIG_KEY)), ""
    except migparted.MigPartedError as exc:
        return {}, said(
            "precheck.mig_configmap_invalid", **where, err=reason_said(exc.args[0] if exc.args else str(exc))
        )


def node_gpus(gateway, node: str, n=None) -> list[dict]:
    """The node's physical GPUs: the twin's hardware, else DCGM's devices, else as many GPUs of
    the model as GPU Feature Discovery counts."""
    live = LiveRead.of(gateway)
    devices = (live.gpu_devices() or {}).get(node)
    if devices:
        return devices
    n = n or live.ledger().node(node)
    if n is None:
        return []
    return [dict(d) for d in n.raw_devices] or [{"model": n.model} for _i in range(n.physical)]


def guessed_layout(configs: dict, config: str, gpus: list[dict]) -> list[Check]:
    """A note on the plan when the layout of some GPU was guessed: the config picks its entries
    by PCI device id and nothing says the GPU's (migparted.guessed_gpus)."""
    indexes = migparted.guessed_gpus(configs, config, gpus)
    if not indexes:
        return []
    models = sorted({str(gpus[i].get("model") or "?") for i in indexes})
    text = said("precheck.mig_guessed", gpus=", ".join(map(str, indexes)), model=", ".join(models), config=config)
    return [Check(True, text, level="warn")]


def mig_advertised(gpus: list[dict], labels: dict) -> dict[str, int]:
    """What the GPU Operator's device plugin advertises for these GPUs (its MIG strategy is
    GFD's nvidia.com/mig.strategy label; mixed when absent)."""
    strategy = (labels or {}).get(vocab.MIG_STRATEGY_LABEL) or "mixed"
    return advertised_resources(gpus, {"flags": {"migStrategy": strategy}})


def advertised_now(raw: dict) -> dict[str, int]:
    """The node's nvidia.com/* allocatable above 0 (kubelet keeps a resource no longer served at 0)."""
    alloc = (raw.get("status") or {}).get("allocatable") or {}
    return {
        r: vocab.quantity(v)
        for r, v in sorted(alloc.items())
        if r.startswith(vocab.NVIDIA_PREFIX) and vocab.quantity(v) > 0
    }


def layout_summary(gpus: list[dict]) -> str:
    """'7 × nvidia.com/mig-1g.10gb on each of 4 GPUs', one part per differently partitioned group."""
    groups: dict[tuple, int] = {}
    for g in gpus:
        key = tuple(sorted(Counter(g.get("mig") or []).items()))
        groups[key] = groups.get(key, 0) + 1
    parts = []
    for key, count in groups.items():
        what = (
            ", ".join(f"{n} × {vocab.MIG_PREFIX}{p}" for p, n in key)
            if key
            else _("%(res)s (MIG off)") % {"res": vocab.GPU}
        )
        parts.append(
            ngettext("%(what)s on %(n)d GPU", "%(what)s on each of %(n)d GPUs", count) % {"what": what, "n": count}
        )
    return "; ".join(parts)


def _resources_text(resources: dict[str, int]) -> str:
    return ", ".join(f"{r}: {n}" for r, n in sorted(resources.items())) or said("step.no_nvidia_resource_bare")


MIG_CONFIG_PARAM = "mig_config"


class SetMigConfig(Step):
    key = "mig-config"

    def __init__(self, config):
        self.config = config

    def title(self, run):
        return _("Label %(node)s %(label)s=%(value)s (mig-manager repartitions its GPUs)") % {
            "node": run.node,
            "label": vocab.MIG_CONFIG_LABEL,
            "value": self.config,
        }

    def kubectl(self, run):
        return (
            f"kubectl label node {run.node} {vocab.MIG_CONFIG_LABEL}={self.config} "
            f"{vocab.MIG_CONFIG_STATE_LABEL}- --overwrite"
        )

    def ensure(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        if labels.get(vocab.MIG_CONFIG_LABEL) == self.config:
            return Outcome(None, said("step.label_already", label=vocab.MIG_CONFIG_LABEL, value=self.config))
        # The state mig-manager reported for the previous layout goes in the same patch, so it
        # is never taken for this layout's.
        change = {vocab.MIG_CONFIG_LABEL: self.config, vocab.MIG_CONFIG_STATE_LABEL: None}
        ctx.gateway.label_node(ctx.node, change)
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        value = (ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}).get(vocab.MIG_CONFIG_LABEL)
        return Check(
            value == self.config,
            f"{vocab.MIG_CONFIG_LABEL}={value}",
            said("step.fix_label", cmd=self.kubectl(ctx)),
        )


def _previous_layout(run) -> str:
    """The mig.config value the node had before this run (recorded at its pre-check)."""
    before = remembered(run, NODE_BEFORE) or {}
    return (before.get("labels") or {}).get(vocab.MIG_CONFIG_LABEL) or "-"


class MigConfigApplied(Step):
    key = "mig-state"
    waits = True
    # mig-manager may reset the GPUs and restart the operator's pods: minutes on real hardware.
    wait_knob, wait_default = "BRICK_MIG_CONFIG_TIMEOUT", 900

    def __init__(self, config, offer_back=True):
        self.config = config
        self.offer_back = offer_back

    def title(self, run):
        return _("Wait for mig-manager to report %(label)s=success") % {"label": vocab.MIG_CONFIG_STATE_LABEL}

    def kubectl(self, run):
        return f"kubectl get node {run.node} -L {vocab.MIG_CONFIG_LABEL},{vocab.MIG_CONFIG_STATE_LABEL} --watch"

    def _back(self, ctx):
        if not self.offer_back:
            return ""
        return said("step.mig_go_back", label=vocab.MIG_CONFIG_LABEL, prev=_previous_layout(ctx.run))

    def verify(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        state = labels.get(vocab.MIG_CONFIG_STATE_LABEL)
        reported = (
            f"{vocab.MIG_CONFIG_LABEL}={labels.get(vocab.MIG_CONFIG_LABEL)} "
            f"{vocab.MIG_CONFIG_STATE_LABEL}={state or '-'}"
        )
        if state == "success" and labels.get(vocab.MIG_CONFIG_LABEL) == self.config:
            return Check(True, reported)
        if state == "failed":
            configs, unreadable = mig_configs(ctx.gateway)
            why = unreadable or reason_said(migparted.layout(configs, self.config, node_gpus(ctx.gateway, ctx.node))[1])
            refused = said(
                "step.mig_refused",
                reported=reported,
                config=self.config,
                node=ctx.node,
                why=why or said("step.mig_read_log"),
            )
            raise StepFailed(reported, joined([refused, self._back(ctx)], " "))
        late = said("step.mig_late", reported=reported, node=ctx.node)
        return Check(False, reported, joined([late, self._back(ctx)], " "))


class MigResourcesAdvertised(Step):
    key = "mig-advertised"
    waits = True

    def __init__(self, config):
        self.config = config

    def title(self, run):
        return _("Verify %(node)s advertises the layout of %(config)s") % {"node": run.node, "config": self.config}

    def kubectl(self, run):
        return f"kubectl describe node {run.node} | grep -A 12 Allocatable"

    def verify(self, ctx):
        raw = ctx.gateway.get_node(ctx.node)
        configs, unreadable = mig_configs(ctx.gateway)
        after, why = migparted.layout(configs, self.config, node_gpus(ctx.gateway, ctx.node))
        if after is None:
            return Check(False, unreadable or reason_said(why), unreadable or reason_said(why))
        want, got = mig_advertised(after, raw["metadata"].get("labels") or {}), advertised_now(raw)
        detail = said("step.mig_advertised", got=_resources_text(got), config=self.config, want=_resources_text(want))
        return Check(
            got == want,
            detail,
            said("step.mig_not_advertised", node=ctx.node),
        )


class ProcedureMigLayout(ProcedureDef):
    code = "M"
    label = gettext_lazy("M. Change a node's MIG layout")
    description = gettext_lazy(
        "Cordon and drain a node where the GPU Operator's mig-manager runs, set "
        "nvidia.com/mig.config to one of its layouts, wait for mig-manager to report success, "
        "verify the MIG devices the node advertises, uncordon."
    )
    action_label = gettext_lazy("Change the MIG layout (M)")
    restorable = True
    restored_labels = (vocab.MIG_CONFIG_LABEL,)
    params = (
        Param(
            MIG_CONFIG_PARAM,
            lambda: forms.ChoiceField(
                label=gettext_lazy("MIG layout (mig-manager config)"),
                choices=_config_choices,
                error_messages={"required": gettext_lazy("Choose a MIG layout.")},
            ),
        ),
        EVICTIONS_PARAM,
        CAPACITY_PARAM,
    )

    def eligibility(self, n):
        if n.dra is not None and any(g.mode == DYNAMIC_MIG for g in n.dra.gpus):
            # the DRA driver makes this node's MIG devices when claims ask: mig-manager is to be stopped there
            return said("precheck.dra_partitions", label=vocab.MIG_MANAGER_DEPLOY_LABEL)
        if not mig_manager_runs(n.labels):
            return said("precheck.no_mig_manager", label=vocab.MIG_MANAGER_DEPLOY_LABEL)
        return ""

    def offered_on(self, n):
        return mig_manager_runs(n.labels) and not self.eligibility(n)

    def leads_on(self, n):
        """A node whose GPUs are in MIG mode: its layout is what an admin changes first."""
        return self.offered_on(n) and bool(capacity_mod.mig_partitioned(n))

    def bind_fields(self, fields, node):
        """Each layout with what the node would advertise under it."""
        if node:
            fields[MIG_CONFIG_PARAM].choices = _config_choices(node)

    def steps(self, params):
        config = params.get(MIG_CONFIG_PARAM) or ""
        return [
            PrecheckStep(self),
            Cordon(),
            Drain(),
            SetMigConfig(config),
            MigConfigApplied(config),
            MigResourcesAdvertised(config),
            Uncordon(),
        ]

    def precheck_kubectl(self, run):
        layouts = mig_parted_configmap_name(get_gateway())
        return (
            f"kubectl get node {run.node} -L {vocab.MIG_CONFIG_LABEL},{vocab.MIG_CONFIG_STATE_LABEL}; "
            f"kubectl -n {vocab.GPU_OPERATOR_NAMESPACE} get configmap {layouts} -o yaml"
        )

    def prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        led = live.ledger()
        n = led.node(node)
        if n is None:
            return [Check(False, said("precheck.not_gpu_node", node=node))]
        reason = self.eligibility(n)
        if reason:
            return [Check(False, reason)]
        config = params.get(MIG_CONFIG_PARAM) or ""
        configs, unreadable = mig_configs(live)
        if unreadable:
            return [Check(False, unreadable, said("precheck.fix_mig_configmap"))]
        gpus = node_gpus(live, node, n)
        after, why = migparted.layout(configs, config, gpus)
        guessed = guessed_layout(configs, config, gpus)
        if after is None:
            refused = said("precheck.mig_would_refuse", config=config, node=node, why=reason_said(why))
            return [Check(False, refused, joined([refused, said("precheck.fix_choose_layout")], " "))] + guessed
        now = {r.resource: r.allocatable for r in n.served}
        want = mig_advertised(after, n.labels)
        checks = [
            Check(
                True,
                said(
                    "precheck.mig_summary",
                    node=node,
                    label=vocab.MIG_CONFIG_LABEL,
                    now=n.labels.get(vocab.MIG_CONFIG_LABEL) or "-",
                    state=n.labels.get(vocab.MIG_CONFIG_STATE_LABEL) or "-",
                    config=config,
                    before=_resources_text({r: v for r, v in now.items() if v}),
                    after=_resources_text(want),
                ),
            )
        ]
        checks.extend(guessed)
        if n.labels.get(vocab.MIG_CONFIG_LABEL) == config:
            checks.append(
                Check(
                    True,
                    said("precheck.mig_already_labelled", config=config),
                    level="info",
                )
            )
        for resource in sorted(set(now) | set(want)):
            row = led.resource(resource)
            new_total = row.logical - now.get(resource, 0) + want.get(resource, 0)
            over = quota_over(
                live,
                resource,
                row.allocated,
                new_total,
                said("precheck.quota_over", res=resource, q=row.allocated, u=new_total),
                ("precheck.fix_lower_quotas", {"res": resource}),
            )
            if over:
                checks.append(over)
        checks.extend(blast_radius(live, node))
        return checks + capacity_checks(self, live, node, params, checks)

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        n = ledger.node(node)
        configs, unreadable = mig_configs(gateway)
        if n is None or unreadable:
            return None
        after, _why = migparted.layout(configs, params.get(MIG_CONFIG_PARAM) or "", node_gpus(gateway, node, n))
        if after is None:
            return None
        now = {r.resource: r.allocatable for r in n.served}
        want = mig_advertised(after, n.labels)
        return {
            res: want.get(res, 0) - now.get(res, 0)
            for res in set(now) | set(want)
            if want.get(res, 0) != now.get(res, 0)
        }


def _config_choices(node: str = ""):
    """(name, text) for each of mig-manager's layouts; with a node, what it would advertise under each."""
    try:
        live = LiveRead(get_gateway())
        configs, _why = mig_configs(live)
        gpus = node_gpus(live, node) if node and configs else []
        labels = (live.get_node(node)["metadata"].get("labels") or {}) if gpus else {}
    except ClusterError:
        return []
    out = []
    for name in configs:
        if not node:
            out.append((name, name))
            continue
        after, why = migparted.layout(configs, name, gpus)
        text = (
            layout_summary(after)
            if after is not None
            else _("mig-manager would refuse it: %(why)s") % {"why": reason_said(why)}
        )
        if after is not None and not mig_advertised(after, labels):
            text = _("nothing advertised (%(what)s)") % {"what": text}
        out.append((name, f"{name} — {text}"))
    return out
