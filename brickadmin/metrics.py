"""Every PromQL query brickadmin makes, in one place (prometheus-api-client).

With no PROMETHEUS_URL, or when Prometheus fails, each function returns None and
records why; callers fall back to labels or the twin's facts and say so on the page.
"""
from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.utils.translation import gettext

from brickadmin.cluster.vocabulary import GPU_SHARED, ksm_resource, quota_key

log = logging.getLogger(__name__)
_state = threading.local()

# dcgm-exporter labelled the host "Hostname"; newer builds use "hostname".
# One series per GPU, or per MIG instance (GPU_I_PROFILE / GPU_I_ID) of a MIG-enabled GPU.
PHYSICAL_GPUS = ('count by (Hostname, hostname, UUID, modelName, pod, namespace, GPU_I_PROFILE, GPU_I_ID) '
                 '(DCGM_FI_DEV_GPU_UTIL)')
ALLOCATABLE_BY_NODE = 'kube_node_status_allocatable{resource=~"nvidia_com.+"}'
SHARED_TOTAL_EXCEPT = ('sum(kube_node_status_allocatable{{resource="' + ksm_resource(GPU_SHARED)
                       + '",node!="{node}"}})')
SHARED_ALLOCATED = f'sum(kube_resourcequota{{resource="{quota_key(GPU_SHARED)}",type="hard"}})'


def last_error() -> str | None:
    return getattr(_state, "error", None)


def _client():
    from prometheus_api_client import PrometheusConnect

    return PrometheusConnect(url=settings.PROMETHEUS_URL, disable_ssl=True, timeout=settings.PROMETHEUS_TIMEOUT)


def query(promql: str) -> list[dict] | None:
    """Instant query; None (and last_error()) when Prometheus is absent or fails."""
    _state.error = None
    if not settings.PROMETHEUS_URL:
        _state.error = gettext("Prometheus is not configured")
        return None
    try:
        return _client().custom_query(query=promql)
    except Exception as exc:  # the client raises several unrelated types
        log.warning("Prometheus query failed: %s", exc)
        _state.error = gettext("Prometheus query failed: %(error)s") % {"error": exc}
        return None


def physical_gpus() -> dict[str, list[dict]] | None:
    """Physical GPUs per node: distinct DCGM GPU UUIDs, with the pods using each."""
    rows = query(PHYSICAL_GPUS)
    if rows is None:
        return None
    if not rows:
        _state.error = gettext("Prometheus has no DCGM series")
        return None
    nodes: dict[str, dict[str, dict]] = {}
    instances: dict[str, dict[int, str]] = {}  # GPU UUID -> {GPU_I_ID: profile}
    for row in rows:
        m = row["metric"]
        host = m.get("Hostname") or m.get("hostname")
        uuid = m.get("UUID")
        if not host or not uuid:
            continue
        dev = nodes.setdefault(host, {}).setdefault(uuid, {"uuid": uuid, "model": m.get("modelName", ""), "pods": []})
        if m.get("GPU_I_PROFILE"):
            instances.setdefault(uuid, {})[int(m.get("GPU_I_ID") or 0)] = m["GPU_I_PROFILE"]
        if m.get("pod"):
            dev["pods"].append(f'{m.get("namespace", "")}/{m["pod"]}')
    for devs in nodes.values():
        for uuid, dev in devs.items():
            if uuid in instances:
                dev["mig"] = [profile for _, profile in sorted(instances[uuid].items())]
    return {host: list(devs.values()) for host, devs in nodes.items()}


def scalar(promql: str) -> float | None:
    rows = query(promql)
    if rows is None:
        return None
    return sum(float(r["value"][1]) for r in rows)


def node_allocatable(node: str) -> dict[str, float] | None:
    """kube_node_status_allocatable for one node, as {resource: value} (procedure step 7)."""
    rows = query(f'kube_node_status_allocatable{{node="{node}",resource=~"nvidia_com.+"}}')
    if rows is None:
        return None
    return {r["metric"]["resource"]: float(r["value"][1]) for r in rows}


class DeviceFeed:
    """The DCGM devices, fetched on an interval (not per snapshot), merged into snapshots."""

    def __init__(self, interval: float):
        self.interval = interval
        self.devices: dict | None = None
        self.note = ""
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(settings.PROMETHEUS_URL)

    def fetch(self) -> bool:
        """Fetch once; True when the figures changed."""
        measured = physical_gpus()
        with self._lock:
            changed = measured != self.devices
            self.devices, self.note = measured, ("" if measured is not None else (last_error() or ""))
        return changed

    def loop(self, watcher, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                if self.fetch():
                    watcher.poke()
            except Exception:  # noqa: BLE001  (Prometheus must not stop the watcher)
                log.exception("fetching DCGM devices failed")

    def merge(self, snap):
        if not self.enabled:
            return snap
        with self._lock:
            devices, note = self.devices, self.note
        if devices is not None:
            snap.devices, snap.device_source, snap.device_note = devices, "dcgm", ""
        elif snap.source != "twin":
            snap.device_note = note
        return snap
