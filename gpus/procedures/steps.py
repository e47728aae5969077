"""Steps shared by procedures A-D (docs/operator-guide.md#procedures). Each: title + kubectl equivalent,
an idempotent ``ensure`` (reads first, sends only what is missing) and a ``verify``."""

from __future__ import annotations

import json

from django.conf import settings
from django.utils.translation import gettext as _

from brickadmin import metrics
from brickadmin.cluster.drain import look_up_daemonsets
from brickadmin.cluster.vocabulary import (
    COMPONENT_LABEL,
    EVICT,
    GPU,
    GPU_SHARED,
    MIG_PREFIX,
    MPS_CAPABLE_LABEL,
    MPS_CONTROL_COMPONENT,
    NVIDIA_PREFIX,
    PLUGIN_NAMESPACE,
    SHARING_LABEL,
    daemonset_to_look_up,
    drain_decision,
    is_terminal,
    json_pointer_escape,
    ksm_resource,
    pdbs_for,
    quantity,
)
from brickadmin.cluster.vocabulary import GPU_TYPE_LABEL as TYPE_LABEL
from brickadmin.cluster.vocabulary import MIRROR_ANNOTATION as MIRROR
from brickadmin.wording import joined, said
from gpus.numbers import ledger as ledger_mod

from .base import Check, Outcome, Step, StepFailed

# The vocabulary the procedures use is read from here too (catalogue/).
__all__ = [
    "COMPONENT_LABEL",
    "EVICT",
    "GPU",
    "GPU_SHARED",
    "MIG_PREFIX",
    "MIRROR",
    "MODE",
    "NVIDIA_PREFIX",
    "PLUGIN_NAMESPACE",
    "SHARING_LABEL",
    "TYPE_LABEL",
    "AllocatableIs",
    "Checklist",
    "Cordon",
    "Drain",
    "Label",
    "LabelBoth",
    "MpsControlDaemonRunning",
    "NoStale",
    "PluginPodRunning",
    "PrometheusAllocatable",
    "RemoveStale",
    "Skipped",
    "Uncordon",
    "configured_replicas",
    "mode_replicas",
    "drain_decision",
    "esc",
    "fmt_resources",
    "is_terminal",
    "json_pointer_escape",
    "ksm_resource",
    "nvidia_resources",
    "pdbs_for",
    "prometheus_check",
    "quantity",
    "status_patch",
    "whole_gpus",
]

MODE = {  # sharing label value -> (plugin component, served resource, stale resource)
    "timeslicing": ("timeslicing", GPU_SHARED, GPU),
    "mps": ("mps", GPU_SHARED, GPU),
    "none": ("default", GPU, GPU_SHARED),
}


esc = json_pointer_escape


def status_patch(node_status: dict, resource: str) -> list[dict]:
    return [
        {"op": "remove", "path": f"/status/{section}/{esc(resource)}"}
        for section in ("capacity", "allocatable")
        if resource in (node_status.get(section) or {})
    ]


def whole_gpus(ctx, node: str) -> tuple[int, str]:
    """(physical whole GPUs on the node, where the number comes from)."""
    n = ctx.ledger().node(node)
    if n is None:
        return 0, "none"
    if n.devices:
        return sum(1 for d in n.devices if not d.mig), n.physical_source
    return n.physical, n.physical_source


def configured_replicas(gateway) -> int:
    return ledger_mod.brick_replicas(gateway.list_configmaps(namespace=PLUGIN_NAMESPACE))


def mode_replicas(gateway, value: str) -> int:
    """The replicas of each whole GPU a node labelled ``value`` is served with: the BRICK
    time-slicing or MPS ConfigMap's, 1 when exclusive."""
    configmaps = gateway.list_configmaps(namespace=PLUGIN_NAMESPACE)
    if value == "timeslicing":
        return ledger_mod.brick_replicas(configmaps)
    if value == "mps":
        return ledger_mod.brick_mps_replicas(configmaps)
    return 1


