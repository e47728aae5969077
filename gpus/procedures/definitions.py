"""Procedures A-D (BRICK convention): ordered steps, pre-checks, and what the pages and
the terminal need to offer them (label, description, parameters, nodes, checklist)."""

from __future__ import annotations

from collections import Counter

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from brickadmin import metrics
from brickadmin.cluster import ClusterError, migparted
from brickadmin.cluster import mig as mig_mod
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import PLUGIN_NAMESPACE, advertised_resources, pod_gpu_requests
from brickadmin.cluster.gateway import get_gateway
from brickadmin.wording import joined, said
from gpus.numbers import capacity as capacity_mod
from gpus.numbers import ledger as ledger_mod
from gpus.view.live import LiveRead

from .. import manifest as manifest_mod
from . import notices
from .base import Check, NodeChoice, NothingToDo, Outcome, Param, ProcedureDef, Step, StepFailed
from .recording import remembered
from .steps import (
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
    nvidia_resources,
    prometheus_check,
    status_patch,
    whole_gpus,
)


class PrecheckStep(Step):
    """Step 0: the procedure's pre-checks again, at run time (the cluster may have changed
    since the plan was shown)."""

    key = "precheck"

    def __init__(self, proc):
        self.proc = proc

    def title(self, run):
        return _("Pre-check")

    def kubectl(self, run):
        return self.proc.precheck_kubectl(run)

    def ensure(self, ctx):
        """Before anything changes: a fix whose finding has gone ends here (NothingToDo);
        record the node as it is (what "Restore the node" puts back)."""
        live = LiveRead(ctx.gateway)
        reason = self.proc.nothing_to_do(live, ctx.node, ctx.params)
        if reason:
            raise NothingToDo(reason)
        if self.proc.restorable and ctx.node:
            from brickadmin.cluster import NotFound

            try:
                before = node_state(live.get_node(ctx.node), self.proc.restored_labels)
            except NotFound:
                return Outcome()
            labels = ", ".join(f"{k}={v if v is not None else '-'}" for k, v in before["labels"].items())
            ctx.remember(
                NODE_BEFORE,
                before,
                said(
                    "step.node_before",
                    labels=labels,
                    state=said("step.cordoned") if before["unschedulable"] else said("step.schedulable"),
                ),
            )
        return Outcome()

    def verify(self, ctx):
        checks = self.proc.prechecks(LiveRead(ctx.gateway), ctx.node, ctx.params)
        # the capacity table goes into the record too: what the admin saw and acknowledged
        # (kept as messages: each reader of the run reads them in their own language)
        detail = joined([precheck_record(c) for c in checks])
        blocks = [c for c in checks if c.level == "block"]
        if blocks:
            return Check(False, detail, joined([c.fix or c.detail for c in blocks], " "))
        for c in checks:
            if c.level != "ack":
                continue
            asked = [p.name for p in self.proc.confirm_params if p.confirm == "ack" and c.asks_for(p.name)]
            if c.ack == CAPACITY_ACK and CAPACITY_ACK not in ctx.params:
                # Started by code, not from a plan (the wizard and the terminal always carry the
                # answer, ticked or not, and refuse to start without it): the table is recorded.
                continue
            if not all(c.acknowledged(ctx.params.get(name)) for name in asked):
                return Check(
                    False,
                    detail,
                    said("step.acknowledgement_missing", what=c.detail),
                )
        return Check(True, detail)


def precheck_record(check: Check):
    """One pre-check as step 0 records it: its level and what it found, and under it, indented,
    the capacity table's lines."""
    lines = [said("precheck.line", level=check.level, text=check.detail), *(check.items if check.capacity else [])]
    text = lines[-1]
    for line in reversed(lines[:-1]):
        text = said("precheck.item", first=line, rest=text)
    return text


NODE_BEFORE = "node_before"  # the run event (engine Context.remember) holding the node before the run
RESTORED_LABELS = (TYPE_LABEL, SHARING_LABEL)  # the labels node procedures change, and Restore puts back


def node_state(raw: dict, keys=RESTORED_LABELS) -> dict:
    """What a node procedure may change on a node: its GPU labels ``keys`` (None: absent) and whether it is
    cordoned."""
    labels = raw["metadata"].get("labels") or {}
    return {
        "labels": {k: labels.get(k) for k in keys or RESTORED_LABELS},
        "unschedulable": bool((raw.get("spec") or {}).get("unschedulable")),
    }


def _shared_quota(live: LiveRead, resource=GPU_SHARED) -> dict[str, int]:
    alloc = ledger_mod.allocated_by_namespace(live.list_resource_quotas())
    return {ns: per.get(resource, 0) for ns, per in alloc.items() if resource in per}


