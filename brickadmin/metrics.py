"""Every PromQL query brickadmin makes, in one place (prometheus-api-client).

With no PROMETHEUS_URL, or when Prometheus fails, each function returns None and
records why; callers fall back to labels or the twin's facts and say so on the page.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.utils.translation import gettext

from brickadmin.cluster.vocabulary import (
    GPU,
    GPU_PRESENT_LABEL,
    GPU_SHARED,
    GPU_SHARING_STRATEGY_LABEL,
    GPU_TYPE_LABEL,
    MIG_PREFIX,
    SHARING_LABEL,
    ksm_label,
    ksm_resource,
    quota_key,
)

log = logging.getLogger(__name__)
_state = threading.local()

# dcgm-exporter labelled the host "Hostname"; newer builds use "hostname".
# One series per GPU, or per MIG instance (GPU_I_PROFILE / GPU_I_ID) of a MIG-enabled GPU,
# repeated per pod using it (a time-sliced GPU's series repeat once per pod, each with the
# device's figure). Its value is the utilisation, so the same rows give the physical GPUs and
# each pod's utilisation: one query where there were two.
DEVICE_LABELS = "Hostname, hostname, UUID, modelName, pod, namespace, GPU_I_PROFILE, GPU_I_ID"
DEVICE_UTILISATION = f"max by ({DEVICE_LABELS}) (DCGM_FI_DEV_GPU_UTIL)"
# Per pod and device, the memory used (MiB).
POD_MEMORY_USED = 'max by (namespace, pod, UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED{pod!=""})'
# The same, recorded by deploy/chart/files/brickadmin-rules.yaml on Prometheus' evaluation
# interval: reading them costs Prometheus no aggregation over the DCGM series at the watcher's
# question (at 40,000 GPUs it is the feed's largest cost). Read when Prometheus has them, the
# expressions above otherwise (no rules loaded, or not evaluated yet).
# "* 1" drops the series' name from the answer (a quarter of its bytes at 52,000 rows), the
# figures unchanged.
DEVICE_UTILISATION_RECORDED = "brick:gpu_device_utilisation:max * 1"
POD_MEMORY_USED_RECORDED = "brick:gpu_pod_memory_used:max * 1"
ALLOCATABLE_BY_NODE = 'kube_node_status_allocatable{resource=~"nvidia_com.+"}'
SHARED_TOTAL_EXCEPT = 'sum(kube_node_status_allocatable{{resource="' + ksm_resource(GPU_SHARED) + '",node!="{node}"}})'
SHARED_ALLOCATED = f'sum(kube_resourcequota{{resource="{quota_key(GPU_SHARED)}",type="hard"}})'


def last_error() -> str | None:
    return getattr(_state, "error", None)


def _client():
    from prometheus_api_client import PrometheusConnect
    from urllib3.util.retry import Retry

    # No retries: the client's default (three, backing off 2 s then 4 s) held a page for 6 s
    # per query when Prometheus was down, whatever PROMETHEUS_TIMEOUT said. A failed query is
    # said on the page and asked again at the next one.
    return PrometheusConnect(
        url=settings.PROMETHEUS_URL, disable_ssl=True, timeout=settings.PROMETHEUS_TIMEOUT, retry=Retry(total=0)
    )


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


def recorded_or_computed(recorded: str, computed: str) -> list[dict] | None:
    """The recorded series when Prometheus has any, else the expression computing them."""
    rows = query(recorded)
    if rows:
        return rows
    return rows if rows is None else query(computed)


def devices_from_rows(rows: list[dict]) -> dict[str, list[dict]]:
    """Physical GPUs per node from DEVICE_UTILISATION's rows: distinct GPU UUIDs, each with
    its model, its MIG instances' profiles and the pods using it."""
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
            dev["pods"].append(f"{m.get('namespace', '')}/{m['pod']}")
    for devs in nodes.values():
        for uuid, dev in devs.items():
            if uuid in instances:
                dev["mig"] = [profile for _, profile in sorted(instances[uuid].items())]
    return {host: list(devs.values()) for host, devs in nodes.items()}


def _pod_device(m: dict) -> tuple[str, str]:
    return f"{m.get('namespace', '')}/{m.get('pod', '')}", m.get("UUID", "") + (
        f"/{m['GPU_I_ID']}" if m.get("GPU_I_ID") else ""
    )


def usage_from_rows(util_rows: list[dict], memory_rows: list[dict]) -> dict[str, dict[str, list]]:
    """{"ns/pod": {device: [utilisation %, memory used MiB or None]}} from DEVICE_UTILISATION's
    rows (the pods' ones; the highest figure of a pod's device, as ``max by`` gives it) and
    POD_MEMORY_USED's."""
    out: dict[str, dict[str, list]] = {}
    for row in util_rows:
        m = row["metric"]
        if not m.get("pod"):
            continue
        pod, dev = _pod_device(m)
        value = float(row["value"][1])
        figures = out.setdefault(pod, {}).get(dev)
        if figures is None:
            out[pod][dev] = [value, None]
        elif value > figures[0] or figures[0] != figures[0]:  # max, as PromQL's: a number beats NaN
            figures[0] = value
    for row in memory_rows:
        pod, dev = _pod_device(row["metric"])
        if dev in out.get(pod, {}):
            out[pod][dev][1] = float(row["value"][1])
    return out


