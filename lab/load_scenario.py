#!/usr/bin/env python3
"""Load scenarios/<name>.yaml into the running lab (replacing whatever was loaded before).

    python lab/load_scenario.py seed-example [--kubeconfig K] [--no-wait]

* Nodes become KWOK nodes (annotation kwok.x-k8s.io/node=fake) with the scenario's status.
* Namespaces, PriorityClasses, ConfigMaps, DaemonSets, PDBs, Pods (bound to their nodes;
  KWOK runs them), Jobs and, last, ResourceQuotas are created as the scenario shows them.
  Pods whose phase is not Running keep that phase (KWOK is told to leave their status).
* The hardware section goes to gpusim (the hardware file it watches); a node's
  ``pluginConfig`` (a rollout restart that was skipped) is handed to gpusim once the
  plugin pod runs there.
* Dynamic Resource Allocation goes through the real scheduler: the ResourceSlices of nodes
  labelled for NVIDIA's DRA kubelet plugin go to gpusim, which publishes them as the plugin
  does (in the form the API server's version accepts); DeviceClasses and DeviceTaintRules are
  created; claims are created without status, a claim the resourceclaim controller made from a
  template is left for it to make again, and a pod using claims is created unbound, pinned to
  its node by its nodeSelector, so that kube-scheduler allocates its claims there and binds it
  (brickadmin/cluster/dra_allocate.py unallocated, which the twin's tests use too).
* The previous scenario goes first: the namespaces this one has too are emptied and
  relabelled in place, the others emptied and deleted (see ``reset``).
* Waits until the cluster settled: DaemonSets rolled out, pods Running, gpusim synced, the
  previous scenario's other namespaces gone.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from brickadmin.cluster import deviceplugin as dp  # noqa: E402
from brickadmin.cluster import dra_allocate, dra_publish, scenarios  # noqa: E402
from brickadmin.cluster.base import ClusterError  # noqa: E402
from brickadmin.cluster.kube import KubeGateway  # noqa: E402
from brickadmin.cluster.vocabulary import GPU_TYPE_LABEL, labels_match, tolerates  # noqa: E402

# what the node lifecycle controller puts on a node until its kubelet (here KWOK) reports Ready
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

STATE = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab"))


def _gpusim_url() -> str:
    """BRICK_LAB_GPUSIM_URL, else the one lab/up wrote into $BRICK_LAB_DIR/env."""
    if os.environ.get("BRICK_LAB_GPUSIM_URL"):
        return os.environ["BRICK_LAB_GPUSIM_URL"]
    env = STATE / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("export BRICK_LAB_GPUSIM_URL="):
                return line.split("=", 1)[1].strip()
    return f"http://127.0.0.1:{19400 + int(os.environ.get('BRICK_LAB_PORT_OFFSET', '0'))}"


GPUSIM = _gpusim_url()
KWOK_NODE = "kwok.x-k8s.io/node"
KWOK_STATUS = "kwok.x-k8s.io/status"
# kueue-system: the namespace of the lab's Kueue (lab/lab.py), part of the lab, not of a scenario
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease", "kueue-system"}
ORDER = [
    "Namespace",
    "PriorityClass",
    "ServiceAccount",
    "ConfigMap",
    "LimitRange",
    "Node",
    "DeviceClass",
    "DeviceTaintRule",
    "ResourceSlice",
    "DaemonSet",
    "PodDisruptionBudget",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
    "Job",
    "ResourceQuota",
]
SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
)


def log(msg: str) -> None:
    print(f"[load_scenario] {msg}", file=sys.stderr, flush=True)


def wait(what: str, check, timeout: float = 120, interval: float = 0.5):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = check()
        if last is True or (last and not isinstance(last, (str, list))):
            return last
        time.sleep(interval)
    raise SystemExit(f"load_scenario: timed out after {timeout:.0f}s waiting for {what}: {last}")


def gpusim(method: str, path: str, body=None):
    req = urllib.request.Request(
        GPUSIM + path, method=method, data=json.dumps(body).encode() if body is not None else None
    )
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        data = r.read()
        return json.loads(data) if data[:1] in (b"{", b"[") else data.decode()


def clean(obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    md = obj.setdefault("metadata", {})
    for f in SERVER_FIELDS:
        md.pop(f, None)
    return obj


# What a new namespace holds before anyone writes to it: its ServiceAccount controller's
# default ServiceAccount and the root CA publisher's ConfigMap. A reused namespace keeps them.
NAMESPACE_DEFAULTS = {"serviceaccounts": "default", "configmaps": "kube-root-ca.crt"}


def namespaced_resources(gw: KubeGateway) -> list[tuple[str, str, bool]]:
    """(API path, plural, deletecollection?) of every namespaced resource the API server
    serves in its preferred versions that can be listed and deleted: what the namespace
    controller empties (discovery as in its initOpCache), custom resources included."""
    found = []
    versions = ["/api/v1"] + [
        "/apis/" + g["preferredVersion"]["groupVersion"] for g in gw._request("GET", "/apis").get("groups") or []
    ]
    for prefix in versions:
        try:
            listing = gw._request("GET", prefix)
        except ClusterError:  # an aggregated API that is down: the controller skips it too
            continue
        for r in listing.get("resources") or []:
            verbs = set(r.get("verbs") or [])
            if r.get("namespaced") and "/" not in r["name"] and {"list", "delete"} <= verbs:
                found.append((prefix, r["name"], "deletecollection" in verbs))
    return found


def empty_namespaces(gw: KubeGateway, namespaces: dict[str, bool], resources) -> None:
    """Delete everything in these namespaces (name -> keep what a new namespace starts
    with), as the namespace controller does before it removes a namespace (kubernetes
    pkg/controller/namespace/deletion/namespaced_resources_deleter.go): a collection
    delete per resource, or one delete per item where the collection cannot be deleted.
    Pods go last and at once, without a grace period (KWOK's pods have no process to
    stop), so that no controller deleted before them makes new ones. The requests are
    independent of each other: several at a time."""

    def empty(ns: str, keep_defaults: bool, prefix: str, plural: str, collection: bool) -> None:
        path = f"{prefix}/namespaces/{ns}/{plural}"
        body = {"propagationPolicy": "Background"}
        if plural == "pods":
            body["gracePeriodSeconds"] = 0
        kept = NAMESPACE_DEFAULTS.get(plural) if keep_defaults else None
        try:
            if collection:
                gw._request("DELETE", path, body=body, query={"fieldSelector": kept and f"metadata.name!={kept}"})
                return
            for item in gw._request("GET", path).get("items") or []:
                if item["metadata"]["name"] != kept:
                    gw._request("DELETE", f"{path}/{item['metadata']['name']}", body=body)
        except ClusterError as e:
            if e.status != 404:  # gone already
                raise

    with ThreadPoolExecutor(max_workers=8) as pool:
        for pods in (False, True):
            jobs = [
                pool.submit(empty, ns, keep, *r)
                for ns, keep in namespaces.items()
                for r in resources
                if (r[1] == "pods") == pods
            ]
            for job in jobs:
                job.result()


def reset(gw: KubeGateway, keep_namespaces: dict[str, dict] | None = None) -> list[str]:
    """Remove what a previous scenario (or test) left: its namespaces, nodes, priority classes.

    ``keep_namespaces`` (name -> the next scenario's Namespace) are emptied and relabelled
    in place instead of deleted: the namespace controller waits 5 s before it starts on a
    deleted namespace and requeues it for seconds while anything is left in it, and the
    next scenario would have to wait for that before it can create the namespace again.
    The other namespaces are emptied here and deleted; their names are returned, for
    ``wait_namespaces_gone`` once the next scenario is loaded."""
    keep_namespaces = keep_namespaces or {}
    # brickadmin's own namespace (the chart's release, labelled part-of=brickadmin) is not a scenario's
    namespaces = {
        n["metadata"]["name"]: n
        for n in gw.list_namespaces()
        if n["metadata"]["name"] not in SYSTEM_NAMESPACES
        and (n["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of") != "brickadmin"
    }
    # a namespace already on its way out cannot be reused: the next scenario waits for it
    reused = [
        name for name, n in namespaces.items() if name in keep_namespaces and not n["metadata"].get("deletionTimestamp")
    ]
    deleted = [name for name in namespaces if name not in reused]
    for ns in deleted:  # first, so that nothing new is admitted into them
        try:
            gw.delete("v1", "Namespace", ns)
        except ClusterError as e:
            if e.status != 409:  # 409: terminating already
                raise
    resources = namespaced_resources(gw)
    empty_namespaces(gw, {ns: ns in reused for ns in namespaces}, resources)
    for ns in reused:
        relabel_namespace(gw, namespaces[ns], keep_namespaces[ns])
    empty_namespaces(gw, {"default": True}, [("/api/v1", "pods", True)])
    delete_dra_cluster_objects(gw)
    for pc in gw.list_priority_classes():
        if not pc["metadata"]["name"].startswith("system-"):
            gw.delete("scheduling.k8s.io/v1", "PriorityClass", pc["metadata"]["name"])

    # pods on their (KWOK) nodes go before the nodes; a pod kept by a finalizer (a Job's)
    # waits for its controller
    def pods_gone():
        left = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in gw.list_pods()
            if p["metadata"]["namespace"] in namespaces or p["metadata"]["namespace"] == "default"
        ]
        return left or True

    wait("old pods to be gone", pods_gone, timeout=180)

    def claims_gone():
        """Claims wait for the resourceclaim controller to lift their finalizer once their
        pods are gone: a scenario that makes the same claim again must not find the old one."""
        try:
            claims = gw._request("GET", "/apis/resource.k8s.io/v1/resourceclaims").get("items") or []
        except ClusterError as e:
            if e.status == 404:
                return True
            raise
        return [c["metadata"]["name"] for c in claims if c["metadata"]["namespace"] in namespaces] or True

    wait("old resource claims to be gone", claims_gone, timeout=60)
    busy = [ns for ns in deleted if ns in keep_namespaces]
    if busy:  # the next scenario needs these names
        wait_namespaces_gone(gw, busy)
    for node in gw.list_nodes():
        gw.delete("v1", "Node", node["metadata"]["name"])
    wait("old nodes to be gone", lambda: not gw.list_nodes() or [n["metadata"]["name"] for n in gw.list_nodes()])
    return [ns for ns in deleted if ns not in keep_namespaces]


DRA_CLUSTER_KINDS = (
    ("/apis/resource.k8s.io/v1", "resourceslices"),
    ("/apis/resource.k8s.io/v1", "deviceclasses"),
    ("/apis/resource.k8s.io/v1alpha3", "devicetaintrules"),
)


def delete_dra_cluster_objects(gw: KubeGateway) -> None:
    """A scenario's cluster-wide DRA objects (slices also go with their Nodes)."""
    for prefix, plural in DRA_CLUSTER_KINDS:
        try:
            gw._request("DELETE", f"{prefix}/{plural}", body={"propagationPolicy": "Background"})
        except ClusterError as e:
            if e.status not in (404, 405):  # not served here
                raise


def dra_plugin_nodes(objects) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Node" and (o["metadata"].get("labels") or {}).get(dra_publish.PLUGIN_NODE_LABEL) == "true"
    }