def _quota_over(live: LiveRead, resource, allocated, new_total, detail, fix) -> Check | None:
    """A block when the approved Workspace quotas of ``resource`` (``allocated`` in all) no longer
    fit under its Total after a change, naming the Workspaces holding it. ``fix`` is the code of a
    message taking %(d)d and %(ws)s, or (that code, its other parameters)."""
    if allocated <= new_total:
        return None
    items = _ws_list({k: v for k, v in _shared_quota(live, resource).items() if v}, live.owners())
    code, more = fix if isinstance(fix, tuple) else (fix, {})
    return Check(
        False, detail, said(code, **more, d=allocated - new_total, ws=joined(items, "; ")), level="block", items=items
    )


def _ws_list(quotas: dict[str, int], owners: dict[str, str]) -> list:
    return [
        said("precheck.workspace_quota", ns=ns, owner=owners.get(ns) or "?", n=n)
        for ns, n in sorted(quotas.items(), key=lambda kv: -kv[1])
    ]


CAPACITY_ACK = "capacity_acknowledged"
CAPACITY_PARAM = Param(
    CAPACITY_ACK,
    lambda: forms.IntegerField(
        required=False,
        min_value=0,
        label=gettext_lazy("I understand the GPU types listed will have less capacity than their allocated quota."),
    ),
    confirm="ack",
    cli="--acknowledge-overcommit",
    refusal=gettext_lazy(
        "Tick the acknowledgement that names how much allocated quota will be over the Total (if "
        "the number changed since the plan was shown, look at the capacity table again)."
    ),
)


def capacity_line_text(line):
    """One GPU type's Total / Allocated / Available now and after, as the run records it."""

    def avail(n):
        shown, over = capacity_mod.shown_available(n)
        return str(shown) if not over else said("precheck.over_allocated_by", n=over)

    return said(
        "precheck.capacity_line",
        res=line.resource,
        t=line.total,
        t2=line.total_after,
        a=line.allocated,
        a2=line.allocated_after,
        v=avail(line.available),
        v2=avail(line.available_after),
    )


def capacity_checks(proc, gateway, node, params, checks) -> list[Check]:
    """The capacity table of a plan (every GPU type, Total / Allocated / Available now and
    after the run) as a check; when the run leaves a type with less capacity than its allocated
    quota, an acknowledgement naming by how much, recorded with the run's parameters. A type
    another check already blocks is shown, not asked about (the block stops the run)."""
    live = LiveRead.of(gateway)
    snap, led = live.snapshot(), live.ledger()
    change = proc.capacity_change(live, led, snap, node, params)
    if change is None:
        return []
    lines = capacity_mod.capacity_after(led, change)
    shown = [line for line in lines if line.changes] or lines
    items = [capacity_line_text(line) for line in shown]
    over = capacity_mod.left_over(lines)
    if over and any(c.level == "block" for c in checks):
        return [Check(True, said("precheck.capacity_blocked"), level="info", items=items, capacity=lines)]
    if not over:
        detail = said("precheck.capacity_kept") if change else said("precheck.capacity_once_advertised")
        return [Check(True, detail, level="info", items=items, capacity=lines)]
    by = sum(line.over_after for line in over)
    names = ", ".join(f"{line.resource} ({line.over_after})" for line in over)
    return [
        Check(
            True,
            said("precheck.capacity_over", types=names),
            level="ack",
            items=items,
            capacity=lines,
            ack=CAPACITY_ACK,
            ack_count=by,
            ack_label=ngettext(
                "I understand %(n)d GPU of allocated quota will be over the Total.",
                "I understand %(n)d GPUs of allocated quota will be over the Total.",
                by,
            )
            % {"n": by},
        )
    ]


EVICTIONS_ACK = "evictions_acknowledged"
EVICTIONS_PARAM = Param(
    EVICTIONS_ACK,
    lambda: forms.IntegerField(
        required=False, min_value=0, label=gettext_lazy("I understand the GPU pods listed will be evicted.")
    ),
    confirm="ack",
    cli="--acknowledge-evictions",
    refusal=gettext_lazy(
        "Tick the acknowledgement that names how many GPU pods will be evicted (if the number "
        "changed since the plan was shown, look at the list again)."
    ),
)