def measure_devices() -> tuple[dict[str, list[dict]] | None, dict[str, dict[str, list]] | None]:
    """(physical GPUs per node, what DCGM measures of each pod's GPUs): two queries, whatever
    the number of GPUs, read from the recorded series when Prometheus has them. (None, None)
    and last_error() when Prometheus is absent, fails or has no DCGM series."""
    rows = recorded_or_computed(DEVICE_UTILISATION_RECORDED, DEVICE_UTILISATION)
    if rows is None:
        return None, None
    if not rows:
        _state.error = gettext("Prometheus has no DCGM series")
        return None, None
    memory = recorded_or_computed(POD_MEMORY_USED_RECORDED, POD_MEMORY_USED) or []
    return devices_from_rows(rows), usage_from_rows(rows, memory)


def physical_gpus() -> dict[str, list[dict]] | None:
    """Physical GPUs per node: distinct DCGM GPU UUIDs, with the pods using each."""
    rows = recorded_or_computed(DEVICE_UTILISATION_RECORDED, DEVICE_UTILISATION)
    if rows is None:
        return None
    if not rows:
        _state.error = gettext("Prometheus has no DCGM series")
        return None
    return devices_from_rows(rows)


def pod_usage() -> dict[str, dict[str, list]] | None:
    """What DCGM measures of each pod's GPUs: {"ns/pod": {device: [utilisation %, memory used
    MiB or None]}} (a device is a GPU UUID, or UUID/instance for MIG); None (and
    last_error()) when Prometheus is absent or fails. Two queries, whatever the number of
    pods: the watcher's feed asks on its interval (measure_devices), never a page."""
    rows = recorded_or_computed(DEVICE_UTILISATION_RECORDED, DEVICE_UTILISATION)
    if rows is None:
        return None
    return usage_from_rows(rows, recorded_or_computed(POD_MEMORY_USED_RECORDED, POD_MEMORY_USED) or [])


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
        self.usage: dict | None = None  # per pod (pod_usage); None: not measured
        self.note = ""
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(settings.PROMETHEUS_URL)

    def fetch(self) -> bool:
        """Fetch once; True when the figures changed."""
        measured, usage = measure_devices()
        note = "" if measured is not None else (last_error() or "")
        with self._lock:
            changed = measured != self.devices or usage != self.usage
            self.devices, self.usage, self.note = measured, usage, note
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
            devices, usage, note = self.devices, self.usage, self.note
        if devices is not None:
            snap.devices, snap.device_source, snap.device_note = devices, "dcgm", ""
            snap.usage = usage
        elif snap.source != "twin":
            snap.device_note = note
        return snap


# --- utilisation over time (the pictures' charts: gpus/pictures.py) -----------------------
# A range query is evaluated at each step, so its cost grows with the number of points,
# not with the length of the range: every range is drawn with at most MAX_POINTS points.
RANGES = {"hour": 3600, "day": 86400, "week": 7 * 86400}
MAX_POINTS = 120
UTIL = "DCGM_FI_DEV_GPU_UTIL"
# One value per GPU (or MIG instance): dcgm-exporter repeats a time-sliced GPU's series
# once per pod using it, all with the device's figure.
PER_DEVICE = "max by (UUID, GPU_I_ID) ({selector})"
# The same, keeping the node's name (dcgm-exporter says Hostname or hostname), to join
# with kube-state-metrics' node labels.
PER_DEVICE_ON_NODE = (
    "max by (UUID, GPU_I_ID, node) (label_replace(label_replace({selector}, "
    '"node", "$1", "hostname", "(.+)"), "node", "$1", "Hostname", "(.+)"))'
)


def _string(value: str) -> str:
    """A PromQL string literal (double-quoted, escaped like Go's strconv.Quote)."""
    return json.dumps(str(value))


def _nodes_of_type(shared: bool) -> str:
    """The GPU nodes of one type from kube_node_labels (value 1 per node), both conventions
    (as deploy/chart/files/brickadmin-rules.yaml classifies them)."""
    sharing, strategy = ksm_label(SHARING_LABEL), ksm_label(GPU_SHARING_STRATEGY_LABEL)
    brick, present = ksm_label(GPU_TYPE_LABEL), ksm_label(GPU_PRESENT_LABEL)
    if shared:
        return (
            f'max by (node) (kube_node_labels{{{sharing}="timeslicing"}}) or '
            f'max by (node) (kube_node_labels{{{brick}="", {strategy}="time-slicing"}})'
        )
    return (
        f'max by (node) (kube_node_labels{{{sharing}="none"}}) or '
        f'max by (node) (kube_node_labels{{{brick}="", {present}="true", {strategy}!="time-slicing"}})'
    )


