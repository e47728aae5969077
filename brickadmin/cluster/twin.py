"""The simulated cluster ("twin"): the gateway protocol over objects in the database.

It reproduces what the procedures depend on and nothing more:
- the DaemonSet controller places the brick-nvidia device-plugin pod on a node from
  its labels (nodeSelector) and taints (tolerations), and replaces pods whose
  template changed (rollout restart);
- the device plugin + kubelet (deviceplugin.py, shared with the lab's simulator)
  set capacity/allocatable from the config *as it was when the plugin pod started*,
  and never drop a vanished resource by themselves;
- drain honours PodDisruptionBudgets and skips DaemonSet and mirror pods; each eviction is
  decided as the API server's Eviction API decides, from the status the disruption
  controller would give the budget at that moment (vocabulary.py);
- a DaemonSet's spec.selector is immutable (422), as on a real API server.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
import time
import uuid
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import F

from . import deviceplugin as dp
from . import migparted
from .base import (
    DRA_CLUSTER_SCOPED,
    DRA_KINDS,
    WATCHED_KINDS,
    Conflict,
    DrainResult,
    Forbidden,
    Gone,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)
from .drain import pods_to_evict
from .models import TwinEvent, TwinHardware, TwinObject, TwinState
from .vocabulary import (
    GPU_OPERATOR_NAMESPACE,
    HOSTNAME_LABEL,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    MIG_PARTED_CONFIG_KEY,
    MIG_STRATEGY_LABEL,
    NVIDIA_PREFIX,
    PLUGIN_CONFIG_KEY,
    PLUGIN_NAMESPACE,
    QUOTA_LIMITS_PREFIX,
    RESTARTED_AT_ANNOTATION,
    UNSCHEDULABLE_TAINT_KEY,
    EvictionRefusal,
    SelectorError,
    controller_of,
    eviction_refusal,
    format_quantity,
    is_terminal,
    ksm_label,
    ksm_resource,
    mig_parted_configmap,
    parse_quantity,
    parse_selector_requirements,
    pdb_status,
    pdbs_for,
    pod_key,
    requirement_matches,
    split_selector_terms,
    tolerates,
)
from .vocabulary import GPU_TYPE_LABEL as GPU_NODE_LABEL

UNSCHEDULABLE_TAINT = {"key": UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}

API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "Namespace": "v1",
    "ConfigMap": "v1",
    "ResourceQuota": "v1",
    "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "Job": "batch/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "ServiceAccount": "v1",
    "LimitRange": "v1",
    "Lease": "coordination.k8s.io/v1",
    **DRA_KINDS,
}
# The event log keeps about this many events (pruned every PRUNE_EVERY writes); a watch
# from an older version gets 410 Gone, as after an etcd compaction.
EVENT_LOG_KEEP = 20_000
PRUNE_EVERY = 500
CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass", "ClusterPolicy", *DRA_CLUSTER_SCOPED}


def _bound_idle_in_transaction() -> None:
    """A Lease write of a candidate paused inside its transaction must not hold the version
    counter's lock (every twin write, the other candidate's Lease too) for good: PostgreSQL
    ends the session after 10 s idle in it (an API server holds no lock for a paused client)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL idle_in_transaction_session_timeout = 10000")


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _field(obj: dict, path: str):
    cur = obj
    for part in path.split("."):
        cur = (cur or {}).get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_selector_matches(obj: dict, selector: str | None) -> bool:
    for term in split_selector_terms(selector or ""):
        term = term.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if _field(obj, key.strip()) != value.strip():
                return False
    return True


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


def _template_hash(ds: dict) -> str:
    raw = json.dumps(ds["spec"]["template"], sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:10]


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