class _Conversion(ProcedureDef):
    target = ""  # sharing label value after the conversion
    source_mode = ""
    restorable = True
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
            Label(v),
            PluginPodRunning(v),
            AllocatableIs(v),
            RemoveStale(v),
            NoStale(v),
            Uncordon(),
            PrometheusAllocatable(v),
        ]

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
        checks.extend(self._blast_radius(live, node))
        return checks

    def _blast_radius(self, live, node):
        """Every pod the drain will evict (the drain's own rule, read live), with its
        Workspace, owner and GPU request; GPU pods need an acknowledgement naming their count."""
        namespaces = {ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in live.list_namespaces()}
        pods = [p for p in live.pods_on(node) if not vocab.is_terminal(p) and vocab.drain_decision(p) == vocab.EVICT]
        rows = []
        for p in pods:
            ns = p["metadata"].get("namespace", "")
            labels = namespaces.get(ns, {})
            gpus = pod_gpu_requests(p)
            rows.append(
                (
                    not gpus,
                    vocab.pod_key(p),
                    said(
                        "precheck.evicted_pod",
                        pod=vocab.pod_key(p),
                        ws=ns if labels.get(vocab.WORKSPACE_LABEL) == "true" else said("precheck.no_workspace", ns=ns),
                        owner=labels.get(vocab.OWNER_LABEL) or "-",
                        gpu=", ".join(f"{r} {n}" for r, n in sorted(gpus.items())) or said("precheck.none"),
                    ),
                )
            )
        rows.sort()
        items = [text for _gpu_last, _key, text in rows]
        gpu_pods = sum(1 for no_gpu, _k, _t in rows if not no_gpu)
        if gpu_pods:
            return [
                Check(
                    True,
                    said("precheck.gpu_pods_evicted", n=gpu_pods, node=node, all=len(rows)),
                    level="ack",
                    items=items,
                    ack=EVICTIONS_ACK,
                    ack_count=gpu_pods,
                    ack_label=ngettext(
                        "I understand %(n)d GPU pod will be evicted.",
                        "I understand %(n)d GPU pods will be evicted.",
                        gpu_pods,
                    )
                    % {"n": gpu_pods},
                )
            ]
        if rows:
            return [
                Check(
                    True,
                    said("precheck.pods_evicted", n=len(rows), node=node),
                    level="warn",
                    items=items,
                )
            ]
        return [Check(True, said("precheck.no_pod_to_evict", node=node), level="info")]

    def _untolerated_taints(self, live, node):
        """The target mode's DaemonSet must tolerate the node's taints, or its plugin pod
        never starts there and the node exposes no GPU at all
        (docs/operator-guide.md#the-device-plugin)."""
        from brickadmin.cluster import NotFound
        from brickadmin.cluster import deviceplugin as dp

        name = manifest_mod.TS_DAEMONSET if self.target == "timeslicing" else manifest_mod.DEFAULT_DAEMONSET
        try:
            ds = live.get_daemonset(PLUGIN_NAMESPACE, name)
        except NotFound:
            return Check(
                False,
                said("precheck.daemonset_missing", ns=PLUGIN_NAMESPACE, name=name),
                said("precheck.fix_apply_manifest"),
            )
        taints = (live.get_node(node).get("spec") or {}).get("taints") or []
        tolerations = ds["spec"]["template"]["spec"].get("tolerations")
        missing = [t for t in taints if not dp.tolerates([t], tolerations)]
        if not missing:
            return None
        names = ", ".join(
            f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}" for t in missing
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
        if n.mode == "timeslicing" and self.target == "timeslicing":
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
        return n.convention == "brick" and n.mode != "timeslicing"


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
        ),
    )

    def offered_on(self, n):
        return n.convention == "brick" and n.mode in ("timeslicing", "unlabelled")

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
        quotas = _shared_quota(live)
        numbers = said("precheck.shared_left", node=node, t=total_except, a=allocated, src=source)
        if total_except < allocated:
            items = _ws_list({k: v for k, v in quotas.items() if v}, owners)
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
        others = [x for x in led.nodes if x.name != node and x.mode == "timeslicing"]
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


# --- C -------------------------------------------------------------------------


class EditManifest(Step):
    key = "manifest-edit"

    def title(self, run):
        return _("Set replicas: %(r)s in the managed manifest") % {"r": run.params.get("replicas")}

    def kubectl(self, run):
        return _(
            "edit brick-nvidia-device-plugin.yaml: sharing.timeSlicing.resources[nvidia.com/gpu].replicas: %(r)s"
        ) % {"r": run.params.get("replicas")}

    def ensure(self, ctx):
        want = int(ctx.params["replicas"])
        cur = manifest_mod.current()
        have = manifest_mod.ts_replicas(manifest_mod.parse(cur.content))
        if have == want:
            return Outcome(None, said("step.manifest_has_replicas", v=cur.version, r=want))
        new = manifest_mod.save_version(
            manifest_mod.set_replicas(cur.content, want),
            actor=ctx.run.actor,
            actor_name=ctx.run.actor_name,
            run=ctx.run,
            note=said("manifest.replicas_set", id=ctx.run.pk, have=str(have), want=want),
        )
        return Outcome(
            {"manifestVersion": new.version, "replicas": want},
            said("step.manifest_replicas_moved", a=cur.version, b=new.version, x=have, y=want),
        )

    def verify(self, ctx):
        cur = manifest_mod.current()
        docs = manifest_mod.parse(cur.content)
        result = manifest_mod.validate(docs)
        ok = result.ok and manifest_mod.ts_replicas(docs) == int(ctx.params["replicas"])
        return Check(
            ok,
            said(
                "step.manifest_state",
                v=cur.version,
                state=said("step.manifest_valid") if result.ok else "; ".join(result.errors),
            ),
            said("step.fix_manifest"),
        )


