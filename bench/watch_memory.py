"""What the cluster watcher holds per object, offline (no lab, a few seconds): the bytes each
kept object costs once decoded from the API server's JSON and projected (projection.py), for
both stacks, and the two stacks' stores at the lab bench's size.

    .venv/bin/python bench/watch_memory.py [--n 5000] [--nodes 500] [--pods-per-node 30]
    .venv/bin/python bench/watch_memory.py --changes --nodes 5000 [--repeat 5]
    .venv/bin/python bench/watch_memory.py --rss both --nodes 5000

The objects are the ones bench/scale.py creates, as the API server hands them back (its
defaults, uid, resourceVersion, timestamps, managedFields): device-plugin nodes with their
GPU capacity, pods requesting nvidia.com/gpu and the plugin's pods; DRA nodes, their one
ResourceSlice of 8 shared GPUs in NVIDIA's driver's format (brickadmin/cluster/dra_publish.py),
claims allocated one share and reserved for their pod, and the pods holding them. Each object is
its own JSON line decoded alone, as the watcher's streamed list and watch decode them, and
is kept in a store keyed (namespace, name) as the watcher keeps it. Memory is tracemalloc's
(what Python allocated and still holds, after a collection), per kind, divided by the count.

The "at the bench's size" lines add up the stores at --nodes (pods-per-node each: one in ten
requesting a GPU on the device plugin, every one holding a claim on DRA), and the watcher's
resident memory they imply with the process's own part taken from the lab's device-plugin
figure (PLUGIN_RSS_MIB at 500 nodes, docs/benchmarks.md), an estimate to be checked there.

``--rss``: a real ClusterWatcher's resident memory at --nodes (each stack in its own process, or
``both`` and their ratio), primed from these objects and published once through the watcher
command's publisher into a throwaway SQLite database: what the lab's watcher holds, less what a
streamed list over HTTP leaves behind.

``--changes``: what one change costs from the watch event to the view's rows, in CPU seconds, at
--nodes DRA nodes (every pod holding a claim): a real ClusterWatcher primed from these objects
(a gateway handing them over one by one, as a streamed list does), then --repeat times a slice
republished with a new productName and --repeat times a claim whose pod let it go (reservedFor
emptied), each applied as the watch event would be, then the watcher's ``snapshot()`` and the
publication's pure part (``gpus.view.publish.prepare``: ledger, findings, rows, with the memos a
running watcher keeps). The objects are made as they are listed (150,000 pods and claims are
never all held at once in their full form; making the one to change makes those before it, and
what that leaves is collected before the change is timed). Then --repeat other slices republished,
each published in full as the watcher does (snapshot to the view committed, the collector off
until then), in wall seconds. It reads the managed manifest from, and publishes into, a throwaway
SQLite database (DATABASE_URL, else one under /tmp).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")

from brickadmin.cluster import dra_publish, projection  # noqa: E402
from brickadmin.cluster import scenarios as s  # noqa: E402
from brickadmin.cluster import vocabulary as vocab  # noqa: E402
from scenarios import build as scenario  # noqa: E402

# the lab's device-plugin watcher after priming at 500 nodes / 15,000 pods (docs/benchmarks.md)
PLUGIN_RSS_MIB, PLUGIN_RSS_NODES = 118.0, 500
DAY = "2026-12-06T"
GPUS = 8
DRA_CLASS = "gpu.nvidia.com"


def stamp(serial: int) -> str:
    """A second of the day: objects made over hours do not share their timestamps."""
    return f"{DAY}{serial // 3600 % 24:02d}:{serial // 60 % 60:02d}:{serial % 60:02d}Z"


def _uid(*parts) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, ".".join(map(str, parts))))


def served(obj: dict, serial: int, *, manager: str = "bench-scale") -> dict:
    """``obj`` as the API server returns it: uid, resourceVersion, creationTimestamp, managedFields."""
    meta = obj.setdefault("metadata", {})
    meta.setdefault("uid", _uid(obj.get("kind"), meta.get("namespace", ""), meta["name"]))
    meta["resourceVersion"] = str(1000 + serial)
    meta["creationTimestamp"] = stamp(serial)
    meta["managedFields"] = [
        {
            "apiVersion": obj.get("apiVersion", "v1"),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {}},
            "manager": manager,
            "operation": "Update",
            "time": stamp(serial),
        }
    ]
    return obj


def pod_served(ns: str, name: str, node: str, serial: int, *, claim: str | None = None, gpu: str = "") -> dict:
    """A workload pod of bench/scale.py, Running, with the API server's defaults."""
    c = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    if claim:
        c["resources"]["claims"] = [{"name": "gpu"}]
    elif gpu:
        c["resources"] = {"requests": {gpu: "1"}, "limits": {gpu: "1"}}
    spec = {
        "nodeName": node,
        "containers": [c],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "enableServiceLinks": False,
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    now = stamp(serial)
    ip = f"10.{244 + serial // 65536 % 10}.{serial // 256 % 256}.{serial % 256}"
    status = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": "main",
                "image": c["image"],
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
        ],
        "hostIP": "10.0.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "qosClass": "Burstable",
        "startTime": now,
    }
    md = {"name": name, "namespace": ns, "labels": {"brickadmin-bench": "scale"}}
    return served({"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}, serial)


def claim_served(ns: str, name: str, node: str, device: int, pod: dict, serial: int) -> dict:
    """The claim a DRA pod holds, as bench/scale.py creates it (allocated one share, reserved)."""
    result = scenario._result(
        "gpu", node, f"gpu-{device}", share=_uid("share", ns, name), consumed={"memory": "0", "shares": "1"}
    )
    claim = scenario._claim(ns, name, [scenario._request("gpu", DRA_CLASS)], [result], node, [pod["metadata"]["name"]])
    claim["status"]["reservedFor"][0]["uid"] = pod["metadata"]["uid"]
    claim["metadata"]["labels"] = {"brickadmin-bench": "scale"}
    claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = False
    return served(claim, serial)


def dra_node_served(name: str, serial: int) -> dict:
    return served(scenario._dra_node(name, extra_labels={"brickadmin-bench": "scale"}), serial)


def plugin_node_served(name: str, i: int, serial: int) -> dict:
    model, _ = ("NVIDIA A100 80GB PCIe", 81920) if i % 2 else ("NVIDIA A30", 24576)
    sharing = "timeslicing" if i % 4 == 0 else "none"
    node = s.node(name, model=model, sharing=sharing, gpu_count=GPUS, labels={"brickadmin-bench": "scale"})
    return served(node, serial)


def slice_served(name: str, node: dict, pods_per_node: int, serial: int) -> dict:
    gpus = s.gpus(name, "NVIDIA A100 80GB PCIe", GPUS, 81920)
    sl = dra_publish.resource_slices(name, gpus, node_uid=node["metadata"]["uid"])[0]
    sl["metadata"].pop("generateName")
    for dev, gpu in zip(sl["spec"]["devices"], gpus, strict=True):
        scenario._shared(dev, f"{gpu['memoryMiB']}Mi", -(-pods_per_node // GPUS))
    return served(sl, serial, manager="gpu-kubelet-plugin")


def plugin_pod_served(node: str, serial: int) -> dict:
    p = pod_served(vocab.PLUGIN_NAMESPACE, f"brick-nvidia-device-plugin-{serial:05d}", node, serial)
    p["metadata"]["labels"] = {"app": "brick-nvidia-device-plugin"}
    return p


def lines(objs) -> list[bytes]:
    return [json.dumps(o, separators=(",", ":")).encode() for o in objs]


def held(kind: str, raw: list[bytes], project) -> tuple[int, int]:
    """Bytes the store of these objects holds once decoded one by one and projected (with
    what the projection shares among them), and how many it keeps."""
    getattr(projection, "forget_shared", lambda: None)()  # (older code shares nothing)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    store = {}
    for line in raw:
        obj = json.loads(line)
        slim = project(kind, obj)
        if slim is not None:
            meta = slim["metadata"]
            store[meta.get("namespace", ""), meta["name"]] = slim
        del obj
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before, len(store)


class _Listed:
    """A gateway that lists the bench's DRA objects, made one by one as they are handed over."""

    name = "bench"

    def __init__(self, nodes: int, ppn: int):
        self.names = [f"bench-scale-{i:05d}" for i in range(nodes)]
        self.nss = [f"bench-scale-ws-{k:04d}" for k in range(max(1, nodes // 10))]
        self.ppn = ppn

    def made(self, kind: str):
        for i, nm in enumerate(self.names):
            nd = dra_node_served(nm, i)
            if kind == "Node":
                yield nd
            elif kind == "ResourceSlice":
                yield slice_served(nm, nd, self.ppn, i)
            elif kind in ("Pod", "ResourceClaim"):
                for k in range(self.ppn):
                    p = i * self.ppn + k
                    pd = pod_served(self.nss[p % len(self.nss)], f"w-{p:06d}", nm, p, claim=f"w-{p:06d}")
                    if kind == "Pod":
                        yield pd
                    else:
                        yield claim_served(pd["metadata"]["namespace"], f"w-{p:06d}", nm, k % GPUS, pd, p)

    def nth(self, kind: str, n: int) -> dict:
        return next(itertools.islice(self.made(kind), n, None))

    def list_with_version(self, kind, namespace=None, *, keep=None, worth=None):
        kept = (keep(o) if keep else o for o in self.made(kind))
        return [o for o in kept if o is not None], "1"

    def watch(self, *args, **kwargs):
        return iter(())


class _PluginListed(_Listed):
    """The device-plugin side of bench/scale.py at the same size: GPU nodes, one plugin pod per
    node and the rest workload pods, one in ``gpu_every`` requesting a GPU (bench/scale.py: 10)."""

    gpu_every = 10

    def made(self, kind: str):
        for i, nm in enumerate(self.names):
            if kind == "Node":
                yield plugin_node_served(nm, i, i)
            elif kind == "Pod":
                yield plugin_pod_served(nm, i)
                for k in range(self.ppn - 1):
                    p = i * (self.ppn - 1) + k
                    gpu = vocab.GPU if p % self.gpu_every == 0 else ""
                    yield pod_served(self.nss[p % len(self.nss)], f"w-{p:06d}", nm, p, gpu=gpu)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss(stack: str, nodes: int, ppn: int, gpu_every: int = 10) -> dict:
    """The resident memory of a real ClusterWatcher of ``stack`` at ``nodes``: primed from the
    bench's objects, then published through the watcher command's own publisher (node rows
    written to a throwaway SQLite database, the query log as the command leaves it)."""
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='watch-memory-')}/db.sqlite3")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from brickadmin import metrics
    from brickadmin.cluster.watch import ClusterWatcher
    from gpus.management.commands.watch_cluster import publisher

    call_command("migrate", verbosity=0)
    gc.collect()
    out = {"stack": stack, "nodes": nodes, "debug": settings.DEBUG, "start": _rss_mib(), "gpu_every": gpu_every}
    gateway = (_Listed if stack == "dra" else _PluginListed)(nodes, ppn)
    gateway.gpu_every = gpu_every
    w = ClusterWatcher(gateway)
    w.prime()
    gc.collect()
    out["primed"] = _rss_mib()
    publish = publisher(metrics.DeviceFeed(60), "bench-watch-memory")
    publish(w.snapshot(), None)
    gc.collect()
    out["published"] = _rss_mib()
    return out


def changes(nodes: int, ppn: int, repeat: int) -> None:
    """CPU seconds from one watch event to the view's rows (see the module's docstring)."""
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='watch-memory-')}/db.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    from brickadmin.cluster.snapshot import without_gc_pauses
    from brickadmin.cluster.watch import ClusterWatcher
    from gpus.view import publish as view_publish

    call_command("migrate", verbosity=0)
    gw = _Listed(nodes, ppn)
    w = ClusterWatcher(gw)
    began = time.process_time()
    w.prime()
    print(
        f"{nodes:,} DRA nodes, {nodes * ppn:,} pods and claims, {nodes * GPUS:,} devices: primed in "
        f"{time.process_time() - began:.1f} s of CPU"
    )

    def publication() -> tuple[float, float]:
        began = time.process_time()
        snap = w.snapshot()
        taken = time.process_time()
        view_publish.prepare(snap)
        return taken - began, time.process_time() - taken

    def published() -> float:
        """Wall seconds from the snapshot to the view committed, as the watcher publishes (the
        collector off until then: what the publication leaves is collected after)."""
        began = time.perf_counter()
        with without_gc_pauses():
            view_publish.publish(w.snapshot())
        return time.perf_counter() - began

    first = publication()
    print(f"first publication: snapshot() {first[0]:.3f} s, prepare {first[1]:.3f} s; written in {published():.1f} s")
    rows = []
    for r in range(repeat):
        sl = gw.nth("ResourceSlice", (r * 7919) % nodes)
        sl["spec"]["devices"][0]["attributes"]["productName"] = {"string": f"NVIDIA A100 80GB PCIe rev {r}"}
        gc.collect()  # what making the event left behind: not the change's cost
        began = time.process_time()
        assert w._apply(("ResourceSlice", None), {"type": "MODIFIED", "object": sl})
        applied = time.process_time() - began
        rows.append(("slice republished", applied, *publication()))
    for r in range(repeat):
        claim = gw.nth("ResourceClaim", (r * 104729) % (nodes * ppn))
        claim["status"]["reservedFor"] = []
        gc.collect()
        began = time.process_time()
        assert w._apply(("ResourceClaim", None), {"type": "MODIFIED", "object": claim})
        applied = time.process_time() - began
        rows.append(("claim let go", applied, *publication()))
    walls = []
    for r in range(repeat):  # other changes, each published in full as the watcher does
        sl = gw.nth("ResourceSlice", (r * 7919 + 13) % nodes)
        sl["spec"]["devices"][0]["attributes"]["productName"] = {"string": f"NVIDIA A100 80GB PCIe rev {r}b"}
        gc.collect()
        assert w._apply(("ResourceSlice", None), {"type": "MODIFIED", "object": sl})
        walls.append(published())
    print("| change | the event applied | snapshot() | prepare | total |\n|---|---|---|---|---|")
    for label in ("slice republished", "claim let go"):
        mine = [r for r in rows if r[0] == label]
        totals = sorted(sum(r[1:]) for r in mine)
        for _label, a, snap_s, prep_s in mine:
            print(
                f"| {label} | {a * 1000:.1f} ms | {snap_s * 1000:.1f} ms | {prep_s * 1000:.1f} ms | "
                f"{(a + snap_s + prep_s) * 1000:.0f} ms |"
            )
        print(f"| {label}: median of {len(mine)} | | | | **{statistics.median(totals) * 1000:.0f} ms** |")
    print(
        f"a slice republished and published as the watcher does (snapshot to the view committed, wall): median "
        f"{statistics.median(walls) * 1000:.0f} ms, max {max(walls) * 1000:.0f} ms of {len(walls)}"
    )


def _rss_both(nodes: int, ppn: int, gpu_every: int) -> int:
    import subprocess

    got = {}
    for stack in ("device-plugin", "dra"):
        line = (
            subprocess.run(
                [sys.executable, __file__, "--rss", stack, "--nodes", str(nodes), "--pods-per-node", str(ppn)]
                + ["--plugin-gpu-every", str(gpu_every)],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        got[stack] = json.loads(line)
    dp, dra = got["device-plugin"], got["dra"]
    print(
        f"a real watcher at {nodes:,} nodes, {nodes * ppn:,} pods (Django DEBUG {dra['debug']}; device plugin: one "
        f"workload pod in {gpu_every} requests a GPU; DRA: every pod holds a claim), VmRSS in MiB:"
    )
    print("| | start | primed | published |\n|---|---|---|---|")
    for r in (dp, dra):
        print(f"| {r['stack']} | {r['start']:.0f} | {r['primed']:.0f} | {r['published']:.0f} |")
    print(f"DRA / device plugin, published: {dra['published'] / dp['published']:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000, help="objects of each kind measured (default 3000)")
    ap.add_argument("--nodes", type=int, default=500, help="the bench size the stores are added up at")
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--changes", action="store_true", help="time one change to the view at --nodes instead")
    ap.add_argument("--repeat", type=int, default=5, help="changes of each kind timed (--changes)")
    ap.add_argument(
        "--rss",
        choices=("dra", "device-plugin", "both"),
        help="the resident memory of a real watcher primed and published at --nodes, each stack in its own process",
    )
    ap.add_argument(
        "--plugin-gpu-every",
        type=int,
        default=10,
        help="--rss: one workload pod in this many requests a GPU on the device plugin (1: every one, as on DRA)",
    )
    args = ap.parse_args()
    if args.rss in ("dra", "device-plugin"):
        print(json.dumps(rss(args.rss, args.nodes, args.pods_per_node, args.plugin_gpu_every)))
        return 0
    if args.rss == "both":
        return _rss_both(args.nodes, args.pods_per_node, args.plugin_gpu_every)
    if args.changes:
        changes(args.nodes, args.pods_per_node, args.repeat)
        return 0
    n, ppn = args.n, args.pods_per_node
    n_nodes = max(1, n // ppn)
    names = [f"bench-scale-{i:05d}" for i in range(n_nodes)]
    nss = [f"bench-scale-ws-{k:04d}" for k in range(max(1, n_nodes // 10))]

    built = {}
    built["plugin node"] = ("Node", lines(plugin_node_served(nm, i, i) for i, nm in enumerate(names)))
    built["GPU pod"] = (
        "Pod",
        lines(pod_served(nss[p % len(nss)], f"w-{p:06d}", names[p % n_nodes], p, gpu=vocab.GPU) for p in range(n)),
    )
    built["plugin pod"] = ("Pod", lines(plugin_pod_served(names[i % n_nodes], i) for i in range(n)))
    dra_nodes = [dra_node_served(nm, i) for i, nm in enumerate(names)]
    built["DRA node"] = ("Node", lines(dra_nodes))
    built["slice device"] = (
        "ResourceSlice",
        lines(slice_served(nm, nd, ppn, i) for i, (nm, nd) in enumerate(zip(names, dra_nodes, strict=True))),
    )
    pods = [pod_served(nss[p % len(nss)], f"w-{p:06d}", names[p // ppn], p, claim=f"w-{p:06d}") for p in range(n)]
    built["pod with a claim"] = ("Pod", lines(pods))
    built["claim"] = (
        "ResourceClaim",
        lines(
            claim_served(pd["metadata"]["namespace"], f"w-{p:06d}", names[p // ppn], p % ppn % GPUS, pd, p)
            for p, pd in enumerate(pods)
        ),
    )
    del pods, dra_nodes

    tracemalloc.start()
    stacks = {"before": getattr(projection, "project_unshared", projection.project), "now": projection.project}
    per: dict[str, dict[str, float]] = {name: {} for name in stacks}
    print(f"held per object once projected ({n} pods/claims, {n_nodes} nodes/slices of {GPUS} devices):")
    print("| object | JSON bytes | held, not shared (before) | held now |\n|---|---|---|---|")
    for label, (kind, raw) in built.items():
        for name, project in stacks.items():
            size, kept = held(kind, raw, project)
            per[name][label] = size / (kept * (GPUS if label == "slice device" else 1))
        count = kept * (GPUS if label == "slice device" else 1)
        print(
            f"| {label} | {sum(map(len, raw)) / count:,.0f} | {per['before'][label]:,.0f} | {per['now'][label]:,.0f} |"
        )
    tracemalloc.stop()

    nodes, pods_n = args.nodes, args.nodes * ppn
    mib = 1 << 20

    def stores(p, nodes=nodes):
        pods_n = nodes * ppn
        plugin = nodes * p["plugin node"] + (pods_n - nodes) // 10 * p["GPU pod"] + nodes * p["plugin pod"]
        dra = nodes * (p["DRA node"] + GPUS * p["slice device"]) + pods_n * (p["pod with a claim"] + p["claim"])
        return plugin / mib, dra / mib

    base = PLUGIN_RSS_MIB - stores(per["before"], PLUGIN_RSS_NODES)[0]
    print(
        f"\nat the bench's size ({nodes:,} nodes, {pods_n:,} pods; device plugin: {(pods_n - nodes) // 10:,} GPU "
        f"pods; DRA: {pods_n:,} claims and the pods holding them, {nodes * GPUS:,} devices), with the "
        f"process's own {base:.0f} MiB (the lab's {PLUGIN_RSS_MIB:.0f} MiB device-plugin watcher at "
        f"{PLUGIN_RSS_NODES} nodes less its objects before sharing):"
    )
    print("| | device plugin | DRA | DRA / device plugin, watcher estimated |\n|---|---|---|---|")
    for name in stacks:
        plugin, dra = stores(per[name])
        print(
            f"| kept objects, {name} | {plugin:.1f} MiB | {dra:.1f} MiB | "
            f"{base + dra:.0f} / {base + plugin:.0f} MiB = {(base + dra) / (base + plugin):.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
