"""The node conversions: A (exclusive → time-slicing) and B (time-slicing → exclusive) cordon,
drain and relabel a node, then check its device-plugin pod, its allocatable, the stale
resource and Prometheus; D makes a plain node a GPU node (both labels at once)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from brickadmin import metrics
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import PLUGIN_NAMESPACE
from brickadmin.wording import joined, said
from gpus.numbers import capacity as capacity_mod
from gpus.numbers import ledger as ledger_mod
from gpus.view.live import LiveRead

from ... import manifest as manifest_mod
from ..base import Check, NodeChoice, Param, ProcedureDef
from ..steps import (
    GPU_SHARED,
    SHARING_LABEL,
    TYPE_LABEL,
    AllocatableIs,
    Checklist,
    Cordon,
    Drain,
    Label,
    LabelBoth,
    NoStale,
    PluginPodRunning,
    PrometheusAllocatable,
    RemoveStale,
    Skipped,
    Uncordon,
)
from .common import (
    CAPACITY_PARAM,
    EVICTIONS_PARAM,
    PrecheckStep,
    blast_radius,
    capacity_checks,
    metrics_configured,
    shared_quota,
    ws_list,
)


class _Conversion(ProcedureDef):
    target = ""  # sharing label value after the conversion
    source_mode = ""
    restorable = True
    from_mps = False  # whether it converts a node the BRICK MPS DaemonSet serves (H, J)
    params = (EVICTIONS_PARAM, CAPACITY_PARAM)
    fixes = ("label-typo",)  # the wizard sets the label exactly (never a bare relabel: drained first)

    def fixes_finding(self, kind, params):
        """A label typo is fixed by the conversion to the mode it most likely meant."""
        return kind in self.fixes and params.get("sharing", self.target) == self.target

    def steps(self, params):
        v = self.target
        return [
            PrecheckStep(self),
            Cordon(),
            Drain(),
            Label(v, leaving_mps=self.from_mps),
            *self.daemon_steps(),
            PluginPodRunning(v),
            AllocatableIs(v),
            RemoveStale(v),
            NoStale(v),
            Uncordon(),
            PrometheusAllocatable(v),
        ]

    def daemon_steps(self) -> list:
        """Steps for what must run on the node before its plugin serves (none but MPS's daemon)."""
        return []

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node} -L {SHARING_LABEL}"

    def prechecks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        checks = self.conversion_checks(live, node, params)
        return checks + capacity_checks(self, live, node, params, checks)

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        n = ledger.node(node)
        if n is None:
            return None
        if self.target == "timeslicing":
            return capacity_mod.conversion_change(n, GPU_SHARED, ledger_mod.brick_replicas(snapshot.plugin_configmaps))
        return capacity_mod.conversion_change(n, vocab.GPU, 1)

    def conversion_checks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        n = live.ledger().node(node)
        if n is None:
            return [Check(False, said("precheck.not_gpu_node", node=node), said("precheck.fix_use_d"))]
        reason = self.eligibility(n)
        if reason:
            return [Check(False, reason)]
        checks = [
            Check(
                True,
                said("precheck.node_summary", node=node, mode=n.mode, p=n.physical, label=n.sharing_label or "-"),
            )
        ]
        if n.mode == "unlabelled":
            checks.append(
                Check(
                    True,
                    said("precheck.label_unrecognised", v=n.sharing_label, t=self.target),
                    level="warn",
                )
            )
        blocker = self._untolerated_taints(live, node)
        if blocker:
            checks.append(blocker)
        checks.extend(self._mig_stays(n))
        checks.extend(blast_radius(live, node))
        return checks

    def _mig_stays(self, n):
        """Time-slicing shares whole GPUs: a GPU in MIG mode keeps it through the conversion
        and serves nothing after, which the plan says, leading to the MIG layout first."""
        partitioned = [d for d in n.devices if d.mig]
        if self.target != "timeslicing" or not partitioned:
            return []
        profiles = ", ".join(f"{p} ×{k}" for p, k in sorted(capacity_mod.mig_partitioned(n).items()))
        from ..registry import find

        mig = find("M")
        offered = mig is not None and mig.offered_on(n)
        return [
            Check(
                True,
                said("precheck.mig_stays", n=len(partitioned), node=n.name, profiles=profiles),
                said("precheck.fix_mig_first") if offered else "",
                level="warn",
                link=mig.pick_url(n.name) if offered else "",
                link_text=mig.label if offered else "",
            )
        ]

    def _untolerated_taints(self, live, node):
        """The target mode's DaemonSet must tolerate the node's taints, or its plugin pod
        never starts there and the node exposes no GPU at all
        (docs/operator-guide.md#the-device-plugin)."""
        from brickadmin.cluster import NotFound
        from brickadmin.cluster import deviceplugin as dp

        names = {
            "timeslicing": [manifest_mod.TS_DAEMONSET],
            # MPS needs NVIDIA's control daemon on the node as well as the plugin
            "mps": [manifest_mod.MPS_DAEMONSET, manifest_mod.MPS_CONTROL_DAEMONSET],
        }.get(self.target, [manifest_mod.DEFAULT_DAEMONSET])
        taints = (live.get_node(node).get("spec") or {}).get("taints") or []
        for name in names:
            try:
                ds = live.get_daemonset(PLUGIN_NAMESPACE, name)
            except NotFound:
                return Check(
                    False,
                    said("precheck.daemonset_missing", ns=PLUGIN_NAMESPACE, name=name),
                    said("precheck.fix_apply_manifest"),
                )
            tolerations = ds["spec"]["template"]["spec"].get("tolerations")
            missing = [t for t in taints if not dp.tolerates([t], tolerations)]
            if missing:
                break
        else:
            return None
        names = ", ".join(
            f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}" for t in missing
        )
        if all(vocab.is_node_condition_taint(t) for t in missing):
            # Kubernetes set these from the node's state: a toleration is not the answer
            return Check(
                False,
                said("precheck.node_condition_taints", taints=names, node=node),
                said("precheck.fix_wait_node_ready", node=node),
                level="block",
            )
        return Check(
            False,
            said("precheck.taints_untolerated", name=name, taints=names, node=node),
            said("precheck.fix_add_toleration"),
            level="block",
        )

    def eligibility(self, n):
        if n.convention != "brick":
            return said("precheck.not_brick_node")
        if n.sharing_label == ledger_mod.MODE_MPS and not self.from_mps:
            return said("precheck.on_mps_use_h_or_j")
        if n.mode in ledger_mod.REPLICATED_MODES and self.target == "timeslicing":
            return said("precheck.already_timeslicing")
        if n.mode in ("exclusive", "mig") and self.target == "none":
            return said("precheck.already_exclusive")
        return ""