class ApplyManifest(Step):
    key = "apply"

    def title(self, run):
        return _("Apply the manifest (server-side apply)")

    def kubectl(self, run):
        return "kubectl apply --server-side -f brick-nvidia-device-plugin.yaml"

    def ensure(self, ctx):
        from django.utils import timezone

        cur = manifest_mod.current()
        docs = manifest_mod.parse(cur.content)
        if all(d.state == "in-sync" for d in manifest_mod.drift(docs, ctx.gateway)):
            return Outcome(None, said("step.live_objects_match", v=cur.version))
        lines = manifest_mod.apply(docs, ctx.gateway)
        type(cur).objects.filter(pk=cur.pk).update(applied_at=timezone.now())
        return Outcome(
            {"manifestVersion": cur.version, "objects": [f"{d['kind']}/{d['metadata']['name']}" for d in docs]},
            "\n".join(lines),
        )

    def verify(self, ctx):
        docs = manifest_mod.parse(manifest_mod.current().content)
        items = manifest_mod.drift(docs, ctx.gateway)
        bad = [f"{d.kind}/{d.name}: {d.state} {', '.join(d.paths)}" for d in items if d.state != "in-sync"]
        return Check(
            not bad,
            "\n".join(f"{d.kind}/{d.name}: {d.state}" for d in items),
            said("step.live_objects_differ", x="; ".join(bad)),
        )


class RolloutRestart(Step):
    key = "rollout-restart"

    def title(self, run):
        return _("Restart the time-slicing plugin (apply alone does not reload its config)")

    def kubectl(self, run):
        return f"kubectl -n {PLUGIN_NAMESPACE} rollout restart ds/{manifest_mod.TS_DAEMONSET}"

    def ensure(self, ctx):
        applied = ctx.finished_at("apply")
        ds = ctx.gateway.get_daemonset(PLUGIN_NAMESPACE, manifest_mod.TS_DAEMONSET)
        ann = (ds["spec"]["template"].get("metadata") or {}).get("annotations") or {}
        restarted = ann.get(manifest_mod.RESTARTED_AT, "")
        if ctx.sent_before(self.key):
            return Outcome(None, said("step.restarted_by_this_run", t=restarted[:20]))
        # A restart in a later second than the apply already reloaded the config; within the
        # same second it cannot be told apart, so restart again (harmless).
        if applied and restarted[:19] > applied.strftime("%Y-%m-%dT%H:%M:%S"):
            return Outcome(None, said("step.restarted_after_apply", t=restarted[:20]))
        ctx.gateway.rollout_restart_daemonset(PLUGIN_NAMESPACE, manifest_mod.TS_DAEMONSET)
        return Outcome(
            {"spec": {"template": {"metadata": {"annotations": {manifest_mod.RESTARTED_AT: "<now>"}}}}},
            f"daemonset.apps/{manifest_mod.TS_DAEMONSET} restarted",
        )


class RolloutStatus(Step):
    key = "rollout-status"
    waits = True

    def title(self, run):
        return _("Wait for the rollout to finish")

    def kubectl(self, run):
        return f"kubectl -n {PLUGIN_NAMESPACE} rollout status ds/{manifest_mod.TS_DAEMONSET}"

    def verify(self, ctx):
        st = ctx.gateway.daemonset_rollout_status(PLUGIN_NAMESPACE, manifest_mod.TS_DAEMONSET)
        return Check(
            st.done,
            st.message,
            said("step.rollout_unfinished", ns=PLUGIN_NAMESPACE),
        )


def _ts_nodes(ctx):
    return [n["metadata"]["name"] for n in ctx.gateway.list_nodes(label_selector=f"{SHARING_LABEL}=timeslicing")]