def relabel_namespace(gw: KubeGateway, current: dict, wanted: dict) -> None:
    """The namespace's labels and annotations become the next scenario's (the API server
    adds kubernetes.io/metadata.name itself), as if it had just been created."""
    md = current["metadata"]
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": md["name"],
            "resourceVersion": md["resourceVersion"],
            "labels": dict((wanted.get("metadata") or {}).get("labels") or {}),
            "annotations": dict((wanted.get("metadata") or {}).get("annotations") or {}),
        },
        "spec": current.get("spec") or {},
    }
    gw._request("PUT", f"/api/v1/namespaces/{md['name']}", body=body)


def wait_namespaces_gone(gw: KubeGateway, names: list[str]) -> None:
    """Until the namespace controller has removed these (emptied) namespaces."""
    if not names:
        return
    wait(
        "old namespaces to be gone",
        lambda: [n["metadata"]["name"] for n in gw.list_namespaces() if n["metadata"]["name"] in names] or True,
        timeout=180,
    )


# Owners a scenario's pods may name that are created before them (ORDER), by the API path of their kind
OWNER_PATHS = {("apps/v1", "DaemonSet"): ("/apis/apps/v1", "daemonsets")}


def owners_here(gw: KubeGateway, namespace: str, refs: list[dict]) -> list[dict]:
    """A pod's ownerReferences as this cluster has its owners: each DaemonSet owner carries the
    uid the lab gave it (a scenario's uid is its own cluster's, or empty, which the API server
    refuses, and a stale one makes the garbage collector delete the pod); a reference to a
    DaemonSet that is not here is dropped. Owners of other kinds are kept as written."""
    out = []
    for ref in refs:
        where = OWNER_PATHS.get((ref.get("apiVersion", ""), ref.get("kind", "")))
        if where is None:
            out.append(ref)
            continue
        try:
            owner = gw._request("GET", gw._ns_path(where[0], where[1], namespace, ref.get("name", "")))
        except ClusterError as e:
            if e.status == 404:
                continue
            raise
        out.append({**ref, "uid": owner["metadata"]["uid"]})
    return out


