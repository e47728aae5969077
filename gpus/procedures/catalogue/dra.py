"""The levers of GPUs under Dynamic Resource Allocation (NVIDIA's DRA driver, gpu.nvidia.com).

G taints one GPU with a DeviceTaintRule (effect None is the dry run: its plan says what NoExecute
would evict); X removes the rules that taint a device (the Fix of a rule's dra-device-taint
finding). K moves a node from the device plugin to DRA and L back: cordon, drain, the labels
NVIDIA's charts schedule each stack's DaemonSet by (brickadmin/cluster/upstream/names.py), the
slices verified (or their absence), uncordon; Restore puts the labels back as before the run.
"""

from __future__ import annotations

import hashlib

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.base import DRA_KINDS
from brickadmin.cluster.dra import DRIVER_NAME, pools_from_slices
from brickadmin.cluster.gateway import get_gateway
from brickadmin.wording import joined, said
from gpus.numbers.dra_lines import is_dra_resource
from gpus.view.live import LiveRead

from ..base import Check, NodeChoice, Outcome, Param, ProcedureDef, Step, StepFailed
from ..steps import GPU_SHARED, MIG_PREFIX, NVIDIA_PREFIX, SHARING_LABEL, TYPE_LABEL, Cordon, Drain, Uncordon
from .common import (
    CAPACITY_PARAM,
    EVICTIONS_ACK,
    EVICTIONS_PARAM,
    Fix,
    PrecheckStep,
    blast_radius,
    capacity_checks,
    name_field,
    shared_quota,
    ws_list,
)

TAINT_RULE_API = DRA_KINDS["DeviceTaintRule"]
EFFECTS = ("None", "NoSchedule", "NoExecute")
DEFAULT_TAINT_KEY = "brick.cloud/maintenance"
CREATED_RULES = "created_taint_rules"  # the run event holding the DeviceTaintRules a run created (Restore deletes them)


# --- DeviceTaintRules ---------------------------------------------------------------