class EveryTSNode(Step):
    key = "verify-nodes"
    waits = True

    def title(self, run):
        return _("Verify every time-slicing node shows physical × %(r)s") % {"r": run.params.get("replicas")}

    def kubectl(self, run):
        return "kubectl describe node <timeslicing node> | grep gpu.shared"

    def wanted(self, ctx) -> int:
        return int(ctx.params["replicas"])

    def verify(self, ctx):
        want = self.wanted(ctx)
        lines, bad = [], []
        for name in _ts_nodes(ctx):
            physical, _src = whole_gpus(ctx, name)
            got = vocab.quantity(
                ((ctx.gateway.get_node(name).get("status") or {}).get("allocatable") or {}).get(GPU_SHARED, "0")
            )
            lines.append(f"{name}: {GPU_SHARED} {got} (expected {physical} × {want} = {physical * want})")
            if got != physical * want:
                bad.append(name)
        return Check(
            not bad,
            "\n".join(lines) or said("step.no_time_slicing_node"),
            said("step.replicas_not_reflected", nodes=", ".join(bad)),
        )


class PrometheusEveryTSNode(Step):
    key = "prometheus"
    waits = True

    def title(self, run):
        return _("Verify Prometheus shows the new totals")

    def kubectl(self, run):
        return 'PromQL: kube_node_status_allocatable{resource="nvidia_com_gpu_shared"}'

    def verify(self, ctx):
        want = int(ctx.params["replicas"])
        checks = []
        for name in _ts_nodes(ctx):
            physical, _src = whole_gpus(ctx, name)
            checks.append((name, prometheus_check(ctx, name, GPU_SHARED, physical * want)))
        bad = [n for n, c in checks if not c.ok]
        return Check(
            not bad,
            joined([said("step.on_node", node=n, text=c.detail) for n, c in checks]),
            joined([c.fix for _n, c in checks if not c.ok], " "),
        )


class ProcedureC(ProcedureDef):
    code = "C"
    label = gettext_lazy("C. Change time-slicing replicas")
    description = gettext_lazy(
        "Change replicas in the managed manifest, apply, rollout restart, verify every time-slicing node."
    )
    action_label = gettext_lazy("Change replicas (C)")
    needs_node = False
    cluster_wide = True  # every time-slicing node changes
    fixes = ("replicas-not-reflected",)
    params = (
        Param(
            "replicas",
            lambda: forms.IntegerField(
                min_value=2,
                max_value=64,
                label=gettext_lazy("New replicas"),
                error_messages={"required": gettext_lazy("Give the new number of replicas (at least 2).")},
            ),
        ),
        CAPACITY_PARAM,
    )

    def offered_on(self, n):
        return n.convention == "brick" and n.mode == "timeslicing"

    def pick_facts(self, ledger, snapshot):
        return [
            (_("Current replicas in the time-slicing ConfigMap"), ledger_mod.brick_replicas(snapshot.plugin_configmaps))
        ]

    def steps(self, params):
        return [
            PrecheckStep(self),
            EditManifest(),
            ApplyManifest(),
            RolloutRestart(),
            RolloutStatus(),
            EveryTSNode(),
            PrometheusEveryTSNode(),
        ]

    def precheck_kubectl(self, run):
        return "PromQL: " + metrics.SHARED_ALLOCATED

    def prechecks(self, gateway, node, params):
        try:
            want = int(params.get("replicas"))
        except (TypeError, ValueError):
            return [Check(False, said("precheck.replicas_not_whole"))]
        if want < 2:
            return [Check(False, said("precheck.replicas_too_few"))]
        live = LiveRead.of(gateway)
        led = live.ledger()
        have = ledger_mod.brick_replicas(live.list_configmaps(namespace=PLUGIN_NAMESPACE))
        ts = [n for n in led.nodes if n.mode == "timeslicing" and n.convention == "brick"]
        whole = {n.name: (sum(1 for d in n.devices if not d.mig) if n.devices else n.physical) for n in ts}
        new_total = sum(whole.values()) * want
        allocated = led.resource(GPU_SHARED).allocated
        total_now = led.resource(GPU_SHARED).logical
        checks = [
            Check(
                True,
                said("precheck.replicas_change", a=have, b=want, n=len(ts), t=total_now, u=new_total, q=allocated),
            )
        ]
        if want == have:
            checks.append(
                Check(
                    True,
                    said("precheck.replicas_already", r=want),
                    level="info",
                )
            )
        if want > have:
            checks.append(
                Check(
                    True,
                    said("precheck.replicas_increase", u=new_total, d=new_total - total_now),
                    level="warn",
                )
            )
        over = _quota_over(
            live,
            GPU_SHARED,
            allocated,
            new_total,
            said("precheck.shared_quota_over", q=allocated, u=new_total),
            "precheck.fix_lower_shared_quotas",
        )
        if want < have and over:
            checks.append(over)
        return checks + capacity_checks(self, gateway, node, params, checks)

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        want = int(params.get("replicas") or 0)
        ts = [n for n in ledger.nodes if n.mode == "timeslicing" and n.convention == "brick"]
        new_total = sum(capacity_mod.whole_gpus(n) for n in ts) * want
        return {GPU_SHARED: new_total - ledger.resource(GPU_SHARED).logical}


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

        if params.get("sharing") not in ("none", "timeslicing"):
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