class ProcedureA(_Conversion):
    code = "A"
    label = gettext_lazy("A. Exclusive → Time-slicing")
    description = gettext_lazy(
        "Cordon and drain a node, switch its sharing label to timeslicing, verify the "
        "time-slicing plugin and physical × replicas, remove the stale nvidia.com/gpu, "
        "uncordon, check Prometheus."
    )
    action_label = gettext_lazy("Convert to time-slicing (A)")
    target = "timeslicing"

    def offered_on(self, n):
        return n.convention == "brick" and n.mode not in ledger_mod.REPLICATED_MODES


class ProcedureB(_Conversion):
    code = "B"
    label = gettext_lazy("B. Time-slicing → Exclusive")
    description = gettext_lazy(
        "The same skeleton back to exclusive, after a pre-check that the shared quota still fits without the node."
    )
    action_label = gettext_lazy("Convert to exclusive (B)")
    target = "none"
    params = (
        EVICTIONS_PARAM,
        CAPACITY_PARAM,
        Param(
            "acknowledged",
            lambda: forms.BooleanField(
                required=False,
                label=gettext_lazy(
                    "I have agreed with the affected Workspace owners; their shared GPU pods will stay Pending."
                ),
            ),
            confirm="ack",
            refusal=gettext_lazy("Tick the acknowledgement to go on."),
            cli="--acknowledge",
            words=gettext_lazy("Agreed with the Workspace owners"),
        ),
    )

    def offered_on(self, n):
        return (
            n.convention == "brick"
            and n.mode in (*ledger_mod.REPLICATED_MODES, "unlabelled")
            and n.sharing_label != ledger_mod.MODE_MPS  # H converts those
        )

    def precheck_kubectl(self, run):
        return "PromQL: " + metrics.SHARED_TOTAL_EXCEPT.format(node=run.node) + "  >=  " + metrics.SHARED_ALLOCATED

    def conversion_checks(self, gateway, node, params):
        live = LiveRead.of(gateway)
        checks = super().conversion_checks(live, node, params)
        if any(c.level == "block" for c in checks):
            return checks
        led = live.ledger()
        total_except = live.measured(metrics.SHARED_TOTAL_EXCEPT.format(node=node))
        allocated = live.measured(metrics.SHARED_ALLOCATED)
        source = "Prometheus"
        if total_except is None or allocated is None:
            why = (metrics_configured() and metrics.last_error()) or said("precheck.not_configured")
            source = said("precheck.source_cluster", why=why)
            total_except = sum(
                r.allocatable for x in led.nodes if x.name != node for r in x.served if r.resource == GPU_SHARED
            )
            allocated = led.resource(GPU_SHARED).allocated
        total_except, allocated = int(total_except), int(allocated)
        owners = live.owners()
        quotas = shared_quota(live)
        numbers = said("precheck.shared_left", node=node, t=total_except, a=allocated, src=source)
        if total_except < allocated:
            items = ws_list({k: v for k, v in quotas.items() if v}, owners)
            checks.append(
                Check(
                    False,
                    numbers,
                    said("precheck.fix_lower_shared", d=allocated - total_except, node=node, ws=joined(items, "; ")),
                    level="block",
                    items=items,
                )
            )
            return checks
        checks.append(Check(True, numbers))
        others = [x for x in led.nodes if x.name != node and x.mode in ledger_mod.REPLICATED_MODES]
        if not others:
            shared_pods = [
                p
                for p in live.list_gpu_pods()
                if (p.get("spec") or {}).get("nodeName") == node
                and GPU_SHARED in str((p.get("spec") or {}).get("containers"))
            ]
            namespaces = sorted({p["metadata"]["namespace"] for p in shared_pods} | set(quotas))
            items = [said("precheck.workspace_owner", ns=ns, owner=owners.get(ns) or "?") for ns in namespaces]
            checks.append(
                Check(
                    True,
                    said("precheck.only_timeslicing_node", node=node, ws=joined(items, ", ") or said("precheck.none")),
                    level="ack",
                    items=items,
                    ack="acknowledged",
                )
            )
        return checks