def rule_name(pool: str, device: str, key: str) -> str:
    """The rule G creates for (pool, device, key): one per taint key on a device, so a second run
    with the same key updates it (idempotent) and another key is another rule."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:6]
    base = f"{pool}-{device}"[: 253 - 8].rstrip("-.")
    return f"{base}-{digest}"


def rule_body(name: str, pool: str, device: str, key: str, value: str, effect: str) -> dict:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return {
        "metadata": {"name": name, "labels": {vocab.MANAGED_BY_LABEL: vocab.MANAGED_BY}},
        "spec": {"deviceSelector": {"driver": DRIVER_NAME, "pool": pool, "device": device}, "taint": taint},
    }


def rules_on(rules: list[dict], pool: str, device: str) -> list[dict]:
    """The rules that select exactly this device (driver, pool and device named)."""
    out = []
    for r in rules:
        sel = (r.get("spec") or {}).get("deviceSelector") or {}
        if sel.get("driver") == DRIVER_NAME and sel.get("pool") == pool and sel.get("device") == device:
            out.append(r)
    return out


def taint_text(taint: dict) -> str:
    key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _device_of(live: LiveRead, node: str, device: str):
    n = live.ledger().node(node)
    if n is None or n.dra is None:
        return None
    return next((d for d in n.dra.devices if d.name == device), None)


def _all_device_choices():
    try:
        led = LiveRead(get_gateway()).ledger()
    except Exception:  # the cluster is not there: the pick page says so elsewhere
        return []
    names = sorted({d.name for n in led.nodes if n.dra is not None for d in n.dra.devices})
    return [(name, name) for name in names]


def _node_device_choices(node: str):
    try:
        n = LiveRead(get_gateway()).ledger().node(node)
    except Exception:
        return []
    if n is None or n.dra is None:
        return []
    out = []
    for d in n.dra.devices:
        pods = ", ".join(d.pods[:3]) or _("no pod")
        out.append((d.name, f"{d.name} · {d.kind}{' ' + d.profile if d.profile else ''} · {pods}"))
    return out


class CreateTaintRule(Step):
    key = "taint-rule"

    def __init__(self, params: dict):
        self.params = params

    def _rule(self, run_node: str) -> dict:
        p = self.params
        key = p.get("taint_key") or DEFAULT_TAINT_KEY
        name = rule_name(run_node, p.get("device", ""), key)
        return rule_body(
            name, run_node, p.get("device", ""), key, p.get("taint_value") or "", p.get("effect") or "None"
        )

    def title(self, run):
        rule = self._rule(run.node)
        return _("Create DeviceTaintRule %(name)s: %(taint)s on %(device)s of %(pool)s") % {
            "name": rule["metadata"]["name"],
            "taint": taint_text(rule["spec"]["taint"]),
            "device": self.params.get("device"),
            "pool": run.node,
        }

    def kubectl(self, run):
        rule = self._rule(run.node)
        t = rule["spec"]["taint"]
        value = f"\n    value: {t['value']}" if t.get("value") else ""
        return (
            f"kubectl apply -f - <<EOF\napiVersion: {TAINT_RULE_API}\nkind: DeviceTaintRule\n"
            f"metadata:\n  name: {rule['metadata']['name']}\nspec:\n  deviceSelector:\n"
            f"    driver: {DRIVER_NAME}\n    pool: {run.node}\n    device: {self.params.get('device')}\n"
            f"  taint:\n    key: {t['key']}{value}\n    effect: {t['effect']}\nEOF"
        )

    def _live(self, ctx, name):
        return next((r for r in ctx.gateway.list_device_taint_rules() if r["metadata"]["name"] == name), None)

    def ensure(self, ctx):
        rule = self._rule(ctx.node)
        name = rule["metadata"]["name"]
        have = self._live(ctx, name)
        if have is not None and (have.get("spec") or {}).get("taint", {}) == rule["spec"]["taint"]:
            if (have.get("spec") or {}).get("deviceSelector") == rule["spec"]["deviceSelector"]:
                return Outcome(None, said("dra.rule_already", name=name))
        if have is None and not ctx.sent_before(self.key):
            ctx.remember(CREATED_RULES, [name], said("dra.rule_created_by_run", name=name))
        ctx.gateway.apply_device_taint_rule(rule)
        return Outcome(rule, f"devicetaintrule.resource.k8s.io/{name} serverside-applied")

    def verify(self, ctx):
        rule = self._rule(ctx.node)
        name = rule["metadata"]["name"]
        have = self._live(ctx, name)
        if have is None:
            return Check(False, said("dra.rule_missing", name=name), said("dra.fix_rule_api", cmd=self.kubectl(ctx)))
        got = (have.get("spec") or {}).get("taint") or {}
        ok = all(got.get(k) == v for k, v in rule["spec"]["taint"].items())
        return Check(ok, f"{name}: {taint_text(got)}", said("dra.fix_rule_api", cmd=self.kubectl(ctx)))


class DeleteTaintRules(Step):
    """The named DeviceTaintRules deleted (Restore of G), or those selecting one device (X)."""

    key = "delete-taint-rules"

    def __init__(self, names: list[str] | None = None, device: str = "", pool: str = ""):
        self.names = list(names or [])
        self.device, self.pool = device, pool

    def _targets(self, gateway) -> list[str]:
        rules = gateway.list_device_taint_rules()
        if self.names:
            return [r["metadata"]["name"] for r in rules if r["metadata"]["name"] in self.names]
        return [r["metadata"]["name"] for r in rules_on(rules, self.pool, self.device)]

    def title(self, run):
        if self.names:
            return _("Delete DeviceTaintRule %(names)s") % {"names": ", ".join(self.names)}
        return _("Delete the DeviceTaintRules on %(device)s of %(pool)s") % {"device": self.device, "pool": self.pool}

    def kubectl(self, run):
        if self.names:
            return f"kubectl delete devicetaintrule {' '.join(self.names)}"
        return (
            "kubectl get devicetaintrules -o json | jq -r '.items[] | select(.spec.deviceSelector.pool==\""
            f'{self.pool}" and .spec.deviceSelector.device=="{self.device}") | .metadata.name\' '
            "| xargs -r kubectl delete devicetaintrule"
        )

    def ensure(self, ctx):
        names = self._targets(ctx.gateway)
        if not names:
            return Outcome(None, said("dra.no_rule_left"))
        for name in names:
            ctx.gateway.delete_device_taint_rule(name)
        return Outcome({"delete": names}, "\n".join(f'devicetaintrule "{n}" deleted' for n in names))

    def verify(self, ctx):
        left = self._targets(ctx.gateway)
        return Check(
            not left,
            said("dra.rules_left", names=", ".join(left)) if left else said("dra.no_rule_left"),
            said("dra.fix_delete_rule", names=" ".join(left)),
        )


class ProcedureTaintGpu(ProcedureDef):
    code = "G"
    label = gettext_lazy("G. Taint a GPU (DRA)")
    description = gettext_lazy(
        "A DeviceTaintRule on one GPU published through DRA: effect None is a dry run that says which "
        "pods would be evicted, NoSchedule keeps new claims off it, NoExecute also evicts the pods "
        "using it. The plan lists those pods first."
    )
    action_label = gettext_lazy("Taint a GPU (G)")
    restorable = True  # Restore deletes the rule a stopped run created
    restored_labels = (vocab.DRA_DRIVER_DEPLOY_LABEL,)
    # a pod on a device the kubelet reports Unhealthy: the wizard opens with that device chosen
    fixes = ("pod-device-unhealthy",)
    params = (
        Param(
            "device",
            lambda: forms.ChoiceField(
                label=gettext_lazy("Device"),
                choices=_all_device_choices,
                error_messages={"required": gettext_lazy("Choose the device.")},
            ),
        ),
        Param(
            "effect",
            lambda: forms.ChoiceField(
                label=gettext_lazy("Effect"),
                initial="None",
                choices=[
                    ("None", gettext_lazy("None (dry run: nothing changes)")),
                    ("NoSchedule", gettext_lazy("NoSchedule (no new claims)")),
                    ("NoExecute", gettext_lazy("NoExecute (no new claims, pods using it evicted)")),
                ],
            ),
        ),
        Param(
            "taint_key",
            lambda: forms.CharField(
                label=gettext_lazy("Taint key"),
                initial=DEFAULT_TAINT_KEY,
                max_length=253,
                required=False,
                validators=[_taint_key],
            ),
        ),
        Param(
            "taint_value",
            lambda: forms.CharField(
                label=gettext_lazy("Taint value"), max_length=63, required=False, validators=[_label_value]
            ),
        ),
        EVICTIONS_PARAM,
    )

    def bind_fields(self, fields, node):
        if node:
            fields["device"].choices = _node_device_choices(node)

    def fixes_finding(self, kind, params):
        """Only a device of NVIDIA's driver, in the node's own pool (the rule G writes selects those)."""
        return kind in self.fixes and bool(params.get("device")) and params.get("driver") == DRIVER_NAME

    def eligibility(self, n):
        if n.dra is None or not n.dra.devices:
            return said("dra.no_dra_device")
        return ""

    def offered_on(self, n):
        return n.dra is not None and bool(n.dra.devices)

    def node_choices(self, ledger, snapshot):
        return [
            NodeChoice(n.name, self.eligibility(n), f"{n.model} · {len(n.dra.devices) if n.dra else 0} DRA devices")
            for n in ledger.nodes
            if n.dra is not None
        ]

    def steps(self, params):
        return [PrecheckStep(self), CreateTaintRule(params)]

    def precheck_kubectl(self, run):
        return f"kubectl get resourceclaims -A -o wide; kubectl get devicetaintrules  # pool {run.node}"

    def prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        device, effect = params.get("device") or "", params.get("effect") or "None"
        if effect not in EFFECTS:
            return [Check(False, said("dra.choose_effect"))]
        d = _device_of(live, node, device)
        if d is None:
            return [Check(False, said("dra.no_such_device", device=device, node=node), said("dra.fix_pick_device"))]
        checks = []
        existing = rules_on(live.snapshot().device_taint_rules, node, device)
        if existing:
            names = ", ".join(
                f"{r['metadata']['name']} ({taint_text((r.get('spec') or {}).get('taint') or {})})" for r in existing
            )
            checks.append(Check(True, said("dra.rules_already_on", device=device, rules=names), level="info"))
        pods = list(d.pods)
        items = [said("dra.pod_on_device", pod=p, device=device) for p in pods]
        if effect == "None":
            checks.append(Check(True, said("dra.dry_run", device=device, n=len(pods)), level="info", items=items))
        elif effect == "NoSchedule":
            checks.append(Check(True, said("dra.no_schedule", device=device, n=len(pods)), level="info", items=items))
        elif pods:
            checks.append(
                Check(
                    True,
                    said("dra.no_execute_evicts", device=device, n=len(pods)),
                    level="ack",
                    items=items,
                    ack=EVICTIONS_ACK,
                    ack_count=len(pods),
                    ack_label=_("I understand %(n)d pod(s) using %(device)s will be evicted.")
                    % {"n": len(pods), "device": device},
                )
            )
        else:
            checks.append(Check(True, said("dra.no_execute_nobody", device=device), level="info"))
        return checks


def _taint_key(value: str) -> None:
    """A taint key: an optional DNS prefix and '/', then a name of letters, digits, '-', '_', '.'."""
    if not value:
        return
    prefix, _sep, name = value.rpartition("/")
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    if (
        not name
        or len(name) > 63
        or not set(name) <= allowed
        or not name[0].isalnum()
        or not name[-1].isalnum()
        or (prefix and (len(prefix) > 253 or not set(prefix) <= set("abcdefghijklmnopqrstuvwxyz0123456789-.")))
    ):
        raise forms.ValidationError(_("Not a taint key: %(v)s") % {"v": value[:80]})


def _label_value(value: str) -> None:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    if value and (len(value) > 63 or not set(value) <= allowed or not value[0].isalnum() or not value[-1].isalnum()):
        raise forms.ValidationError(_("Not a taint value: %(v)s") % {"v": value[:80]})


class ProcedureRemoveTaintRule(Fix):
    code = "X"
    label = gettext_lazy("Remove the DeviceTaintRule")
    description = gettext_lazy(
        "The DeviceTaintRules that taint one DRA device are deleted, so claims can be allocated it "
        "again. A taint the driver set itself (an unhealthy GPU) is not a rule and stays."
    )
    fixes = ("dra-device-taint",)
    params = (
        Param("device", name_field(gettext_lazy("the device"))),
        Param("pool", name_field(gettext_lazy("the pool"))),
    )

    def fixes_finding(self, kind, params):
        return kind in self.fixes and bool(params.get("device"))

    def confirm_sentence(self, node, params):
        return _("Delete the DeviceTaintRules on %(device)s of %(pool)s? Claims can then be allocated it again.") % {
            "device": params.get("device"),
            "pool": params.get("pool") or node,
        }

    def steps(self, params):
        return [PrecheckStep(self), DeleteTaintRules(device=params.get("device", ""), pool=params.get("pool", ""))]

    def precheck_kubectl(self, run):
        return "kubectl get devicetaintrules"

    def nothing_to_do(self, gateway, node, params):
        rules = rules_on(LiveRead.of(gateway).snapshot().device_taint_rules, params.get("pool"), params.get("device"))
        if rules:
            return ""
        return said("dra.no_rule_on_device", device=params.get("device"), pool=params.get("pool"))

    def fix_prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        rules = rules_on(live.snapshot().device_taint_rules, params["pool"], params["device"])
        d = _device_of(live, params["pool"], params["device"])
        items = [f"{r['metadata']['name']}: {taint_text((r.get('spec') or {}).get('taint') or {})}" for r in rules]
        checks = [Check(True, said("dra.rules_to_delete", device=params["device"], n=len(rules)), items=items)]
        if d is not None and any(not t.get("rule") for t in d.taints):
            checks.append(Check(True, said("dra.driver_taint_stays", device=params["device"]), level="warn"))
        return checks


# --- moving a node between the device plugin and DRA --------------------------------

DEVICE_PLUGIN, DRA = "device-plugin", "dra"
STACK_LABELS = (
    TYPE_LABEL,
    SHARING_LABEL,
    vocab.DEVICE_PLUGIN_DEPLOY_LABEL,
    vocab.DRA_DRIVER_DEPLOY_LABEL,
    vocab.GPU_ALLOCATION_MODE_LABEL,
)


def operator_node(labels: dict) -> bool:
    """Whether the GPU Operator runs the node's stack (its deploy or mode labels, or its device
    plugin's config label); else it is a BRICK node, served by brick-nvidia's DaemonSets."""
    return any(
        k in labels
        for k in (vocab.DEVICE_PLUGIN_DEPLOY_LABEL, vocab.GPU_ALLOCATION_MODE_LABEL, vocab.DEVICE_PLUGIN_CONFIG_LABEL)
    ) and not labels.get(TYPE_LABEL)


def stack_labels(labels: dict, target: str, sharing: str = "none") -> dict[str, str | None]:
    """The labels that make ``target`` serve the node and the other stack leave it (None: removed).

    DRA: the DRA kubelet plugin's deploy label on; the device plugin's off (brick-nvidia's
    DaemonSets select gpu.type and gpu.sharing, the operator's its deploy label). The operator's
    allocation mode follows where the node has one (its node-labelling controller reads it)."""
    out: dict[str, str | None] = {}
    op = operator_node(labels)
    if target == DRA:
        out[vocab.DRA_DRIVER_DEPLOY_LABEL] = "true"
        if op:
            out[vocab.DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
        else:
            out[TYPE_LABEL] = None
            out[SHARING_LABEL] = None
    else:
        out[vocab.DRA_DRIVER_DEPLOY_LABEL] = None
        if op:
            out[vocab.DEVICE_PLUGIN_DEPLOY_LABEL] = "true"
        else:
            out[TYPE_LABEL] = "nvidia"
            out[SHARING_LABEL] = sharing
    if vocab.GPU_ALLOCATION_MODE_LABEL in labels:
        out[vocab.GPU_ALLOCATION_MODE_LABEL] = target
    return out


def _labels_text(change: dict) -> str:
    return " ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in change.items())


class SetStackLabels(Step):
    key = "stack-labels"

    def __init__(self, target: str, sharing: str = "none"):
        self.target, self.sharing = target, sharing

    def _want(self, gateway, node):
        labels = gateway.get_node(node)["metadata"].get("labels") or {}
        return labels, stack_labels(labels, self.target, self.sharing)

    def title(self, run):
        if self.target == DRA:
            return _("Label %(node)s for NVIDIA's DRA kubelet plugin, off the device plugin") % {"node": run.node}
        return _("Label %(node)s for the device plugin, off NVIDIA's DRA kubelet plugin") % {"node": run.node}

    def kubectl(self, run):
        if self.target == DRA:
            change = {vocab.DRA_DRIVER_DEPLOY_LABEL: "true", TYPE_LABEL: None, SHARING_LABEL: None}
        else:
            change = {vocab.DRA_DRIVER_DEPLOY_LABEL: None, TYPE_LABEL: "nvidia", SHARING_LABEL: self.sharing}
        return f"kubectl label node {run.node} {_labels_text(change)} --overwrite"

    def ensure(self, ctx):
        labels, want = self._want(ctx.gateway, ctx.node)
        change = {k: v for k, v in want.items() if labels.get(k) != v}
        if not change:
            return Outcome(None, said("step.labels_already_set"))
        ctx.gateway.label_node(ctx.node, change)  # one patch: one stack leaves as the other comes
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        labels, want = self._want(ctx.gateway, ctx.node)
        wrong = {k: v for k, v in want.items() if labels.get(k) != v}
        shown = ", ".join(f"{k}={labels.get(k, '-')}" for k in want)
        return Check(
            not wrong,
            shown,
            said("dra.fix_labels", cmd=f"kubectl label node {ctx.node} {_labels_text(wrong)} --overwrite"),
        )


def _node_slices(gateway, node):
    return [s for s in gateway.list_resource_slices(node) if (s.get("spec") or {}).get("driver") == DRIVER_NAME]


def plugin_resources(node: dict) -> dict[str, str]:
    """The device plugin's resources in the node's allocatable (nvidia.com/*)."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {r: str(v) for r, v in alloc.items() if r.startswith(NVIDIA_PREFIX)}


class DraPublished(Step):
    key = "dra-published"
    waits = True

    def title(self, run):
        return _("Verify %(node)s publishes its GPUs through DRA (its pool complete)") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl get resourceslices --field-selector spec.nodeName={run.node} -o wide"

    def verify(self, ctx):
        slices = _node_slices(ctx.gateway, ctx.node)
        if not slices:
            return Check(
                False,
                said("dra.no_slices", node=ctx.node),
                said("dra.fix_no_slices", node=ctx.node, label=vocab.DRA_DRIVER_DEPLOY_LABEL),
            )
        pools = pools_from_slices(slices, DRIVER_NAME)
        # the scheduler trusts a pool when all its resourceSliceCount slices are seen at its newest generation
        lines = [
            said("dra.pool_seen", pool=pid.pool, gen=p.generation, seen=len(p.slices), expected=p.expected_slice_count)
            for pid, p in pools.items()
        ]
        devices = sum(len(p.devices) for p in pools.values())
        incomplete = [pid.pool for pid, p in pools.items() if len(p.slices) != p.expected_slice_count]
        detail = joined([*lines, said("dra.devices_published", n=devices)])
        if incomplete or not devices:
            return Check(False, detail, said("dra.fix_incomplete_pool", node=ctx.node))
        return Check(True, detail)


class PluginResourcesGone(Step):
    """The device plugin's resources out of the node's status: the plugin stopped, the kubelet
    would keep them (stale) until it restarts; the same JSON patch as step 6 of A/B."""

    key = "plugin-gone"
    waits = True

    def title(self, run):
        return _("Remove the device plugin's nvidia.com/* from the status of %(node)s and verify they are gone") % {
            "node": run.node
        }

    def kubectl(self, run):
        return f"kubectl patch node {run.node} --subresource=status --type=json -p='[...nvidia.com/* removed]'"

    def ensure(self, ctx):
        node = ctx.gateway.get_node(ctx.node)
        st = node.get("status") or {}
        names = sorted(
            {r for sec in ("capacity", "allocatable") for r in (st.get(sec) or {}) if r.startswith(NVIDIA_PREFIX)}
        )
        if not names:
            return Outcome(None, said("dra.no_plugin_resource"))
        ctx.gateway.remove_node_status_resources(ctx.node, names)
        return Outcome({"remove": names}, f"node/{ctx.node} patched")

    def verify(self, ctx):
        left = plugin_resources(ctx.gateway.get_node(ctx.node))
        text = ", ".join(f"{k}: {v}" for k, v in sorted(left.items()))
        return Check(
            not left,
            said("dra.plugin_resources_left", res=text) if left else said("dra.no_plugin_resource"),
            said("dra.fix_plugin_still_serves", node=ctx.node),
        )


class SlicesGone(Step):
    key = "slices-gone"
    waits = True

    def title(self, run):
        return _("Verify %(node)s publishes no GPU through DRA any more") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl get resourceslices --field-selector spec.nodeName={run.node}"

    def verify(self, ctx):
        slices = _node_slices(ctx.gateway, ctx.node)
        names = ", ".join(s["metadata"]["name"] for s in slices)
        return Check(
            not slices,
            said("dra.slices_left", names=names) if slices else said("dra.no_slices", node=ctx.node),
            said("dra.fix_slices_left", node=ctx.node, label=vocab.DRA_DRIVER_DEPLOY_LABEL),
        )


class PluginResourceBack(Step):
    key = "plugin-back"
    waits = True

    def __init__(self, sharing: str = "none"):
        self.sharing = sharing

    @property
    def resource(self):
        return GPU_SHARED if self.sharing == "timeslicing" else vocab.GPU

    def title(self, run):
        return _("Verify the device plugin advertises %(res)s on %(node)s again") % {
            "res": self.resource,
            "node": run.node,
        }

    def kubectl(self, run):
        return f"kubectl describe node {run.node} | grep -A 10 Allocatable"

    def verify(self, ctx):
        have = plugin_resources(ctx.gateway.get_node(ctx.node))
        served = {k: v for k, v in have.items() if k == self.resource or k.startswith(MIG_PREFIX)}
        ok = any(vocab.quantity(v) > 0 for v in served.values())
        text = ", ".join(f"{k}: {v}" for k, v in sorted(have.items())) or said("step.no_nvidia_resource")
        return Check(ok, text, said("dra.fix_plugin_not_back", res=self.resource, node=ctx.node))


class _StackMove(ProcedureDef):
    target = ""
    restorable = True
    restored_labels = STACK_LABELS
    params: tuple[Param, ...] = (EVICTIONS_PARAM, CAPACITY_PARAM)
    fixes = ("dra-both-stacks",)  # one stack per node: either move is offered on the finding

    def precheck_kubectl(self, run):
        return (
            f"kubectl get node {run.node} -L {vocab.DRA_DRIVER_DEPLOY_LABEL},{TYPE_LABEL},"
            f"{vocab.DEVICE_PLUGIN_DEPLOY_LABEL}; kubectl get resourceslices --field-selector spec.nodeName={run.node}"
        )

    def prechecks(self, gateway, node, params):
        from brickadmin.cluster import NotFound

        live = LiveRead.of(gateway)
        try:
            raw = live.get_node(node)
        except NotFound:
            return [Check(False, said("precheck.no_such_node", node=node))]
        n = live.ledger().node(node)
        reason = self.eligibility(n) if n is not None else said("dra.not_gpu_node", node=node)
        if reason:
            return [Check(False, reason)]
        labels = raw["metadata"].get("labels") or {}
        change = stack_labels(labels, self.target, params.get("sharing") or "none")
        checks = [
            Check(
                True,
                said(
                    "dra.move_summary",
                    node=node,
                    stack=n.stack or "-",
                    labels=_labels_text(change),
                    convention=said("dra.operator") if operator_node(labels) else said("dra.brick"),
                ),
            )
        ]
        checks.extend(self.quota_checks(live, n))
        checks.extend(blast_radius(live, node))
        return checks + capacity_checks(self, live, node, params, checks)

    def quota_checks(self, live, n) -> list[Check]:
        return []

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        n = ledger.node(node)
        if n is None:
            return None
        change: dict[str, int] = {}
        for r in n.served:
            leaves = not is_dra_resource(r.resource) if self.target == DRA else is_dra_resource(r.resource)
            if leaves and r.allocatable:
                change[r.resource] = change.get(r.resource, 0) - r.allocatable
        if self.target == DEVICE_PLUGIN:
            res = GPU_SHARED if params.get("sharing") == "timeslicing" else vocab.GPU
            per = 1
            if res == GPU_SHARED:
                from gpus.numbers import ledger as ledger_mod

                per = max(1, ledger_mod.brick_replicas(snapshot.plugin_configmaps))
            change[res] = change.get(res, 0) + (n.dra.physical if n.dra else n.physical) * per
        return {k: v for k, v in change.items() if v}


class ProcedureToDra(_StackMove):
    code = "K"
    label = gettext_lazy("K. Move a node to DRA")
    description = gettext_lazy(
        "Cordon and drain a node, take it off the device plugin and label it for NVIDIA's DRA kubelet "
        "plugin, verify its pool is complete and nvidia.com/* is gone from its allocatable, uncordon. "
        "Workspaces whose quota is requests.nvidia.com/* lose its GPUs."
    )
    action_label = gettext_lazy("Move to DRA (K)")
    target = DRA

    def eligibility(self, n):
        if n.stack == DRA:
            return said("dra.already_dra")
        if not n.served and n.dra is None:
            return said("dra.not_gpu_node", node=n.name)
        return ""

    def offered_on(self, n):
        return n.stack in (DEVICE_PLUGIN, "both")

    def steps(self, params):
        return [
            PrecheckStep(self),
            Cordon(),
            Drain(),
            SetStackLabels(DRA),
            DraPublished(),
            PluginResourcesGone(),
            Uncordon(),
        ]

    def quota_checks(self, live, n):
        out = []
        for r in n.served:
            if is_dra_resource(r.resource) or not r.allocatable:
                continue
            quotas = {k: v for k, v in shared_quota(live, r.resource).items() if v}
            if quotas:
                items = ws_list(quotas, live.owners())
                out.append(
                    Check(
                        True,
                        said("dra.quota_loses", res=r.resource, n=r.allocatable, node=n.name, ws=len(quotas)),
                        level="warn",
                        items=items,
                    )
                )
        return out


class ProcedureToDevicePlugin(_StackMove):
    code = "L"
    label = gettext_lazy("L. Move a node to the device plugin")
    description = gettext_lazy(
        "Cordon and drain a node, take it off NVIDIA's DRA kubelet plugin and label it for the device "
        "plugin, verify its slices are gone and nvidia.com/gpu is advertised again, uncordon."
    )
    action_label = gettext_lazy("Move to the device plugin (L)")
    target = DEVICE_PLUGIN
    params = (
        Param(
            "sharing",
            lambda: forms.ChoiceField(
                label=gettext_lazy("Sharing mode"),
                initial="none",
                choices=[("none", gettext_lazy("Exclusive (none)")), ("timeslicing", gettext_lazy("Time-slicing"))],
            ),
        ),
        EVICTIONS_PARAM,
        CAPACITY_PARAM,
    )

    def eligibility(self, n):
        if n.stack == DEVICE_PLUGIN or n.dra is None:
            return said("dra.already_device_plugin")
        return ""

    def offered_on(self, n):
        return n.stack in (DRA, "both")

    def steps(self, params):
        sharing = params.get("sharing") or "none"
        return [
            PrecheckStep(self),
            Cordon(),
            Drain(),
            SetStackLabels(DEVICE_PLUGIN, sharing),
            SlicesGone(),
            PluginResourceBack(sharing),
            Uncordon(),
        ]

    def quota_checks(self, live, n):
        out = []
        for r in n.served:
            if not is_dra_resource(r.resource) or not r.allocatable:
                continue
            quotas = {k: v for k, v in shared_quota(live, r.resource).items() if v}
            if quotas:
                out.append(
                    Check(
                        True,
                        said("dra.quota_loses", res=r.resource, n=r.allocatable, node=n.name, ws=len(quotas)),
                        level="warn",
                        items=ws_list(quotas, live.owners()),
                    )
                )
        return out


__all__ = [
    "CREATED_RULES",
    "DeleteTaintRules",
    "ProcedureRemoveTaintRule",
    "ProcedureTaintGpu",
    "ProcedureToDevicePlugin",
    "ProcedureToDra",
    "StepFailed",
    "rule_name",
    "stack_labels",
]
