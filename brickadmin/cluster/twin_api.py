"""The twin's API: the gateway's methods, answered as the API server answers them.

Reads list and get the stored objects; writes validate as the API server does (422, 409,
400), store, run the controllers for what they touched, inside one transaction, and bump
the twin's version.
"""

from __future__ import annotations

import copy
import re
import time
import uuid

from django.conf import settings
from django.db import connection, transaction

from . import deviceplugin as dp
from .base import (
    DRA_KINDS,
    KUEUE_CRD,
    KUEUE_KINDS,
    WATCHED_KINDS,
    Conflict,
    DrainResult,
    Forbidden,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)
from .drain import pods_to_evict
from .models import TwinHardware, TwinObject, TwinState
from .twin_store import CLUSTER_SCOPED, TwinWatch, _quota_sync, now_iso
from .vocabulary import (
    HOSTNAME_LABEL,
    MIG_CONFIG_LABEL,
    NVIDIA_PREFIX,
    QUOTA_LIMITS_PREFIX,
    RESTARTED_AT_ANNOTATION,
    UNSCHEDULABLE_TAINT_KEY,
    format_quantity,
    ksm_label,
    ksm_resource,
    parse_quantity,
    pod_key,
)

UNSCHEDULABLE_TAINT = {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}


def _bound_idle_in_transaction() -> None:
    """A Lease write of a candidate paused inside its transaction must not hold the version
    counter's lock (every twin write, the other candidate's Lease too) for good: PostgreSQL
    ends the session after 10 s idle in it (an API server holds no lock for a paused client)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL idle_in_transaction_session_timeout = 10000")


_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _validate_labels(kind: str, name: str, labels: dict) -> None:
    """The API server's 422 for an invalid object name or label value (namespaces)."""
    if kind == "Namespace" and (len(name) > 63 or not _DNS1123_LABEL_RE.match(name)):
        raise PermanentClusterError(
            f'Namespace "{name}" is invalid: metadata.name: Invalid value: "{name}": '
            "a lowercase RFC 1123 label must consist of lower case alphanumeric "
            "characters or '-'",
            status=422,
            reason="Invalid",
        )
    for value in (labels or {}).values():
        value = str(value)
        if len(value) > 63 or not _LABEL_VALUE_RE.match(value):
            raise PermanentClusterError(
                f'{kind} "{name}" is invalid: metadata.labels: Invalid value: "{value}": a valid label must be '
                "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character",
                status=422,
                reason="Invalid",
            )


def _canonical_hard(hard: dict) -> dict[str, str]:
    """A quota's amounts as the API server stores them: canonical ("1000" reads back "1k")."""
    return {k: format_quantity(str(v)) for k, v in hard.items()}


def _prom_labels(labels: dict[str, str]) -> str:
    """{k="v",...} in Prometheus' text format (backslash, quote and newline escaped)."""
    esc = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n"}
    return "{" + ",".join(f'{k}="{str(v).translate(esc)}"' for k, v in labels.items()) + "}"


def _ksm_labels(node: dict) -> dict[str, str]:
    """A node's labels as kube-state-metrics puts them on kube_node_labels."""
    return {ksm_label(k): v for k, v in sorted(((node.get("metadata") or {}).get("labels") or {}).items())}