# --- D -------------------------------------------------------------------------


class ProcedureD(ProcedureDef):
    code = "D"
    label = gettext_lazy("D. Add a GPU node")
    description = gettext_lazy(
        "Confirm the node build checklist, label gpu.type and gpu.sharing together, verify the plugin and resources."
    )
    checklist = gettext_lazy(
        "Checklist: the NVIDIA driver (.run) and nvidia-container-runtime (rpm) are installed "
        "on %(node)s per the node build guide."
    )
    params = (
        Param(
            "sharing",
            lambda: forms.ChoiceField(
                label=gettext_lazy("Sharing mode"),
                initial="none",
                choices=[("none", gettext_lazy("Exclusive (none)")), ("timeslicing", gettext_lazy("Time-slicing"))],
                error_messages={"required": gettext_lazy("Choose the sharing mode.")},
            ),
        ),
        Param(
            "checklist_confirmed",
            lambda: forms.BooleanField(
                required=False,
                label=gettext_lazy(
                    "Checklist: the NVIDIA driver (.run) and nvidia-container-runtime "
                    "(rpm) are installed on this node per the node build guide."
                ),
            ),
            confirm="always",
            cli="--confirm-checklist",
            refusal=gettext_lazy("Confirm the checklist: the driver and container runtime must be installed first."),
        ),
        CAPACITY_PARAM,
    )

    def node_choices(self, ledger, snapshot):
        """Every node of the cluster: D turns a plain node into a GPU node."""
        out = []
        for raw in snapshot.nodes:
            labels = raw["metadata"].get("labels") or {}
            roles = ", ".join(k.split("/", 1)[1] for k in labels if k.startswith(vocab.NODE_ROLE_PREFIX))
            out.append(NodeChoice(raw["metadata"]["name"], self.eligibility_raw(raw), roles))
        return out

    def steps(self, params):
        v = params.get("sharing", "none")
        return [
            PrecheckStep(self),
            Checklist(),
            LabelBoth(v),
            PluginPodRunning(v),
            AllocatableIs(v),
            Skipped("status-patch", _("Status patch"), said("step.new_node_no_status_patch")),
        ]

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node} --show-labels"

    def prechecks(self, gateway, node, params):
        from brickadmin.cluster import NotFound

        if params.get("sharing") not in ("none", "timeslicing"):  # a new node goes to MPS with E
            return [Check(False, said("precheck.choose_sharing"))]
        try:
            raw = LiveRead.of(gateway).get_node(node)
        except NotFound:
            return [Check(False, said("precheck.no_such_node", node=node))]
        reason = self.eligibility_raw(raw)
        if reason:
            return [Check(False, reason)]
        checks = [
            Check(
                True,
                said("precheck.new_gpu_node", node=node, t=TYPE_LABEL, s=SHARING_LABEL, v=params["sharing"]),
            )
        ]
        return checks + capacity_checks(self, gateway, node, params, checks)

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        return {}  # a node without GPU labels advertises nothing yet: the Totals grow after the run

    def eligibility_raw(self, raw):
        labels = raw["metadata"].get("labels") or {}
        if labels.get(TYPE_LABEL):
            return said("precheck.already_gpu_node", l=TYPE_LABEL, v=labels[TYPE_LABEL])
        if labels.get(vocab.GPU_PRESENT_LABEL) or labels.get(vocab.DEVICE_PLUGIN_CONFIG_LABEL):
            return said("precheck.gpu_operator_node")
        if vocab.CONTROL_PLANE_LABEL in labels:
            return said("precheck.control_plane_node")
        return ""
