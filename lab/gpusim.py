#!/usr/bin/env python3
"""GPU node simulator for the lab: plays the NVIDIA device plugin + kubelet for KWOK nodes
and serves DCGM-exporter-format metrics.

    python lab/gpusim.py --kubeconfig K --hardware /tmp/brickadmin-lab/hardware.json --listen 127.0.0.1:19400

* Physical GPUs per node come from the hardware file ({node: [{uuid, model, memoryMiB, mig}]},
  JSON or YAML, optionally under a top-level ``hardware:`` key), re-read when it changes;
  ``PUT /hardware`` with the same JSON replaces it.
* Device plugin + kubelet: when a device-plugin pod (namespace brick-nvidia, label
  app.kubernetes.io/component default|timeslicing) is Running on a node, the node's status
  capacity/allocatable are set from its physical GPUs and the plugin ConfigMap's config *as
  it was when that pod started* (remembered per pod UID, so a ConfigMap edit without a
  rollout restart changes nothing). A resource no longer served stays in capacity with
  allocatable "0" until a status patch removes it; no plugin pod -> nvidia resources
  allocatable 0. All of that is brickadmin.cluster.deviceplugin (shared with the twin).
* NVIDIA's GPU DRA kubelet plugin (driver gpu.nvidia.com) on nodes labelled
  nvidia.com/gpu.deploy.dra-driver=true: the node's ResourceSlices, one pool named after the
  node, owned by the Node, ``pool.generation`` raised on each republish. The devices are those
  ``PUT /draslices`` gave for the node (a scenario's slices: its driver settings, dynamic MIG,
  shares, a pool seen in part), else what the driver's legacy path makes of the node's
  hardware; in the form the API server's version accepts (brickadmin/cluster/dra_publish.py,
  shared with the twin). A node that loses the label loses its slices (kubelet wipes them when
  the plugin goes).
* ``GET /metrics``: DCGM_FI_DEV_* per GPU (and per MIG instance), with pod/namespace/container
  labels for GPUs held by Running pods. ``GET /state``: what the simulator believes (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from brickadmin.cluster import dcgm_exporter, dra_publish, migparted  # noqa: E402
from brickadmin.cluster import deviceplugin as dp  # noqa: E402
from brickadmin.cluster import vocabulary as vocab  # noqa: E402
from brickadmin.cluster.vocabulary import DEVICE_PLUGIN_CONFIG_LABEL  # noqa: E402
from brickadmin.cluster.vocabulary import GPU_TYPE_LABEL as GPU_NODE_LABEL  # noqa: E402  (as in the twin)

PLUGIN_COMPONENTS = ("default", "timeslicing", "mps")  # never the MPS control daemon: it serves no resource
# KWOK neither plays the status of a pod so annotated "custom" nor finishes its deletion
# (lab.py --disregard-status-with-annotation-selector)
KWOK_STATUS = "kwok.x-k8s.io/status"


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} gpusim: {msg}", flush=True)


class Api:
    """Tiny API client (stdlib only) from a token kubeconfig."""

    def __init__(self, kubeconfig: str):
        cfg = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = cfg.get("current-context")
        ctx = next(
            (c["context"] for c in cfg.get("contexts", []) if c["name"] == ctx_name), cfg["contexts"][0]["context"]
        )
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        self.token = user.get("token")
        self.ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))

    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, timeout=10, context=self.ctx) as r:
            return json.loads(r.read() or b"{}")

    def items(self, path: str, keep=None, page_size: int = 500) -> list[dict]:
        """Every item, paged through limit/continue: one unpaginated list of 60,000 pods takes
        longer than this client's timeout, and then no node got its GPUs. ``keep(item)``
        drops items as their page arrives, so the whole list is never held."""
        out: list[dict] = []
        cont = ""
        sep = "&" if "?" in path else "?"
        while True:
            query = f"limit={page_size}" + (f"&continue={urllib.parse.quote(cont)}" if cont else "")
            page = self.request("GET", f"{path}{sep}{query}")
            out.extend(it for it in page.get("items") or [] if keep is None or keep(it))
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return out


def load_hardware(path: Path) -> dict[str, list[dict]]:
    if not path.exists():
        return {}
    text = path.read_text()
    data = (json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)) or {}
    if isinstance(data, dict) and "hardware" in data and isinstance(data["hardware"], dict):
        data = data["hardware"]
    return {str(k): list(v or []) for k, v in data.items()}


class Simulator:
    def __init__(self, api: Api, hardware_path: Path, state_path: Path | None, interval: float):
        self.api = api
        self.hardware_path = hardware_path
        self.state_path = state_path
        self.interval = interval
        self.lock = threading.Lock()
        self.hardware: dict[str, list[dict]] = {}
        self._hw_mtime = None
        # pod uid -> {"config": text|None, "configMap": name, "node": name, "started": ts}
        self.pod_configs: dict[str, dict] = {}
        self.advertised: dict[str, dict | None] = {}
        self.pods: list[dict] = []
        self._gpu_pods: list[dict] = []
        self.nodes: dict[str, dict] = {}
        self.mig_applied: dict[str, str] = {}  # node -> the mig.config value mig-manager last acted on
        self.last_error = ""
        self.syncs = 0
        # the DRA kubelet plugin: node -> the slices a scenario gave (PUT /draslices), and
        # node -> what was last published there ({"content", "generation", "names"})
        self.dra_path = hardware_path.with_name("dra-slices.json")
        self.dra_given: dict[str, list[dict]] = json.loads(self.dra_path.read_text()) if self.dra_path.exists() else {}
        self.dra_published: dict[str, dict] = {}
        self.server_minor: int | None = None
        if state_path and state_path.exists():
            try:
                self.pod_configs = json.loads(state_path.read_text())
            except ValueError:
                self.pod_configs = {}

    # ---------------------------------------------------------------- hardware
    def refresh_hardware(self) -> None:
        try:
            mtime = self.hardware_path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime != self._hw_mtime:
            self.hardware = load_hardware(self.hardware_path)
            self._hw_mtime = mtime
            log(f"hardware: {sum(len(v) for v in self.hardware.values())} GPUs on {len(self.hardware)} nodes")

    def set_hardware(self, data: dict) -> None:
        tmp = self.hardware_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.hardware_path)
        self.refresh_hardware()

    # ---------------------------------------------------------------- plugin + kubelet
    def plugin_config(self, pod: dict, daemonsets: dict[str, dict], configmaps: dict[str, dict], node: dict) -> dict:
        """The config the plugin pod read when it started (remembered per pod UID)."""
        uid = pod["metadata"]["uid"]
        if uid in self.pod_configs:
            return self.pod_configs[uid]
        owner = next(
            (o["name"] for o in pod["metadata"].get("ownerReferences") or [] if o.get("kind") == "DaemonSet"), None
        )
        ds = daemonsets.get(owner) if owner else None
        if ds is None:
            ds = dp.daemonset_for_node(node, list(daemonsets.values()))
        cm_name = dp.config_map_name(ds) if ds else None
        cm = configmaps.get(cm_name) if cm_name else None
        text = None
        if cm is not None:
            data = cm.get("data") or {}
            text = data.get(dp.CONFIG_KEY)
            if text is None:
                # GPU Operator style: one ConfigMap of named configs, picked by a node label
                key = (node["metadata"].get("labels") or {}).get(DEVICE_PLUGIN_CONFIG_LABEL)
                text = data.get(key) if key else None
        rec = {
            "config": text,
            "configMap": cm_name,
            "node": pod["spec"].get("nodeName"),
            "pod": pod["metadata"]["name"],
            "started": time.time(),
        }
        self.pod_configs[uid] = rec
        log(f"plugin pod {pod['metadata']['name']} on {rec['node']} started with {cm_name or 'no ConfigMap'}")
        self._save()
        return rec

    def finish_deletion(self, pod: dict) -> None:
        """A pod whose status KWOK leaves to us is deleted by us too once it is terminating
        (kubelet stops a crash-looping container at once)."""
        md = pod["metadata"]
        try:
            self.api.request(
                "DELETE",
                f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                {"gracePeriodSeconds": 0, "preconditions": {"uid": md["uid"]}},
            )
        except urllib.error.HTTPError as e:
            if e.code not in (404, 409):
                raise

    def show_crash_loop(self, pod: dict, rec: dict) -> None:
        """The plugin exits at start on a config it refuses: kubelet restarts its container
        with a back-off, the pod stays Running and is never Ready."""
        md = pod["metadata"]
        containers = [c.get("name", "") for c in pod["spec"].get("containers") or []]
        patch = {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                    {"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady"},
                ],
                "containerStatuses": [
                    {
                        "name": c,
                        "ready": False,
                        "restartCount": 1,
                        "image": "",
                        "imageID": "",
                        "state": {
                            "waiting": {
                                "reason": "CrashLoopBackOff",
                                "message": f"back-off 10s restarting failed container={c} pod={md['name']}",
                            }
                        },
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                    }
                    for c in containers
                ],
            }
        }
        path = f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}"
        try:
            # KWOK leaves the status of a pod so annotated to us (lab.py --disregard-status-...)
            self.api.request(
                "PATCH", path, {"metadata": {"annotations": {KWOK_STATUS: "custom"}}}, "application/merge-patch+json"
            )
            self.api.request("PATCH", path + "/status", patch, "application/strategic-merge-patch+json")
        except urllib.error.HTTPError as e:
            if e.code not in (404, 409):
                raise
            return
        rec["crashLooping"] = True
        self._save()
        log(f"plugin pod {md['name']} on {rec['node']}: CrashLoopBackOff (the plugin refuses its config)")

    def running_plugin_pod(self, node: str) -> str | None:
        """The UID of the plugin pod serving ``node`` now, chosen as sync() chooses it (the
        newest Running one), asked of the API server, not of the last sync, which may still
        show the pod a scenario load has just replaced."""
        pods = self.api.items(
            f"/api/v1/namespaces/{dp.PLUGIN_NAMESPACE}/pods?fieldSelector=spec.nodeName%3D{urllib.parse.quote(node)}"
        )
        running = [
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get(dp.COMPONENT_LABEL) in PLUGIN_COMPONENTS
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        newest = max(running, key=lambda p: p["metadata"].get("creationTimestamp", ""), default=None)
        return newest["metadata"]["uid"] if newest else None

    def override_configs(self, configs: dict[str, str]) -> list[str]:
        """Pretend the plugin pod running on each node read ``configs[node]`` at start. A node
        whose running plugin pod this simulator has not started yet (its sync has not seen it)
        is returned as missing, to be asked again: an override given to the pod it replaced
        would be lost, and the new pod would serve its ConfigMap instead."""
        missing = []
        serving = {node: self.running_plugin_pod(node) for node in configs}
        with self.lock:
            for node, text in configs.items():
                if serving[node] not in self.pod_configs:
                    missing.append(node)
                    continue
                uids = [u for u, rec in self.pod_configs.items() if rec.get("node") == node]
                for u in uids:
                    self.pod_configs[u]["config"] = text
                    self.pod_configs[u]["overridden"] = True
            self._save()
        return missing

    def _save(self) -> None:
        if self.state_path:
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.pod_configs))
            os.replace(tmp, self.state_path)

    def sync(self) -> None:
        self.refresh_hardware()
        ns = dp.PLUGIN_NAMESPACE
        nodes = {n["metadata"]["name"]: n for n in self.api.items("/api/v1/nodes")}
        self.play_mig_manager(nodes)
        try:
            self.play_dra_plugin(nodes)
        except urllib.error.HTTPError as e:
            if e.code != 404:  # an API server without resource.k8s.io/v1 has no slices to publish
                raise
        # the GPU pods as list_gpu_pods last found them (one assignment there: read whole)
        pods = self.api.items(f"/api/v1/namespaces/{ns}/pods") + self._gpu_pods
        daemonsets = {d["metadata"]["name"]: d for d in self.api.items(f"/apis/apps/v1/namespaces/{ns}/daemonsets")}
        configmaps = {c["metadata"]["name"]: c for c in self.api.items(f"/api/v1/namespaces/{ns}/configmaps")}
        plugin_pods: dict[str, dict] = {}
        live_uids = set()
        for p in pods:
            md = p["metadata"]
            if md.get("namespace") != ns:
                continue
            if (md.get("labels") or {}).get(dp.COMPONENT_LABEL) not in PLUGIN_COMPONENTS:
                continue
            live_uids.add(md["uid"])
            if md.get("deletionTimestamp") and (md.get("annotations") or {}).get(KWOK_STATUS) == "custom":
                self.finish_deletion(p)
            node = p["spec"].get("nodeName")
            if not node or md.get("deletionTimestamp") or (p.get("status") or {}).get("phase") != "Running":
                continue
            prev = plugin_pods.get(node)
            if prev is None or md.get("creationTimestamp", "") > prev["metadata"].get("creationTimestamp", ""):
                plugin_pods[node] = p
        # forget pods that no longer exist
        gone = [u for u in self.pod_configs if u not in live_uids]
        for u in gone:
            del self.pod_configs[u]
        if gone:
            self._save()
        advertised_now: dict[str, dict | None] = {}
        for name, gpus in self.hardware.items():
            node = nodes.get(name)
            if node is None:
                continue
            if not (node["metadata"].get("labels") or {}).get(GPU_NODE_LABEL):
                continue  # not served by the brick-nvidia plugin (e.g. GPU Operator convention)
            pod = plugin_pods.get(name)
            if pod is not None:
                rec = self.plugin_config(pod, daemonsets, configmaps, node)
                adv = dp.advertised_resources(gpus, rec["config"])
                refuses = dp.plugin_config_errors(rec["config"]) or dp.mps_start_error(gpus, rec["config"])
                if refuses and not rec.get("crashLooping"):
                    self.show_crash_loop(pod, rec)
            else:
                adv = None
            advertised_now[name] = adv
            status = node.get("status") or {}
            new = dp.kubelet_status(status, adv)
            if new.get("capacity") != status.get("capacity") or new.get("allocatable") != status.get("allocatable"):
                patch = {
                    "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                    "status": {"capacity": new["capacity"], "allocatable": new["allocatable"]},
                }
                try:
                    self.api.request("PATCH", f"/api/v1/nodes/{name}/status", patch, "application/merge-patch+json")
                    log(f"node {name}: advertised {adv}")
                except urllib.error.HTTPError as e:
                    if e.code != 409:
                        raise
        with self.lock:
            self.advertised = advertised_now
            self.pods = pods
            self.nodes = nodes
            self.syncs += 1

    # ---------------------------------------------------------------- mig-manager (GPU Operator)
    def play_mig_manager(self, nodes: dict[str, dict]) -> None:
        """mig-manager on the nodes the GPU Operator runs it on (nvidia.com/gpu.deploy.mig-manager=true),
        as the twin plays it: a nvidia.com/mig.config value not acted on yet -> state pending, the
        GPUs repartitioned (the hardware file), the operator's device plugin advertising them,
        then success; failed, the GPUs unchanged, for an unknown name or a layout a GPU cannot hold."""
        for name, node in nodes.items():
            labels = node["metadata"].get("labels") or {}
            config = labels.get(vocab.MIG_CONFIG_LABEL)
            if labels.get(vocab.MIG_MANAGER_DEPLOY_LABEL) != "true" or name not in self.hardware or config is None:
                continue
            reported = labels.get(vocab.MIG_CONFIG_STATE_LABEL) in ("success", "failed")
            if reported and self.mig_applied.setdefault(name, config) == config:
                continue  # acted on already (by this simulator, or before it started)
            self._label(name, {vocab.MIG_CONFIG_STATE_LABEL: "pending"})
            try:
                cm = self.api.request(
                    "GET", f"/api/v1/namespaces/{vocab.GPU_OPERATOR_NAMESPACE}/configmaps/{vocab.MIG_PARTED_CONFIGMAP}"
                )
                gpus, why = migparted.layout(
                    migparted.parse((cm.get("data") or {}).get(vocab.MIG_PARTED_CONFIG_KEY)),
                    config,
                    self.hardware[name],
                )
            except (urllib.error.HTTPError, migparted.MigPartedError) as e:
                gpus, why = None, str(e)
            if gpus is not None:
                self.set_hardware({**self.hardware, name: gpus})
                if not labels.get(GPU_NODE_LABEL):  # the operator's own plugin (brick nodes: the sync below)
                    strategy = labels.get(vocab.MIG_STRATEGY_LABEL) or "mixed"
                    new = dp.kubelet_status(
                        node.get("status") or {}, dp.advertised_resources(gpus, {"flags": {"migStrategy": strategy}})
                    )
                    self.api.request(
                        "PATCH",
                        f"/api/v1/nodes/{name}/status",
                        {"status": {"capacity": new["capacity"], "allocatable": new["allocatable"]}},
                        "application/merge-patch+json",
                    )
            self._label(name, {vocab.MIG_CONFIG_STATE_LABEL: "failed" if gpus is None else "success"})
            self.mig_applied[name] = config
            log(f"mig-manager on {name}: {config} " + (f"failed: {why}" if gpus is None else "applied"))

    # ---------------------------------------------------------------- DRA kubelet plugin
    def set_dra_slices(self, data: dict) -> None:
        tmp = self.dra_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.dra_path)
        with self.lock:
            self.dra_given = {str(k): list(v or []) for k, v in data.items()}

    def play_dra_plugin(self, nodes: dict[str, dict]) -> None:
        """Publish each DRA node's slices when they differ from what is published (a new
        node, new hardware or slices, a slice deleted behind the plugin's back)."""
        if self.server_minor is None:
            version = self.api.request("GET", "/version")
            self.server_minor = int("".join(c for c in str(version.get("minor", "0")) if c.isdigit()) or 0)
        path = "/apis/resource.k8s.io/v1/resourceslices"
        current = self.api.items(f"{path}?fieldSelector=spec.driver%3D{dra_publish.DRIVER}")
        by_node: dict[str, list[dict]] = {}
        for sl in current:
            by_node.setdefault((sl.get("spec") or {}).get("nodeName") or "", []).append(sl)
        with self.lock:
            given = dict(self.dra_given)
        for name in list(self.dra_published):
            if name not in nodes:
                del self.dra_published[name]  # the slices went with their Node
        for name, node in nodes.items():
            labels = node["metadata"].get("labels") or {}
            have = by_node.get(name, [])
            if labels.get(dra_publish.PLUGIN_NODE_LABEL) != "true" or (name not in given and name not in self.hardware):
                if name in self.dra_published:
                    for sl in have:
                        self._delete_slice(sl["metadata"]["name"])
                    del self.dra_published[name]
                    log(f"DRA plugin on {name}: stopped, its slices removed")
                continue
            want = given.get(name) or dra_publish.hardware_slices(name, self.hardware.get(name) or [])
            want = dra_publish.published(
                name, node["metadata"]["uid"], dra_publish.slices_for_server(want, self.server_minor), 0
            )
            content = dra_publish.content(want)
            generation = max((int(sl["spec"]["pool"].get("generation") or 0) for sl in have), default=0)
            rec = self.dra_published.get(name)
            names = sorted(sl["metadata"]["name"] for sl in have)
            if rec and rec["content"] == content and rec["generation"] == generation and rec["names"] == names:
                continue
            for sl in have:
                self._delete_slice(sl["metadata"]["name"])
            # the plugin's own counter: above anything it published, even slices deleted behind its back
            generation = max(generation, rec["generation"] if rec else 0) + 1
            for sl in dra_publish.published(
                name,
                node["metadata"]["uid"],
                [{"metadata": w["metadata"], "spec": w["spec"]} for w in want],
                generation,
            ):
                self.api.request("POST", path, sl)
            self.dra_published[name] = {
                "content": content,
                "generation": generation,
                "names": sorted(w["metadata"]["name"] for w in want),
            }
            log(f"DRA plugin on {name}: published {len(want)} slice(s), generation {generation}")

    def _delete_slice(self, name: str) -> None:
        try:
            self.api.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{name}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def _label(self, node: str, labels: dict) -> None:
        self.api.request(
            "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}}, "application/merge-patch+json"
        )

    def list_gpu_pods(self) -> None:
        """Keep ``_gpu_pods``: the pods holding GPUs outside the plugin's namespace (for the
        DCGM labels). No selector picks them, so every pod is listed, in a thread of its own
        (60,000 pods take minutes to list on a busy API server, and the device plugin's sync
        must not wait for that), and on a large lab at most a tenth of the time, so the
        simulator does not keep the API server it simulates busy."""
        ns = dp.PLUGIN_NAMESPACE
        while True:
            started = time.monotonic()
            try:
                self._gpu_pods = self.api.items(
                    "/api/v1/pods", keep=lambda p: p["metadata"].get("namespace") != ns and bool(dp.pod_gpu_requests(p))
                )
            except Exception as e:  # keep simulating through API hiccups
                log(f"listing every pod failed: {type(e).__name__}: {e}")
            time.sleep(max(self.interval, 9 * (time.monotonic() - started)))

    def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                self.sync()
                self.last_error = ""
                took = time.monotonic() - started
            except Exception as e:  # keep simulating through API hiccups
                msg = f"{type(e).__name__}: {e}"
                if msg != self.last_error:
                    log(f"sync failed: {msg}")
                    traceback.print_exc()
                self.last_error = msg
                took = 0.0  # a sync cut short by an API outage says nothing of the lab's size
            # a sync of a large lab takes long: at least twice its time between syncs, but never
            # more than a minute (a sync slowed by an API server starting up is not the lab's size)
            time.sleep(max(self.interval, min(2 * took, 60.0)))

    # ---------------------------------------------------------------- DCGM metrics
    def assignments(self) -> dict[tuple[str, str], list[tuple[dict, str]]]:
        """(node, device key) -> [(pod, container)] for Running pods holding GPUs
        (brickadmin/cluster/dcgm_exporter.py, shared with the demo's simulated cluster)."""
        with self.lock:
            pods = list(self.pods)
            hardware = dict(self.hardware)
            advertised = dict(self.advertised)
        return dcgm_exporter.held_devices(hardware, pods, advertised)

    def metrics(self, now: float | None = None) -> str:
        """The exporter's page at ``now`` (default: the current time)."""
        now = time.time() if now is None else now
        with self.lock:
            hardware = dict(self.hardware)
        return dcgm_exporter.page(hardware, self.assignments(), now)

    def state(self) -> dict:
        with self.lock:
            return {
                "hardware": self.hardware,
                "advertised": self.advertised,
                "pluginPods": self.pod_configs,
                "syncs": self.syncs,
                "dra": {
                    n: {"generation": r["generation"], "slices": r["names"]} for n, r in self.dra_published.items()
                },
                "lastError": self.last_error,
            }


