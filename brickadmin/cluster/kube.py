"""The real cluster gateway: the only module that imports the ``kubernetes`` client.

Everything goes over the API server's REST paths through the client's transport
(configuration, TLS, auth), and every object handed out is the JSON the API server
returned, parsed into plain dicts: no client model classes leak out. Lists page
through ``limit``/``continue`` (the watcher's lists are streamed where the API server
can); list items get ``apiVersion``/``kind`` filled in (the API server leaves them out
of list items; ``kubectl get -o yaml`` shows them).

Failures become the errors of :mod:`brickadmin.cluster.base`: 429, 5xx, timeouts and
connection failures are transient (``TransientClusterError``/``ClusterUnreachable``);
400, 401, 403, 404, 409, 422 are permanent (``Forbidden``, ``NotFound``, ``Conflict``, ...).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import threading
import time
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from .base import (
    DRA_KINDS,
    KUEUE_API_VERSION,
    KUEUE_KINDS,
    WATCHED_KINDS,
    ClusterError,
    ClusterUnreachable,
    Conflict,
    DrainResult,
    Forbidden,
    Gone,
    NotFound,
    PermanentClusterError,
    RolloutStatus,
    TransientClusterError,
)
from .deviceplugin import pod_gpu_requests
from .drain import pods_to_evict
from .vocabulary import (
    CLUSTER_POLICY_PATH,
    MIRROR_ANNOTATION,
    NVIDIA_PREFIX,
    QUOTA_LIMITS_PREFIX,
    QUOTA_REQUESTS_PREFIX,
    RESTARTED_AT_ANNOTATION,
    json_pointer_escape,
    pod_key,
)

# MIRROR_ANNOTATION is read from here too.
__all__ = [
    "INITIAL_EVENTS_END",
    "LEASES",
    "MIRROR_ANNOTATION",
    "RESTARTED_AT",
    "STREAM_LIST_SECONDS",
    "KubeGateway",
]

log = logging.getLogger(__name__)

RESTARTED_AT = RESTARTED_AT_ANNOTATION
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# a streaming list of 150,000 pods on a loaded API server takes minutes; the watcher closes it
# at the initial-events-end bookmark, so this only bounds a list that never finishes
STREAM_LIST_SECONDS = 1800

# kind -> (api prefix, plural, namespaced) for the kinds the gateway names itself;
# anything else handed to apply()/delete() is resolved through discovery.
_KNOWN = {
    ("v1", "Node"): ("/api/v1", "nodes", False),
    ("v1", "Pod"): ("/api/v1", "pods", True),
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps", True),
    ("v1", "ResourceQuota"): ("/api/v1", "resourcequotas", True),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("apps/v1", "DaemonSet"): ("/apis/apps/v1", "daemonsets", True),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments", True),
    ("batch/v1", "Job"): ("/apis/batch/v1", "jobs", True),
    ("policy/v1", "PodDisruptionBudget"): ("/apis/policy/v1", "poddisruptionbudgets", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    ("coordination.k8s.io/v1", "Lease"): ("/apis/coordination.k8s.io/v1", "leases", True),
    ("resource.k8s.io/v1", "ResourceSlice"): ("/apis/resource.k8s.io/v1", "resourceslices", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    ("resource.k8s.io/v1", "DeviceClass"): ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    ("resource.k8s.io/v1alpha3", "DeviceTaintRule"): ("/apis/resource.k8s.io/v1alpha3", "devicetaintrules", False),
}
LEASES = "/apis/coordination.k8s.io/v1"


def _now_rfc3339() -> str:
    # sub-second precision: two restarts within one second must still change the template
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_escape = json_pointer_escape


def _check_quota_keys(name: str, hard: dict) -> None:
    """The API server accepts ``nvidia.com/gpu`` or ``limits.nvidia.com/gpu`` as quota keys,
    but quota only enforces extended resources as ``requests.<name>``: such a quota would
    silently limit nothing. Refuse it the way the twin does (422, permanent)."""
    for key in hard:
        if key.startswith((NVIDIA_PREFIX, QUOTA_LIMITS_PREFIX + NVIDIA_PREFIX)):
            raise PermanentClusterError(
                f'ResourceQuota "{name}" is invalid: spec.hard[{key}]: extended resources are quota\'d '
                f"only as {QUOTA_REQUESTS_PREFIX}{key.split(NVIDIA_PREFIX, 1)[0].removeprefix(QUOTA_LIMITS_PREFIX)}"
                f"{NVIDIA_PREFIX}{key.split(NVIDIA_PREFIX, 1)[1]}",
                status=422,
                reason="Invalid",
            )


class KubeGateway:
    """:class:`brickadmin.cluster.base.ClusterGateway` over a real API server."""

    name = "kube"

    def __init__(
        self,
        kubeconfig: str | None = None,
        *,
        token: str | None = None,
        context: str | None = None,
        in_cluster: bool | None = None,
        request_timeout: float = 15,
        page_size: int = 250,
        stream_lists: bool = True,
    ):
        cfg = k8s_client.Configuration()
        if in_cluster is None:
            in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        try:
            if in_cluster:
                k8s_config.load_incluster_config(client_configuration=cfg)
            else:
                k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        except (k8s_config.ConfigException, OSError, TypeError, ValueError) as e:
            raise PermanentClusterError(f"cannot load cluster configuration: {e}") from e
        if token:
            # the kubeconfig loader installs a hook that re-reads its own token before every
            # request: drop it, or the kubeconfig's credentials silently win over this token
            cfg.refresh_api_key_hook = None
            cfg.api_key = {"BearerToken": f"Bearer {token}", "authorization": f"Bearer {token}"}
            cfg.api_key_prefix = {}
            cfg.cert_file = cfg.key_file = None  # authenticate as the token, not a client cert
        # one quick connect retry; read/status retries are ours to decide
        cfg.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0, backoff_factor=0.2)
        self.configuration = cfg
        self.api_client = k8s_client.ApiClient(cfg)
        self.request_timeout = request_timeout
        self.page_size = page_size
        self.stream_lists = stream_lists  # False once the API server refused a streaming list
        self._discovery: dict[tuple[str, str], tuple[str, str, bool]] = dict(_KNOWN)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<KubeGateway {self.configuration.host}>"

    # ------------------------------------------------------------------ transport
    def _request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body=None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        q = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        try:
            m, url, hdrs, b, post = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=q or None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            read_timeout = timeout or self.request_timeout
            # a dead address should fail fast (the pages show a banner), a slow answer may take longer
            resp = self.api_client.call_api(
                m,
                url,
                header_params=hdrs,
                body=b,
                post_params=post,
                _request_timeout=(min(3.0, read_timeout), read_timeout),
            )
            data = resp.read()
            status = resp.status
        except ApiException as e:  # raised by the REST layer for some statuses
            raise self._error(e.status or 0, e.body, method, path) from e
        except urllib3.exceptions.ReadTimeoutError as e:
            raise TransientClusterError(
                f"{method} {path}: timed out reading from the API server", reason="Timeout"
            ) from e
        except (
            urllib3.exceptions.MaxRetryError,
            urllib3.exceptions.NewConnectionError,
            urllib3.exceptions.ProtocolError,
            urllib3.exceptions.ConnectTimeoutError,
            urllib3.exceptions.SSLError,
            ConnectionError,
            OSError,
        ) as e:
            reason = getattr(e, "reason", None) or e
            if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
                raise TransientClusterError(f"{method} {path}: timed out", reason="Timeout") from e
            raise ClusterUnreachable(
                f"the Kubernetes API server at {self.configuration.host} did not answer: {reason}", reason="Unreachable"
            ) from e
        except urllib3.exceptions.HTTPError as e:
            raise TransientClusterError(f"{method} {path}: {e}") from e
        if not 200 <= status <= 299:
            raise self._error(status, data, method, path)
        if not data:
            return {}
        return json.loads(data)

    @staticmethod
    def _error(status: int, body, method: str, path: str) -> ClusterError:
        message, reason = "", ""
        try:
            st = json.loads(body) if body else {}
            message, reason = st.get("message", ""), st.get("reason", "")
        except (ValueError, TypeError):
            message = (body.decode(errors="replace") if isinstance(body, bytes) else str(body or ""))[:500]
        text = f"{method} {path}: {status} {reason or ''} {message}".strip()
        if status == 404:
            return NotFound(text, status=status, reason=reason or "NotFound")
        if status == 403:
            return Forbidden(text, status=status, reason=reason or "Forbidden")
        if status == 409:
            return Conflict(text, status=status, reason=reason or "Conflict")
        if status == 410:
            return Gone(text, status=status, reason=reason or "Expired")
        if status == 429 or status >= 500 or status in (408,):
            return TransientClusterError(text, status=status, reason=reason or "ServerError")
        if status == 0:
            return ClusterUnreachable(text, status=None, reason="Unreachable")
        return PermanentClusterError(text, status=status, reason=reason or "Invalid")

    def _list(self, path: str, *, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        return self._list_versioned(path, label_selector=label_selector, field_selector=field_selector)[0]

    def _list_versioned(
        self, path: str, *, label_selector: str | None = None, field_selector: str | None = None, keep=None
    ) -> tuple[list[dict], str]:
        """Every item (paged through limit/continue) and the list's resourceVersion (every
        page of one list is served from the same version). ``keep`` projects each item as
        its page arrives; None drops it."""
        items: list[dict] = []
        cont = None
        restarted = False
        while True:
            try:
                page = self._request(
                    "GET",
                    path,
                    query={
                        "labelSelector": label_selector,
                        "fieldSelector": field_selector,
                        "limit": self.page_size,
                        "continue": cont,
                    },
                )
            except PermanentClusterError as e:
                if e.status == 410 and cont and not restarted:  # continue token expired: start over once
                    items, cont, restarted = [], None, True
                    continue
                raise
            kind = (page.get("kind") or "").removesuffix("List")
            for it in page.get("items") or []:
                it.setdefault("apiVersion", page.get("apiVersion"))
                it.setdefault("kind", kind)
                if keep is not None:
                    it = keep(it)
                    if it is None:
                        continue
                items.append(it)
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    @staticmethod
    def _ns_path(prefix: str, plural: str, namespace: str | None, name: str | None = None) -> str:
        p = prefix + (f"/namespaces/{quote(namespace, safe='')}" if namespace else "") + f"/{plural}"
        return p + (f"/{quote(name, safe='')}" if name else "")

    def _resource(self, api_version: str, kind: str) -> tuple[str, str, bool]:
        key = (api_version, kind)
        if key in self._discovery:
            return self._discovery[key]
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        doc = self._request("GET", prefix)
        for r in doc.get("resources") or []:
            if r.get("kind") == kind and "/" not in r.get("name", ""):
                with self._lock:
                    self._discovery[key] = (prefix, r["name"], bool(r.get("namespaced")))
                return self._discovery[key]
        raise NotFound(f"the API server does not serve {kind} in {api_version}", status=404, reason="NotFound")

    def _path_for(self, api_version: str, kind: str, name: str | None, namespace: str | None) -> str:
        prefix, plural, namespaced = self._resource(api_version, kind)
        if namespaced and not namespace:
            namespace = "default"
        return self._ns_path(prefix, plural, namespace if namespaced else None, name)

    # ------------------------------------------------------------------ reads
    def list_nodes(self, label_selector: str | None = None) -> list[dict]:
        return self._list("/api/v1/nodes", label_selector=label_selector)

    def get_node(self, name: str) -> dict:
        return self._request("GET", f"/api/v1/nodes/{quote(name, safe='')}")

    def list_pods(
        self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict]:
        return self._list(
            self._ns_path("/api/v1", "pods", namespace), label_selector=label_selector, field_selector=field_selector
        )

    def list_gpu_pods(self) -> list[dict]:
        """Non-terminal pods holding nvidia.com/* resources (the ledger's input)."""
        return [
            p
            for p in self._list("/api/v1/pods", field_selector="status.phase!=Succeeded,status.phase!=Failed")
            if pod_gpu_requests(p)
        ]

    def get_pod(self, namespace: str, name: str) -> dict:
        return self._request("GET", self._ns_path("/api/v1", "pods", namespace, name))

    def list_resource_quotas(self, namespace: str | None = None) -> list[dict]:
        return self._list(self._ns_path("/api/v1", "resourcequotas", namespace))

    def list_daemonsets(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self._list(self._ns_path("/apis/apps/v1", "daemonsets", namespace), label_selector=label_selector)

    def get_daemonset(self, namespace: str, name: str) -> dict:
        return self._request("GET", self._ns_path("/apis/apps/v1", "daemonsets", namespace, name))

    def list_configmaps(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self._list(self._ns_path("/api/v1", "configmaps", namespace), label_selector=label_selector)

    def get_configmap(self, namespace: str, name: str) -> dict:
        return self._request("GET", self._ns_path("/api/v1", "configmaps", namespace, name))

    def list_namespaces(self, label_selector: str | None = None) -> list[dict]:
        return self._list("/api/v1/namespaces", label_selector=label_selector)

    def list_pod_disruption_budgets(self, namespace: str | None = None) -> list[dict]:
        return self._list(self._ns_path("/apis/policy/v1", "poddisruptionbudgets", namespace))

    def list_jobs(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self._list(self._ns_path("/apis/batch/v1", "jobs", namespace), label_selector=label_selector)

    def list_priority_classes(self) -> list[dict]:
        return self._list("/apis/scheduling.k8s.io/v1/priorityclasses")

    def list_cluster_policies(self) -> list[dict]:
        try:
            return self._list(CLUSTER_POLICY_PATH)
        except (NotFound, Forbidden):  # no GPU Operator (no CRD), or not allowed: the default applies
            return []

    def _dra_list(self, kind: str, field_selector: str | None = None) -> list[dict]:
        try:
            path = self._path_for(DRA_KINDS[kind], kind, None, None)
            return self._list(path, field_selector=field_selector)
        except (NotFound, Forbidden):  # no DRA served (or not this kind): none
            return []

    def list_resource_slices(self, node: str | None = None) -> list[dict]:
        return self._dra_list("ResourceSlice", f"spec.nodeName={node}" if node else None)

    def list_device_taint_rules(self) -> list[dict]:
        return self._dra_list("DeviceTaintRule")

    def gpu_devices(self) -> dict[str, list[dict]] | None:
        return None  # a real cluster's hardware is known from DCGM metrics (metrics.py)

    # ------------------------------------------------------------------ Kueue
    def kueue_served(self) -> bool:
        """Discovery: /apis/kueue.x-k8s.io/v1beta2 lists ClusterQueue (404 or 403: not served)."""
        try:
            self._resource(KUEUE_API_VERSION, "ClusterQueue")
        except (NotFound, Forbidden):
            return False
        return True

    def list_kueue(self, kind: str, namespace: str | None = None) -> list[dict]:
        if kind not in KUEUE_KINDS:
            raise PermanentClusterError(f"{kind} is not a Kueue kind", reason="Invalid")
        try:
            prefix, plural, namespaced = self._resource(KUEUE_API_VERSION, kind)
            return self._list(self._ns_path(prefix, plural, namespace if namespaced else None))
        except (NotFound, Forbidden):  # Kueue not installed, or not readable: none
            return []

    # ------------------------------------------------------------------ list-then-watch
    def _kind_path(self, kind: str, namespace: str | None) -> tuple[str, str]:
        api_version = WATCHED_KINDS.get(kind)
        if api_version is None:
            raise PermanentClusterError(f"{kind} is not a watched kind", reason="Invalid")
        prefix, plural, namespaced = self._resource(api_version, kind)
        return self._ns_path(prefix, plural, namespace if namespaced else None), api_version

    def list_with_version(
        self, kind: str, namespace: str | None = None, *, keep=None, worth=None
    ) -> tuple[list[dict], str]:
        """The watcher's list: streamed when the API server can (``_stream_list``), else paged."""
        path, api_version = self._kind_path(kind, namespace)
        if self.stream_lists:
            try:
                return self._stream_list(path, api_version, kind, keep, worth)
            except PermanentClusterError as e:
                if e.status not in (400, 422):  # 403, 404...: the paged list would fail the same way
                    raise
                # a server without the streaming list refuses its parameters (resourceVersionMatch
                # on a watch is invalid before v1.27, sendInitialEvents without the WatchList gate)
                log.info("the API server does not stream lists (%s); paging them", e)
                self.stream_lists = False
            except TransientClusterError as e:
                # The API server closes a watch whose reader falls behind its event buffer; while
                # a large list is still being sent, heavy churn does that. Pages have no buffer.
                log.info("%s; paging this list", e)
        return self._list_versioned(path, keep=keep)

    def _stream_list(self, path: str, api_version: str, kind: str, keep, worth) -> tuple[list[dict], str]:
        """Kubernetes' streaming list (``sendInitialEvents``, KEP-3157): a watch that first
        sends every current object as ADDED, then a bookmark annotated
        ``k8s.io/initial-events-end`` carrying the version they reflect. One request instead
        of a page per 250 objects, and each object is its own line, so ``worth`` skips the
        objects nobody keeps without decoding them (most pods request no GPU)."""
        query = [
            ("watch", "1"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(STREAM_LIST_SECONDS)),
        ]
        stream = self._open_watch(path, api_version, kind, query, worth, STREAM_LIST_SECONDS)
        items: dict[tuple[str, str], dict] = {}
        try:
            for ev in stream:
                type_, obj = ev.get("type"), ev.get("object") or {}
                meta = obj.get("metadata") or {}
                if type_ == "BOOKMARK":
                    if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                        return list(items.values()), str(meta.get("resourceVersion") or "")
                    continue
                if type_ == "SKIPPED":
                    continue
                key = (meta.get("namespace", ""), meta.get("name", ""))
                kept = None if type_ == "DELETED" else (keep(obj) if keep is not None else obj)
                if kept is None:
                    items.pop(key, None)
                else:
                    items[key] = kept
        finally:
            stream.close()
        raise TransientClusterError(
            f"GET {path}: the streaming list ended before all objects were sent", reason="StreamBroken"
        )

    def watch(
        self, kind: str, namespace: str | None = None, *, resource_version: str, timeout_seconds: int = 300, worth=None
    ) -> _KubeWatch:
        """A watch stream (``?watch=1``, bookmarks on, the server ends it after
        ``timeout_seconds``), read line by line. Opening it raises like any request
        (``Gone`` for 410); iterating raises ``Gone`` for an ERROR event with code 410.
        ``worth(line) -> bool`` (projection.worth_decoding): an event line it refuses is
        not decoded and comes through as ``SKIPPED`` with only its resourceVersion."""
        path, api_version = self._kind_path(kind, namespace)
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(int(timeout_seconds))),
        ]
        return self._open_watch(path, api_version, kind, query, worth, timeout_seconds)

    def _open_watch(
        self, path: str, api_version: str, kind: str, query: list, worth, timeout_seconds: float
    ) -> _KubeWatch:
        headers = {"Accept": "application/json"}
        method = "GET"
        try:
            m, url, hdrs, b, post = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=query,
                header_params=headers,
                auth_settings=["BearerToken"],
            )
            # the server closes the stream after timeout_seconds; a silent socket for much
            # longer than that (bookmarks come about every minute) is a dead connection
            resp = self.api_client.call_api(
                m, url, header_params=hdrs, body=b, post_params=post, _request_timeout=(3.0, timeout_seconds + 30)
            )
        except ApiException as e:
            raise self._error(e.status or 0, e.body, method, path) from e
        except urllib3.exceptions.HTTPError as e:
            raise self._transport_error(e, method, path) from e
        except OSError as e:
            raise self._transport_error(e, method, path) from e
        if not 200 <= resp.status <= 299:
            data = resp.read()
            raise self._error(resp.status, data, method, path)
        return _KubeWatch(self, resp.response, method, path, api_version, kind, worth)

    def _transport_error(self, e: Exception, method: str, path: str) -> ClusterError:
        if isinstance(e, urllib3.exceptions.ReadTimeoutError):
            return TransientClusterError(f"{method} {path}: timed out reading from the API server", reason="Timeout")
        if isinstance(e, urllib3.exceptions.ProtocolError) and not isinstance(
            getattr(e, "reason", None) or (e.args[1] if len(e.args) > 1 else None), ConnectionRefusedError
        ):
            return TransientClusterError(f"{method} {path}: the stream broke: {e}", reason="StreamBroken")
        reason = getattr(e, "reason", None) or e
        return ClusterUnreachable(
            f"the Kubernetes API server at {self.configuration.host} did not answer: {reason}", reason="Unreachable"
        )

    # ------------------------------------------------------------------ leases
    def _lease_path(self, namespace: str, name: str | None = None) -> str:
        return self._ns_path(LEASES, "leases", namespace, name)

    def get_lease(self, namespace: str, name: str) -> dict:
        return self._request("GET", self._lease_path(namespace, name))

    def create_lease(self, namespace: str, body: dict) -> dict:
        body = {**body, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
        return self._request("POST", self._lease_path(namespace), body=body)

    def update_lease(self, namespace: str, body: dict) -> dict:
        """PUT: the body's metadata.resourceVersion makes it conditional (409 Conflict)."""
        body = {**body, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
        return self._request("PUT", self._lease_path(namespace, body["metadata"]["name"]), body=body)

    def ping(self) -> dict:
        """The API server's version; raises ClusterUnreachable when it does not answer."""
        return self._request("GET", "/version", timeout=5)

    # ------------------------------------------------------------------ node writes
    def _patch_node(self, name: str, patch, content_type: str, subresource: str = "") -> dict:
        path = f"/api/v1/nodes/{quote(name, safe='')}" + (f"/{subresource}" if subresource else "")
        return self._request("PATCH", path, body=patch, content_type=content_type)

    def cordon(self, node: str) -> None:
        self._patch_node(node, {"spec": {"unschedulable": True}}, "application/strategic-merge-patch+json")

    def uncordon(self, node: str) -> None:
        self._patch_node(node, {"spec": {"unschedulable": None}}, "application/strategic-merge-patch+json")

    def label_node(self, node: str, labels: dict[str, str | None]) -> dict:
        """Set labels (overwrite); a ``None`` value removes the label."""
        return self._patch_node(node, {"metadata": {"labels": dict(labels)}}, "application/merge-patch+json")

    def remove_node_status_resources(self, node: str, resources: list[str]) -> dict:
        """JSON-patch ``remove`` of each resource from status.capacity and status.allocatable.

        Only paths that exist are removed, so removing what is already gone is a no-op.
        A ``test`` on resourceVersion guards against a concurrent kubelet update; on a
        conflict the node is read again and the patch rebuilt."""
        for attempt in range(5):
            obj = self.get_node(node)
            status = obj.get("status") or {}
            ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]}]
            for field in ("capacity", "allocatable"):
                for r in resources:
                    if r in (status.get(field) or {}):
                        ops.append({"op": "remove", "path": f"/status/{field}/{_escape(r)}"})
            if len(ops) == 1:
                return obj
            try:
                return self._patch_node(node, ops, "application/json-patch+json", "status")
            except (Conflict, PermanentClusterError) as e:
                # a failed "test" is 422 (or 409): someone wrote in between; read again
                if e.status in (409, 422) and attempt < 4:
                    time.sleep(0.2)
                    continue
                raise
        raise TransientClusterError(f"node {node} kept changing while its status was patched")

    # ------------------------------------------------------------------ drain
    def drain(self, node: str, *, delete_emptydir_data: bool = True, timeout_seconds: float = 60) -> DrainResult:
        """Cordon, then evict every pod on the node through the Eviction API.

        Like ``kubectl drain --ignore-daemonsets --force [--delete-emptydir-data]``:
        DaemonSet and mirror pods are skipped; pods with emptyDir volumes are evicted only
        when ``delete_emptydir_data``; evictions refused by a PodDisruptionBudget (429) are
        retried until ``timeout_seconds``; the call waits until evicted pods are gone.
        Completed (Succeeded/Failed) pods are deleted. ``blocked`` names what is left and why.
        """
        deadline = time.monotonic() + timeout_seconds
        self.cordon(node)
        result = DrainResult()
        pods = self.list_pods(field_selector=f"spec.nodeName={node}")
        going = pods_to_evict(self, pods, result, delete_emptydir_data=delete_emptydir_data)
        if result.blocked:  # as kubectl: a pod it may not delete stops the drain before any eviction
            return result
        pending: dict[str, dict] = {pod_key(p): p for p in going}

        to_evict = {k: p for k, p in pending.items() if not p["metadata"].get("deletionTimestamp")}
        waiting: dict[str, str] = {k: p["metadata"]["uid"] for k, p in pending.items()}
        while to_evict and time.monotonic() < deadline:
            for key in list(to_evict):
                ns, name = key.split("/", 1)
                body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
                try:
                    self._request("POST", self._ns_path("/api/v1", "pods", ns, name) + "/eviction", body=body)
                    result.evicted.append(key)
                    result.blocked.pop(key, None)
                    del to_evict[key]
                except NotFound:
                    del to_evict[key]  # gone already
                    waiting.pop(key, None)
                except TransientClusterError as e:
                    if e.status == 429:
                        result.blocked[key] = f"eviction refused by a PodDisruptionBudget: {e.message}"
                    else:
                        result.blocked[key] = f"eviction failed, retrying: {e.message}"
            if to_evict:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

        # wait for evicted pods to be gone (deleted, or replaced by a new pod with another uid)
        while waiting and time.monotonic() < deadline:
            for key, uid in list(waiting.items()):
                if key in to_evict:
                    continue
                ns, name = key.split("/", 1)
                try:
                    cur = self.get_pod(ns, name)
                    if cur["metadata"]["uid"] != uid:
                        del waiting[key]
                except NotFound:
                    del waiting[key]
            if [k for k in waiting if k not in to_evict]:
                time.sleep(0.5)
            else:
                break
        for key in waiting:
            if key not in result.blocked:
                result.blocked[key] = "evicted but still terminating at the timeout"
        result.done = not result.blocked and not waiting
        return result

    # ------------------------------------------------------------------ generic writes
    def apply(self, manifest: dict, *, field_manager: str = "brickadmin", force: bool = True) -> dict:
        """Server-side apply (``kubectl apply --server-side --force-conflicts``)."""
        md = manifest.get("metadata") or {}
        path = self._path_for(manifest["apiVersion"], manifest["kind"], md["name"], md.get("namespace"))
        return self._request(
            "PATCH",
            path,
            body=manifest,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": field_manager, "force": "true" if force else None},
        )

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete (background propagation); deleting what is already gone is a no-op."""
        path = self._path_for(api_version, kind, name, namespace)
        try:
            self._request("DELETE", path, body={"propagationPolicy": "Background"})
        except NotFound:
            return

    def apply_device_taint_rule(self, rule: dict) -> dict:
        return self.apply({**rule, "apiVersion": DRA_KINDS["DeviceTaintRule"], "kind": "DeviceTaintRule"})

    def delete_device_taint_rule(self, name: str) -> None:
        self.delete(DRA_KINDS["DeviceTaintRule"], "DeviceTaintRule", name)

    def rollout_restart_daemonset(self, namespace: str, name: str) -> None:
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: _now_rfc3339()}}}}}
        self._request(
            "PATCH",
            self._ns_path("/apis/apps/v1", "daemonsets", namespace, name),
            body=patch,
            content_type="application/strategic-merge-patch+json",
        )

    def daemonset_rollout_status(self, namespace: str, name: str) -> RolloutStatus:
        """The logic of ``kubectl rollout status daemonset`` (one look, no waiting)."""
        ds = self.get_daemonset(namespace, name)
        spec, st, md = ds.get("spec") or {}, ds.get("status") or {}, ds["metadata"]
        desired = int(st.get("desiredNumberScheduled") or 0)
        updated = int(st.get("updatedNumberScheduled") or 0)
        available = int(st.get("numberAvailable") or 0)
        if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") != "RollingUpdate":
            return RolloutStatus(
                False, "rollout status is only available for RollingUpdate strategy type", desired, updated, available
            )
        if int(md.get("generation") or 0) <= int(st.get("observedGeneration") or 0):
            if updated < desired:
                return RolloutStatus(
                    False,
                    f'Waiting for daemon set "{name}" rollout to finish: '
                    f"{updated} out of {desired} new pods have been updated...",
                    desired,
                    updated,
                    available,
                )
            if available < desired:
                return RolloutStatus(
                    False,
                    f'Waiting for daemon set "{name}" rollout to finish: '
                    f"{available} of {desired} updated pods are available...",
                    desired,
                    updated,
                    available,
                )
            return RolloutStatus(True, f'daemon set "{name}" successfully rolled out', desired, updated, available)
        return RolloutStatus(False, "Waiting for daemon set spec update to be observed...", desired, updated, available)

    def create_namespace(self, name: str, labels: dict[str, str]) -> dict:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
        return self._request("POST", "/api/v1/namespaces", body=body)

    def create_resource_quota(self, namespace: str, name: str, hard: dict[str, str]) -> dict:
        _check_quota_keys(name, hard)
        body = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"hard": {k: str(v) for k, v in hard.items()}},
        }
        return self._request("POST", self._ns_path("/api/v1", "resourcequotas", namespace), body=body)

    def create_priority_class(
        self, name: str, value: int, description: str = "", preemption_policy: str = "PreemptLowerPriority"
    ) -> dict:
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": int(value),
            "description": description,
            "preemptionPolicy": preemption_policy,
            "globalDefault": False,
        }
        return self._request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=body)

    def create_job(self, namespace: str, manifest: dict) -> dict:
        body = dict(manifest)
        body.setdefault("apiVersion", "batch/v1")
        body.setdefault("kind", "Job")
        body["metadata"] = {**(manifest.get("metadata") or {}), "namespace": namespace}
        return self._request("POST", self._ns_path("/apis/batch/v1", "jobs", namespace), body=body)


class _KubeWatch:
    """One watch stream: iterate for events (``{"type", "object"}``), ``close()`` from
    any thread to end it. Bookmarks come through as ``BOOKMARK`` events; runs of lines
    that ``worth`` refuses as ``SKIPPED`` events carrying only the last resourceVersion."""

    def __init__(self, gateway: KubeGateway, response, method: str, path: str, api_version: str, kind: str, worth=None):
        self._gw, self._resp, self._method, self._path = gateway, response, method, path
        self._api_version, self._kind = api_version, kind
        self._worth = worth
        self._closed = False

    def close(self) -> None:
        self._closed = True
        try:
            self._resp.shutdown()  # unblocks a read in another thread
        except Exception:  # noqa: BLE001  (already closed, or an older urllib3)
            pass
        try:
            self._resp.release_conn()
        except Exception:  # noqa: BLE001
            pass

    def __iter__(self):
        rest = b""
        try:
            for chunk in self._resp.stream(65536, decode_content=True):
                # split a chunk once (not the whole buffer once per line: a 64 KiB chunk of
                # small events would be copied once per event)
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                yield from self._events(lines)
            yield from self._events([rest])
        except ClusterError:
            raise
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            if self._closed:
                return
            raise self._gw._transport_error(e, self._method, self._path) from e
        finally:
            self.close()

    def _events(self, lines: list[bytes]):
        """The events of whole lines. A run of lines ``worth`` refuses becomes one SKIPPED
        event with the run's last version (and its length), so the objects nobody keeps
        cost a byte search each, not a decoded event each."""
        worth = self._worth
        last_skipped, run = None, 0
        for line in lines:
            if not line or line.isspace():
                continue
            # only an object's event may be skipped: a BOOKMARK (the streaming list's end among
            # them) or an ERROR inside a run would otherwise be lost with the run
            if worth is not None and line.startswith(_OBJECT_EVENTS) and not worth(line):
                last_skipped, run = line, run + 1
                continue
            if last_skipped is not None:
                yield self._skipped(last_skipped, run)
                last_skipped, run = None, 0
            yield self._event(line)
        if last_skipped is not None:
            yield self._skipped(last_skipped, run)

    def _skipped(self, line: bytes, run: int) -> dict:
        rv = _resource_version(line)
        if rv is None:  # not read from the bytes: decode it after all (the watcher drops it)
            return self._event(line)
        return {"type": "SKIPPED", "skipped": run, "object": {"metadata": {"resourceVersion": rv}}}

    def _event(self, line: bytes) -> dict:
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise TransientClusterError(
                f"{self._method} {self._path}: unreadable watch event: {line[:200]!r}", reason="StreamBroken"
            ) from e
        obj = ev.get("object") or {}
        if ev.get("type") == "ERROR":
            code = int(obj.get("code") or 0)
            raise self._gw._error(code or 500, json.dumps(obj).encode(), self._method, self._path)
        obj.setdefault("apiVersion", self._api_version)
        obj.setdefault("kind", self._kind)
        return ev


_RV_KEY = b'"resourceVersion":"'
_OBJECT_EVENTS = (b'{"type":"ADDED"', b'{"type":"MODIFIED"', b'{"type":"DELETED"')


def _resource_version(line: bytes) -> str | None:
    """The object's resourceVersion, read from a watch event's bytes without decoding it.
    Only for ADDED/MODIFIED/DELETED events of an object (not ERROR, not BOOKMARK: those are
    decoded). The API server writes ``metadata`` before ``spec`` and ``status``, and in it
    ``resourceVersion`` before labels and annotations, so the first such key is the
    object's own (a key inside a string value would have its quotes escaped). None when the
    line does not look like that; the caller then decodes it."""
    if not line.startswith(_OBJECT_EVENTS):
        return None
    start = line.find(_RV_KEY)
    if start < 0:
        return None
    start += len(_RV_KEY)
    end = line.find(b'"', start)
    rv = line[start:end]
    return rv.decode() if end > start and rv.isdigit() else None