class TwinGateway:
    """The gateway over the twin tables. Every write runs the simulated controllers
    for what it touched, inside one transaction, and bumps the generation."""

    name = "twin"

    # --- storage helpers ----------------------------------------------------
    def _rows(self, kind, namespace=None):
        qs = TwinObject.objects.filter(kind=kind)
        if namespace:
            qs = qs.filter(namespace=namespace)
        return qs

    def _list(self, kind, namespace=None, label_selector=None, field_selector=None, qs=None):
        qs = qs if qs is not None else self._rows(kind, namespace)
        try:  # read once, refused as the API server refuses it
            wanted = parse_selector_requirements(label_selector)
        except SelectorError as exc:
            raise PermanentClusterError(str(exc), status=400, reason="BadRequest") from exc
        out = []
        for body in qs.order_by("namespace", "name").values_list("body", flat=True):
            labels = body["metadata"].get("labels") or {}
            if not all(requirement_matches(r, labels) for r in wanted):
                continue
            if field_selector and not field_selector_matches(body, field_selector):
                continue
            out.append(body)
        return out

    def _get(self, kind, name, namespace=""):
        try:
            return TwinObject.objects.get(kind=kind, namespace=namespace or "", name=name).body
        except TwinObject.DoesNotExist:
            ns = f" in namespace {namespace}" if namespace else ""
            raise NotFound(f'{kind.lower()}s "{name}" not found{ns}', status=404, reason="NotFound") from None

    def _save(self, body: dict) -> dict:
        kind = body["kind"]
        meta = body.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        body.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
        namespace = "" if kind in CLUSTER_SCOPED else meta.get("namespace", "default")
        if kind not in CLUSTER_SCOPED:
            meta["namespace"] = namespace
        node_name = (body.get("spec") or {}).get("nodeName", "") if kind == "Pod" else ""
        holds_gpu = kind == "Pod" and not is_terminal(body) and bool(dp.pod_gpu_requests(body))
        _, created = TwinObject.objects.update_or_create(
            kind=kind,
            namespace=namespace,
            name=meta["name"],
            defaults={"body": body, "node_name": node_name or "", "holds_gpu": holds_gpu},
        )
        self._record(rv, TwinEvent.ADDED if created else TwinEvent.MODIFIED, kind, namespace, meta["name"], body)
        return body

    def _delete_row(self, kind, name, namespace=""):
        self._delete_rows(TwinObject.objects.filter(kind=kind, namespace=namespace or "", name=name))

    def _delete_rows(self, qs):
        """Delete rows, each with its DELETED event (the object as it was, at a new version)."""
        rows = list(qs.values_list("pk", "kind", "namespace", "name", "body"))
        for _pk, kind, namespace, name, body in rows:
            rv = self._next_rv()
            body["metadata"]["resourceVersion"] = str(rv)
            self._record(rv, TwinEvent.DELETED, kind, namespace, name, body)
        if rows:
            TwinObject.objects.filter(pk__in=[r[0] for r in rows]).delete()

    # --- the event log (what a watch delivers) --------------------------------
    @staticmethod
    def _next_rv() -> int:
        """The next resourceVersion. The UPDATE locks the one TwinState row until the
        transaction commits, so versions are committed in order: a watcher that has seen
        version N has seen every version below N."""
        if not TwinState.objects.filter(pk=1).update(last_rv=F("last_rv") + 1):
            TwinState.objects.get_or_create(pk=1)
            TwinState.objects.filter(pk=1).update(last_rv=F("last_rv") + 1)
        return TwinState.objects.filter(pk=1).values_list("last_rv", flat=True).get()

    @staticmethod
    def _record(rv: int, type_: str, kind: str, namespace: str, name: str, body: dict) -> None:
        TwinEvent.objects.create(id=rv, kind=kind, namespace=namespace, name=name, type=type_, body=body)
        if rv % PRUNE_EVERY == 0 and rv > EVENT_LOG_KEEP:
            TwinGateway._compact(rv - EVENT_LOG_KEEP)

    @staticmethod
    def _compact(upto: int) -> None:
        """Forget the events up to ``upto`` (etcd compaction): watches from before it get Gone."""
        TwinEvent.objects.filter(id__lte=upto).delete()
        TwinState.objects.filter(pk=1, compacted_rv__lt=upto).update(compacted_rv=upto)

    @staticmethod
    def resource_version() -> int:
        return TwinState.objects.filter(pk=1).values_list("last_rv", flat=True).first() or 0

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        """Every object of ``kind`` and the version the list reflects (at least). The
        version is read first: a change committed in between is in the list and replayed
        by the watch from that version, which converges (events carry whole objects).
        ``worth`` is not needed: the twin's objects are decoded already."""
        if kind not in WATCHED_KINDS:
            raise PermanentClusterError(f"{kind} is not a watched kind", reason="Invalid")
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
        return TwinWatch(kind, namespace, int(resource_version or 0), timeout_seconds, poll_seconds)

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

    def _bump(self):
        TwinState.objects.update_or_create(pk=1, defaults={"version": uuid.uuid4().hex})

    @staticmethod
    def version() -> str:
        return TwinState.objects.filter(pk=1).values_list("version", flat=True).first() or ""

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
        try:
            current = self._get(kind, meta["name"], ns)
        except NotFound:
            current = None
        if kind == "ResourceQuota":
            self._get("Namespace", ns)
            self._validate_quota(meta["name"], manifest.get("spec") or {})
            hard = _canonical_hard((manifest.get("spec") or {}).get("hard") or {})
            manifest["spec"]["hard"] = hard
            manifest["status"] = {"hard": hard, "used": {k: "0" for k in hard}}
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
                "status": {"hard": hard, "used": {k: "0" for k in hard}},
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
        self._reconcile()
        for node, config in (plugin_configs or {}).items():
            hw = TwinHardware.objects.get(node=node)
            if hw.plugin_pod_uid:
                hw.advertised = dp.advertised_resources(hw.gpus, config)
                hw.save()
                row = TwinObject.objects.get(kind="Node", name=node)
                pod = self._plugin_pod_by_uid(hw.plugin_pod_uid)
                if pod is not None and dp.plugin_config_errors(config):
                    self._crash_loop(pod)
                self._kubelet_sync(row, hw, pod)
        self._bump()

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

    # --- the simulated controllers ------------------------------------------
    def _reconcile(self, nodes: list[str] | None = None):
        """DaemonSet controller for brick-nvidia, then device plugin + kubelet."""
        daemonsets = self.list_daemonsets(namespace=PLUGIN_NAMESPACE)
        node_rows = TwinObject.objects.filter(kind="Node")
        if nodes is not None:
            node_rows = node_rows.filter(name__in=nodes)
        hardware = {h.node: h for h in TwinHardware.objects.all() if nodes is None or h.node in nodes}
        plugin_pods = {}
        for row in TwinObject.objects.filter(kind="Pod", namespace=PLUGIN_NAMESPACE):
            owner = (row.body["metadata"].get("ownerReferences") or [{}])[0]
            if owner.get("kind") == "DaemonSet":
                plugin_pods.setdefault(row.node_name, []).append(row.body)
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
            self._kubelet_sync(row, hardware.get(name), running)
        for ds in daemonsets:
            self._update_ds_status(ds)

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

    def _kubelet_sync(self, node_row, hw: TwinHardware | None, plugin_pod: dict | None):
        if hw is None or not (node_row.body["metadata"].get("labels") or {}).get(GPU_NODE_LABEL):
            return  # not a node the twin's plugin serves (e.g. GPU Operator convention)
        if plugin_pod is None:
            advertised = None
            hw.plugin_pod_uid, hw.advertised = "", None
        elif plugin_pod["metadata"]["uid"] != hw.plugin_pod_uid:
            # The plugin reads its config once, at start.
            ds = self._get("DaemonSet", plugin_pod["metadata"]["ownerReferences"][0]["name"], PLUGIN_NAMESPACE)
            cm_name = dp.config_map_name(ds)
            try:
                config = self._get("ConfigMap", cm_name, PLUGIN_NAMESPACE)["data"].get(PLUGIN_CONFIG_KEY)
            except NotFound:
                config = None
            advertised = dp.advertised_resources(hw.gpus, config)
            hw.plugin_pod_uid, hw.advertised = plugin_pod["metadata"]["uid"], advertised
            if dp.plugin_config_errors(config):
                self._crash_loop(plugin_pod)
        else:
            advertised = hw.advertised
        hw.save()
        node = node_row.body
        new_status = dp.kubelet_status(node.get("status") or {}, advertised)
        if new_status != node.get("status"):
            node["status"] = new_status
            self._save(node)

    def _crash_loop(self, pod):
        """The plugin exits at start (a config it refuses): kubelet restarts its container
        with a back-off; the pod stays Running, never Ready."""
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