def serve(sim: Simulator, listen: str) -> ThreadingHTTPServer:
    host, port = listen.rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _send(self, code: int, body: str, ctype: str = "text/plain; version=0.0.4") -> None:
            b = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, sim.metrics())
            elif path == "/healthz":
                self._send(200 if sim.syncs else 503, "ok\n" if sim.syncs else "not synced yet\n")
            elif path in ("/state", "/hardware"):
                st = sim.state()
                self._send(200, json.dumps(st if path == "/state" else st["hardware"], indent=1), "application/json")
            else:
                self._send(404, "not found\n")

        def do_POST(self):
            # POST /pluginconfig {node: config text}: the plugin pod now running on that node
            # read this config at its start (a scenario where a rollout restart was skipped).
            if self.path != "/pluginconfig":
                return self._send(404, "not found\n")
            n = int(self.headers.get("Content-Length") or 0)
            try:
                missing = sim.override_configs(json.loads(self.rfile.read(n) or b"{}"))
            except (ValueError, OSError) as e:
                return self._send(400, f"bad request: {e}\n")
            if missing:
                return self._send(409, f"no running plugin pod on: {', '.join(missing)}\n")
            self._send(200, "ok\n")

        def do_PUT(self):
            if self.path == "/draslices":  # node -> the slices its DRA plugin publishes
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    sim.set_dra_slices(json.loads(self.rfile.read(n) or b"{}"))
                except (ValueError, OSError) as e:
                    return self._send(400, f"bad slices: {e}\n")
                return self._send(200, "ok\n")
            if self.path != "/hardware":
                return self._send(404, "not found\n")
            n = int(self.headers.get("Content-Length") or 0)
            try:
                data = json.loads(self.rfile.read(n) or b"{}")
                if "hardware" in data and isinstance(data["hardware"], dict):
                    data = data["hardware"]
                sim.set_hardware(data)
            except (ValueError, OSError) as e:
                return self._send(400, f"bad hardware: {e}\n")
            self._send(200, "ok\n")

    srv = ThreadingHTTPServer((host, int(port)), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--hardware", required=True, help="JSON/YAML file: node -> [GPU]")
    ap.add_argument("--listen", default="127.0.0.1:19400")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--state", default=None, help="where to remember plugin pods' configs")
    args = ap.parse_args()
    hw = Path(args.hardware)
    state = Path(args.state) if args.state else hw.with_name("gpusim-pods.json")
    sim = Simulator(Api(args.kubeconfig), hw, state, args.interval)
    serve(sim, args.listen)
    log(f"serving DCGM metrics on http://{args.listen}/metrics")
    threading.Thread(target=sim.list_gpu_pods, name="gpu-pods", daemon=True).start()
    sim.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