class TwinApi:
    """The gateway's methods over the store, each write running the controllers."""

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        """Every object of ``kind`` and the version the list reflects (at least). The
        version is read first: a change committed in between is in the list and replayed
        by the watch from that version, which converges (events carry whole objects).
        ``worth`` is not needed: the twin's objects are decoded already."""
        if kind not in WATCHED_KINDS:
            raise PermanentClusterError(f"{kind} is not a watched kind", reason="Invalid")
        self._served(kind)
        rv = self.resource_version()
        items = []
        for body in self._rows(kind, namespace).order_by("namespace", "name").values_list("body", flat=True):
            if keep is not None:
                body = keep(body)
                if body is None:
                    continue
            items.append(body)
        return items, str(rv)

    def watch(self, kind, namespace=None, *, resource_version, timeout_seconds=300, poll_seconds=0.2, worth=None):
        """Events after ``resource_version``, read from the event log (polled). With
        ``timeout_seconds=0``: the events pending now, then the stream ends. ``worth`` is
        for gateways that read bytes; the twin's events are objects already."""
        if kind not in WATCHED_KINDS:
            raise PermanentClusterError(f"{kind} is not a watched kind", reason="Invalid")
        self._served(kind)
        return TwinWatch(kind, namespace, int(resource_version or 0), timeout_seconds, poll_seconds)

    def _served(self, kind):
        """As the API server: 404 for a Kueue kind where Kueue is not served."""
        if kind in KUEUE_KINDS and not self.kueue_served():
            raise NotFound(f"the server could not find the requested resource ({kind})", status=404, reason="NotFound")

    # --- Leases (leader election) ------------------------------------------------
    def get_lease(self, namespace, name):
        return self._get("Lease", name, namespace)

    @transaction.atomic
    def create_lease(self, namespace, body):
        body = copy.deepcopy(body)
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        body["metadata"]["namespace"] = namespace
        _bound_idle_in_transaction()
        # the version counter's row lock first: two candidates creating the Lease at once
        # take turns, and the second sees the first's (409, as the API server answers)
        TwinState.objects.get_or_create(pk=1)
        TwinState.objects.select_for_update().filter(pk=1).first()
        if TwinObject.objects.filter(kind="Lease", namespace=namespace, name=body["metadata"]["name"]).exists():
            raise Conflict(
                f'leases.coordination.k8s.io "{body["metadata"]["name"]}" already exists',
                status=409,
                reason="AlreadyExists",
            )
        return self._save(body)  # no _bump: a lease renewal is not a change of the GPU cluster

    @transaction.atomic
    def update_lease(self, namespace, body):
        body = copy.deepcopy(body)
        name = body["metadata"]["name"]
        _bound_idle_in_transaction()
        row = TwinObject.objects.select_for_update().filter(kind="Lease", namespace=namespace, name=name).first()
        if row is None:
            raise NotFound(f'leases.coordination.k8s.io "{name}" not found', status=404, reason="NotFound")
        if str(body["metadata"].get("resourceVersion") or "") != str(row.body["metadata"].get("resourceVersion")):
            raise Conflict(
                f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
                status=409,
                reason="Conflict",
            )
        body.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        body["metadata"] = {
            **row.body["metadata"],
            **{k: v for k, v in body["metadata"].items() if k in ("labels", "annotations")},
        }
        return self._save(body)

    # --- reads ---------------------------------------------------------------
    def list_nodes(self, label_selector=None):
        return self._list("Node", label_selector=label_selector)

    def get_node(self, name):
        return self._get("Node", name)

    def list_pods(self, namespace=None, label_selector=None, field_selector=None):
        qs = self._rows("Pod", namespace)
        m = re.search(r"spec\.nodeName=([^,]+)", field_selector or "")
        if m:
            qs = qs.filter(node_name=m.group(1))
        return self._list("Pod", label_selector=label_selector, field_selector=field_selector, qs=qs)

    def list_gpu_pods(self):
        """Non-terminal pods holding nvidia.com/* resources (the ledger's input)."""
        return list(TwinObject.objects.filter(kind="Pod", holds_gpu=True).values_list("body", flat=True))

    def list_resource_quotas(self, namespace=None):
        return self._list("ResourceQuota", namespace)

    def list_daemonsets(self, namespace=None, label_selector=None):
        return self._list("DaemonSet", namespace, label_selector)

    def get_daemonset(self, namespace, name):
        return self._get("DaemonSet", name, namespace)

    def list_configmaps(self, namespace=None, label_selector=None):
        return self._list("ConfigMap", namespace, label_selector)

    def get_configmap(self, namespace, name):
        return self._get("ConfigMap", name, namespace)

    def list_namespaces(self, label_selector=None):
        return self._list("Namespace", label_selector=label_selector)

    def list_pod_disruption_budgets(self, namespace=None):
        return self._list("PodDisruptionBudget", namespace)

    def list_jobs(self, namespace=None, label_selector=None):
        return self._list("Job", namespace, label_selector)

    def list_priority_classes(self):
        return self._list("PriorityClass")

    def list_cluster_policies(self):
        return self._list("ClusterPolicy")

    def gpu_devices(self):
        return {h.node: h.gpus for h in TwinHardware.objects.all()}

    def list_resource_slices(self, node=None):
        slices = self._list("ResourceSlice")
        return [s for s in slices if not node or (s.get("spec") or {}).get("nodeName") == node]

    def list_device_taint_rules(self):
        return self._list("DeviceTaintRule")

    # --- Kueue: served when BRICK_TWIN_KUEUE says so or a scenario holds its CRD ----------
    def kueue_served(self):
        if settings.BRICK_TWIN_KUEUE:
            return True
        return TwinObject.objects.filter(kind="CustomResourceDefinition", namespace="", name=KUEUE_CRD).exists()

    def list_kueue(self, kind, namespace=None):
        if kind not in KUEUE_KINDS:
            raise PermanentClusterError(f"{kind} is not a Kueue kind", reason="Invalid")
        return self._list(kind, namespace) if self.kueue_served() else []

    def _kueue_write(self, kind, manifest=None):
        """As the API server: a Kueue kind is 404 where Kueue is not served; a ClusterQueue is
        validated as Kueue's webhook does (pkg/webhooks/clusterqueue_webhook.go)."""
        if not self.kueue_served():
            raise NotFound(f"the server could not find the requested resource ({kind})", status=404, reason="NotFound")
        if kind == "ClusterQueue" and manifest is not None:
            spec = manifest.get("spec") or {}
            for group in spec.get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    for r in flavor.get("resources") or []:
                        limited = "borrowingLimit" in r or "lendingLimit" in r
                        if limited and not spec.get("cohortName"):
                            raise PermanentClusterError(
                                "borrowingLimit and lendingLimit must be nil when cohort is empty", status=422
                            )
                        if "lendingLimit" in r and parse_quantity(r["lendingLimit"]) > parse_quantity(
                            r.get("nominalQuota") or "0"
                        ):
                            raise PermanentClusterError(
                                "lendingLimit: must be less than or equal to the nominalQuota", status=422
                            )

    @transaction.atomic
    def set_kueue_status(self, kind, name, status, namespace=None):
        """What Kueue's controller writes to a ClusterQueue's or LocalQueue's status (the twin runs no Kueue)."""
        body = self._get(kind, name, "" if kind in CLUSTER_SCOPED else namespace or "default")
        body["status"] = copy.deepcopy(status)
        self._save(body)
        self._bump()
        return body

    def exporter_page(self, now: float | None = None) -> str:
        """What the simulated cluster's exporters serve Prometheus (the demo scrapes it: the
        charts and idle findings then read Prometheus, as in production): dcgm-exporter's
        DCGM_FI_DEV_* series of its GPUs (pods placed on them as the lab's GPU simulator
        places them, dcgm_exporter.py) and the kube-state-metrics series brickadmin's
        queries and recording rules read (kube_node_labels, kube_node_status_allocatable of
        the nvidia.com/* resources, kube_resourcequota)."""
        from . import dcgm_exporter

        now = time.time() if now is None else now
        hardware = self.gpu_devices()
        nodes = self._list("Node")
        advertised = {
            n["metadata"]["name"]: {
                k: dp.quantity(v)
                for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()
                if k.startswith(NVIDIA_PREFIX)
            }
            for n in nodes
        }
        pods = self._list("Pod", qs=TwinObject.objects.filter(kind="Pod", holds_gpu=True))
        page = dcgm_exporter.page(hardware, dcgm_exporter.held_devices(hardware, pods, advertised), now)
        ksm = [
            "# TYPE kube_node_labels gauge",
            *(f"kube_node_labels{_prom_labels({'node': n['metadata']['name'], **_ksm_labels(n)})} 1" for n in nodes),
            "# TYPE kube_node_status_allocatable gauge",
            *(
                "kube_node_status_allocatable"
                + _prom_labels({"node": node, "resource": ksm_resource(res), "unit": "integer"})
                + f" {count}"
                for node, served in advertised.items()
                for res, count in sorted(served.items())
            ),
            "# TYPE kube_resourcequota gauge",
        ]
        for q in self._list("ResourceQuota"):
            status = q.get("status") or {}
            for type_ in ("hard", "used"):
                for res, qty in sorted((status.get(type_) or {}).items()):
                    try:
                        value = float(parse_quantity(str(qty)))
                    except ValueError:
                        continue
                    meta = q["metadata"]
                    labels = {
                        "namespace": meta["namespace"],
                        "resourcequota": meta["name"],
                        "resource": res,
                        "type": type_,
                    }
                    ksm.append(f"kube_resourcequota{_prom_labels(labels)} {value:g}")
        return page + "\n".join(ksm) + "\n"

    # --- writes --------------------------------------------------------------
    @transaction.atomic
    def cordon(self, node):
        self._set_unschedulable(node, True)

    @transaction.atomic
    def uncordon(self, node):
        self._set_unschedulable(node, False)

    def _set_unschedulable(self, node, value):
        body = self._get("Node", node)
        spec = body.setdefault("spec", {})
        if bool(spec.get("unschedulable")) == value:
            return
        # The node lifecycle controller mirrors spec.unschedulable as a taint.
        taints = [t for t in spec.get("taints") or [] if t.get("key") != UNSCHEDULABLE_TAINT["key"]]
        if value:
            spec["unschedulable"] = True
            taints.append(dict(UNSCHEDULABLE_TAINT, timeAdded=now_iso()))
        else:
            spec.pop("unschedulable", None)
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        self._save(body)
        self._bump()

    @transaction.atomic
    def drain(self, node, *, delete_emptydir_data=True, timeout_seconds=60):
        self._get("Node", node)
        result = DrainResult()
        pdbs = self.list_pod_disruption_budgets()
        pods = self.list_pods(field_selector=f"spec.nodeName={node}")
        for pod in pods_to_evict(self, pods, result, delete_emptydir_data=delete_emptydir_data):
            key = pod_key(pod)
            refusal = self._eviction_refusal(pod, pdbs)
            if refusal:
                result.blocked[key] = " ".join(filter(None, [refusal.message, refusal.cause]))
                continue
            self._delete_row("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
            result.evicted.append(key)
        result.done = not result.blocked
        if result.evicted:
            self._bump()
        return result

    @transaction.atomic
    def evict_pod(self, namespace, name):
        """POST .../pods/<name>/eviction: delete the pod unless the Eviction API would refuse
        (429 TooManyRequests with the API server's message, 403, or 500 for two budgets)."""
        pod = self._get("Pod", name, namespace)
        refusal = self._eviction_refusal(pod, self.list_pod_disruption_budgets(namespace))
        if refusal:
            text = " ".join(filter(None, [refusal.message, refusal.cause]))
            if refusal.status == 403:
                raise Forbidden(text, status=403, reason=refusal.reason)
            raise TransientClusterError(text, status=refusal.status, reason=refusal.reason)
        self._delete_row("Pod", name, namespace)
        self._bump()

    @transaction.atomic
    def label_node(self, node, labels):
        body = self._get("Node", node)
        current = body["metadata"].setdefault("labels", {})
        before = dict(current)
        for key, value in labels.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = str(value)
        if current != before:
            self._save(body)
            self._reconcile(nodes=[node])
            if current.get(MIG_CONFIG_LABEL) != before.get(MIG_CONFIG_LABEL):
                body = self._mig_manager(node)
            self._mig_manager_daemonset(node, current)
            self._dra_kubelet_plugin(node, before, current)
            self._bump()
        return body

    @transaction.atomic
    def remove_node_status_resources(self, node, resources):
        body = self._get("Node", node)
        status = body.setdefault("status", {})
        changed = False
        for section in ("capacity", "allocatable"):
            for name in resources:
                if name in (status.get(section) or {}):
                    del status[section][name]
                    changed = True
        if changed:
            self._save(body)
            self._reconcile(nodes=[node])  # kubelet re-adds what the plugin still serves
            self._bump()
        return body

    @transaction.atomic
    def apply(self, manifest, *, field_manager="brickadmin"):
        manifest = copy.deepcopy(manifest)
        kind = manifest["kind"]
        meta = manifest["metadata"]
        ns = "" if kind in CLUSTER_SCOPED else meta.get("namespace", "default")
        if kind in KUEUE_KINDS:
            self._kueue_write(kind, manifest)
        try:
            current = self._get(kind, meta["name"], ns)
        except NotFound:
            current = None
        if kind == "ResourceQuota":
            self._get("Namespace", ns)
            self._validate_quota(meta["name"], manifest.get("spec") or {})
            manifest["spec"]["hard"] = _canonical_hard((manifest.get("spec") or {}).get("hard") or {})
            manifest.pop("status", None)  # the quota controller's (twin_controllers.py), written on save
        if current is None:
            body = manifest
            if kind == "DaemonSet":
                body.setdefault("metadata", {})["generation"] = 1
        else:
            if kind == "DaemonSet" and current["spec"].get("selector") != manifest["spec"].get("selector"):
                raise PermanentClusterError(
                    f'DaemonSet.apps "{meta["name"]}" is invalid: spec.selector: Invalid value: field is immutable',
                    status=422,
                    reason="Invalid",
                )
            body = copy.deepcopy(current)
            for key, value in manifest.items():
                if key == "metadata":
                    for mkey in ("labels", "annotations"):
                        if mkey in value:
                            body["metadata"].setdefault(mkey, {}).update(value[mkey])
                elif key not in ("apiVersion", "kind", "status"):
                    body[key] = value
            if kind == "DaemonSet":
                # Keep a restartedAt annotation the apply does not mention, as SSA does
                # for fields owned by another manager (kubectl rollout restart).
                old_ann = current["spec"]["template"].get("metadata", {}).get("annotations") or {}
                restarted = old_ann.get(RESTARTED_AT_ANNOTATION)
                if restarted:
                    body["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {}).setdefault(
                        RESTARTED_AT_ANNOTATION, restarted
                    )
                if body["spec"] != current["spec"]:
                    body["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
            if body == current:
                return current
        body.setdefault("metadata", {}).setdefault("managedFields", [{"manager": field_manager, "operation": "Apply"}])
        self._save(body)
        if kind in ("DaemonSet", "Node"):
            self._reconcile(nodes=[meta["name"]] if kind == "Node" else None)
        self._bump()
        return body

    @transaction.atomic
    def delete(self, api_version, kind, name, namespace=None):
        ns = "" if kind in CLUSTER_SCOPED else (namespace or "default")
        if kind in KUEUE_KINDS:
            self._kueue_write(kind)
        self._get(kind, name, ns)
        self._delete_row(kind, name, ns)
        if kind == "Namespace":
            self._delete_rows(TwinObject.objects.filter(namespace=name))
        if kind == "DaemonSet":
            self._reconcile()  # its pods go: no DaemonSet wants them any more
        if kind == "Job":
            for pod in self.list_pods(namespace=ns, label_selector=f"job-name={name}"):
                self._delete_row("Pod", pod["metadata"]["name"], ns)
        self._bump()

    @transaction.atomic
    def apply_device_taint_rule(self, rule):
        body = self.apply({**rule, "apiVersion": DRA_KINDS["DeviceTaintRule"], "kind": "DeviceTaintRule"})
        if self._device_taint_eviction(body):
            self._bump()
        return body

    def delete_device_taint_rule(self, name):
        try:
            self.delete(DRA_KINDS["DeviceTaintRule"], "DeviceTaintRule", name)
        except NotFound:
            return

    @transaction.atomic
    def rollout_restart_daemonset(self, namespace, name):
        body = self._get("DaemonSet", name, namespace)
        tmeta = body["spec"]["template"].setdefault("metadata", {})
        tmeta.setdefault("annotations", {})[RESTARTED_AT_ANNOTATION] = now_iso() + f"#{uuid.uuid4().hex[:6]}"
        body["metadata"]["generation"] = int(body["metadata"].get("generation", 1)) + 1
        self._save(body)
        self._reconcile()
        self._bump()

    def daemonset_rollout_status(self, namespace, name):
        ds = self._get("DaemonSet", name, namespace)
        st = ds.get("status") or {}
        desired = int(st.get("desiredNumberScheduled", 0))
        updated = int(st.get("updatedNumberScheduled", 0))
        available = int(st.get("numberAvailable", 0))
        done = updated >= desired and available >= desired
        msg = (
            f'daemon set "{name}" successfully rolled out'
            if done
            else f'Waiting for daemon set "{name}" rollout to finish: '
            f"{updated} out of {desired} new pods have been updated..."
        )
        return RolloutStatus(done=done, message=msg, desired=desired, updated=updated, available=available)

    @transaction.atomic
    def create_namespace(self, name, labels):
        _validate_labels("Namespace", name, labels)
        return self._create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": dict(labels)},
                "status": {"phase": "Active"},
            }
        )

    @staticmethod
    def _validate_quota(name, spec):
        """What the API server refuses in a ResourceQuota spec (422): extended resources
        other than as ``requests.<name>``, and a pod-only scope (PriorityClass,
        Terminating, ...) over a standard resource that is not a pod count or cpu/memory."""
        hard = spec.get("hard") or {}
        for value in hard.values():
            try:
                format_quantity(str(value))
            except ValueError as e:
                raise PermanentClusterError(
                    f'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: {e}',
                    status=400,
                    reason="BadRequest",
                ) from e
        for key in hard:
            if key.startswith(QUOTA_LIMITS_PREFIX + NVIDIA_PREFIX) or (key.startswith(NVIDIA_PREFIX)):
                raise PermanentClusterError(
                    f'ResourceQuota "{name}" is invalid: spec.hard[{key}]: Invalid value: '
                    "must be a standard resource for quota",
                    status=422,
                    reason="Invalid",
                )
        scopes = list(spec.get("scopes") or []) + [
            e.get("scopeName") for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []
        ]
        pod_scoped = {"Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"}
        pod_resources = {"pods", "cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
        for scope in scopes:
            for key in hard:
                standard = "/" not in key or key.startswith("requests.hugepages") or key.startswith("kubernetes.io/")
                if scope in pod_scoped and standard and key not in pod_resources:
                    raise PermanentClusterError(
                        f'ResourceQuota "{name}" is invalid: spec.scopeSelector: Invalid value: '
                        "unsupported scope applied to resource",
                        status=422,
                        reason="Invalid",
                    )

    @transaction.atomic
    def create_resource_quota(self, namespace, name, hard):
        self._get("Namespace", namespace)
        self._validate_quota(name, {"hard": hard})
        hard = _canonical_hard(hard)
        return self._create(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"hard": hard},
            }
        )

    @transaction.atomic
    def create_priority_class(self, name, value, description="", preemption_policy="PreemptLowerPriority"):
        return self._create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": int(value),
                "description": description,
                "preemptionPolicy": preemption_policy,
            }
        )

    @transaction.atomic
    def create_job(self, namespace, manifest):
        self._get("Namespace", namespace)
        job = copy.deepcopy(manifest)
        job.setdefault("metadata", {})["namespace"] = namespace
        job["kind"] = "Job"
        job["status"] = {"active": 1, "startTime": now_iso()}
        created = self._create(job)
        # The Job controller's pod, placed where the nodeSelector says (the scheduler).
        tmpl = job["spec"]["template"]
        node = (tmpl["spec"].get("nodeSelector") or {}).get(HOSTNAME_LABEL, "")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-{uuid.uuid4().hex[:5]}",
                "namespace": namespace,
                "labels": {**(tmpl.get("metadata", {}).get("labels") or {}), "job-name": job["metadata"]["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": created["metadata"]["uid"],
                    }
                ],
            },
            "spec": {**tmpl["spec"], "nodeName": node},
            "status": {"phase": "Running" if node else "Pending", "startTime": now_iso()},
        }
        if tmpl["spec"].get("resourceClaims"):  # the scheduler binds it where its claims are allocated
            del pod["spec"]["nodeName"]
            if node:
                pod["spec"]["nodeSelector"] = {**(pod["spec"].get("nodeSelector") or {}), HOSTNAME_LABEL: node}
            self._schedule_claim_pod(self._save(pod))
        else:
            self._save(pod)
        self._bump()
        return created

    @transaction.atomic
    def set_job_status(self, namespace, name, status):
        """What the Job controller writes when a Job's pod ends (the twin has no controller)."""
        body = self._get("Job", name, namespace)
        body["status"] = copy.deepcopy(status)
        self._save(body)
        self._bump()
        return body

    def _create(self, body):
        kind = body["kind"]
        ns = "" if kind in CLUSTER_SCOPED else body["metadata"].get("namespace", "default")
        if TwinObject.objects.filter(kind=kind, namespace=ns, name=body["metadata"]["name"]).exists():
            raise Conflict(
                f'{kind.lower()}s "{body["metadata"]["name"]}" already exists', status=409, reason="AlreadyExists"
            )
        saved = self._save(body)
        self._bump()
        return saved

    # --- loading (management command) ---------------------------------------
    @transaction.atomic
    def load(self, objects: list[dict], hardware: dict[str, list[dict]], plugin_configs: dict[str, str] | None = None):
        """Replace the whole twin with these objects and physical GPUs. ``plugin_configs``
        gives, per node, the config its running plugin read at start when that differs
        from the ConfigMap (a rollout restart that was skipped)."""
        _quota_sync.namespaces = set()  # the quota controller runs once the cluster is written
        try:
            self._load(objects, hardware, plugin_configs)
        finally:
            _quota_sync.namespaces = None

    def _load(self, objects, hardware, plugin_configs):
        TwinObject.objects.all().delete()
        # A new cluster: rather than a DELETED event per old object, compact the log past
        # the replacement, so every watch started before it gets Gone and lists again.
        self._compact(self._next_rv())
        TwinHardware.objects.all().delete()
        TwinHardware.objects.bulk_create(TwinHardware(node=n, gpus=g) for n, g in hardware.items())
        for obj in objects:
            obj = copy.deepcopy(obj)
            if obj["kind"] == "Node" and (obj.get("spec") or {}).get("unschedulable"):
                taints = obj["spec"].setdefault("taints", [])
                if not any(t.get("key") == UNSCHEDULABLE_TAINT["key"] for t in taints):
                    taints.append(dict(UNSCHEDULABLE_TAINT))
            if obj["kind"] == "ResourceQuota":
                for part in (obj.get("spec") or {}, obj.get("status") or {}):
                    if part.get("hard"):
                        part["hard"] = _canonical_hard(part["hard"])
            self._save(obj)
        # the nodes' status as written, with what their plugins (each with the config it read) serve
        self._reconcile(loaded=dict(plugin_configs or {}))
        self._schedule_claim_pods()
        self._sync_quotas_after_load()
        self._bump()