# --- M: a node's MIG layout, the GPU Operator's mig-manager way -------------------------
# The admin names one of mig-manager's layouts (the mig-parted ConfigMap) in the node label
# nvidia.com/mig.config; mig-manager (a GPU Operator DaemonSet on the nodes labelled
# nvidia.com/gpu.deploy.mig-manager=true) repartitions the GPUs, restarts the device plugin and
# reports nvidia.com/mig.config.state: pending, then success or failed.


def mig_manager_runs(labels: dict) -> bool:
    return (labels or {}).get(vocab.MIG_MANAGER_DEPLOY_LABEL) == "true"


def metrics_configured() -> bool:
    from django.conf import settings

    return bool(settings.PROMETHEUS_URL)


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
    return vocab.mig_parted_configmap(policies, getattr(settings, "BRICK_MIG_PARTED_CONFIGMAP", ""))


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
    _blast_radius = _Conversion._blast_radius  # the pods the drain evicts, as A and B name them

    def eligibility(self, n):
        if not mig_manager_runs(n.labels):
            return said("precheck.no_mig_manager", label=vocab.MIG_MANAGER_DEPLOY_LABEL)
        return ""

    def offered_on(self, n):
        return mig_manager_runs(n.labels)

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
        after, why = migparted.layout(configs, config, node_gpus(live, node, n))
        if after is None:
            refused = said("precheck.mig_would_refuse", config=config, node=node, why=reason_said(why))
            return [Check(False, refused, joined([refused, said("precheck.fix_choose_layout")], " "))]
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
            over = _quota_over(
                live,
                resource,
                row.allocated,
                new_total,
                said("precheck.quota_over", res=resource, q=row.allocated, u=new_total),
                ("precheck.fix_lower_quotas", {"res": resource}),
            )
            if over:
                checks.append(over)
        checks.extend(self._blast_radius(live, node))
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


# --- R: restore a node after a run that stopped ------------------------------------


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


# --- Fixes: one audited click from a health finding ----------------------------------
# Unlisted procedures (never on the procedure index), each declaring the finding kinds it
# fixes (``fixes``): the Health page offers "Fix" on such a finding, with the finding's
# facts as parameters. Each says, read live when its run starts, when the finding has gone
# (``nothing_to_do``): the run then ends as "nothing to do" without a write.