def nvidia_resources(node: dict) -> dict[str, tuple[str, str]]:
    st = node.get("status") or {}
    cap, alloc = st.get("capacity") or {}, st.get("allocatable") or {}
    return {
        r: (cap.get(r, "-"), alloc.get(r, "-")) for r in sorted(set(cap) | set(alloc)) if r.startswith(NVIDIA_PREFIX)
    }


def fmt_resources(node: dict) -> str:
    lines = [f"{r}: capacity {c}, allocatable {a}" for r, (c, a) in nvidia_resources(node).items()]
    return "\n".join(lines) or said("step.no_nvidia_resource")


# --- node steps -----------------------------------------------------------------


class Cordon(Step):
    key = "cordon"

    def title(self, run):
        return _("Cordon %(node)s") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl cordon {run.node}"

    def ensure(self, ctx):
        node = ctx.gateway.get_node(ctx.node)
        if (node.get("spec") or {}).get("unschedulable"):
            return Outcome(None, said("step.already_cordoned", node=ctx.node))
        ctx.gateway.cordon(ctx.node)
        return Outcome({"spec": {"unschedulable": True}}, f"node/{ctx.node} cordoned")

    def verify(self, ctx):
        ok = bool((ctx.gateway.get_node(ctx.node).get("spec") or {}).get("unschedulable"))
        return Check(
            ok,
            said("step.cordoned_verified") if ok else said("step.still_schedulable"),
            said("step.fix_cordon", node=ctx.node),
        )


def _evictable(pod: dict, daemonsets: dict | None = None) -> bool:
    """A pod the drain still has to move: a finished pod is as good as gone. ``daemonsets``:
    what the drain's DaemonSet lookups gave (an orphaned DaemonSet pod is moved too)."""
    wanted = daemonset_to_look_up(pod)
    found = (daemonsets or {}).get(wanted, True) if wanted else True
    return not is_terminal(pod) and drain_decision(pod, daemonset=found) == EVICT


class Drain(Step):
    key = "drain"
    reensure_on_poll = True
    waits = True

    def title(self, run):
        return _("Drain %(node)s (evictions honour PodDisruptionBudgets)") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl drain {run.node} --ignore-daemonsets --delete-emptydir-data"

    def _left(self, ctx):
        pods = ctx.gateway.list_pods(field_selector=f"spec.nodeName={ctx.node}")
        daemonsets = look_up_daemonsets(ctx.gateway, pods)
        return [p for p in pods if _evictable(p, daemonsets)]

    def ensure(self, ctx):
        left = self._left(ctx)
        if not left:
            return Outcome(None, said("step.nothing_to_evict"))
        result = ctx.gateway.drain(ctx.node, delete_emptydir_data=True, timeout_seconds=ctx.drain_timeout)
        lines = [f"evicting pod {k}" for k in result.evicted]
        lines += [f"skipped {k} (DaemonSet/mirror pod)" for k in result.skipped]
        lines += [f"blocked {k}: {why}" for k, why in result.blocked.items()]
        sent = {"evictions": result.evicted} if result.evicted else None
        return Outcome(sent, "\n".join(lines))

    def verify(self, ctx):
        left = self._left(ctx)
        if not left:
            return Check(True, said("step.drained", node=ctx.node))
        pdbs = ctx.gateway.list_pod_disruption_budgets()
        items, blockers = [], []
        for p in left:
            key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            names = [b["metadata"]["name"] for b in pdbs_for(p, pdbs)]
            if names:
                blockers.append(key)
                items.append(said("step.pod_protected_by_pdb", pod=key, pdb=", ".join(names)))
            else:
                items.append(said("step.pod_still_on_node", pod=key))
        if blockers:
            fix = said("step.drain_blocked_by_pdbs", items=joined(items, "; "))
        else:
            fix = said("step.drain_pods_left", items=joined(items, "; "))
        return Check(False, joined(items), fix, items=items)