class TwinWatch:
    """A watch on the twin: polls the event log for ``kind`` after a version. Ends after
    ``timeout_seconds`` (0: after the events pending now), or when closed; raises Gone when
    the version was compacted away. Sends a BOOKMARK when the log moved on only for
    other kinds, so an idle watch's version stays recent."""

    def __init__(self, kind, namespace, rv, timeout_seconds, poll_seconds):
        self.kind, self.namespace, self.rv = kind, namespace, rv
        self.timeout, self.poll = timeout_seconds, poll_seconds
        self._closed = threading.Event()

    def close(self):
        self._closed.set()

    def _pending(self):
        last, compacted = TwinState.objects.filter(pk=1).values_list("last_rv", "compacted_rv").first() or (0, 0)
        if self.rv < compacted:
            raise Gone(f"too old resource version: {self.rv} ({compacted})", status=410, reason="Expired")
        qs = TwinEvent.objects.filter(kind=self.kind, id__gt=self.rv, id__lte=last)
        if self.namespace:
            qs = qs.filter(namespace=self.namespace)
        events = list(qs.order_by("id").values_list("id", "type", "body")[:1000])
        return last, events

    def __iter__(self):
        deadline = time.monotonic() + self.timeout
        bookmarked = self.rv
        while not self._closed.is_set():
            last, events = self._pending()
            for rv, type_, body in events:
                self.rv = rv
                yield {"type": type_, "object": body}
            if len(events) == 1000:
                continue
            if last > self.rv and last > bookmarked:  # only other kinds' events since
                self.rv = bookmarked = last
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": self.kind,
                        "apiVersion": WATCHED_KINDS[self.kind],
                        "metadata": {"resourceVersion": str(last)},
                    },
                }
            if time.monotonic() >= deadline:
                return
            self._closed.wait(self.poll)
