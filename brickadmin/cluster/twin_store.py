"""The twin's store: the cluster's objects as rows, and the event log a watch reads.

Each write gets the next resourceVersion and its event (ADDED, MODIFIED, DELETED) in the
same transaction; the log is compacted as etcd is, so a watch from before gets 410 Gone.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

from django.db.models import F

from . import deviceplugin as dp
from .base import (
    DRA_CLUSTER_SCOPED,
    DRA_KINDS,
    KUEUE_CLUSTER_SCOPED,
    KUEUE_KINDS,
    WATCHED_KINDS,
    Gone,
    NotFound,
    PermanentClusterError,
)
from .models import TwinEvent, TwinObject, TwinState
from .vocabulary import (
    SelectorError,
    field_terms_match,
    is_terminal,
    parse_field_selector,
    parse_selector_requirements,
    requirement_matches,
)

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
    **KUEUE_KINDS,
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
}
# The event log keeps about this many events (pruned every PRUNE_EVERY writes); a watch
# from an older version gets 410 Gone, as after an etcd compaction.
EVENT_LOG_KEEP = 20_000
PRUNE_EVERY = 500
CLUSTER_SCOPED = {
    "Node",
    "Namespace",
    "PriorityClass",
    "ClusterPolicy",
    "CustomResourceDefinition",
    *DRA_CLUSTER_SCOPED,
    *KUEUE_CLUSTER_SCOPED,
}


# The kinds whose writes move a namespace's quota use (the quota controller's evaluators).
USAGE_KINDS = frozenset({"Pod", "ResourceClaim"})
# While a load writes its objects: the namespaces whose quotas are brought up to date at its end
# (None: at each write).
_quota_sync = threading.local()


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _field(obj: dict, path: str):
    cur = obj
    for part in path.split("."):
        cur = (cur or {}).get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_selector_matches(obj: dict, selector: str | None) -> bool:
    """A field selector string as the API server applies it (fields.ParseSelector: commas and
    equals signs in a value escaped with a backslash); FieldSelectorError when it refuses it."""
    terms = parse_field_selector(selector)
    return field_terms_match({t.field: _field(obj, t.field) for t in terms}, terms)


class TwinStore:
    """The rows of the twin's objects and their event log: what the controllers and the
    API read and write."""

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
        """Write an object as the API server stores it, then run what a control plane does
        at once with it: a quota's status is the quota controller's, and a pod or a claim
        moves its namespace's quotas (twin_controllers.py)."""
        kind = body["kind"]
        if kind == "ResourceQuota" and getattr(_quota_sync, "namespaces", None) is None:
            body["status"] = self._quota_status(body)
        saved = self._save_row(body)
        if kind in USAGE_KINDS:
            self._usage_changed(saved["metadata"]["namespace"])
        return saved

    def _quota_status(self, quota: dict) -> dict:
        """The status the quota controller writes (twin_controllers.py plays it)."""
        return quota.get("status") or {}

    def _usage_changed(self, namespace: str) -> None:
        """A pod or a claim of ``namespace`` was written or deleted (twin_controllers.py)."""

    def _save_row(self, body: dict) -> dict:
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
        for namespace in sorted({r[2] for r in rows if r[1] in USAGE_KINDS}):
            self._usage_changed(namespace)

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
            TwinStore._compact(rv - EVENT_LOG_KEEP)

    @staticmethod
    def _compact(upto: int) -> None:
        """Forget the events up to ``upto`` (etcd compaction): watches from before it get Gone."""
        TwinEvent.objects.filter(id__lte=upto).delete()
        TwinState.objects.filter(pk=1, compacted_rv__lt=upto).update(compacted_rv=upto)

    @staticmethod
    def resource_version() -> int:
        return TwinState.objects.filter(pk=1).values_list("last_rv", flat=True).first() or 0

    def _bump(self):
        TwinState.objects.update_or_create(pk=1, defaults={"version": uuid.uuid4().hex})

    @staticmethod
    def version() -> str:
        return TwinState.objects.filter(pk=1).values_list("version", flat=True).first() or ""


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
