"""The twin's controllers: what a control plane does after a write, run on demand.

The DaemonSet controller places and replaces the brick-nvidia device-plugin pods and writes
their DaemonSet's status; the device plugin and kubelet advertise the GPUs (deviceplugin.py);
the GPU Operator's mig-manager repartitions a node's GPUs, and its DaemonSet's pod leaves a node
labelled off; the device taint eviction controller deletes the pods using a device a NoExecute
DeviceTaintRule taints, and their claims are released; the disruption controller gives
each budget the status the Eviction API decides from; the resourceclaim controller makes a
pod's claims from their templates and kube-scheduler's DRA plugin allocates them
(dra_allocate.py) before the pod is bound; NVIDIA's DRA kubelet plugin publishes a node's
ResourceSlices where the node is labelled for it (dra_publish.py).
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from datetime import UTC, datetime

from . import deviceplugin as dp
from . import dra_allocate, dra_publish, migparted, projection, quotausage
from .base import NotFound
from .models import TwinHardware, TwinObject
from .twin_store import _quota_sync, now_iso
from .vocabulary import (
    DRA_DRIVER_DEPLOY_LABEL,
    GPU_OPERATOR_NAMESPACE,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    MIG_PARTED_CONFIG_KEY,
    MIG_STRATEGY_LABEL,
    PLUGIN_CONFIG_KEY,
    PLUGIN_NAMESPACE,
    EvictionRefusal,
    controller_of,
    eviction_refusal,
    mig_parted_configmap,
    pdb_status,
    pdbs_for,
    tolerates,
    toleration_matches,
)
from .vocabulary import GPU_TYPE_LABEL as GPU_NODE_LABEL

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"  # the resourceclaim controller's


def _template_hash(ds: dict) -> str:
    raw = json.dumps(ds["spec"]["template"], sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:10]


class TwinClaimScheduling:
    """The resourceclaim controller and kube-scheduler's DRA plugin, for pods that use
    ResourceClaims: a template's claim is made for its pod (``<pod>-<claim>``, owned by the
    pod), the claims are allocated on the first node where they all fit (the pod's own node
    when it names one) and reserved for the pod, which is bound and Running; when they fit
    nowhere the pod stays Pending with the scheduler's message."""

    def _schedule_claim_pods(self) -> None:
        """Every pod using claims that are not all allocated and reserved for it (a load)."""
        for row in TwinObject.objects.filter(kind="Pod").order_by("id"):
            pod = row.body
            if not (pod.get("spec") or {}).get("resourceClaims") or (pod.get("status") or {}).get("phase") in (
                "Succeeded",
                "Failed",
            ):
                continue
            claims = self._pod_claims(pod, create=False)
            if any(c is None or not self._reserved_for(c, pod) for c in claims):
                self._schedule_claim_pod(pod)

    def _pod_claims(self, pod: dict, *, create: bool) -> list[dict | None]:
        """The pod's claims in the order of spec.resourceClaims; a template's claim is made
        when ``create`` (None where a claim does not exist)."""
        ns = pod["metadata"]["namespace"]
        made = {
            s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        out: list[dict | None] = []
        for ref in pod["spec"].get("resourceClaims") or []:
            name = ref.get("resourceClaimName") or made.get(ref["name"])
            if not name and ref.get("resourceClaimTemplateName"):
                name = f"{pod['metadata']['name']}-{ref['name']}"
            try:
                out.append(self._get("ResourceClaim", name, ns))
                continue
            except NotFound:
                pass
            if not (create and ref.get("resourceClaimTemplateName")):
                out.append(None)
                continue
            try:
                template = self._get("ResourceClaimTemplate", ref["resourceClaimTemplateName"], ns)
            except NotFound:
                out.append(None)
                continue
            out.append(self._save(self._claim_from_template(pod, ref["name"], name, template)))
        return out

    @staticmethod
    def _claim_from_template(pod: dict, pod_claim: str, name: str, template: dict) -> dict:
        md = pod["metadata"]
        owner = {"apiVersion": "v1", "kind": "Pod", "name": md["name"], "uid": md.get("uid", "")}
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": md["namespace"],
                "annotations": {POD_CLAIM_NAME_ANNOTATION: pod_claim},
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": copy.deepcopy(template["spec"].get("spec") or {}),
        }

    @staticmethod
    def _reserved_for(claim: dict, pod: dict) -> bool:
        return any(
            r.get("resource") == "pods" and r.get("name") == pod["metadata"]["name"]
            for r in (claim.get("status") or {}).get("reservedFor") or []
        )

    def _claim_nodes(self, pod: dict) -> list[str]:
        """The nodes the pod may go to, in name order: its own when it names one, else those
        its nodeSelector matches, schedulable, whose NoSchedule taints it tolerates."""
        if pod["spec"].get("nodeName"):
            return [pod["spec"]["nodeName"]]
        selector = pod["spec"].get("nodeSelector") or {}
        out = []
        for node in sorted(self.list_nodes(), key=lambda n: n["metadata"]["name"]):
            labels = node["metadata"].get("labels") or {}
            spec = node.get("spec") or {}
            taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
            if any(labels.get(k) != v for k, v in selector.items()) or spec.get("unschedulable"):
                continue
            if tolerates(taints, pod["spec"].get("tolerations")):
                out.append(node["metadata"]["name"])
        return out

    def _schedule_claim_pod(self, pod: dict) -> dict:
        """Allocate and reserve the pod's claims, then bind it (Running); Pending with the
        scheduler's message when no node holds them all."""
        claims = self._pod_claims(pod, create=True)
        pod.setdefault("status", {})["resourceClaimStatuses"] = [
            {"name": ref["name"], "resourceClaimName": c["metadata"]["name"]}
            for ref, c in zip(pod["spec"].get("resourceClaims") or [], claims, strict=True)
            if c is not None and ref.get("resourceClaimTemplateName")
        ]
        nodes = self._claim_nodes(pod)
        missing = [c for c in claims if c is None]
        if missing:
            return self._unschedulable(pod, "waiting for resource claims to be created", len(nodes))
        slices = list(TwinObject.objects.filter(kind="ResourceSlice").values_list("body", flat=True))
        everything = list(TwinObject.objects.filter(kind="ResourceClaim").values_list("body", flat=True))
        # A scenario that lists no DeviceClass at all was exported without its cluster-scoped
        # kinds: its driver's chart installed NVIDIA's classes.
        # Once any class is listed, the listed ones are all there are.
        classes = {
            c["metadata"]["name"]: c
            for c in TwinObject.objects.filter(kind="DeviceClass").values_list("body", flat=True)
        } or dra_allocate.nvidia_device_classes()
        missing_class = dra_allocate.missing_device_class(
            [c for c in claims if c is not None and not (c.get("status") or {}).get("allocation")], classes
        )
        if missing_class:
            # PreFilter's verdict, before any node is tried
            return self._unschedulable(pod, missing_class, len(self.list_nodes()), prefilter=True)
        for node in nodes:
            pending = [c for c in claims if not ((c or {}).get("status") or {}).get("allocation")]
            placed = [c for c in claims if c not in pending]
            if any(not self._allocated_on(c, node) for c in placed):
                continue
            others = [c for c in everything if (c.get("status") or {}).get("allocation")]
            try:
                results = dra_allocate.allocate(pending, slices, node, others, classes=classes)
            except dra_allocate.AllocationError as e:
                # the scheduler aborts this pod's attempt with the error rather than trying other nodes
                return self._scheduler_error(pod, str(e))
            if results is None:
                continue
            stamp = now_iso()
            for claim, got in zip(pending, results, strict=True):
                claim.setdefault("status", {})["allocation"] = dra_allocate.allocation(got, node, stamp)
            for claim in claims:
                assert claim is not None
                ref = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"].get("uid", "")}
                reserved = claim.setdefault("status", {}).setdefault("reservedFor", [])
                if not self._reserved_for(claim, pod):
                    reserved.append(ref)
                self._save(claim)
            pod["spec"]["nodeName"] = node
            pod["status"] = {
                **{k: v for k, v in pod["status"].items() if k not in ("conditions", "message", "reason")},
                "phase": "Running",
                "startTime": pod["status"].get("startTime") or stamp,
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            }
            return self._save(pod)
        return self._unschedulable(pod, dra_allocate.UNSCHEDULABLE_MESSAGE, len(nodes) or len(self.list_nodes()))

    @staticmethod
    def _allocated_on(claim: dict, node: str) -> bool:
        terms = (((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}).get(
            "nodeSelectorTerms"
        )
        if not terms:
            return True
        return any(
            f.get("key") == "metadata.name" and node in (f.get("values") or [])
            for t in terms
            for f in t.get("matchFields") or []
        )

    def _scheduler_error(self, pod: dict, error: str) -> dict:
        """A Filter plugin's error, as the scheduler records it: reason SchedulerError."""
        message = f'running "DynamicResources" filter plugin: {error}'
        pod["status"] = {
            **pod.get("status", {}),
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError", "message": message}],
        }
        return self._save(pod)

    def _unschedulable(self, pod: dict, why: str, nodes: int, prefilter: bool = False) -> dict:
        if prefilter:
            # as kube-scheduler 1.34 words a PreFilter rejection, DRA's PostFilter and preemption after it
            message = (
                f"0/{nodes} nodes are available: {why}. no new claims to deallocate, preemption: "
                f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
            )
        else:
            message = f"0/{nodes} nodes are available: {nodes} {why}."
        pod["status"] = {
            **pod.get("status", {}),
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        }
        return self._save(pod)


class TwinDeviceTaints:
    """Kubernetes' device taint eviction controller (pkg/controller/devicetainteviction): a pod using a
    claim allocated a device that a DeviceTaintRule taints NoExecute is deleted, unless the claim's
    result tolerates the taint (admin access is an observer, not a use, and is left); then the
    resourceclaim controller's part: the pod leaves its claims' reservedFor, a claim reserved for no
    pod is deallocated, and a claim made for the pod from a template is deleted with it."""

    def _device_taint_eviction(self, rule: dict) -> bool:
        spec = rule.get("spec") or {}
        taint, sel = spec.get("taint") or {}, spec.get("deviceSelector") or {}
        if taint.get("effect") != "NoExecute" or not sel:
            return False
        evicted = False
        for row in TwinObject.objects.filter(kind="ResourceClaim").order_by("id"):
            claim = row.body
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
            if not any(_tainted(r, sel, taint) for r in results):
                continue
            ns = claim["metadata"]["namespace"]
            for ref in list((claim.get("status") or {}).get("reservedFor") or []):
                if ref.get("resource") == "pods" and self._evict_claim_pod(ns, ref.get("name", "")):
                    evicted = True
        return evicted

    def _evict_claim_pod(self, ns: str, name: str) -> bool:
        try:
            pod = self._get("Pod", name, ns)
        except NotFound:
            return False
        self._delete_row("Pod", name, ns)
        for row in TwinObject.objects.filter(kind="ResourceClaim", namespace=ns).order_by("id"):
            claim = row.body
            owners = (claim.get("metadata") or {}).get("ownerReferences") or []
            if any(o.get("kind") == "Pod" and o.get("name") == name for o in owners):
                self._delete_row("ResourceClaim", claim["metadata"]["name"], ns)
                continue
            status = claim.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if r.get("name") != name]
            if reserved == (status.get("reservedFor") or []):
                continue
            status["reservedFor"] = reserved
            if not reserved:
                status.pop("reservedFor", None)
                status.pop("allocation", None)
            claim["status"] = status
            self._save(claim)
        return bool(pod)