def _k8s_name(value: str) -> None:
    """A Kubernetes object name (DNS-1123 subdomain): lowercase letters, digits, '-' and '.',
    starting and ending with a letter or digit. Checked without a regular expression."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
    if not value or len(value) > 253 or not set(value) <= allowed or value[0] in "-." or value[-1] in "-.":
        raise forms.ValidationError(_("Not a Kubernetes object name: %(v)s") % {"v": value[:80]})


def _name_field(label):
    return lambda: forms.CharField(max_length=253, label=label, validators=[_k8s_name])


class _Fix(ProcedureDef):
    listed = False

    def confirm_sentence(self, node: str, params: dict) -> str:
        return _(
            "Run “%(fix)s” on %(target)s? It changes the cluster as planned above and is recorded under your name."
        ) % {"fix": self.label, "target": node or _("the cluster")}

    def prechecks(self, gateway, node, params):
        """``nothing_to_do`` and ``fix_prechecks`` read one LiveRead: the cluster they decide on."""
        from brickadmin.cluster import NotFound

        live = LiveRead.of(gateway)
        try:
            reason = self.nothing_to_do(live, node, params)
        except NotFound as exc:
            return [Check(False, str(exc), said("precheck.object_gone"))]
        if reason:
            return [
                Check(
                    True,
                    said("precheck.nothing_to_do_now", why=reason),
                    level="info",
                )
            ]
        return self.fix_prechecks(live, node, params)

    def fix_prechecks(self, gateway, node, params):
        return []


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


class ProcedureRemoveStale(_Fix):
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


class RestartPlugin(RolloutRestart):
    def title(self, run):
        return _("Restart the time-slicing plugin (it reads its config only when it starts)")


class EveryTSNodeConfigured(EveryTSNode):
    def title(self, run):
        return _("Verify every time-slicing node shows physical × the configured replicas")

    def wanted(self, ctx):
        return ctx.replicas()


def _not_reflected(live: LiveRead) -> list[str]:
    """Time-slicing nodes whose running plugin advertises other replicas than configured."""
    return [
        f"{n.name} ({n.replicas} ≠ {n.configured_replicas})"
        for n in live.ledger().nodes
        if n.convention == "brick"
        and n.mode == "timeslicing"
        and n.plugin_state == "running"
        and n.replicas != n.configured_replicas
    ]


class ProcedureRestartPlugin(_Fix):
    code = "P"
    label = gettext_lazy("Restart the time-slicing plugin")
    description = gettext_lazy(
        "Rollout restart of the time-slicing device plugin, so every time-slicing node "
        "advertises the replicas its ConfigMap says (the restart procedure C would do)."
    )
    needs_node = False
    cluster_wide = True  # every time-slicing node's plugin restarts
    fixes = ("replicas-not-reflected",)

    def steps(self, params):
        return [PrecheckStep(self), RestartPlugin(), RolloutStatus(), EveryTSNodeConfigured()]

    def precheck_kubectl(self, run):
        return (
            f"kubectl get node -l {SHARING_LABEL}=timeslicing -o custom-columns=NAME:.metadata.name,"
            "SHARED:.status.allocatable.nvidia\\.com/gpu\\.shared"
        )

    def nothing_to_do(self, gateway, node, params):
        live = LiveRead.of(gateway)
        if _not_reflected(live):
            return ""
        return said(
            "precheck.replicas_reflected", r=ledger_mod.brick_replicas(live.list_configmaps(namespace=PLUGIN_NAMESPACE))
        )

    def fix_prechecks(self, gateway, node, params):
        return [
            Check(
                True,
                said("precheck.not_reflected_on", nodes=", ".join(_not_reflected(LiveRead.of(gateway)))),
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
        from ..models import OwnerNotice

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
        from ..models import OwnerNotice

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


class ProcedureDeleteFailedPod(_Fix):
    code = "F"
    label = gettext_lazy("Delete a failed pod after telling its owner")
    description = gettext_lazy(
        "A GPU pod the kubelet refused stays Failed until deleted. The owner is told on their "
        "Workspace page what happened, then the pod is deleted."
    )
    fixes = ("pod-admission-failed",)
    params = (
        Param("pod_namespace", _name_field(gettext_lazy("the pod's namespace"))),
        Param("pod_name", _name_field(gettext_lazy("the pod's name"))),
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


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class AddToleration(Step):
    key = "manifest-toleration"

    def _taint(self, params):
        return {
            "key": params.get("taint_key", ""),
            "value": params.get("taint_value") or "",
            "effect": params.get("taint_effect", ""),
        }

    def title(self, run):
        return _("Add a toleration of %(taint)s to both DaemonSets in the managed manifest (a new version)") % {
            "taint": _taint_text(self._taint(run.params))
        }

    def kubectl(self, run):
        tol = key_values(manifest_mod.toleration_for(self._taint(run.params)))
        return _("edit brick-nvidia-device-plugin.yaml: spec.template.spec.tolerations of both DaemonSets += %(t)s") % {
            "t": tol
        }

    def ensure(self, ctx):
        taint = self._taint(ctx.params)
        cur = manifest_mod.current()
        new_content = manifest_mod.add_toleration(cur.content, taint)
        if new_content == cur.content:
            return Outcome(None, said("step.manifest_tolerates", v=cur.version, t=_taint_text(taint)))
        new = manifest_mod.save_version(
            new_content,
            actor=ctx.run.actor,
            actor_name=ctx.run.actor_name,
            run=ctx.run,
            note=said("manifest.toleration_added", id=ctx.run.pk, taint=_taint_text(taint)),
        )
        return Outcome(
            {"manifestVersion": new.version, "toleration": manifest_mod.toleration_for(taint)},
            said("step.manifest_moved", a=cur.version, b=new.version),
        )

    def verify(self, ctx):
        cur = manifest_mod.current()
        docs = manifest_mod.parse(cur.content)
        ok = manifest_mod.validate(docs).ok and manifest_mod.daemonsets_tolerate(docs, self._taint(ctx.params))
        return Check(ok, said("step.manifest_version", v=cur.version), said("step.fix_manifest"))


class ApplyTheManifest(ApplyManifest):
    def title(self, run):
        return _("Apply the manifest (server-side apply)")


class AnyPluginPodRunning(Step):
    key = "plugin-pod"
    waits = True

    def title(self, run):
        return _("Verify a device-plugin pod is Running on %(node)s") % {"node": run.node}

    def kubectl(self, run):
        return f"kubectl -n {PLUGIN_NAMESPACE} get pod -o wide --field-selector spec.nodeName={run.node}"

    def verify(self, ctx):
        pods = ctx.gateway.list_pods(namespace=PLUGIN_NAMESPACE, field_selector=f"spec.nodeName={ctx.node}")
        lines = [f"{p['metadata']['name']} {(p.get('status') or {}).get('phase', '?')}" for p in pods]
        ok = any((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return Check(
            ok,
            "\n".join(lines) or said("step.no_resources_found"),
            said("step.no_running_plugin_pod", node=ctx.node),
        )


def key_values(fields: dict) -> str:
    """A small mapping as people read it ("key=a, operator=Equal, effect=NoSchedule"), not as a
    Python dict."""
    return ", ".join(f"{k}={v}" for k, v in fields.items())


def _taint_text(taint: dict) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


class ProcedureAddToleration(_Fix):
    code = "T"
    label = gettext_lazy("Add a missing toleration to the device plugin")
    description = gettext_lazy(
        "A tainted GPU node gets no device-plugin pod when the DaemonSets do not tolerate its "
        "taint. The toleration is added to both DaemonSets as a new version of the managed "
        "manifest, which is then applied."
    )
    cluster_wide = True  # the manifest and both DaemonSets change
    fixes = ("plugin-missing",)
    params = (
        Param("taint_key", lambda: forms.CharField(max_length=317, label=gettext_lazy("Taint key"))),
        Param("taint_value", lambda: forms.CharField(max_length=63, required=False, label=gettext_lazy("Taint value"))),
        Param(
            "taint_effect",
            lambda: forms.ChoiceField(choices=[(e, e) for e in TAINT_EFFECTS], label=gettext_lazy("Taint effect")),
        ),
        Param(
            "drift_acknowledged",
            lambda: forms.BooleanField(
                required=False,
                label=gettext_lazy(
                    "I understand the apply also brings the live objects listed back to the managed manifest."
                ),
            ),
            confirm="ack",
            refusal=gettext_lazy("Tick the acknowledgement: the apply also changes the live objects listed."),
            cli="--acknowledge-drift",
        ),
    )

    def fixes_finding(self, kind, params):
        return kind in self.fixes and bool(params.get("taint_key"))

    def confirm_sentence(self, node, params):
        return _("Save a new manifest version whose two DaemonSets tolerate %(t)s, and apply it to the cluster?") % {
            "t": _taint_text(self._taint(params))
        }

    def steps(self, params):
        return [PrecheckStep(self), AddToleration(), ApplyTheManifest(), AnyPluginPodRunning()]

    def precheck_kubectl(self, run):
        return f"kubectl get node {run.node} -o jsonpath='{{.spec.taints}}'"

    def _taint(self, params):
        return {
            "key": params.get("taint_key", ""),
            "value": params.get("taint_value") or "",
            "effect": params.get("taint_effect", ""),
        }

    def nothing_to_do(self, gateway, node, params):
        from brickadmin.cluster import NotFound

        live = LiveRead.of(gateway)
        taint = self._taint(params)
        taints = (live.get_node(node).get("spec") or {}).get("taints") or []
        if not any(
            t.get("key") == taint["key"]
            and t.get("effect") == taint["effect"]
            and (t.get("value") or "") == taint["value"]
            for t in taints
        ):
            return said("precheck.taint_gone", node=node, t=_taint_text(taint))
        for name in (manifest_mod.DEFAULT_DAEMONSET, manifest_mod.TS_DAEMONSET):
            try:
                ds = live.get_daemonset(PLUGIN_NAMESPACE, name)
            except NotFound:
                return ""
            if not vocab.tolerates([taint], ds["spec"]["template"]["spec"].get("tolerations")):
                return ""
        return said("precheck.taint_tolerated", t=_taint_text(taint))

    def fix_prechecks(self, gateway, node, params):
        cur = manifest_mod.current()
        checks = [
            Check(
                True,
                said(
                    "precheck.toleration_added",
                    v=cur.version,
                    tol=key_values(manifest_mod.toleration_for(self._taint(params))),
                    node=node,
                ),
            )
        ]
        try:
            drifted = [
                f"{d.kind}/{d.name}: {d.state}"
                for d in manifest_mod.drift(manifest_mod.parse(cur.content), LiveRead.of(gateway))
                if d.state != "in-sync"
            ]
        except manifest_mod.ManifestError as exc:
            return [Check(False, str(exc), said("precheck.fix_manifest_first"))]
        if drifted:  # e.g. replicas edited by hand: the apply would undo it, so the admin says so first
            checks.append(
                Check(
                    True,
                    said("precheck.apply_undoes_drift", v=cur.version),
                    level="ack",
                    items=drifted,
                    ack="drift_acknowledged",
                )
            )
        return checks


class ProcedureUncordon(_Fix):
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


BUILT_IN = (
    ProcedureA(),
    ProcedureB(),
    ProcedureC(),
    ProcedureD(),
    ProcedureMigLayout(),
    ProcedureRestore(),
    ProcedureRemoveStale(),
    ProcedureRestartPlugin(),
    ProcedureDeleteFailedPod(),
    ProcedureAddToleration(),
    ProcedureUncordon(),
)  # registry.py lists them by code; Workspace repairs: workspaces/procedures.py