class Label(Step):
    key = "label"

    def __init__(self, value, leaving_mps=False):
        self.value = value
        self.leaving_mps = leaving_mps  # the node was on MPS: its kubectl takes nvidia.com/mps.capable away

    def title(self, run):
        return _("Label %(node)s %(label)s=%(value)s") % {"node": run.node, "label": SHARING_LABEL, "value": self.value}

    def kubectl(self, run):
        mps = ""
        if self.value == "mps":
            mps = f" {MPS_CAPABLE_LABEL}=true"
        elif self.leaving_mps:
            mps = f" {MPS_CAPABLE_LABEL}-"
        return f"kubectl label node {run.node} {SHARING_LABEL}={self.value}{mps} --overwrite"

    def wanted(self) -> dict[str, str | None]:
        """The labels this step sets: on MPS also nvidia.com/mps.capable=true, which GPU feature
        discovery would set and NVIDIA's MPS control daemon selects; off MPS, without it."""
        return {SHARING_LABEL: self.value, MPS_CAPABLE_LABEL: "true" if self.value == "mps" else None}

    def _differs(self, labels):
        return {k: v for k, v in self.wanted().items() if labels.get(k) != v}

    def ensure(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        change = self._differs(labels)
        if not change:
            return Outcome(None, said("step.label_already", label=SHARING_LABEL, value=self.value))
        ctx.gateway.label_node(ctx.node, change)  # one patch: the plugin and the MPS daemon switch together
        return Outcome({"metadata": {"labels": change}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        shown = " ".join(f"{k}={labels.get(k)}" for k in self.wanted() if k in labels or k == SHARING_LABEL)
        return Check(
            not self._differs(labels),
            shown,
            said("step.fix_label", cmd=self.kubectl(ctx)),
        )


class LabelBoth(Label):
    key = "label"

    def title(self, run):
        return _("Label %(node)s %(type)s=nvidia and %(label)s=%(value)s together") % {
            "node": run.node,
            "type": TYPE_LABEL,
            "label": SHARING_LABEL,
            "value": self.value,
        }

    def kubectl(self, run):
        return f"kubectl label node {run.node} {TYPE_LABEL}=nvidia {SHARING_LABEL}={self.value}"

    def ensure(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        want = {TYPE_LABEL: "nvidia", SHARING_LABEL: self.value}
        if all(labels.get(k) == v for k, v in want.items()):
            return Outcome(None, said("step.labels_already_set"))
        ctx.gateway.label_node(ctx.node, want)  # one patch: both labels together
        return Outcome({"metadata": {"labels": want}}, f"node/{ctx.node} labeled")

    def verify(self, ctx):
        labels = ctx.gateway.get_node(ctx.node)["metadata"].get("labels") or {}
        ok = labels.get(TYPE_LABEL) == "nvidia" and labels.get(SHARING_LABEL) == self.value
        return Check(
            ok,
            f"{TYPE_LABEL}={labels.get(TYPE_LABEL)} {SHARING_LABEL}={labels.get(SHARING_LABEL)}",
            said("step.fix_both_labels", cmd=self.kubectl(ctx)),
        )


def component_pods(ctx, component: str) -> tuple[list[dict], list[str], bool]:
    """The node's pods of one plugin component (``app.kubernetes.io/component``): the pods, a
    line per pod (name and phase) for the step's output, and whether one of them is Running."""
    pods = ctx.gateway.list_pods(
        namespace=PLUGIN_NAMESPACE,
        label_selector=f"{COMPONENT_LABEL}={component}",
        field_selector=f"spec.nodeName={ctx.node}",
    )
    lines = [f"{p['metadata']['name']} {(p.get('status') or {}).get('phase', '?')}" for p in pods]
    return pods, lines, any((p.get("status") or {}).get("phase") == "Running" for p in pods)


class PluginPodRunning(Step):
    key = "plugin-pod"
    waits = True

    def __init__(self, value):
        self.value = value

    @property
    def component(self):
        return MODE[self.value][0]

    def title(self, run):
        return _("Verify the %(component)s device-plugin pod is Running on %(node)s") % {
            "component": self.component,
            "node": run.node,
        }

    def kubectl(self, run):
        return (
            f"kubectl -n {PLUGIN_NAMESPACE} get pod -o wide -l {COMPONENT_LABEL}={self.component} "
            f"--field-selector spec.nodeName={run.node}"
        )

    def verify(self, ctx):
        pods, lines, ok = component_pods(ctx, self.component)
        if ok:
            return Check(True, "\n".join(lines))
        if pods:
            fix = said("step.plugin_pod_not_running", component=self.component, node=ctx.node)
        else:
            fix = said(
                "step.no_plugin_pod",
                component=self.component,
                node=ctx.node,
                label=SHARING_LABEL,
                value=self.value,
            )
        return Check(False, "\n".join(lines) or said("step.no_resources_found"), fix)


class MpsControlDaemonRunning(Step):
    """NVIDIA's MPS control daemon runs on the node: the MPS plugin waits for it before it
    serves a replica (internal/plugin/mps.go waits for the daemon's pipe)."""

    key = "mps-daemon"
    waits = True

    def title(self, run):
        return _("Verify the MPS control daemon pod is Running on %(node)s") % {"node": run.node}

    def kubectl(self, run):
        return (
            f"kubectl -n {PLUGIN_NAMESPACE} get pod -o wide -l {COMPONENT_LABEL}={MPS_CONTROL_COMPONENT} "
            f"--field-selector spec.nodeName={run.node}"
        )

    def verify(self, ctx):
        _pods, lines, ok = component_pods(ctx, MPS_CONTROL_COMPONENT)
        return Check(
            ok,
            "\n".join(lines) or said("step.no_resources_found"),
            said("step.no_mps_daemon", node=ctx.node, label=MPS_CAPABLE_LABEL),
        )


class AllocatableIs(Step):
    key = "allocatable"
    waits = True

    def __init__(self, value):
        self.value = value

    @property
    def resource(self):
        return MODE[self.value][1]

    def title(self, run):
        what = _("physical × replicas") if self.value in MODE and MODE[self.value][1] == GPU_SHARED else _("physical")
        return _("Verify allocatable %(res)s = %(what)s") % {"res": self.resource, "what": what}

    def kubectl(self, run):
        return f"kubectl describe node {run.node} | grep -A 10 Allocatable"

    def expected(self, ctx):
        physical, source = whole_gpus(ctx, ctx.node)
        replicas = mode_replicas(ctx.gateway, self.value)
        return physical, replicas, source

    def verify(self, ctx):
        node = ctx.gateway.get_node(ctx.node)
        physical, replicas, source = self.expected(ctx)
        got = quantity(((node.get("status") or {}).get("allocatable") or {}).get(self.resource, "0"))
        detail = joined(
            [
                fmt_resources(node),
                said(
                    "step.allocatable_expected",
                    res=self.resource,
                    p=physical,
                    src=source,
                    r=replicas,
                    e=physical * replicas,
                ),
            ]
        )
        if physical <= 0:
            return Check(
                False,
                detail,
                said("step.no_physical_gpu", node=ctx.node),
            )
        ok = got == physical * replicas
        return Check(
            ok,
            detail,
            said("step.allocatable_wrong", res=self.resource, got=got, e=physical * replicas),
        )


class RemoveStale(Step):
    key = "remove-stale"

    def __init__(self, value):
        self.value = value

    @property
    def resource(self):
        return MODE[self.value][2]

    def title(self, run):
        return _("Remove the stale %(res)s from node status (JSON patch)") % {"res": self.resource}

    def kubectl(self, run):
        ops = json.dumps(
            status_patch({"capacity": {self.resource: 1}, "allocatable": {self.resource: 1}}, self.resource)
        )
        return f"kubectl patch node {run.node} --subresource=status --type=json -p='{ops}'"

    def ensure(self, ctx):
        status = ctx.gateway.get_node(ctx.node).get("status") or {}
        ops = status_patch(status, self.resource)
        if not ops:
            return Outcome(None, said("step.no_stale", res=self.resource))
        ctx.gateway.remove_node_status_resources(ctx.node, [self.resource])
        return Outcome(ops, f"node/{ctx.node} patched")

    def verify(self, ctx):
        node = ctx.gateway.get_node(ctx.node)
        left = bool(status_patch(node.get("status") or {}, self.resource))
        return Check(
            not left,
            fmt_resources(node),
            said("step.stale_still_in_status", res=self.resource),
        )


class NoStale(Step):
    key = "no-stale"

    def __init__(self, value):
        self.value = value

    def title(self, run):
        return _("Verify no stale nvidia.com resource is left")

    def kubectl(self, run):
        return f"kubectl describe node {run.node} | grep nvidia"

    def verify(self, ctx):
        node = ctx.gateway.get_node(ctx.node)
        served = MODE[self.value][1]
        stale = [r for r in nvidia_resources(node) if r != served and not r.startswith(MIG_PREFIX)]
        return Check(
            not stale,
            fmt_resources(node),
            said("step.stale_left", res=", ".join(stale)),
        )


class Uncordon(Step):
    key = "uncordon"

    def title(self, run):
        return _("Uncordon %(node)s") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl uncordon {run.node}"

    def ensure(self, ctx):
        if not (ctx.gateway.get_node(ctx.node).get("spec") or {}).get("unschedulable"):
            return Outcome(None, said("step.already_schedulable", node=ctx.node))
        ctx.gateway.uncordon(ctx.node)
        return Outcome({"spec": {"unschedulable": None}}, f"node/{ctx.node} uncordoned")

    def verify(self, ctx):
        ok = not (ctx.gateway.get_node(ctx.node).get("spec") or {}).get("unschedulable")
        return Check(
            ok,
            said("step.schedulable") if ok else said("step.still_cordoned"),
            said("step.fix_uncordon", node=ctx.node),
        )


def prometheus_check(ctx, node: str, resource: str, expected: int) -> Check:
    metric = ksm_resource(resource)
    values = metrics.node_allocatable(node)
    if values is None:
        # not configured: said in each reader's language (a failure's own words are kept as they are)
        why = (settings.PROMETHEUS_URL and metrics.last_error()) or said("step.prometheus_not_configured")
        raw = ctx.gateway.get_node(node)
        got = quantity(((raw.get("status") or {}).get("allocatable") or {}).get(resource, "0"))
        detail = said("step.prometheus_fell_back", why=why, res=resource, got=got, e=expected)
        return Check(
            got == expected,
            detail,
            said("step.allocatable_mismatch", node=node, got=got, e=expected),
            level="ok" if got == expected else "block",
        )
    got = values.get(metric)
    detail = "\n".join(
        f'kube_node_status_allocatable{{node="{node}",resource="{k}"}} {v:g}' for k, v in sorted(values.items())
    ) or said("step.no_series")
    ok = got is not None and int(got) == expected
    return Check(
        ok,
        detail,
        said("step.prometheus_wrong", metric=metric, got=got, node=node, e=expected),
    )


class PrometheusAllocatable(Step):
    key = "prometheus"
    waits = True

    def __init__(self, value):
        self.value = value

    def title(self, run):
        return _("Verify Prometheus kube_node_status_allocatable shows the new resource")

    def kubectl(self, run):
        return f'PromQL: kube_node_status_allocatable{{node="{run.node}",resource=~"nvidia_com.+"}}'

    def verify(self, ctx):
        step = AllocatableIs(self.value)
        physical, replicas, _src = step.expected(ctx)
        return prometheus_check(ctx, ctx.node, step.resource, physical * replicas)


class Skipped(Step):
    def __init__(self, key, title, reason):
        self.key = key
        self._title = title
        self.skip_reason = reason

    def title(self, run):
        return str(self._title)


class Checklist(Step):
    key = "checklist"
    manual = True

    def title(self, run):
        return _("Checklist: NVIDIA driver and nvidia-container-runtime installed on %(node)s") % {"node": run.node}

    def kubectl(self, run):
        return _(
            "(outside the cluster) install the NVIDIA driver (.run) and nvidia-container-runtime (rpm) "
            "per the node build guide"
        )

    def verify(self, ctx):
        who = ctx.params.get("checklist_confirmed_by") or ctx.run.actor_name
        if not ctx.params.get("checklist_confirmed"):
            who = ctx.checklist_confirmed_by()  # confirmed on the run page after a first stop here
        if who:
            return Check(
                True,
                said("step.checklist_confirmed", who=who, node=ctx.node),
            )
        raise StepFailed(
            said("step.checklist_missing"),
            said("step.checklist_fix"),
        )