def _tainted(result: dict, sel: dict, taint: dict) -> bool:
    """Whether a claim's allocation result is a device the rule's selector names, not tolerated."""
    if result.get("adminAccess") is True:
        return False
    if any(sel.get(k) is not None and sel[k] != result.get(k) for k in ("driver", "pool", "device")):
        return False
    return not any(toleration_matches(taint, t) for t in result.get("tolerations") or [])


class TwinControllers(TwinClaimScheduling, TwinDeviceTaints):
    """The simulated controllers, run by the API's writes for what they touched."""

    # --- kube-controller-manager's resource quota controller -----------------------
    def _quota_status(self, quota: dict) -> dict:
        """What the quota controller writes in ``quota``'s status now (quotausage.py): hard
        as the spec says, used measured from the namespace's pods and claims."""
        ns = quota["metadata"].get("namespace", "default")
        return quotausage.quota_status(quota, self._list("Pod", ns), datetime.now(UTC), self._list("ResourceClaim", ns))

    def _usage_changed(self, namespace: str) -> None:
        """A pod or a claim of ``namespace`` changed: each of its quotas whose use moved is
        written again (the controller's replenishment), at once, or at the end of a load."""
        deferred = getattr(_quota_sync, "namespaces", None)
        if deferred is not None:
            deferred.add(namespace)
            return
        for quota in self._list("ResourceQuota", namespace):
            status = self._quota_status(quota)
            if status != quota.get("status"):
                quota["status"] = status
                self._save_row(quota)

    def _sync_quotas_after_load(self) -> None:
        """Every quota's status as the controller writes it once it has listed the cluster."""
        _quota_sync.namespaces = None
        for namespace in sorted(
            set(TwinObject.objects.filter(kind="ResourceQuota").values_list("namespace", flat=True))
        ):
            for quota in self._list("ResourceQuota", namespace):
                quota["status"] = self._quota_status(quota)
                self._save_row(quota)

    # --- the disruption controller, as the Eviction API asks it -----------------
    def _eviction_refusal(self, pod, pdbs) -> EvictionRefusal | None:
        """The Eviction API's decision, each guarding budget with the status the disruption
        controller would give it now (the twin runs that controller on demand; an evicted pod's
        row goes at once, so no eviction is left to remember in status.disruptedPods)."""
        guarding = [dict(b, status=self.pdb_status(b)) for b in pdbs_for(pod, pdbs)]
        return eviction_refusal(pod, guarding)

    def pdb_status(self, pdb) -> dict:
        """What the disruption controller would write in this budget's status now."""
        namespace = pdb["metadata"]["namespace"]
        pods = self.list_pods(namespace=namespace)
        return pdb_status(pdb, pods, self._workloads(namespace, pods))

    def _workloads(self, namespace, pods) -> list[dict]:
        """The objects the pods' owner references may lead to (ReplicaSet -> Deployment)."""
        kinds = {"ReplicationController", "ReplicaSet", "Deployment", "StatefulSet"}
        kinds |= {ref["kind"] for ref in filter(None, map(controller_of, pods))}
        return list(TwinObject.objects.filter(namespace=namespace, kind__in=kinds).values_list("body", flat=True))

    # --- the GPU Operator's mig-manager ----------------------------------------
    def _mig_manager(self, node: str) -> dict:
        """What mig-manager does when a node's nvidia.com/mig.config changes, on a node where
        the operator runs it (nvidia.com/gpu.deploy.mig-manager=true): state ``pending``, then
        the GPUs repartitioned and the device plugin restarted, then ``success``; ``failed``
        (GPUs unchanged) for a config name it does not know or a layout a GPU cannot hold."""
        body = self._get("Node", node)
        if (body["metadata"].get("labels") or {}).get(MIG_MANAGER_DEPLOY_LABEL) != "true":
            return body
        self._set_mig_state(body, "pending")
        state = self._reconfigure_migs(node)
        return self._set_mig_state(self._get("Node", node), state)

    def _mig_manager_daemonset(self, node: str, labels: dict) -> None:
        """The GPU Operator's mig-manager DaemonSet selects nvidia.com/gpu.deploy.mig-manager=true:
        on a node labelled otherwise, its controller deletes the pod it ran there."""
        if labels.get(MIG_MANAGER_DEPLOY_LABEL) == "true":
            return
        for row in TwinObject.objects.filter(kind="Pod", namespace=GPU_OPERATOR_NAMESPACE, node_name=node):
            if projection.is_mig_manager_pod(row.body):
                self._delete_row("Pod", row.name, GPU_OPERATOR_NAMESPACE)

    def _set_mig_state(self, body: dict, state: str) -> dict:
        body["metadata"].setdefault("labels", {})[MIG_CONFIG_STATE_LABEL] = state
        return self._save(body)

    def _reconfigure_migs(self, node: str) -> str:
        """Repartition the node's GPUs as its mig.config label says; the state it ends in."""
        body = self._get("Node", node)
        labels = body["metadata"].get("labels") or {}
        hw = TwinHardware.objects.filter(node=node).first()
        try:
            name = mig_parted_configmap(self.list_cluster_policies())
            cm = self._get("ConfigMap", name, GPU_OPERATOR_NAMESPACE)
            configs = migparted.parse((cm.get("data") or {}).get(MIG_PARTED_CONFIG_KEY))
        except (NotFound, migparted.MigPartedError):
            return "failed"
        gpus, _why = migparted.layout(configs, labels.get(MIG_CONFIG_LABEL, ""), hw.gpus if hw else [])
        if gpus is None or hw is None:
            return "failed"
        hw.gpus = gpus
        hw.plugin_pod_uid = ""  # the device plugin restarts and reads the new MIG devices
        hw.save()
        if labels.get(GPU_NODE_LABEL):
            self._reconcile(nodes=[node])
        else:  # the GPU Operator's own device plugin (not simulated as a pod): its advertisement
            strategy = labels.get(MIG_STRATEGY_LABEL) or "mixed"
            advertised = dp.advertised_resources(gpus, {"flags": {"migStrategy": strategy}})
            body["status"] = dp.kubelet_status(body.get("status") or {}, advertised)
            self._save(body)
        return "success"

    # --- NVIDIA's DRA kubelet plugin (kept apart from the device plugin's controllers) ----
    def _dra_kubelet_plugin(self, node: str, before: dict, after: dict) -> None:
        """The DRA driver's kubelet plugin, run where the node is labelled for it
        (DRA_DRIVER_DEPLOY_LABEL=true, its DaemonSet's nodeSelector): started by the label, it
        publishes the node's pool from its GPUs (a new generation, the old slices replaced);
        stopped by the label's removal, its slices go (the kubelet wipes an unregistered
        driver's slices). The device plugin's resource is the device plugin's own business:
        it goes when that plugin stops serving the node (its labels), not here."""
        was = before.get(DRA_DRIVER_DEPLOY_LABEL) == "true"
        now = after.get(DRA_DRIVER_DEPLOY_LABEL) == "true"
        if was == now:
            return
        old = self._dra_slices_of(node)
        if now:
            hw = TwinHardware.objects.filter(node=node).first()
            if hw is None:
                return  # no GPU: the plugin publishes nothing
            uid = (self._get("Node", node).get("metadata") or {}).get("uid", "")
            generation = dra_publish.pool_generation(old, node) + 1
            fresh = dra_publish.resource_slices(node, hw.gpus, generation=generation, node_uid=uid)
            for body in fresh:
                self._save(body)
            keep = {b["metadata"]["name"] for b in fresh}
            old = [s for s in old if s["metadata"]["name"] not in keep]
        for s in old:
            self._delete_row("ResourceSlice", s["metadata"]["name"])

    def _dra_slices_of(self, node: str) -> list[dict]:
        return [
            body
            for body in TwinObject.objects.filter(kind="ResourceSlice").values_list("body", flat=True)
            if (body.get("spec") or {}).get("nodeName") == node
            and (body.get("spec") or {}).get("driver") == dra_publish.DRIVER
        ]

    # --- the simulated controllers ------------------------------------------
    def _reconcile(self, nodes: list[str] | None = None, *, loaded: dict[str, str] | None = None):
        """DaemonSet controller for brick-nvidia, then device plugin + kubelet. ``loaded``:
        the nodes were just loaded, their status as the scenario wrote it; per node, the
        config its running plugin read at start when that differs from the ConfigMap."""
        daemonsets = self.list_daemonsets(namespace=PLUGIN_NAMESPACE)
        node_rows = TwinObject.objects.filter(kind="Node")
        if nodes is not None:
            node_rows = node_rows.filter(name__in=nodes)
        hardware = {h.node: h for h in TwinHardware.objects.all() if nodes is None or h.node in nodes}
        plugin_pods, daemon_pods = {}, {}
        for row in TwinObject.objects.filter(kind="Pod", namespace=PLUGIN_NAMESPACE):
            owner = (row.body["metadata"].get("ownerReferences") or [{}])[0]
            if owner.get("kind") == "DaemonSet":
                into = daemon_pods if dp.is_mps_control_daemon(row.body) else plugin_pods
                into.setdefault(row.node_name, []).append(row.body)
        control_daemons = [ds for ds in daemonsets if dp.is_mps_control_daemon(ds)]
        for row in node_rows:
            node = row.body
            name = node["metadata"]["name"]
            wanted = None
            if (node["metadata"].get("labels") or {}).get(GPU_NODE_LABEL):
                wanted = dp.daemonset_for_node(node, daemonsets)
            tolerations = wanted["spec"]["template"]["spec"].get("tolerations") if wanted else None
            taints = (node.get("spec") or {}).get("taints")
            running = None
            for pod in plugin_pods.get(name, []):
                owner = pod["metadata"]["ownerReferences"][0]["name"]
                current_hash = pod["metadata"]["labels"].get("controller-revision-hash")
                # Like the DaemonSet controller: an untolerated NoSchedule taint stops new
                # pods but leaves a running one; only NoExecute evicts it.
                if (
                    wanted
                    and owner == wanted["metadata"]["name"]
                    and current_hash == _template_hash(wanted)
                    and tolerates([t for t in taints or [] if t.get("effect") == "NoExecute"], tolerations)
                ):
                    running = pod
                else:
                    self._delete_row("Pod", pod["metadata"]["name"], PLUGIN_NAMESPACE)
            if wanted and running is None and tolerates(taints, tolerations):
                running = self._start_plugin_pod(wanted, name)
            self._kubelet_sync(row, hardware.get(name), running, loaded=loaded)
            self._reconcile_control_daemon(node, control_daemons, daemon_pods.get(name, []))
        for ds in daemonsets:
            self._update_ds_status(ds)

    def _reconcile_control_daemon(self, node, control_daemons, pods):
        """NVIDIA's MPS control daemon, as the DaemonSet controller runs it: one pod on each node
        its nodeSelector (nvidia.com/mps.capable=true) picks and whose taints it tolerates."""
        labels = node["metadata"].get("labels") or {}
        taints = (node.get("spec") or {}).get("taints")
        for ds in control_daemons:
            spec = ds["spec"]["template"]["spec"]
            wanted = dp.matches_selector(labels, spec.get("nodeSelector")) and tolerates(
                taints, spec.get("tolerations")
            )
            mine = [p for p in pods if p["metadata"]["ownerReferences"][0]["name"] == ds["metadata"]["name"]]
            if wanted and not mine:
                self._start_plugin_pod(ds, node["metadata"]["name"])
            elif not wanted:
                for pod in mine:
                    self._delete_row("Pod", pod["metadata"]["name"], PLUGIN_NAMESPACE)

    def _start_plugin_pod(self, ds, node_name):
        tmpl = copy.deepcopy(ds["spec"]["template"])
        labels = {**(tmpl["metadata"].get("labels") or {}), "controller-revision-hash": _template_hash(ds)}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{ds['metadata']['name']}-{uuid.uuid4().hex[:5]}",
                "namespace": ds["metadata"]["namespace"],
                "labels": labels,
                "annotations": tmpl["metadata"].get("annotations") or {},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "controller": True,
                        "name": ds["metadata"]["name"],
                        "uid": ds["metadata"].get("uid", ""),
                    }
                ],
            },
            "spec": {**tmpl["spec"], "nodeName": node_name},
            "status": {"phase": "Running", "startTime": now_iso(), "conditions": [{"type": "Ready", "status": "True"}]},
        }
        return self._save(pod)

    def _kubelet_sync(
        self, node_row, hw: TwinHardware | None, plugin_pod: dict | None, *, loaded: dict[str, str] | None = None
    ):
        """kubelet's status sync with the node's device plugin. A plugin that starts, restarts
        or stops changes the node's GPU resources (deviceplugin.kubelet_status: what it no
        longer serves falls to 0); otherwise, and on the sync right after a load, the status is
        kept as it is and only what the plugin serves and the status lacks is written
        (deviceplugin.kubelet_status_registered)."""
        if hw is None or not (node_row.body["metadata"].get("labels") or {}).get(GPU_NODE_LABEL):
            return  # not a node the twin's plugin serves (e.g. GPU Operator convention)
        name = node_row.body["metadata"]["name"]
        if plugin_pod is None:
            advertised = None
            changed = bool(hw.plugin_pod_uid)  # a plugin was serving the node: it stopped
            hw.plugin_pod_uid, hw.advertised = "", None
        elif plugin_pod["metadata"]["uid"] != hw.plugin_pod_uid:
            # The plugin reads its config once, at start (a loaded one may have read another).
            if loaded is not None and name in loaded:
                config = loaded[name]
            else:
                ds = self._get("DaemonSet", plugin_pod["metadata"]["ownerReferences"][0]["name"], PLUGIN_NAMESPACE)
                try:
                    cm = self._get("ConfigMap", dp.config_map_name(ds), PLUGIN_NAMESPACE)
                    config = cm["data"].get(PLUGIN_CONFIG_KEY)
                except NotFound:
                    config = None
            advertised = dp.advertised_resources(hw.gpus, config)
            changed = True
            hw.plugin_pod_uid, hw.advertised = plugin_pod["metadata"]["uid"], advertised
            if dp.plugin_config_errors(config) or dp.mps_start_error(hw.gpus, config):
                self._crash_loop(plugin_pod)
        else:
            advertised, changed = hw.advertised, False
        hw.save()
        node = node_row.body
        if changed and loaded is None:
            new_status = dp.kubelet_status(node.get("status") or {}, advertised)
        else:
            new_status = dp.kubelet_status_registered(node.get("status") or {}, advertised)
        if new_status != node.get("status"):
            node["status"] = new_status
            self._save(node)

    def _crash_loop(self, pod):
        """The plugin exits at start (a config it refuses, or MPS it cannot give these GPUs):
        kubelet restarts its container with a back-off; the pod stays Running, never Ready."""
        containers = pod["spec"].get("containers") or [{}]
        pod["status"] = {
            **pod["status"],
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "ready": False,
                    "restartCount": 1,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off 10s restarting failed container={c.get('name', '')} "
                            f"pod={pod['metadata']['name']}",
                        }
                    },
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                }
                for c in containers
            ],
        }
        self._save(pod)

    def _plugin_pod_by_uid(self, uid):
        for pod in self.list_pods(namespace=PLUGIN_NAMESPACE):
            if pod["metadata"]["uid"] == uid:
                return pod
        return None

    def _update_ds_status(self, ds):
        name = ds["metadata"]["name"]
        ns = ds["metadata"]["namespace"]
        pods = [
            p
            for p in self.list_pods(namespace=ns)
            if (p["metadata"].get("ownerReferences") or [{}])[0].get("name") == name
        ]
        h = _template_hash(ds)
        updated = sum(1 for p in pods if p["metadata"]["labels"].get("controller-revision-hash") == h)
        ready = sum(
            1
            for p in pods
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        status = {
            "desiredNumberScheduled": len(pods),
            "currentNumberScheduled": len(pods),
            "updatedNumberScheduled": updated,
            "numberReady": ready,
            "numberAvailable": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        if ds.get("status") != status:
            ds["status"] = status
            self._save(ds)