def daemonset_revision(gw: KubeGateway, namespace: str, refs: list[dict]) -> str:
    """The current revision hash of the DaemonSet that controls a pod (its ControllerRevision
    the DaemonSet controller writes soon after the DaemonSet is created), or ''."""
    owner = next((r for r in refs if r.get("kind") == "DaemonSet" and r.get("controller")), None)
    if owner is None:
        return ""

    def newest():
        items = gw._request("GET", gw._ns_path("/apis/apps/v1", "controllerrevisions", namespace)).get("items") or []
        mine = [
            c
            for c in items
            if any(o.get("uid") == owner["uid"] for o in (c.get("metadata") or {}).get("ownerReferences") or [])
        ]
        if not mine:
            return "no ControllerRevision yet"
        top = max(mine, key=lambda c: int(c.get("revision") or 0))
        found = (top["metadata"].get("labels") or {}).get("controller-revision-hash")
        return (found,) if found else "no revision hash yet"  # wait() goes on while it reads a str

    return str(wait(f"DaemonSet {owner.get('name')}'s revision", newest, 60)[0])


def create(gw: KubeGateway, obj: dict) -> None:
    kind = obj["kind"]
    body = clean(obj)
    md = body["metadata"]
    status = body.pop("status", None)
    if kind == "Node":
        md.setdefault("annotations", {})[KWOK_NODE] = "fake"
        body["status"] = status or {}
        gw._request("POST", "/api/v1/nodes", body=body)
        if status:  # the API server may drop status on create: set it through the subresource
            gw._request(
                "PATCH",
                f"/api/v1/nodes/{md['name']}/status",
                body={"status": {k: v for k, v in status.items() if k in ("capacity", "allocatable")}},
                content_type="application/merge-patch+json",
            )
        return
    if kind == "ResourceSlice":
        gw._request("POST", "/apis/resource.k8s.io/v1/resourceslices", body=body)
        return
    if kind == "DeviceTaintRule":
        try:
            gw._request("POST", "/apis/resource.k8s.io/v1alpha3/devicetaintrules", body=body)
        except ClusterError as e:  # effect None is served from 1.35
            log(f"DeviceTaintRule {md['name']} not created: {e.message}")
        return
    if kind == "Pod":
        md["ownerReferences"] = owners_here(gw, md.get("namespace", ""), md.get("ownerReferences") or [])
        if not md["ownerReferences"]:
            del md["ownerReferences"]
        revision = daemonset_revision(gw, md.get("namespace", ""), md.get("ownerReferences") or [])
        if revision:
            # the DaemonSet controller replaces a pod of another revision (its rolling update)
            md.setdefault("labels", {})["controller-revision-hash"] = revision
        phase = (status or {}).get("phase", "Running")
        if phase != "Running":
            md.setdefault("annotations", {})[KWOK_STATUS] = "custom"
        body["spec"].setdefault("automountServiceAccountToken", False)
        path = gw._ns_path("/api/v1", "pods", md["namespace"])
        for attempt in range(40):  # the namespace's default ServiceAccount may not exist yet
            try:
                gw._request("POST", path, body=body)
                break
            except ClusterError as e:
                if "serviceaccount" in e.message.lower() and attempt < 39:
                    time.sleep(0.25)
                    continue
                raise
        if phase != "Running":
            gw._request(
                "PATCH",
                path + f"/{md['name']}/status",
                body={"status": status},
                content_type="application/merge-patch+json",
            )
        return
    try:
        gw.apply(body, field_manager="lab-scenario")
    except ClusterError as e:
        if kind == "PriorityClass" and e.status == 422:  # value is immutable: replace it
            gw.delete("scheduling.k8s.io/v1", "PriorityClass", md["name"])
            gw.apply(body, field_manager="lab-scenario")
        else:
            raise