def utilisation_query(scope: str, subject: str = "") -> str:
    """The PromQL of the mean GPU utilisation (%) of the cluster, a GPU type (a resource
    name), a node or a Workspace (a namespace). Raises ValueError for an unknown scope."""
    if scope == "cluster":
        return f"avg({PER_DEVICE.format(selector=UTIL)})"
    if scope == "node":
        host = _string(subject)
        return f"avg({PER_DEVICE.format(selector=f'{UTIL}{{Hostname={host}}} or {UTIL}{{hostname={host}}}')})"
    if scope == "workspace":
        return f"avg({PER_DEVICE.format(selector=f'{UTIL}{{namespace={_string(subject)}}}')})"
    if scope == "type":
        if subject.startswith(MIG_PREFIX):
            profile = _string(subject[len(MIG_PREFIX) :])
            return f"avg({PER_DEVICE.format(selector=f'{UTIL}{{GPU_I_PROFILE={profile}}}')})"
        if subject in (GPU, GPU_SHARED):
            devices = PER_DEVICE_ON_NODE.format(selector=f'{UTIL}{{GPU_I_PROFILE=""}}')
            return f"avg({devices} * on (node) group_left () ({_nodes_of_type(subject == GPU_SHARED)}))"
    raise ValueError(f"no utilisation query for {scope} {subject!r}")


def recorded_query(scope: str, subject: str = "") -> str | None:
    """The series deploy/chart/files/brickadmin-rules.yaml records for the same figure, when
    there is one (the cluster and GPU types: the queries that read every GPU)."""
    if scope == "cluster":
        return "brick:gpu_utilisation:avg"
    if scope == "type" and subject.startswith(MIG_PREFIX):
        return f"brick:gpu_utilisation:avg_by_mig_profile{{GPU_I_PROFILE={_string(subject[len(MIG_PREFIX) :])}}}"
    if scope == "type" and subject in (GPU, GPU_SHARED):
        return f'brick:gpu_utilisation:avg_by_type{{gpu_type="{"shared" if subject == GPU_SHARED else "exclusive"}"}}'
    return None


def window(range_key: str, now: float | None = None) -> tuple[float, float, float]:
    """(start, end, step) of a range: MAX_POINTS points, the end aligned to the step (so a
    repeated request within one step asks the same question, and is answered from cache)."""
    span = RANGES[range_key]
    step = span / MAX_POINTS
    now = time.time() if now is None else now
    end = (now // step) * step
    return end - step * (MAX_POINTS - 1), end, step


@dataclass
class Series:
    """A measured series, or why there is none (``error``: then nothing may be drawn)."""

    start: float
    end: float
    step: float
    points: list[tuple[float, float]] = field(default_factory=list)
    error: str | None = None

    @property
    def measured(self) -> bool:
        return self.error is None


def query_range(promql: str, start: float, end: float, step: float) -> list[tuple[float, float]] | None:
    """A range query's one series as [(unix time, value)]; None (and last_error()) when
    Prometheus is absent or fails. Several series are averaged per timestamp."""
    _state.error = None
    if not settings.PROMETHEUS_URL:
        _state.error = gettext("Prometheus is not configured")
        return None
    try:
        rows = _client().custom_query_range(
            query=promql,
            start_time=datetime.fromtimestamp(start, tz=UTC),
            end_time=datetime.fromtimestamp(end, tz=UTC),
            step=f"{step:g}",
        )
    except Exception as exc:  # the client raises several unrelated types
        log.warning("Prometheus range query failed: %s", exc)
        _state.error = gettext("Prometheus query failed: %(error)s") % {"error": exc}
        return None
    sums: dict[float, list[float]] = {}
    for row in rows or []:
        for t, v in row.get("values") or []:
            try:
                sums.setdefault(float(t), []).append(float(v))
            except ValueError:  # "NaN" parses; junk does not
                continue
    return sorted((t, sum(vs) / len(vs)) for t, vs in sums.items() if all(v == v for v in vs))


def utilisation(scope: str, subject: str, range_key: str, now: float | None = None) -> Series:
    """Mean GPU utilisation over the last hour, day or week, at most MAX_POINTS points.
    The recorded series (brickadmin-rules.yaml) is read when Prometheus has it; otherwise
    the figure is computed from the DCGM series. Answers are cached for a step (at most a
    minute): a page's charts cost one query each per step, however many people look."""
    from django.core.cache import cache

    start, end, step = window(range_key, now)
    series = Series(start=start, end=end, step=step)
    promql = utilisation_query(scope, subject)  # raises ValueError for what has no query
    key = (
        "brick-util:"
        + hashlib.sha256(json.dumps([settings.PROMETHEUS_URL, promql, start, end, step]).encode()).hexdigest()
    )
    points = cache.get(key)
    if points is None:
        recorded = recorded_query(scope, subject)
        points = query_range(recorded, start, end, step) if recorded else []
        if points == []:
            points = query_range(promql, start, end, step)
        if points is None:
            series.error = last_error() or gettext("Prometheus did not answer")
            return series
        cache.set(key, points, timeout=min(step, 60))
    series.points = [(t, v) for t, v in points]
    return series
