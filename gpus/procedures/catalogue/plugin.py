"""The procedures that change the device plugin itself: C (time-slicing replicas in the managed
manifest, apply, rollout restart, every time-slicing node checked), and the two Fixes that
reuse its steps: P restarts the time-slicing plugin when nodes do not advertise the configured
replicas, T adds a missing toleration to both DaemonSets."""

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
from ..base import Check, Outcome, Param, ProcedureDef, Step
from ..steps import GPU_SHARED, SHARING_LABEL, prometheus_check, whole_gpus
from .common import CAPACITY_PARAM, Fix, PrecheckStep, capacity_checks, quota_over


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
        return n.convention == "brick" and n.mode in ledger_mod.REPLICATED_MODES

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
        configmaps = live.list_configmaps(namespace=PLUGIN_NAMESPACE)
        have = ledger_mod.brick_replicas(configmaps)
        ts = [n for n in led.nodes if n.mode in ledger_mod.REPLICATED_MODES and n.convention == "brick"]
        too_many = _mps_clients_exceeded(ts, configmaps, want)
        if too_many is not None:
            return [too_many]
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
        over = quota_over(
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
        ts = [n for n in ledger.nodes if n.mode in ledger_mod.REPLICATED_MODES and n.convention == "brick"]
        new_total = sum(capacity_mod.whole_gpus(n) for n in ts) * want
        return {GPU_SHARED: new_total - ledger.resource(GPU_SHARED).logical}


def _mps_clients_exceeded(nodes, configmaps, want: int) -> Check | None:
    """A blocking check when the BRICK config shares by MPS and ``want`` replicas exceed what one
    MPS server takes per GPU on one of ``nodes`` (the MPS control daemon refuses them and the
    plugin then serves nothing: cmd/mps-control-daemon/mps/device.go)."""
    from brickadmin.cluster import deviceplugin as dp

    if ledger_mod.brick_sharing_strategy(configmaps) != ledger_mod.MPS:
        return None
    for n in nodes:
        for gpu in n.raw_devices or [{"model": n.model}]:
            capability = dp.compute_capability(gpu, n.labels)
            if capability and vocab.mps_replicas_error(capability, want):
                most = vocab.mps_max_clients(capability)
                return Check(
                    False,
                    said("precheck.mps_too_many_clients", most=most, node=n.name, cc=capability, r=want),
                    said("precheck.fix_mps_clients", most=most),
                    level="block",
                )
    return None


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
        and n.mode in ledger_mod.REPLICATED_MODES
        and n.plugin_state == "running"
        and n.replicas != n.configured_replicas
    ]


class ProcedureRestartPlugin(Fix):
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


class ProcedureAddToleration(Fix):
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
        key = params.get("taint_key")
        # a taint Kubernetes sets from the node's state is waited out, never tolerated
        return kind in self.fixes and bool(key) and not vocab.is_node_condition_taint({"key": key})

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