def load(name: str, kubeconfig: str, *, do_wait: bool = True, timeout: float = 180) -> dict:
    t0 = time.time()
    objects, hardware, plugin_configs = scenarios.read(name)
    scenario_objects = objects
    gw = KubeGateway(kubeconfig)
    gw.ping()
    leaving = reset(gw, {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"})
    log(f"previous scenario removed in {time.time() - t0:.1f}s")
    gpusim("PUT", "/hardware", hardware)
    # DRA: the plugin nodes' slices are gpusim's to publish; claims go to the scheduler
    objects = dra_allocate.unallocated(objects)
    plugin_nodes = dra_plugin_nodes(objects)
    given: dict[str, list] = {}
    for o in objects:
        if o["kind"] == "ResourceSlice" and (o.get("spec") or {}).get("nodeName") in plugin_nodes:
            given.setdefault(o["spec"]["nodeName"], []).append(clean(o))
    gpusim("PUT", "/draslices", given)
    minor = int("".join(c for c in str(gw._request("GET", "/version").get("minor", "0")) if c.isdigit()) or 0)
    others = dra_publish.slices_for_server(
        [o for o in objects if o["kind"] == "ResourceSlice" and o["spec"].get("nodeName") not in plugin_nodes], minor
    )
    objects = [o for o in objects if o["kind"] != "ResourceSlice"] + others
    for kind in ORDER:
        if kind == "ResourceClaimTemplate" and plugin_nodes:
            wait("gpusim to publish the DRA nodes' slices", lambda: dra_published(gw, plugin_nodes), timeout)
        for obj in objects:
            if obj["kind"] == kind:
                create(gw, obj)
    log(f"created {len(objects)} objects, hardware for {len(hardware)} nodes")
    if do_wait:
        settle(gw, objects, hardware, plugin_configs, timeout)
        # a fresh load lists none of the previous scenario's namespaces (the controller took
        # them in the meantime: a few seconds after their deletion)
        wait_namespaces_gone(gw, leaving)
    log(f"scenario {name} loaded in {time.time() - t0:.1f}s")
    return {"objects": scenario_objects, "hardware": hardware, "plugin_configs": plugin_configs}


def dra_published(gw: KubeGateway, nodes: set[str]):
    """True once every DRA plugin node has slices; else the nodes still without."""
    slices = gw._request("GET", "/apis/resource.k8s.io/v1/resourceslices").get("items") or []
    have = {(s.get("spec") or {}).get("nodeName") for s in slices}
    return sorted(nodes - have) or True


def daemonset_pods(gw: KubeGateway, ds: dict) -> str:
    """Where a DaemonSet's pods stand, for a rollout that does not finish: each pod's node,
    phase, readiness and revision, so a timeout says which of them the DaemonSet waits for."""
    uid = ds["metadata"]["uid"]
    out = []
    for p in gw.list_pods(namespace=ds["metadata"]["namespace"]):
        md = p["metadata"]
        if not any(o.get("uid") == uid for o in md.get("ownerReferences") or []):
            continue
        st = p.get("status") or {}
        ready = next((c.get("status") for c in st.get("conditions") or [] if c.get("type") == "Ready"), "-")
        gone = " deleting" if md.get("deletionTimestamp") else ""
        out.append(
            f"{md['name']} on {(p.get('spec') or {}).get('nodeName') or '-'}: {st.get('phase', '-')}, Ready {ready}, "
            f"revision {(md.get('labels') or {}).get('controller-revision-hash', '-')}{gone}"
        )
    return "[" + "; ".join(out) + "]"


def settle(gw: KubeGateway, objects, hardware, plugin_configs, timeout: float) -> None:
    own_taints = {
        o["metadata"]["name"]: {t.get("key") for t in (o.get("spec") or {}).get("taints") or []}
        for o in objects
        if o["kind"] == "Node"
    }

    def nodes_ready():
        """KWOK has marked every scenario node Ready and the node lifecycle controller has
        lifted the not-ready taint it puts on a new node (unless the scenario gave it)."""
        pending = []
        for n in gw.list_nodes():
            name = n["metadata"]["name"]
            if name not in own_taints:
                continue
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
            lifted = [
                t["key"]
                for t in (n.get("spec") or {}).get("taints") or []
                if t.get("key") in NOT_READY_TAINTS and t.get("key") not in own_taints[name]
            ]
            if not ready or lifted:
                pending.append(f"{name}: {'Ready' if ready else 'not Ready'} {' '.join(lifted)}".strip())
        return pending or True

    wait("scenario nodes to be Ready", nodes_ready, timeout)

    def daemonsets_done():
        """Each plugin DaemonSet has an available, up-to-date pod on every node that it
        selects and whose taints it tolerates (the DaemonSet controller's own rule)."""
        pending = []
        nodes = gw.list_nodes()
        for ds in gw.list_daemonsets(namespace=dp.PLUGIN_NAMESPACE):
            tmpl = ds["spec"]["template"]["spec"]
            want = sum(
                1
                for n in nodes
                if labels_match(n["metadata"].get("labels") or {}, tmpl.get("nodeSelector"))
                and tolerates((n.get("spec") or {}).get("taints"), tmpl.get("tolerations"))
            )
            st = gw.daemonset_rollout_status(ds["metadata"]["namespace"], ds["metadata"]["name"])
            if not st.done or st.desired != want:
                pending.append(f"{ds['metadata']['name']}: want {want}; {st.message} {daemonset_pods(gw, ds)}")
        return pending or True

    wait("device-plugin DaemonSets to roll out", daemonsets_done, timeout)

    want_running = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "Pod" and (o.get("status") or {}).get("phase", "Running") == "Running"
    }

    def pods_running():
        running = {
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in gw.list_pods()
            if (p.get("status") or {}).get("phase") == "Running"
        }
        missing = sorted(f"{ns}/{n}" for ns, n in want_running - running)
        return missing or True

    wait("scenario pods to be Running", pods_running, timeout)

    if plugin_configs:

        def override():
            try:
                gpusim("POST", "/pluginconfig", plugin_configs)
                return True
            except urllib.error.HTTPError as e:
                return f"{e.code} {e.read().decode().strip()}"

        wait("plugin pods to take the scenario's pluginConfig", override, timeout)

    def gpusim_settled():
        """Every brick GPU node's status shows what gpusim says its plugin advertises."""
        st = gpusim("GET", "/state")
        not_yet = []
        nodes = {n["metadata"]["name"]: n for n in gw.list_nodes()}
        for node_name in hardware:
            node = nodes.get(node_name)
            if node is None or not (node["metadata"].get("labels") or {}).get(GPU_TYPE_LABEL):
                continue
            if node_name not in st["advertised"]:
                not_yet.append(f"{node_name}: not synced")
                continue
            want = dp.kubelet_status(node.get("status") or {}, st["advertised"][node_name])
            if want.get("allocatable") != (node.get("status") or {}).get("allocatable"):
                not_yet.append(f"{node_name}: status not updated")
        return not_yet or True

    wait("gpusim to publish node resources", gpusim_settled, timeout)
    # and a few more syncs so that nothing is in flight
    s0 = gpusim("GET", "/state")["syncs"]
    wait("gpusim to sync again", lambda: gpusim("GET", "/state")["syncs"] >= s0 + 2, 30)


def main() -> int:
    ap = argparse.ArgumentParser(description="Load a scenario into the brickadmin lab")
    ap.add_argument("name", help="scenario name (scenarios/<name>.yaml) or a path")
    ap.add_argument("--kubeconfig", default=os.environ.get("BRICK_LAB_KUBECONFIG", str(STATE / "kubeconfig")))
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args()
    try:
        load(args.name, args.kubeconfig, do_wait=not args.no_wait, timeout=args.timeout)
    except scenarios.ScenarioError as e:
        print(f"load_scenario: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:
        print(f"load_scenario: the lab's API server refused: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
