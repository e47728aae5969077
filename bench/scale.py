"""Scale benchmark against the lab's real API server: the watch-fed,
materialised cluster view at 500 nodes / 15,000 pods, 2,000 / 60,000 (and 5,000 / 150,000
when asked and the machine holds it).

    .venv/bin/python bench/scale.py [--sizes 500,2000] [--pods-per-node 30]

For each size it grows the lab's cluster (KWOK GPU nodes with the BRICK labels, as
lab/load_scenario.py makes them; pods bound to the nodes, one in ten requesting GPUs, or one in
`--gpu-every N`), then
prints the figures below. What is simulated while building (`--populate direct`, the default):
the bench writes each node's GPU capacity/allocatable itself, computed by the device-plugin
code gpusim uses (brickadmin/cluster/deviceplugin.py with the plugin ConfigMap), instead of
gpusim writing it once the node's plugin pod runs (gpusim is not given the bench nodes, so it
never rewrites them); and each workload pod is created bound (spec.nodeName) with KWOK's
"leave the status alone" annotation, then given the Running status KWOK's pod-ready stage
writes, in one status PATCH by the same worker. The DaemonSet controller, the scheduler and
KWOK still create, bind and run one device-plugin pod per node, and KWOK keeps every node's
heartbeat. The churn's pods are KWOK's as before. `--populate kwok` builds as before (gpusim
and KWOK do it all; 48 minutes at 5,000 nodes).

`--stack dra` builds the same sizes on Dynamic Resource Allocation: each GPU node is labelled
for NVIDIA's DRA kubelet plugin (nvidia.com/gpu.deploy.dra-driver, as the dra scenario's nodes),
has no device-plugin capacity and no device-plugin pod, and carries one ResourceSlice in the
driver's format (brickadmin/cluster/dra_publish.py: 8 whole GPUs, each shared by up to
ceil(pods-per-node / 8) claims as the driver's consumable shares publish it). Every pod (30 a
node: 150,000 claims on 40,000 devices at 5,000 nodes) holds a ResourceClaim of one share,
created by the bench already allocated (status.allocation and reservedFor the pod written
directly, as the pods' statuses are), so the scheduler has no work. The change timed to the
pages is the node's pool republished with a new productName (one PATCH of its slice, the
pool's generation raised); the churn's GPU pods hold a claim each. `--json FILE` keeps each
size's figures and `--beside FILE` (the other stack's) prints the two side by side with the
watcher's memory ratio:

    BRICK_LAB_DIR=/tmp/brickadmin-lab-scale BRICK_LAB_PORT_OFFSET=600 .venv/bin/python bench/scale.py \
        --sizes 500 --json /tmp/scale-dp.json
    BRICK_LAB_DIR=/tmp/brickadmin-lab-scale BRICK_LAB_PORT_OFFSET=600 .venv/bin/python bench/scale.py \
        --sizes 500 --stack dra --beside /tmp/scale-dp.json

* the watcher's initial list time and its memory (VmRSS of `manage.py watch_cluster`, a
  subprocess on a fresh SQLite database, after priming and after the churn);
* Dashboard (/), Nodes (/nodes/) and Availability (/availability/) server time through the
  Django test client: median of 20 in a warm process, and the first request in a new process,
  with the lab's simulators paused (in a deployment the cluster's kubelets, KWOK here, and its
  Prometheus do not share the product server's CPU), and the warm median also with them running;
* Kubernetes API calls and bytes per page view from the API server's own /metrics
  (apiserver_request_total, apiserver_response_sizes_sum) before/after 20 views of each page,
  divided by 20. apiserver_request_total carries no client label, so the watcher is stopped
  and the lab's other API clients (gpusim, KWOK, kube-state-metrics, controller-manager,
  scheduler) are paused (SIGSTOP/SIGCONT, a few seconds) during those windows; an equal
  window without page views is printed as the residual. The page process also counts the
  HTTP requests it sends to the API server itself (client side), as a cross-check;
* SQL queries per page (CaptureQueriesContext);
* the delay from a node label change (the GPU product label, so a new model row appears; one
  merge PATCH of the node, as `kubectl label` sends it) to the Dashboard and the Nodes page
  (?model=) showing it: median and p95 of 20, timed from the PATCH's send to the answer of the
  page request that showed it (an upper bound: the PATCH's round trip and the page's render are
  inside), and, as a lower bound, from the PATCH's answer to the start of that page request.
  Twice: with the lab's simulators running, and with them paused around each change (as for the
  page times: in a deployment the watcher does not share its CPU with the cluster's kubelets);
* the watcher's CPU time (utime+stime from /proc/<pid>/stat) over a churn of 1,000 pod
  creations and deletions, until its view settled again;
* one `kubectl get nodes -o json` (median of 5) and the Dashboard's median over it;
* a count check: the watcher's kept pods and nodes against a fresh list.

`--bulk etcd` (with `--stack dra`) builds the pods and their claims without the API server:
through it each pod and its claim are four requests (the pod, its status, the claim, its
status) of about 3 ms of its CPU each, hours at 5,000 nodes on 2 cores. The first pod and claim
are created through the API server as above; the rest are that pod and claim as the API
server stored them (defaults, admission's additions, managedFields, the Running status, the
allocation) with namespace, name, node, uids, device, share and pod IP replaced, written
straight into the lab's etcd under the API server's keys (/registry/pods/<ns>/<name>,
/registry/resourceclaims/<ns>/<name>; JSON values, which its storage decoder reads beside
protobuf) in transactions of 128 puts, while the controller-manager, the scheduler and Kueue
are paused. The bench then waits for the API server's watch cache to reach etcd's last
revision and for the paused controllers to catch up. Nodes and slices still go through the
API server, and no admission runs for the bulk (its result is in the copied first object).
The output says the bulk was written to etcd.

On this machine (2 cores, 24 GiB, shared) 500 nodes / 15,000 pods build in 118 s with
--populate direct (pods at 177/s, 12 ms of CPU per object for the lab and the bench) against
486 s with --populate kwok (25 ms); 2,000 / 60,000 took about 15 minutes with KWOK and gpusim
doing it. The build prints its CPU per object: on a shared machine that is the comparable
figure. Prometheus and kube-state-metrics (and gpusim, with --populate direct) are paused while
building (Prometheus held ~3 GiB at 2,000 nodes). 5,000 / 150,000 was built once, with
--populate kwok (48 minutes); `--watcher-only` measures just the watcher. `--settle-timeout`
bounds the wait.

Everything it creates (namespaces bench-scale-*, nodes bench-scale-*, the lease namespace, the
device-plugin objects when the lab had none, gpusim hardware entries) is removed at the end,
also on Ctrl-C (object by object from a lab that was already running; a lab it brought up
goes down whole); processes it starts are stopped. It waits for lab/ci.sh and bench/faults.py to
finish, takes lab/lablock.py's lock, and brings the lab up (and down at the end) only when no
lab is running. Creation time is printed but is not the measured figure.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
LAB_DIR = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab"))
BENCH_LABEL = ("brickadmin-bench", "scale")
PREFIX = "bench-scale"
LEASE_NS = f"{PREFIX}-lease"
CHURN_NS = f"{PREFIX}-churn"
PAGES = ("/", "/nodes/", "/availability/")
MODELS = [("NVIDIA A30", 24576), ("NVIDIA A100 80GB PCIe", 81920), ("NVIDIA H100 80GB HBM3", 81559)]
BACKGROUND = ("gpusim", "kwok", "kube-state-metrics", "kube-controller-manager", "kube-scheduler")
MARK = "@@scale@@ "
DRA_CLASS = "gpu.nvidia.com"  # the DeviceClass NVIDIA's chart installs for whole GPUs
GPUS_PER_NODE = 8
HEARTBEAT_S = 4  # gpus.view.publish.HEARTBEAT_SECONDS: how often the watcher's status reaches the view
KWOK_STATUS = "kwok.x-k8s.io/status"  # =custom: KWOK leaves the pod's status alone (lab/lab.py)
# what reacts to each pod or claim: paused while --bulk etcd writes them. Not KWOK: it keeps
# the nodes' leases, and pods with KWOK_STATUS are left alone by it
REACTING = ("kube-controller-manager", "kube-scheduler", "kueue")


def log(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# =========================================================================== page worker
# `scale.py --worker` (a warm process answering JSON commands on stdin) and
# `scale.py --first URL` (a new process timing its first request). Both read the same
# database as the watcher.


def _django():
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
    import django

    django.setup()
    import urllib3.connectionpool

    counter = {"n": 0, "paths": []}
    orig = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def counting(self, method, url, *a, **kw):  # every request the page process sends to the API server
        counter["n"] += 1
        counter["paths"].append(f"{method} {url.split('?')[0]}")
        return orig(self, method, url, *a, **kw)

    urllib3.connectionpool.HTTPConnectionPool.urlopen = counting
    from django.contrib.auth import get_user_model
    from django.test import Client

    admin, _ = get_user_model().objects.get_or_create(
        username="bench-scale", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    return client, counter


def _get(client, counter, url):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    n0 = counter["n"]
    with CaptureQueriesContext(connection) as ctx:
        t = time.perf_counter()
        r = client.get(url)
        ms = (time.perf_counter() - t) * 1000
    return {
        "ms": ms,
        "status": r.status_code,
        "queries": len(ctx.captured_queries),
        "api": counter["n"] - n0,
        "body": r.content.decode(errors="replace") if r.status_code == 200 else "",
    }


def view_state() -> dict:
    from gpus.models import ViewNode, ViewResourceRow, ViewState

    st = ViewState.objects.filter(pk=1).first()
    if st is None or not st.generation:
        return {"generation": 0}
    return {
        "generation": st.generation,
        "as_of": str(st.as_of),
        "watcher_status": st.watcher_status,
        "nodes": ViewNode.objects.count(),
        "gpu_nodes": ViewNode.objects.filter(is_gpu=True).count(),
        "resources": {
            r.resource: {"logical": r.logical, "allocated": r.allocated, "requested": r.requested}
            for r in ViewResourceRow.objects.filter(generation=st.generation)
        },
        "totals": st.totals,
    }


def worker_main() -> int:
    client, counter = _django()
    out = sys.stdout

    def reply(obj):
        out.write(MARK + json.dumps(obj, default=str) + "\n")
        out.flush()

    reply({"ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            reply(_worker_cmd(client, counter, cmd))
        except Exception as exc:  # noqa: BLE001  (report it to the orchestrator)
            import traceback

            reply({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})
    return 0


def _worker_cmd(client, counter, cmd) -> dict:
    c = cmd["cmd"]
    if c == "state":
        return view_state()
    if c == "time":  # warm: one untimed request, then n timed; queries and API calls per request
        res = {}
        for url in cmd["urls"]:
            first = _get(client, counter, url)
            runs = [_get(client, counter, url) for _ in range(cmd["n"])]
            res[url] = {
                "median_ms": statistics.median(r["ms"] for r in runs),
                "p95_ms": pct([r["ms"] for r in runs], 0.95),
                "statuses": sorted({r["status"] for r in runs} | {first["status"]}),
                "queries": sorted({r["queries"] for r in runs}),
                "api_calls": sum(r["api"] for r in runs),
                "warmup_api_calls": first["api"],
                "bytes": len(runs[-1]["body"]),
            }
        return res
    if c == "views":
        n0, p0 = counter["n"], len(counter["paths"])
        t = time.perf_counter()
        statuses = [client.get(cmd["url"]).status_code for _ in range(cmd["n"])]
        return {
            "elapsed": time.perf_counter() - t,
            "statuses": sorted(set(statuses)),
            "api_calls": counter["n"] - n0,
            "paths": counter["paths"][p0:],
        }
    if c == "wait_text":  # poll the pages until each shows its text; the wall clock when it did
        found, polls = {}, 0
        deadline = time.time() + cmd["timeout"]
        while len(found) < len(cmd["checks"]) and time.time() < deadline:
            for url, text in cmd["checks"]:
                if url in found:
                    continue
                started = time.time()
                r = client.get(url)
                polls += 1
                if r.status_code == 200 and text in r.content.decode(errors="replace"):
                    found[url] = [started, time.time()]  # the page read the view in between
        return {"found": found, "polls": polls}
    if c == "probe":
        r = _get(client, counter, cmd["url"])
        return {"status": r["status"], "contains": {t: t in r["body"] for t in cmd.get("texts", [])}}
    raise ValueError(f"unknown command {c!r}")


def first_main(url: str) -> int:
    t0 = time.perf_counter()
    client, counter = _django()
    setup_s = time.perf_counter() - t0
    r = _get(client, counter, url)
    r.pop("body")
    r["setup_s"] = setup_s
    r["paths"] = counter["paths"]
    print(MARK + json.dumps(r))
    return 0


# =========================================================================== the lab's API
class Api:
    """Admin access to the lab's API server (token kubeconfig), one requests.Session per thread."""

    def __init__(self, kubeconfig: str):
        import yaml

        cfg = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = cfg.get("current-context")
        ctx = next((c["context"] for c in cfg["contexts"] if c["name"] == ctx_name), cfg["contexts"][0]["context"])
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        self.ca = cluster.get("certificate-authority")
        self.token = user["token"]
        self._local = threading.local()

    def session(self):
        s = getattr(self._local, "s", None)
        if s is None:
            import requests
            from requests.adapters import HTTPAdapter

            s = requests.Session()
            s.verify = self.ca
            s.trust_env = False  # REQUESTS_CA_BUNDLE / proxies from the environment would override the lab's CA
            s.headers.update(
                {
                    "Authorization": f"Bearer {self.token}",
                    "Accept": "application/json",
                    "User-Agent": "brickadmin-bench-scale",
                }
            )
            s.mount("https://", HTTPAdapter(pool_connections=2, pool_maxsize=4))
            self._local.s = s
        return s

    def req(
        self, method, path, body=None, ok=(200, 201, 202), ctype="application/json", params=None, raw=False, timeout=120
    ):
        data = json.dumps(body) if body is not None and not isinstance(body, str) else body
        for attempt in range(8):
            try:
                r = self.session().request(
                    method,
                    self.server + path,
                    data=data,
                    params=params,
                    timeout=timeout,
                    headers={"Content-Type": ctype} if data is not None else None,
                )
            except Exception:  # connection reset under load: retry
                if attempt == 7:
                    raise
                time.sleep(0.5 * (attempt + 1))
                continue
            if r.status_code == 429 or r.status_code >= 500:
                time.sleep(0.5 * (attempt + 1))
                continue
            if r.status_code not in ok:
                raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
            return r.text if raw else (r.json() if r.content else {})
        raise RuntimeError(f"{method} {path}: gave up after retries")

    def list_all(self, path, params=None, limit=5000):
        return list(self.each(path, params, limit))

    def each(self, path, params=None, limit=5000):
        """The objects of a list, a page at a time: 150,000 pods are never all held at once."""
        cont = None
        while True:
            p = dict(params or {}, limit=limit)
            if cont:
                p["continue"] = cont
            page = self.req("GET", path, params=p)
            yield from page.pop("items", None) or []
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return

    def metrics(self) -> tuple[dict, dict]:
        """Apiserver_request_total and apiserver_response_sizes_sum, by (verb, resource, subresource)."""
        text = self.req("GET", "/metrics", raw=True)
        req, size = {}, {}
        for line in text.splitlines():
            if line.startswith("apiserver_request_total{"):
                target = req
            elif line.startswith("apiserver_response_sizes_sum{"):
                target = size
            else:
                continue
            labels, value = line.rsplit(" ", 1)
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            key = (lab.get("verb", ""), lab.get("resource", "") or lab.get("path", ""), lab.get("subresource", ""))
            target[key] = target.get(key, 0.0) + float(value)
        return req, size


def running_status(pod: dict, serial: int) -> dict:
    """The status KWOK's pod-ready stage writes for a pod on a fake node: Running and Ready,
    every container running since now, a pod IP."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    names = [c["name"] for c in pod["spec"]["containers"]]
    ip = f"10.{244 + serial // 65536 % 10}.{serial // 256 % 256}.{serial % 256}"
    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": n,
                "image": c["image"],
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for n, c in zip(names, pod["spec"]["containers"], strict=True)
        ],
        "hostIP": "10.0.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
    }


def diff(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def pmap(fn, items, workers=24):
    ex = cf.ThreadPoolExecutor(workers)
    try:
        for f in cf.as_completed([ex.submit(fn, i) for i in items]):
            f.result()
    finally:  # on Ctrl-C (or an error) drop the queued calls instead of finishing them first
        ex.shutdown(wait=True, cancel_futures=True)


# =========================================================================== orchestrator
class Bench:
    def __init__(self, args):
        self.args = args
        self.kubeconfig = args.kubeconfig
        self.tmp = Path(tempfile.mkdtemp(prefix="brick-scale-"))
        self.procs: list[subprocess.Popen] = []
        self.paused: list[int] = []
        self.held: list[int] = []  # controllers kept paused from an etcd bulk until the watcher primes
        self.kept: list[int] = []  # processes paused until the end (Prometheus, kube-state-metrics)
        self.own_lab = False
        self.lock = None
        self.created_plugin = False
        self.orig_hardware = None
        self.gpusim_url = None
        self.kubectl = None
        self.api: Api | None = None
        self.nodes: list[tuple[str, str, str]] = []  # (name, sharing, resource)
        self.dra = args.stack == "dra"
        self.dra_nodes: dict[str, tuple[str, list, int]] = {}  # name -> (uid, GPUs, pool generation)
        self.created_class = False
        self.namespaces: list[str] = []
        self.n_pods = 0
        self.run_id = f"{int(time.time()) % 100000:05d}"
        self.results = []

    # ------------------------------------------------------------------ the lab
    def wait_for_lab_users(self):
        deadline = time.time() + self.args.lab_wait
        while True:
            busy = []
            for pat in ("lab/ci.sh", "bench/faults.py"):
                pids = [
                    p
                    for p in subprocess.run(
                        ["pgrep", "-f", pat], capture_output=True, text=True, check=False
                    ).stdout.split()
                    if int(p) != os.getpid()
                ]
                if pids:
                    busy.append(f"{pat} (pid {', '.join(pids)})")
            if not busy:
                return
            if time.time() > deadline:
                raise SystemExit(f"scale: the lab is still in use after {self.args.lab_wait:.0f}s: {busy}")
            log(f"lab in use by {', '.join(busy)}; waiting 30 s")
            time.sleep(30)

    def lab_env(self) -> dict:
        out = {}
        env = LAB_DIR / "env"
        if env.exists():
            for line in env.read_text().splitlines():
                if line.startswith("export ") and "=" in line:
                    k, v = line[len("export ") :].split("=", 1)
                    out[k.strip()] = v.strip()
        return out

    def lab_running(self) -> bool:
        """This lab's API server (BRICK_LAB_DIR's pid file) is alive: other labs on the machine
        (another BRICK_LAB_DIR) are not this one."""
        try:
            os.kill(int((LAB_DIR / "pids" / "kube-apiserver").read_text().strip()), 0)
        except (OSError, ValueError):
            return False
        return True

    def acquire_lab(self):
        if LAB_DIR == Path("/tmp/brickadmin-lab"):  # lab/ci.sh and bench/faults.py use that one
            self.wait_for_lab_users()
        if not self.lab_running():
            log("no lab running: lab/up")
            subprocess.run([str(REPO / "lab" / "up")], check=True, stdout=subprocess.DEVNULL)
            self.own_lab = True
        else:
            log("reusing the running lab")
        sys.path.insert(0, str(REPO / "lab"))
        from lablock import lab_lock

        self.lock = lab_lock(timeout=self.args.lab_wait)
        self.lock.__enter__()
        env = self.lab_env()
        self.gpusim_url = env.get("BRICK_LAB_GPUSIM_URL", "http://127.0.0.1:19400")
        self.kubectl = env.get("BRICK_LAB_KUBECTL") or shutil.which("kubectl")
        self.api = Api(self.kubeconfig)
        self.api.req("GET", "/version")

    def gpusim(self, method, path, body=None):
        import requests

        r = requests.request(
            method,
            self.gpusim_url + path,
            data=json.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        r.raise_for_status()
        return r.json() if r.content[:1] in (b"{", b"[") else r.text

    def kubectl_get_nodes_ms(self, n=5) -> float:
        ks = []
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run(
                [self.kubectl, "--kubeconfig", self.kubeconfig, "get", "nodes", "-o", "json"],
                stdout=subprocess.DEVNULL,
                check=True,
            )
            ks.append(time.perf_counter() - t)
        return statistics.median(ks) * 1000

    def pause_background(self, with_prometheus=False, names=None):
        for name in names or BACKGROUND + (("prometheus",) if with_prometheus else ()):
            try:
                pid = int((LAB_DIR / "pids" / name).read_text().strip())
                os.kill(pid, signal.SIGSTOP)
                self.paused.append(pid)
            except (OSError, ValueError):
                pass

    def resume_background(self):
        while self.paused:
            pid = self.paused.pop()
            if pid in self.kept:  # paused again for a timing: stays paused to the end
                continue
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass

    # ------------------------------------------------------------------ building the cluster
    def ensure_plugin(self):
        sys.path.insert(0, str(REPO))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
        from brickadmin.cluster import scenarios as s
        from brickadmin.cluster import vocabulary as vocab

        self.s, self.vocab = s, vocab
        self.make_ns(LEASE_NS)  # the watcher's Lease lives here (BRICK_LEASE_NAMESPACE)
        if self.dra:
            self.ensure_device_class()
        have = self.api.req("GET", f"/apis/apps/v1/namespaces/{vocab.PLUGIN_NAMESPACE}/daemonsets", ok=(200, 404))
        if have.get("items") or []:
            log(f"reusing the lab's device-plugin DaemonSets in {vocab.PLUGIN_NAMESPACE}")
            return
        self.created_plugin = True
        for doc in s.device_plugin_manifest(replicas=4):
            doc.setdefault("metadata", {}).setdefault("labels", {})[BENCH_LABEL[0]] = BENCH_LABEL[1]
            kind = doc["kind"]
            md = doc["metadata"]
            path = {
                "Namespace": f"/api/v1/namespaces/{md['name']}",
                "ConfigMap": f"/api/v1/namespaces/{md.get('namespace')}/configmaps/{md['name']}",
                "DaemonSet": f"/apis/apps/v1/namespaces/{md.get('namespace')}/daemonsets/{md['name']}",
            }[kind]
            self.api.req(
                "PATCH",
                path,
                body=doc,
                ctype="application/apply-patch+yaml",
                params={"fieldManager": "bench-scale", "force": "true"},
            )
        log(f"created the device-plugin objects in {vocab.PLUGIN_NAMESPACE}")

    def ensure_device_class(self):
        """The DeviceClass the bench's claims name, as NVIDIA's chart installs it (the dra scenario's)."""
        from brickadmin.cluster import dra_publish
        from scenarios import build as scenario

        self.scenario, self.dra_publish = scenario, dra_publish
        path = "/apis/resource.k8s.io/v1/deviceclasses"
        if self.api.req("GET", f"{path}/{DRA_CLASS}", ok=(200, 404)).get("kind") == "DeviceClass":
            return
        body = scenario._device_class(DRA_CLASS, "gpu")
        body["metadata"]["labels"] = {BENCH_LABEL[0]: BENCH_LABEL[1]}
        self.api.req("POST", path, body=body, ok=(201, 409))
        self.created_class = True

    def dra_slice(self, name: str, uid: str, gpus: list, generation: int) -> dict:
        """The node's one ResourceSlice as NVIDIA's kubelet plugin publishes 8 whole GPUs
        (dra_publish), each shared by up to ``shares`` claims (--consumable-shares, the dra
        scenario's shape): every workload pod holds one share."""
        sl = self.dra_publish.resource_slices(name, gpus, generation=generation, node_uid=uid)[0]
        sl["metadata"].pop("generateName")
        sl["metadata"]["labels"] = {BENCH_LABEL[0]: BENCH_LABEL[1]}
        shares = -(-self.args.pods_per_node // GPUS_PER_NODE)
        for dev, gpu in zip(sl["spec"]["devices"], gpus, strict=True):
            self.scenario._shared(dev, f"{gpu['memoryMiB']}Mi", shares)
        return sl

    def create_claim(self, ns: str, name: str, node: str, device: int, pod: dict):
        """The claim ``pod`` holds, as kube-scheduler leaves it: allocated one share of ``device``
        on ``node`` and reserved for the pod (status written directly, as pods' statuses are)."""
        sc = self.scenario
        result = sc._result(
            "gpu", node, f"gpu-{device}", share=sc._uid("share", ns, name), consumed={"memory": "0", "shares": "1"}
        )
        claim = sc._claim(ns, name, [sc._request("gpu", DRA_CLASS)], [result], node, [pod["metadata"]["name"]])
        status = claim.pop("status")
        status["reservedFor"][0]["uid"] = pod["metadata"]["uid"]
        claim["metadata"].pop("uid")
        claim["metadata"]["labels"] = {BENCH_LABEL[0]: BENCH_LABEL[1]}
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        self.api.req("POST", path, body=claim, ok=(201, 409))
        self.api.req("PATCH", f"{path}/{name}/status", body={"status": status}, ctype="application/merge-patch+json")

    def make_ns(self, name, workspace_owner=None):
        body = self.s.namespace(name, owner=workspace_owner)
        body["metadata"]["labels"][BENCH_LABEL[0]] = BENCH_LABEL[1]
        self.api.req("POST", "/api/v1/namespaces", body=body, ok=(201, 409))
        # the ServiceAccount admission refuses a pod until the namespace's "default" account
        # exists (even with automount off); the controller-manager makes it, late when busy
        for _ in range(240):
            st = self.api.req("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default", ok=(200, 404))
            if (st.get("metadata") or {}).get("name") == "default":
                return
            time.sleep(0.25)

    def build_cpu_s(self) -> float:
        """CPU seconds used so far by the lab's processes and this one: what building costs,
        whatever else shares the machine's cores."""
        total = time.process_time()
        for f in (LAB_DIR / "pids").glob("*"):
            if f.suffix:
                continue
            try:
                total += self.cpu_s(int(f.read_text().strip()))
            except (OSError, ValueError):
                pass
        return total

    def grow(self, n_nodes: int, n_pods: int):
        s, vocab = self.s, self.vocab
        t0, cpu0, load0 = time.time(), self.build_cpu_s(), os.getloadavg()[0]
        old_nodes = len(self.nodes)
        new = []
        for i in range(old_nodes, n_nodes):
            model, mem = MODELS[i % 3]
            sharing = "timeslicing" if i % 4 == 0 else "none"
            res = vocab.GPU_SHARED if sharing == "timeslicing" else vocab.GPU
            name = f"{PREFIX}-{i:05d}"
            bench = {BENCH_LABEL[0]: BENCH_LABEL[1]}
            if self.dra:  # labelled for NVIDIA's DRA kubelet plugin: no device-plugin pod, no GPU capacity
                node, sharing, res = self.scenario._dra_node(name, extra_labels=bench), "dra", ""
            else:
                node = s.node(name, model=model, sharing=sharing, gpu_count=GPUS_PER_NODE, labels=bench)
            node["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
            new.append((name, node, s.gpus(name, model, GPUS_PER_NODE, mem)))
            self.nodes.append((name, sharing, res))

        direct = self.args.populate == "direct"
        plugin = self.plugin_configs() if direct else None

        def create_node(item):
            name, node, gpus = item
            if self.dra:  # the node, then the pool its DRA kubelet plugin would publish
                made = self.api.req("POST", "/api/v1/nodes", body=node, ok=(201, 409))
                uid = (made.get("metadata") or {}).get("uid")
                if not uid:  # an earlier run's node (409)
                    uid = self.api.req("GET", f"/api/v1/nodes/{name}")["metadata"]["uid"]
                self.dra_nodes[name] = (uid, gpus, 1)
                sl = self.dra_slice(name, uid, gpus, 1)
                self.api.req("POST", "/apis/resource.k8s.io/v1/resourceslices", body=sl, ok=(201, 409))
                return
            status = node.get("status") or {}
            if direct:  # what gpusim's device plugin would advertise once its pod ran there
                status = self.s_dp.kubelet_status(status, self.advertised(node, gpus, plugin))
                node = {**node, "status": status}  # in the node as created too: KWOK starts from it
            self.api.req("POST", "/api/v1/nodes", body=node, ok=(201, 409))
            self.api.req(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                body={"status": {k: v for k, v in status.items() if k in ("capacity", "allocatable")}},
                ctype="application/merge-patch+json",
            )

        if not direct and not self.dra:  # gpusim advertises the bench nodes' GPUs once their plugin pods run
            hw = self.gpusim("GET", "/hardware")
            if self.orig_hardware is None:
                self.orig_hardware = dict(hw)
            hw.update({name: gpus for name, _, gpus in new})
            self.gpusim("PUT", "/hardware", hw)
        pmap(create_node, new, 16)
        log(f"{len(new)} nodes created in {time.time() - t0:.0f}s")

        n_ns = max(1, n_nodes // 10)
        # each waits for the controller-manager to make its ServiceAccount: 7 minutes one by one
        # for 500 on a busy machine
        new_ns = [(f"{PREFIX}-ws-{k:04d}", f"bench{k}") for k in range(len(self.namespaces), n_ns)]
        pmap(lambda item: self.make_ns(item[0], workspace_owner=item[1]), new_ns, 16)
        self.namespaces += [name for name, _ in new_ns]
        log(f"{len(new_ns)} namespaces created in {time.time() - t0:.0f}s since the start")
        # one device-plugin pod per node makes up the rest; DRA nodes run none (their kubelet
        # plugin is not simulated as a pod), so every pod there is a workload pod holding a claim
        want = n_pods if self.dra else n_pods - n_nodes
        old_pods = self.n_pods
        # a lab left by an interrupted run already has most pods: create only the missing ones
        existing = (
            set()
            if self.own_lab
            else {
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.api.list_all("/api/v1/pods", params={"labelSelector": "=".join(BENCH_LABEL)})
            }
        )
        if existing:
            log(f"{len(existing)} bench pods already there")
        t1 = time.time()
        done = [0]

        ppn = self.args.pods_per_node
        bulk_etcd = self.args.bulk == "etcd"

        def create_pod(p):
            # DRA: pods_per_node pods on each node (a node keeps its pods as the cluster grows), one
            # share of its GPUs each, round robin
            name, _, res = self.nodes[p // ppn if self.dra else p % n_nodes]
            ns = self.namespaces[p % n_ns]
            if (ns, f"w-{p:06d}") in existing:
                return
            claim = f"w-{p:06d}" if self.dra else None
            gpu = p % self.args.gpu_every == 0
            body = self.pod(ns, f"w-{p:06d}", name, res, gpu, status_by_bench=direct, claim=claim)
            created = self.api.req("POST", f"/api/v1/namespaces/{ns}/pods", body=body, ok=(201, 409))
            if direct and created.get("metadata"):  # (409: an earlier run's, already Running)
                self.api.req(
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/pods/{body['metadata']['name']}/status",
                    body={"status": running_status(body, p)},
                    ctype="application/merge-patch+json",
                )
            if claim and created.get("metadata"):
                self.create_claim(ns, claim, name, p % ppn % GPUS_PER_NODE, created)
            done[0] += 1
            if done[0] % 10000 == 0:
                log(f"  {done[0]} pods created ({done[0] / (time.time() - t1):.0f}/s)")

        # Prometheus scraping kube-state-metrics' series of every new pod took half a core and
        # slowed the build; nothing reads it until the measurement (the watcher runs without it)
        # With --populate direct gpusim serves none of the bench nodes, and its list of every
        # pod (for the DCGM labels) cost the API server a tenth of the build: paused too.
        self.pause_background(names=("prometheus", "kube-state-metrics") + (("gpusim",) if direct else ()))
        try:
            todo = range(self.n_pods, want)
            if bulk_etcd:  # the first through the API server, as the shape of the rest
                todo = [q for q in todo if (self.namespaces[q % n_ns], f"w-{q:06d}") not in existing]
                if todo:
                    create_pod(todo[0])
                    self.pause_background(names=REACTING)
                    self.etcd_bulk(todo[0], todo[1:], n_ns)
                    done[0] += len(todo) - 1
            else:
                pmap(create_pod, todo, self.args.concurrency)
            log(
                f"{want - self.n_pods} pods created in {time.time() - t1:.0f}s "
                f"({(want - self.n_pods) / max(0.001, time.time() - t1):.0f}/s)"
            )
            self.n_pods = want
            self.settle(n_nodes, want)
        finally:
            self.resume_background()
            if bulk_etcd:
                # The controllers stay paused until the watcher has primed: resumed after a bulk
                # they relist every pod and claim, and beside the watcher's own first list at
                # 5,000 nodes those lists ran past the API server's 60 s timeout, were asked
                # again, and grew it to 15 GiB. measure() lets them catch up once it has its view.
                self.pause_background(names=REACTING)
                self.held = list(self.paused)
                self.paused.clear()
            if self.args.watcher_only or bulk_etcd:
                # Nothing measured reads Prometheus (the watcher runs without it): keep its CPU
                # free. At 5,000 DRA nodes, resumed, kube-state-metrics listed the 150,000 pods
                # into 3.4 GiB and Prometheus scraped it into 2.3 GiB, beside an API server of 9.
                self.pause_background(names=("prometheus", "kube-state-metrics"))
                self.kept += self.paused  # until the end, not resumed after the page timings' pauses
                self.paused.clear()
        cpu = self.build_cpu_s() - cpu0
        created = (n_nodes - old_nodes) + (want - old_pods)
        log(
            f"built {n_nodes - old_nodes} nodes and {want - old_pods} pods in {time.time() - t0:.0f} s "
            f"(--populate {self.args.populate}"
            + (", the bulk of pods and claims written to etcd" if bulk_etcd else "")
            + f"); CPU of the lab and the bench {cpu:.0f} s, "
            f"{cpu / max(1, created) * 1000:.1f} ms per object; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
        )
        return time.time() - t0

    def etcd_url(self) -> str:
        """The lab's etcd client URL, from its command line (lab/lab.py's PORTS, offset)."""
        pid = int((LAB_DIR / "pids" / "etcd").read_text().strip())
        for arg in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"):
            if arg.startswith("--listen-client-urls="):
                return arg.split("=", 1)[1].split(",")[0].rstrip("/")
        raise RuntimeError("the lab's etcd has no --listen-client-urls")

    def etcd_bulk(self, first: int, rest: list, n_ns: int) -> None:
        """Pods ``rest`` and their claims written straight into the lab's etcd, in the API
        server's storage layout (/registry/pods/<ns>/<name>, /registry/resourceclaims/<ns>/<name>;
        JSON values, which its storage decoder reads as well as protobuf), then waited for in its
        watch cache. Each is pod ``first`` and its claim as the API server stored them (defaults,
        admission's tolerations and service account, managedFields, the Running status, the
        allocation) with what differs per pod replaced: namespace, name, node, uids, device,
        share and pod IP. Through the API server each pod and claim is four requests of about
        3 ms of its CPU each; this is what makes 5,000 nodes buildable on 2 cores."""
        import base64
        import uuid

        import requests

        ppn = self.args.pods_per_node
        ns0, name0 = self.namespaces[first % n_ns], f"w-{first:06d}"
        pod = self.api.req("GET", f"/api/v1/namespaces/{ns0}/pods/{name0}")
        claim = self.api.req("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns0}/resourceclaims/{name0}")
        for obj in (pod, claim):
            obj["metadata"].pop("resourceVersion", None)  # etcd's revision is the object's version
        node0 = pod["spec"]["nodeName"]
        result0 = claim["status"]["allocation"]["devices"]["results"][0]
        ip0 = pod["status"]["podIP"]

        def tokens(ns, name, node, pod_uid, claim_uid, share, device, ip) -> list:
            # longest first: a node name is not inside a namespace's, nor a name inside either
            return [
                (f'"{ns0}"', f'"{ns}"'),
                (f'"{name0}"', f'"{name}"'),
                (f'"{node0}"', f'"{node}"'),
                (f'"{pod["metadata"]["uid"]}', f'"{pod_uid}'),
                (f'"{claim["metadata"]["uid"]}"', f'"{claim_uid}"'),
                (f'"{result0["shareID"]}"', f'"{share}"'),
                (f'"device":"{result0["device"]}"', f'"device":"{device}"'),
                (f'"{ip0}', f'"{ip}'),  # also inside managedFields' escaped podIPs key
            ]

        pod_s = json.dumps(pod, separators=(",", ":"))
        claim_s = json.dumps(claim, separators=(",", ":"))
        for old, _ in tokens(*[""] * 8):
            if old not in pod_s + claim_s:
                raise RuntimeError(f"etcd bulk: {old} not in the template pod and claim")

        def render(q: int) -> tuple[str, str, str, str]:
            ns, name = self.namespaces[q % n_ns], f"w-{q:06d}"
            node = self.nodes[q // ppn][0]
            ip = f"10.{244 + q // 65536 % 10}.{q // 256 % 256}.{q % 256}"  # as running_status
            share = self.scenario._uid("share", ns, name)
            p, c = pod_s, claim_s
            for old, new in tokens(
                ns, name, node, str(uuid.uuid4()), str(uuid.uuid4()), share, f"gpu-{q % ppn % GPUS_PER_NODE}", ip
            ):
                p, c = p.replace(old, new), c.replace(old, new)
            return ns, name, p, c

        url = self.etcd_url() + "/v3/kv/txn"
        local = threading.local()
        last = {"rev": 0, "key": None}
        lock = threading.Lock()
        t0, written = time.time(), [0]

        def b64(x: str) -> str:
            return base64.b64encode(x.encode()).decode()

        def put(chunk):
            ops = []
            for q in chunk:
                ns, name, p, c = render(q)
                ops.append({"requestPut": {"key": b64(f"/registry/pods/{ns}/{name}"), "value": b64(p)}})
                ops.append({"requestPut": {"key": b64(f"/registry/resourceclaims/{ns}/{name}"), "value": b64(c)}})
            s = getattr(local, "s", None) or requests.Session()
            local.s = s
            r = s.post(url, data=json.dumps({"success": ops}), timeout=120)
            r.raise_for_status()
            rev = int(r.json()["header"]["revision"])
            with lock:
                if rev > last["rev"]:
                    last.update(rev=rev, key=(ns, name))
                written[0] += len(chunk)
                if written[0] // 10000 != (written[0] - len(chunk)) // 10000:
                    log(f"  {written[0]} pods and claims written to etcd ({written[0] / (time.time() - t0):.0f}/s)")

        per_txn = 64  # 128 puts: etcd's default --max-txn-ops
        pmap(put, [rest[i : i + per_txn] for i in range(0, len(rest), per_txn)], 3)
        log(f"{len(rest)} pods and {len(rest)} claims written to etcd in {time.time() - t0:.0f}s")
        if last["key"] is None:
            return
        # etcd's watch delivers in revision order: once the last write is in the API server's
        # cache (a GET at resourceVersion 0 is served from it), every earlier one is too
        t1 = time.time()
        ns, name = last["key"]
        while True:
            got = self.api.req(
                "GET", f"/api/v1/namespaces/{ns}/pods/{name}", params={"resourceVersion": "0"}, ok=(200, 404)
            )
            if got.get("kind") == "Pod" and int(got["metadata"]["resourceVersion"]) >= last["rev"]:
                break
            if time.time() - t1 > self.args.settle_timeout:
                raise RuntimeError(f"the API server's cache did not reach etcd revision {last['rev']}")
            time.sleep(2)
        log(f"the API server's watch cache caught up in {time.time() - t1:.0f}s")

    def wait_lab_quiet(self, busy=0.2, window=10.0):
        """Until the controllers paused during an etcd bulk have caught up with it: together
        they use less than ``busy`` of a core, bounded by --settle-timeout."""
        names = REACTING
        t0 = time.time()
        while time.time() - t0 < self.args.settle_timeout:
            a = self.lab_cpu(names)
            time.sleep(window)
            b = self.lab_cpu(names)
            used = {n: (b[n] - a[n]) / window for n in b if n in a}
            if sum(used.values()) < busy:
                break
            log("  the lab catching up (cores): " + ", ".join(f"{n} {u:.2f}" for n, u in used.items()))
        log(f"the lab was quiet after {time.time() - t0:.0f}s")

    def lab_cpu(self, names) -> dict:
        out = {}
        for n in names:
            try:
                out[n] = self.cpu_s(int((LAB_DIR / "pids" / n).read_text().strip()))
            except (OSError, ValueError):
                pass
        return out

    def plugin_configs(self) -> dict:
        """The device-plugin DaemonSets and ConfigMaps as gpusim reads them."""
        from brickadmin.cluster import deviceplugin as dp

        self.s_dp = dp
        ns = dp.PLUGIN_NAMESPACE
        return {
            "daemonsets": self.api.list_all(f"/apis/apps/v1/namespaces/{ns}/daemonsets"),
            "configmaps": {c["metadata"]["name"]: c for c in self.api.list_all(f"/api/v1/namespaces/{ns}/configmaps")},
        }

    def advertised(self, node, gpus, plugin) -> dict | None:
        """The resources gpusim's plugin pod on ``node`` would advertise (lab/gpusim.py's
        plugin_config with brickadmin.cluster.deviceplugin, the same code)."""
        dp = self.s_dp
        ds = dp.daemonset_for_node(node, plugin["daemonsets"])
        if ds is None:
            return None
        cm = plugin["configmaps"].get(dp.config_map_name(ds) or "")
        data = (cm or {}).get("data") or {}
        text = data.get(dp.CONFIG_KEY)
        if text is None:
            key = (node["metadata"].get("labels") or {}).get(self.vocab.DEVICE_PLUGIN_CONFIG_LABEL)
            text = data.get(key) if key else None
        return dp.advertised_resources(gpus, text)

    def pod(self, ns, name, node, res, gpu, status_by_bench=False, claim=None):
        c = {
            "name": "main",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }
        if claim:  # the GPU is the claim's (DRA): no device-plugin resource
            c["resources"]["claims"] = [{"name": "gpu"}]
        elif gpu:
            c["resources"] = {"requests": {res: "1"}, "limits": {res: "1"}}
        md = {"name": name, "namespace": ns, "labels": {BENCH_LABEL[0]: BENCH_LABEL[1]}}
        if status_by_bench:  # KWOK leaves its status (and its deletion) alone: the bench writes them
            md["annotations"] = {KWOK_STATUS: "custom"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": md,
            "spec": {
                "nodeName": node,
                "containers": [c],
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 0,
                "enableServiceLinks": False,
                **({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]} if claim else {}),
            },
        }

    def settle(self, n_nodes, n_pods):
        """Device-plugin pods on every bench node, gpusim advertising their GPUs, workload pods
        Running (KWOK), each within a bounded wait. With --populate direct the GPUs and the
        workload pods' status were written by the bench: the plugin pods (the DaemonSet
        controller's, Running by KWOK) are what is waited for."""
        t0 = time.time()
        names = {n for n, sharing, _ in self.nodes if sharing != "dra"}  # DRA nodes run no plugin pod
        pending = None
        if self.args.populate == "direct" or self.dra:
            plugin_ns = self.vocab.PLUGIN_NAMESPACE
            while time.time() - t0 < self.args.settle_timeout:
                running = {
                    (p.get("spec") or {}).get("nodeName")
                    for p in self.api.list_all(
                        f"/api/v1/namespaces/{plugin_ns}/pods", params={"fieldSelector": "status.phase=Running"}
                    )
                }
                missing = len(names - running)
                pending = self.count_pending()
                if missing == 0 and pending == 0:
                    break
                log(f"  settling: {missing} bench nodes without a Running plugin pod, {pending} bench pods not Running")
                time.sleep(10)
            log(f"settled in {time.time() - t0:.0f}s" + ("" if pending == 0 else f" (gave up: {pending} not Running)"))
            return
        while time.time() - t0 < self.args.settle_timeout:
            nodes = self.api.list_all("/api/v1/nodes", params={"labelSelector": "=".join(BENCH_LABEL)})
            advertised = sum(
                1
                for n in nodes
                if any(
                    k.startswith("nvidia.com/") and v not in ("0",)
                    for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()
                )
            )
            pending = self.count_pending()
            if advertised >= len(names) and pending == 0:
                break
            log(f"  settling: {advertised}/{len(names)} nodes advertise GPUs, {pending} bench pods not Running")
            time.sleep(10)
        log(f"settled in {time.time() - t0:.0f}s" + ("" if pending == 0 else f" (gave up: {pending} pods not Running)"))

    def count_pending(self) -> int:
        n = 0
        for ns in self.namespaces:
            page = self.api.req(
                "GET",
                f"/api/v1/namespaces/{ns}/pods",
                params={"fieldSelector": "status.phase!=Running", "limit": 500},
            )
            n += len(page.get("items") or [])
        return n

    # ------------------------------------------------------------------ processes
    def env(self, db: Path) -> dict:
        env = dict(os.environ)
        env.update(
            {
                "BRICK_KUBECONFIG": self.kubeconfig,
                "BRICK_CLUSTER": "kube",
                "DATABASE_URL": f"sqlite:///{db}",
                "BRICK_VAR_DIR": str(self.tmp),
                "BRICK_LEASE_NAMESPACE": LEASE_NS,
                "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
                "PYTHONUNBUFFERED": "1",
                "LOG_LEVEL": "WARNING",
            }
        )
        env.pop("PROMETHEUS_URL", None)  # DCGM on its interval is not what this measures
        return env

    def start_watcher(self, db: Path, tag: str) -> subprocess.Popen:
        logf = open(self.tmp / f"watcher-{tag}.log", "ab")  # noqa: SIM115 (closed with the process)
        p = subprocess.Popen(
            [PY, str(REPO / "manage.py"), "watch_cluster", "--identity", f"bench-scale-{tag}"],
            env=self.env(db),
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=str(REPO),
        )
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, timeout=20):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def start_worker(self, db: Path):
        errf = open(self.tmp / "worker.log", "ab")  # noqa: SIM115 (closed with the process)
        p = subprocess.Popen(
            [PY, str(Path(__file__).resolve()), "--worker"],
            env=self.env(db),
            cwd=str(REPO),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errf,
            text=True,
        )
        self.procs.append(p)
        self.wp = p
        self._read()
        return p

    def _read(self):
        for line in self.wp.stdout:
            if line.startswith(MARK):
                out = json.loads(line[len(MARK) :])
                if "error" in out:
                    raise RuntimeError(f"page worker: {out['error']}\n{out.get('trace', '')}")
                return out
        raise RuntimeError(f"the page worker exited (see {self.tmp / 'worker.log'})")

    def ask(self, **cmd):
        self.wp.stdin.write(json.dumps(cmd) + "\n")
        self.wp.stdin.flush()
        return self._read()

    def first_request(self, db: Path, url: str) -> dict:
        r = subprocess.run(
            [PY, str(Path(__file__).resolve()), "--first", url],
            env=self.env(db),
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        for line in r.stdout.splitlines():
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])
        Path("/tmp/brick-scale-first.err").write_text(r.stderr)
        raise RuntimeError(f"first request of {url} failed (stderr in /tmp/brick-scale-first.err): {r.stderr[-600:]}")

    @staticmethod
    def rss_mib(pid) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
        return float("nan")

    @staticmethod
    def cpu_s(pid) -> float:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def wait_view(self, min_generation=1, timeout=900, watcher=None):
        t0 = time.time()
        while time.time() - t0 < timeout:
            st = self.ask(cmd="state")
            if st["generation"] >= min_generation:
                return st
            if watcher is not None and watcher.poll() is not None:
                raise RuntimeError(f"the watcher exited with {watcher.returncode} before publishing (log: {self.tmp})")
            time.sleep(0.2)
        raise RuntimeError("the watcher published no view in time")

    def wait_quiet(self, quiet=4.0, timeout=180) -> tuple[float, dict]:
        """Until the view's generation has not moved for `quiet` seconds."""
        t0 = time.time()
        st = self.ask(cmd="state")
        last_gen, since = st["generation"], time.time()
        while time.time() - t0 < timeout:
            time.sleep(0.5)
            st = self.ask(cmd="state")
            if st["generation"] != last_gen:
                last_gen, since = st["generation"], time.time()
            elif time.time() - since >= quiet:
                return since - t0, st
        return time.time() - t0, st

    # ------------------------------------------------------------------ measuring one size
    def measure(self, n_nodes: int, n_pods: int) -> dict:
        r = {"nodes": n_nodes, "pods": n_pods, "load": [os.getloadavg()[0]]}
        db = self.tmp / f"view-{n_nodes}.sqlite3"
        subprocess.run(
            [PY, str(REPO / "manage.py"), "migrate", "--verbosity", "0"], env=self.env(db), check=True, cwd=str(REPO)
        )
        self.start_worker(db)

        # -- the watcher: initial list, memory
        t0 = time.time()
        w = self.start_watcher(db, f"{n_nodes}a")
        st = self.wait_view(watcher=w)
        r["first_view_s"] = time.time() - t0
        ws = st.get("watcher_status") or {}
        r["rss_primed"] = self.rss_mib(w.pid)
        r["cpu_prime"] = self.cpu_s(w.pid)
        time.sleep(12)  # a heartbeat carries the watcher's own started/primed times
        st = self.ask(cmd="state")
        ws = st.get("watcher_status") or {}
        r["list_s"] = self._seconds(ws.get("started_at"), ws.get("primed_at"))
        r["view_nodes"], r["view_gpu_nodes"] = st.get("nodes"), st.get("gpu_nodes")
        r["publish_first"] = next((t for n, t in ws.get("publish_seconds") or [] if n == 1), None)
        r["streams"] = {k: v.get("objects") for k, v in (ws.get("streams") or {}).items()}
        r["rss_settled"] = self.rss_mib(w.pid)
        log(f"view published after {r['first_view_s']:.1f}s; list {r['list_s']}; RSS {r['rss_primed']:.0f} MiB")
        if self.held:  # after an etcd bulk: the controllers catch up before anything else is measured
            self.paused, self.held = self.held, []
            self.resume_background()
            self.wait_lab_quiet()
        if self.args.watcher_only:  # the memory figure and the counts, for a size too slow to measure whole
            time.sleep(60)
            r["rss_after_churn"] = self.rss_mib(w.pid)  # no churn: a minute of following the cluster
            r["counts"] = self.count_check()
            self.stop(w)
            self.stop(self.wp)
            return r

        # -- page server time: warm, and the first request in a new process. Twice: with the lab's
        # simulators running (KWOK's 500-2,000 kubelets, gpusim, kube-state-metrics and Prometheus
        # share this machine's 2 cores with the page process), and with them paused, which is what
        # the product's own server has to itself in a deployment (the watcher keeps running).
        # kubectl get nodes -o json is timed under the same two conditions, for the ratio.
        r["warm_busy"] = self.ask(cmd="time", urls=list(PAGES), n=20)
        r["kubectl_busy_ms"] = self.kubectl_get_nodes_ms()
        self.pause_background(with_prometheus=True)
        try:
            time.sleep(2)
            r["warm"] = self.ask(cmd="time", urls=list(PAGES), n=20)
            r["first"] = {u: self.first_request(db, u) for u in PAGES}
            r["kubectl_ms"] = self.kubectl_get_nodes_ms()
        finally:
            self.resume_background()

        # -- label change to page; and how long each of those generations took to publish
        n0, _ = self.publications()
        g0 = self.ask(cmd="state")["generation"]
        r["label"] = self.label_delays(n_nodes)
        n1, times = self.publications()
        g1 = self.ask(cmd="state")["generation"]
        r["publish_label"] = [t for n, t in times if n0 < n <= n1]
        r["label_paused"] = self.label_delays(n_nodes, paused=True)
        n2, times = self.publications()
        r["publish_label_paused"] = [t for n, t in times if n1 < n <= n2]
        ws = self.ask(cmd="state").get("watcher_status") or {}  # its recent publications by phase
        phases = ws.get("publish_phases") or []
        r["phases_label_paused"] = [p for p in phases if p["generation"] > g1]
        r["phases_label"] = [p for p in phases if g0 < p["generation"] <= g1]
        r["gc_label_paused"] = ws.get("gc")
        paused = r["label_paused"]
        if paused["dash"]:  # said now: a run stopped later (its memory guard) still leaves these
            log(
                f"change -> page, simulators paused: Dashboard median {statistics.median(paused['dash']):.2f} s, "
                f"p95 {pct(paused['dash'], 0.95):.2f} s; Nodes p95 {pct(paused['nodes'], 0.95):.2f} s; publications "
                f"{[round(t, 3) for t in r['publish_label_paused']]}; phases {r['phases_label_paused']}"
            )

        # -- churn: the watcher's CPU
        r["churn"] = self.churn(w)
        r["rss_after_churn"] = self.rss_mib(w.pid)
        n3, times = self.publications()
        r["publish_churn"] = [t for n, t in times if n2 < n <= n3]
        r["counts"] = self.count_check()

        # -- API calls per page view (watcher stopped, lab's other clients paused)
        self.stop(w)
        r["watcher_exit"] = w.returncode
        r["api"] = self.api_per_view()
        r["load"].append(os.getloadavg()[0])
        self.stop(self.wp)
        return r

    def publications(self) -> tuple[int, list]:
        """(publications so far, [(number, seconds it took), ...] of the recent ones), from the
        watcher's next heartbeat: the time from its snapshot to the view's transaction committed."""
        time.sleep(HEARTBEAT_S + 0.5)
        ws = self.ask(cmd="state").get("watcher_status") or {}
        return ws.get("published", 0), ws.get("publish_seconds") or []

    @staticmethod
    def _seconds(a, b):
        from datetime import datetime

        try:
            return (datetime.fromisoformat(str(b)) - datetime.fromisoformat(str(a))).total_seconds()
        except (TypeError, ValueError):
            return None

    def label_delays(self, n_nodes, *, paused=False) -> dict:
        """Node label change -> pages showing it, `--changes` times. With `paused`, the lab's
        simulators are stopped around each change (from a second before the PATCH until the
        pages show it, then 2 s to catch up): what the watcher and the page process see when
        2,000 simulated kubelets do not share these 2 cores with them."""
        changes = self.args.changes
        dash, dash_after, dash_read, nodes_pg, patch, missed = [], [], [], [], [], 0
        gen0, w0 = self.ask(cmd="state")["generation"], time.time()
        for i in range(changes):
            node = self.nodes[(i * 37 + 5 + (11 if paused else 0)) % n_nodes][0]
            # new in every run: a lab reused after an interrupted run still carries the old labels,
            # and a page already showing the name would be "seen" before the change
            model = f"BenchM{n_nodes}x{i:02d}{'p' if paused else 'r'}{self.run_id}"
            # the Dashboard's per-model rows are its magnifier fragment (/dashboard/models/, loaded into
            # the Dashboard by htmx); "/" itself shows totals, which a model label does not change
            checks = [["/dashboard/models/", model], [f"/nodes/?model={model}", node]]
            if paused:
                self.pause_background(with_prometheus=True)
                time.sleep(1.0)
            try:
                self.wp.stdin.write(json.dumps({"cmd": "wait_text", "checks": checks, "timeout": 30}) + "\n")
                self.wp.stdin.flush()
                # the label change is one PATCH of the node (what `kubectl label` sends, without
                # kubectl's own start-up): the write lands between its send and its answer
                t0 = time.time()
                self.change_model(node, model)
                t1 = time.time()
                res = self._read()
            finally:
                if paused:
                    self.resume_background()
            patch.append(t1 - t0)
            f = res["found"]
            # timed from the PATCH's send to the answer of the page request that showed it: an
            # upper bound (the PATCH's round trip and the page's own render included); from the
            # PATCH's answer to the start of that page request, a lower bound
            if checks[0][0] in f:
                started, answered = f[checks[0][0]]
                dash.append(answered - t0)
                dash_after.append(answered - t1)
                dash_read.append(max(0.0, started - t1))
            else:
                missed += 1
            if checks[1][0] in f:
                nodes_pg.append(f[checks[1][0]][1] - t0)
            time.sleep(2.0 if paused else 0.3)
        gens = self.ask(cmd="state")["generation"] - gen0
        return {
            "dash": dash,
            "dash_after": dash_after,
            "dash_read": dash_read,
            "nodes": nodes_pg,
            "patch": patch,
            "missed": missed,
            "changes": changes,
            "generations": gens,
            "wall_s": time.time() - w0,
        }

    def change_model(self, node: str, model: str) -> None:
        """The node's GPUs renamed ``model``, in one write. Device plugin: its GPU product label (one
        merge PATCH of the node, as `kubectl label` sends it). DRA, where the model is the devices'
        productName: its DRA kubelet plugin republishing the pool (one merge PATCH of its slice, the
        pool's generation raised)."""
        if not self.dra:
            self.api.req(
                "PATCH",
                f"/api/v1/nodes/{node}",
                ctype="application/merge-patch+json",
                body={"metadata": {"labels": {self.vocab.GPU_PRODUCT_LABEL: model}}},
            )
            return
        uid, gpus, generation = self.dra_nodes[node]
        sl = self.dra_slice(node, uid, [{**g, "model": model} for g in gpus], generation + 1)
        self.api.req(
            "PATCH",
            f"/apis/resource.k8s.io/v1/resourceslices/{self.dra_publish.slice_name(node, 1)}",
            ctype="application/merge-patch+json",
            body={"spec": sl["spec"]},
        )
        self.dra_nodes[node] = (uid, gpus, generation + 1)

    def churn(self, w, n=1000) -> dict:
        self.make_ns(CHURN_NS)
        self.wait_quiet(quiet=3, timeout=60)
        gen0 = self.ask(cmd="state")["generation"]
        c0, t0 = self.cpu_s(w.pid), time.time()
        res = self.nodes

        def create(p):
            name, _, r = res[p % len(res)]
            claim = f"churn-{p:05d}" if self.dra and p % 10 == 0 else None  # DRA: the GPU pods hold a claim
            made = self.api.req(
                "POST",
                f"/api/v1/namespaces/{CHURN_NS}/pods",
                body=self.pod(CHURN_NS, f"churn-{p:05d}", name, r, p % 10 == 0, claim=claim),
                ok=(201, 409),
            )
            if claim and made.get("metadata"):  # a share of the last two GPUs (30 pods a node leave one on each)
                self.create_claim(CHURN_NS, claim, name, GPUS_PER_NODE - 1 - p // len(res) % 2, made)

        def delete(p):
            self.api.req(
                "DELETE",
                f"/api/v1/namespaces/{CHURN_NS}/pods/churn-{p:05d}",
                body={"gracePeriodSeconds": 0},
                ok=(200, 202, 404),
            )
            if self.dra and p % 10 == 0:
                self.api.req(
                    "DELETE",
                    f"/apis/resource.k8s.io/v1/namespaces/{CHURN_NS}/resourceclaims/churn-{p:05d}",
                    ok=(200, 202, 404),
                )

        pmap(create, range(n), self.args.concurrency)
        t_created = time.time() - t0
        pmap(delete, range(n), self.args.concurrency)
        t_deleted = time.time() - t0
        _, st = self.wait_quiet(quiet=4, timeout=180)
        c1 = self.cpu_s(w.pid)
        return {
            "cpu_s": c1 - c0,
            "wall_s": time.time() - t0,
            "create_s": t_created,
            "delete_s": t_deleted,
            "generations": st["generation"] - gen0,
            "alive": w.poll() is None,
        }

    def count_check(self) -> dict:
        """The watcher's kept objects (its heartbeat) against a fresh list."""
        vocab = self.vocab
        time.sleep(11)  # one more heartbeat
        st = self.ask(cmd="state")
        ws = st.get("watcher_status") or {}
        gpu_pods = plugin = n_pods = claim_pods = 0
        req = {}
        for p in self.api.each("/api/v1/pods"):  # counted as listed: the list in full is GiBs at 5,000 nodes
            md, spec = p["metadata"], p.get("spec") or {}
            n_pods += 1
            claim_pods += bool(spec.get("resourceClaims"))
            if md.get("namespace") == vocab.PLUGIN_NAMESPACE and (md.get("labels") or {}).get(vocab.COMPONENT_LABEL):
                plugin += 1
                continue
            asks = {}
            for c in spec.get("containers") or []:
                rr = c.get("resources") or {}
                for k, v in {**(rr.get("limits") or {}), **(rr.get("requests") or {})}.items():
                    if k.startswith("nvidia.com/"):
                        asks[k] = asks.get(k, 0) + int(v)
            if asks:
                gpu_pods += 1
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    for k, v in asks.items():
                        req[k] = req.get(k, 0) + v
        nodes = self.api.list_all("/api/v1/nodes")
        gpu_labelled = sum(1 for n in nodes if (n["metadata"].get("labels") or {}).get(vocab.GPU_TYPE_LABEL))
        dra = {}
        if self.dra:  # the claims and the devices against the view's DRA resource
            slices = self.api.list_all("/apis/resource.k8s.io/v1/resourceslices")
            n_claims = allocated = 0
            for c in self.api.each("/apis/resource.k8s.io/v1/resourceclaims"):
                n_claims += 1
                if (c.get("status") or {}).get("allocation"):
                    allocated += 1
                    # each request counted as 1 device (ExactCount 1), as the view's quota-style row
                    for rq in ((c.get("spec") or {}).get("devices") or {}).get("requests") or []:
                        key = f"{(rq.get('exactly') or {}).get('deviceClassName')}.deviceclass.resource.k8s.io/devices"
                        req[key] = req.get(key, 0) + int((rq.get("exactly") or {}).get("count") or 1)
            dra = {
                "live_dra_nodes": sum(
                    1 for n in nodes if (n["metadata"].get("labels") or {}).get(vocab.DRA_DRIVER_DEPLOY_LABEL) == "true"
                ),
                "live_slices": len(slices),
                "live_devices": sum(len((s.get("spec") or {}).get("devices") or []) for s in slices),
                "live_claims": n_claims,
                "live_allocated": allocated,
                "live_claim_pods": claim_pods,
            }
        return {
            **dra,
            "live_pods": n_pods,
            "live_gpu_pods": gpu_pods,
            "live_plugin_pods": plugin,
            "live_nodes": len(nodes),
            "live_gpu_labelled": gpu_labelled,
            "live_requested": req,
            "streams": {k: v.get("objects") for k, v in (ws.get("streams") or {}).items()},
            "view_nodes": st.get("nodes"),
            "view_gpu_nodes": st.get("gpu_nodes"),
            "view_requested": {k: v["requested"] for k, v in (st.get("resources") or {}).items()},
            "errors": (ws.get("errors"), ws.get("relists"), ws.get("last_error")),
        }

    def api_per_view(self, n=20) -> dict:
        for u in PAGES:  # warm (and let the process's API-server probe happen outside the windows)
            self.ask(cmd="views", url=u, n=1)
        out = {}
        self.pause_background()
        try:
            time.sleep(1.0)  # let in-flight requests of the paused clients finish
            m0 = self.api.metrics()
            time.sleep(1.5)
            m1 = self.api.metrics()
            out["residual"] = (diff(m1[0], m0[0]), diff(m1[1], m0[1]), 1.5)
            for u in PAGES:
                a = self.api.metrics()
                v = self.ask(cmd="views", url=u, n=n)
                b = self.api.metrics()
                out[u] = (diff(b[0], a[0]), diff(b[1], a[1]), v)
        finally:
            self.resume_background()
        return out

    # ------------------------------------------------------------------ cleanup
    def cleanup(self):
        self.paused += self.held
        self.held = []
        self.resume_background()
        self.paused, self.kept = self.kept, []
        self.resume_background()
        for p in list(self.procs):
            try:
                self.stop(p, timeout=10)
            except Exception as exc:  # noqa: BLE001
                log(f"stopping pid {p.pid}: {exc}")
        # A lab this benchmark brought up goes down whole (its etcd data with it): deleting
        # 60,000 pods one by one first took longer than the measurement.
        if self.api is not None and not self.own_lab:
            t0 = time.time()
            try:
                self._delete_cluster_objects()
                log(f"lab cleaned in {time.time() - t0:.0f}s")
            except Exception as exc:  # noqa: BLE001
                log(f"cleanup incomplete: {exc}")
        if self.lock is not None:
            self.lock.__exit__(None, None, None)
        if self.own_lab:
            subprocess.run(
                [str(REPO / "lab" / "down")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
            )
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _delete_cluster_objects(self):
        api = self.api
        sel = "=".join(BENCH_LABEL)
        nss = [n["metadata"]["name"] for n in api.list_all("/api/v1/namespaces", params={"labelSelector": sel})]
        nss = [n for n in nss if n.startswith(PREFIX)]
        pmap(
            lambda ns: api.req(
                "DELETE",
                f"/api/v1/namespaces/{ns}/pods",
                params={"gracePeriodSeconds": "0"},
                ok=(200, 202, 404),
                timeout=600,
            ),
            nss,
            4,
        )
        pmap(lambda ns: api.req("DELETE", f"/api/v1/namespaces/{ns}", ok=(200, 202, 404)), nss + [LEASE_NS], 8)
        api.req("DELETE", "/api/v1/nodes", params={"labelSelector": sel}, ok=(200, 202, 404), timeout=600)
        if self.dra:  # the slices would go with their nodes, but the garbage collector takes its time
            dra = "/apis/resource.k8s.io/v1"
            api.req("DELETE", f"{dra}/resourceslices", params={"labelSelector": sel}, ok=(200, 202, 404), timeout=600)
            if self.created_class:
                api.req("DELETE", f"{dra}/deviceclasses/{DRA_CLASS}", ok=(200, 202, 404))
        plugin_ns = getattr(getattr(self, "vocab", None), "PLUGIN_NAMESPACE", "brick-nvidia")
        if self.created_plugin:
            api.req("DELETE", f"/api/v1/namespaces/{plugin_ns}", ok=(200, 202, 404))
        # device-plugin pods bound to the deleted nodes (the pod GC would take them later)
        leftover = [
            p["metadata"]["name"]
            for p in api.list_all(f"/api/v1/namespaces/{plugin_ns}/pods")
            if (p.get("spec") or {}).get("nodeName", "").startswith(PREFIX + "-")
        ]
        pmap(
            lambda n: api.req(
                "DELETE", f"/api/v1/namespaces/{plugin_ns}/pods/{n}", body={"gracePeriodSeconds": 0}, ok=(200, 202, 404)
            ),
            leftover,
            16,
        )
        if self.orig_hardware is not None:
            self.gpusim("PUT", "/hardware", self.orig_hardware)
        deadline = time.time() + 300
        while time.time() < deadline:
            left = [
                n["metadata"]["name"]
                for n in api.list_all("/api/v1/namespaces", params={"labelSelector": sel})
                if n["metadata"]["name"].startswith(PREFIX)
            ]
            if not left:
                break
            time.sleep(3)
        else:
            log(f"namespaces still terminating: {left[:5]}")


# =========================================================================== printing
def report(r: dict, targets: dict) -> None:
    n, p = r["nodes"], r["pods"]
    every = f", one workload pod in {r['gpu_every']} on a GPU" if r.get("gpu_every") else ""
    print(f"\n=== {n:,} nodes / {p:,} pods, {r['stack']}{every} ===")
    print(
        f"cluster built (nodes, pods, settling; not a measured figure): {r['build_s']:.0f} s; "
        f"1-min load average at start/end of the measurements {r['load'][0]:.1f}/{r['load'][-1]:.1f}"
    )
    ls = f"{r['list_s']:.2f} s" if r.get("list_s") is not None else "n/a"
    print(
        f"watcher initial list (its started_at -> primed_at): {ls}; process start -> first published view: "
        f"{r['first_view_s']:.1f} s; the watcher's own CPU (user + system) by then {r['cpu_prime']:.1f} s "
        "(the rest of the wall time is the API server's and the machine's other processes')"
    )
    print(
        f"watcher memory (VmRSS): {r['rss_primed']:.0f} MiB after priming, {r['rss_settled']:.0f} MiB 12 s later, "
        f"{r['rss_after_churn']:.0f} MiB after the churn"
    )
    print(f"watcher's kept objects: {r['streams']}")
    if "warm" not in r:  # --watcher-only
        _print_counts(r["counts"])
        peak = max(r["rss_primed"], r["rss_settled"], r["rss_after_churn"])
        print(
            f"(--watcher-only: the last memory figure is a minute after priming, without a churn)\n"
            f"targets: watcher < 512 MiB: {'met' if peak < 512 else 'NOT met'} ({peak:.0f} MiB)"
        )
        sys.stdout.flush()
        return
    print(
        "page server time (Django test client), the lab's simulators (KWOK, gpusim, kube-state-metrics, "
        "Prometheus, controller-manager, scheduler) paused; the watcher and the API server running:"
    )
    for u in PAGES:
        wv, fv, bv = r["warm"][u], r["first"][u], r["warm_busy"][u]
        print(
            f"  {u:15s} warm median of 20 {wv['median_ms']:7.1f} ms (p95 {wv['p95_ms']:.1f}; with the simulators "
            f"running {bv['median_ms']:.1f} ms, p95 {bv['p95_ms']:.1f}); first request in a new "
            f"process {fv['ms']:7.1f} ms (status {fv['status']}, {fv['queries']} SQL, {fv['api']} API calls"
            f"{' ' + ', '.join(fv['paths']) if fv['paths'] else ''}; Django setup {fv['setup_s']:.1f} s)"
        )
    print(
        "SQL queries per page (warm): "
        + ", ".join(f"{u} {r['warm'][u]['queries']}" for u in PAGES)
        + "; statuses "
        + ", ".join(f"{u} {r['warm'][u]['statuses']}" for u in PAGES)
    )
    print(
        "API calls sent by the page process (client side, 20 warm views each): "
        + ", ".join(f"{u} {r['warm'][u]['api_calls']}" for u in PAGES)
    )
    api = r["api"]
    res_req, res_size, res_s = api["residual"]
    print(
        "Kubernetes API per page view, from the API server's /metrics (watcher stopped, lab clients paused), "
        "20 views each (a WATCH is counted when its stream ends, and the API server renews its own identity lease "
        "every 10 s: both listed, not charged to the page):"
    )
    for u in PAGES:
        dreq, dsize, v = api[u]
        calls, nbytes = _charged(dreq, v), _charged(dsize, v)
        print(
            f"  {u:15s} {calls / 20:.2f} calls/view, {nbytes / 20:,.0f} bytes/view over {v['elapsed']:.2f} s "
            f"(server counted {calls:.0f} requests: {_fmt(dreq)}; client counted {v['api_calls']}"
            f"{': ' + ', '.join(sorted(set(v['paths']))) if v['paths'] else ''})"
        )
    print(
        f"  residual: a {res_s:.1f} s window without page views: {sum(res_req.values()):.0f} requests "
        f"({_fmt(res_req)}), {sum(res_size.values()):,.0f} bytes (the bench's own /metrics reads do not appear "
        f"in apiserver_request_total by resource)"
    )
    lb, lp = r["label"], r["label_paused"]
    change = (
        "pool republished (one PATCH of the node's ResourceSlice: productName, generation + 1)"
        if r["stack"] == "dra"
        else "label change (GPU product label, one PATCH of the node)"
    )
    for what, x in (("the simulators running", lb), ("the simulators paused around each change", lp)):
        if not x["dash"]:
            print(f"{change} -> page, {what}: NOT seen within 30 s in any of {x['changes']} changes")
            continue
        print(
            f"{change} -> page showing the new model, {what} "
            f"({len(x['dash'])}/{x['changes']} seen; {x['generations']} view generations published in "
            f"{x['wall_s']:.0f} s): from the PATCH's send to the answer of the page that showed it (an upper bound; "
            f"the PATCH itself median {statistics.median(x['patch']) * 1000:.0f} ms, max "
            f"{max(x['patch']) * 1000:.0f} ms): Dashboard model detail (/dashboard/models/) median "
            f"{statistics.median(x['dash']):.2f} s, p95 {pct(x['dash'], 0.95):.2f} s, max {max(x['dash']):.2f} s; "
            f"Nodes (?model=) median {statistics.median(x['nodes']) if x['nodes'] else float('nan'):.2f} s, "
            f"p95 {pct(x['nodes'], 0.95):.2f} s; from the PATCH's answer: Dashboard median "
            f"{statistics.median(x['dash_after']):.2f} s, p95 {pct(x['dash_after'], 0.95):.2f} s; from the PATCH's "
            f"answer to the start of the page request that showed it (a lower bound): median "
            f"{statistics.median(x['dash_read']):.2f} s, p95 {pct(x['dash_read'], 0.95):.2f} s"
        )
    pubs = {
        "label changes, simulators running": r["publish_label"],
        "label changes, simulators paused": r["publish_label_paused"],
        "the churn": r["publish_churn"],
    }
    first = f"{r['publish_first']:.2f} s" if r.get("publish_first") is not None else "n/a"
    print(
        "one generation's publish (the watcher's snapshot to the view's transaction committed, as the watcher "
        f"timed it): the first (every row written) {first}; then "
        + "; ".join(
            f"during {what} {len(v)} generations, median {statistics.median(v):.3f} s, p95 {pct(v, 0.95):.3f} s, "
            f"max {max(v):.3f} s"
            for what, v in pubs.items()
            if v
        )
    )
    for what, key in (("simulators running", "phases_label"), ("simulators paused", "phases_label_paused")):
        phases = r.get(key) or []
        if phases:
            print(
                f"those publications by phase, label changes with the {what} ({len(phases)}): "
                + "; ".join(
                    f"{part} median {statistics.median(p[part] for p in phases) * 1000:.0f} ms, "
                    f"p95 {pct([p[part] for p in phases], 0.95) * 1000:.0f} ms"
                    for part in ("prepare", "write", "commit", "after", "gc")
                )
            )
    if r.get("gc_label_paused"):
        gcs = r["gc_label_paused"]
        print(f"the watcher's garbage collector so far, by generation: {gcs['collections']} runs, {gcs['seconds']} s")
    ch = r["churn"]
    print(
        f"churn of 1,000 pod creations + deletions (1 in 10 GPU): watcher CPU {ch['cpu_s']:.2f} s over "
        f"{ch['wall_s']:.1f} s wall (created in {ch['create_s']:.1f} s, deleted by {ch['delete_s']:.1f} s), "
        f"{ch['generations']} view generations published; watcher alive: {ch['alive']}"
    )
    _print_counts(r["counts"])
    dmed = r["warm"]["/"]["median_ms"]
    ratio = dmed / r["kubectl_ms"]
    busy = r["warm_busy"]["/"]["median_ms"] / r["kubectl_busy_ms"]
    print(
        f"kubectl get nodes -o json: median of 5 {r['kubectl_ms']:.0f} ms; Dashboard median / kubectl = {ratio:.3f} "
        f"(simulators running: kubectl {r['kubectl_busy_ms']:.0f} ms, ratio {busy:.3f})"
    )
    calls = max(_charged(api[u][0], api[u][2]) / 20 for u in PAGES)
    t = [
        f"0 API calls per view: {'met' if calls == 0 else 'NOT met'}",
        f"Dashboard < 50 ms: {'met' if dmed < 50 else 'NOT met'} ({dmed:.1f} ms, simulators paused; "
        f"{r['warm_busy']['/']['median_ms']:.1f} ms with them running)",
    ]
    if n == 2000:
        t.append(f"< 0.25 of kubectl at 2,000: {'met' if ratio < 0.25 else 'NOT met'} ({ratio:.3f})")
    if lb["dash"] or lp["dash"]:

        def verdict(x):
            if not x["dash"]:
                return "NOT met (not seen)", "n/a"
            p95 = pct(x["dash"], 0.95)
            return ("met" if p95 < 1 and not x["missed"] else "NOT met"), f"{p95:.2f} s"

        (vp, fp), (vb, fb) = verdict(lp), verdict(lb)
        # under 1 s at 2,000 nodes with the simulators running, and at 5,000 with them paused
        if n >= 5000:
            t.append(f"change-to-page p95 < 1 s, simulators paused: {vp} ({fp}; {fb} with them running)")
        else:
            t.append(f"change-to-page p95 < 1 s, simulators running: {vb} ({fb}; {fp} with them paused)")
    # judged as the pages' times are: with the simulators paused (in a deployment the cluster's
    # kubelets do not share the watcher's cores); the other phases printed beside
    paused = r["publish_label_paused"]
    if paused:
        worst = max(paused)
        others = "; ".join(f"{what} max {max(v):.3f} s" for what, v in pubs.items() if v and v is not paused)
        t.append(
            f"one generation's publish < 1 s, simulators paused: {'met' if worst < 1 else 'NOT met'} "
            f"(max {worst:.3f} s; {others})"
        )
    if n >= 5000:
        peak = max(r["rss_primed"], r["rss_settled"], r["rss_after_churn"])
        t.append(f"watcher < 512 MiB: {'met' if peak < 512 else 'NOT met'} ({peak:.0f} MiB)")
    print("targets: " + "; ".join(t))
    sys.stdout.flush()


def summary(r: dict) -> dict:
    """The figures set beside another stack's at the same size (written by --json, read by --beside)."""
    out = {k: r.get(k) for k in ("nodes", "pods", "list_s", "first_view_s", "rss_primed", "rss_settled")}
    out["rss_after_churn"] = r["rss_after_churn"]
    out["rss_peak"] = max(r["rss_primed"], r["rss_settled"], r["rss_after_churn"])
    out["load"] = r["load"]
    out["streams"] = r["streams"]
    if "warm" in r:
        api = r["api"]
        out["api_per_view"] = max(_charged(api[u][0], api[u][2]) / 20 for u in PAGES)
        out["warm_ms"] = {u: r["warm"][u]["median_ms"] for u in PAGES}
        out["queries"] = {u: r["warm"][u]["queries"] for u in PAGES}
        for key in ("label", "label_paused"):
            x = r[key]
            out[key] = [statistics.median(x["dash"]), pct(x["dash"], 0.95), len(x["dash"])] if x["dash"] else None
        paused = r["publish_label_paused"]
        out["publish_paused"] = [statistics.median(paused), max(paused)] if paused else None
        out["churn_cpu_s"] = r["churn"]["cpu_s"]
    return out


def print_beside(dra: dict, dp: dict) -> None:
    """DRA's figures beside the device plugin's at the same size, and the memory ratio."""

    def fmt(v, f="{:.1f}"):
        if v is None:
            return "n/a"
        if isinstance(v, list):
            return f"median {v[0]:.2f} s, p95 {v[1]:.2f} s" if len(v) == 3 else f"median {v[0]:.2f} s, max {v[1]:.2f} s"
        if isinstance(v, dict):
            return " / ".join(f.format(x) for x in v.values())
        return f.format(v)

    rows = [
        ("watcher initial list, s", "list_s", "{:.1f}"),
        ("process start -> first view, s", "first_view_s", "{:.1f}"),
        ("watcher RSS primed, MiB", "rss_primed", "{:.0f}"),
        ("watcher RSS 12 s later, MiB", "rss_settled", "{:.0f}"),
        ("watcher RSS after the churn, MiB", "rss_after_churn", "{:.0f}"),
        ("API calls per page view (most of three pages)", "api_per_view", "{:.2f}"),
        ("Dashboard / Nodes / Availability warm median, ms (paused)", "warm_ms", "{:.1f}"),
        ("SQL per page (warm)", "queries", "{}"),
        ("change -> page, simulators paused", "label_paused", ""),
        ("change -> page, simulators running", "label", ""),
        ("one generation's publish, paused", "publish_paused", ""),
        ("watcher CPU over the churn, s", "churn_cpu_s", "{:.2f}"),
    ]
    print(f"\n--- DRA beside the device plugin at {dra['nodes']:,} nodes / {dra['pods']:,} pods ---")
    print("| figure | device plugin | DRA |\n|---|---|---|")
    for label, key, f in rows:
        if key in dra or key in dp:
            print(f"| {label} | {fmt(dp.get(key), f)} | {fmt(dra.get(key), f)} |")
    ratio = dra["rss_peak"] / dp["rss_peak"]
    print(
        f"watcher memory, DRA / device plugin (peak of the three figures): {dra['rss_peak']:.0f} / "
        f"{dp['rss_peak']:.0f} MiB = {ratio:.2f}x; target <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}"
    )
    sys.stdout.flush()


def _print_counts(c: dict) -> None:
    if "live_claims" in c:
        print(
            f"DRA: live {c['live_dra_nodes']} DRA nodes, {c['live_slices']} ResourceSlices, {c['live_devices']} "
            f"devices, {c['live_claims']} ResourceClaims ({c['live_allocated']} allocated), {c['live_claim_pods']} "
            "pods holding a claim"
        )
    print(
        f"count check: live {c['live_nodes']} nodes ({c['live_gpu_labelled']} GPU-labelled), "
        f"{c['live_pods']} pods ({c['live_gpu_pods']} requesting GPUs, {c['live_plugin_pods']} device-plugin); "
        f"view {c['view_nodes']} nodes ({c['view_gpu_nodes']} GPU); watcher streams {c['streams']}; "
        f"requested live {c['live_requested']} vs view {c['view_requested']}; watcher errors/relists/last "
        f"{c['errors']}"
    )


def _charged(counted: dict, views: dict) -> float:
    """What the API server counted in a page's window that is charged to the page. Not: a
    WATCH (counted when its stream ends: a lab client's or the stopped watcher's stream timing
    out in the window), and, when the page process itself sent no request at all, a lease
    renewal (the API server renews its own identity lease every 10 s; pages never touch
    leases). Both are still printed beside the figure."""
    page_sent_nothing = views.get("api_calls", 1) == 0
    return sum(
        c for (verb, res, _), c in counted.items() if verb != "WATCH" and not (page_sent_nothing and res == "leases")
    )


def _fmt(d: dict) -> str:
    if not d:
        return "none"
    return ", ".join(
        f"{v:.0f}x {verb} {res}{'/' + sub if sub else ''}"
        for (verb, res, sub), v in sorted(d.items(), key=lambda kv: -kv[1])
    )


def biggest_processes(n: int = 5) -> str:
    """The machine's ``n`` largest processes by resident memory: "name GiB, ..."."""
    sizes = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            sizes.append((int(fields.get("VmRSS", "0 kB").split()[0]) / 2**20, fields["Name"].strip()))
        except (OSError, ValueError, KeyError):
            continue
    return ", ".join(f"{name} {gib:.1f}" for gib, name in sorted(sizes, reverse=True)[:n])


def memory_guard(floor_gib: float = 1.5, every_s: float = 60) -> None:
    """Stop the bench (as Ctrl-C would: it cleans up) before the machine runs out of memory:
    a 5,000-node lab's API server once grew to 15 GiB while its clients relisted. Says every
    minute, and when it stops, which processes hold the memory."""
    said = 0.0
    while True:
        time.sleep(5)
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) / 2**20
        if avail < floor_gib:
            log(f"only {avail:.1f} GiB of memory left: stopping (GiB: {biggest_processes()})")
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if time.time() - said >= every_s:
            said = time.time()
            log(f"  memory available {avail:.1f} GiB; largest (GiB): {biggest_processes()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,2000", help="node counts, comma-separated (500,2000,5000)")
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--kubeconfig", default=os.environ.get("BRICK_LAB_KUBECONFIG", str(LAB_DIR / "kubeconfig")))
    ap.add_argument("--lab-wait", type=float, default=1200, help="seconds to wait for other lab users")
    ap.add_argument("--settle-timeout", type=float, default=360)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument(
        "--populate",
        choices=("direct", "kwok"),
        default="direct",
        help="direct: the bench writes the nodes' GPUs and the workload pods' Running status itself "
        "(the default); kwok: gpusim advertises the GPUs once each plugin pod runs and KWOK runs the pods",
    )
    ap.add_argument("--changes", type=int, default=20, help="node label changes timed to the pages")
    ap.add_argument(
        "--gpu-every",
        type=int,
        default=10,
        help="device-plugin stack: one workload pod in N requests a GPU (default 10; 1: every pod, like for "
        "like with the DRA stack, where every pod holds a claim)",
    )
    ap.add_argument(
        "--stack",
        choices=("device-plugin", "dra"),
        default="device-plugin",
        help="dra: the GPU nodes are DRA nodes (one ResourceSlice of 8 whole GPUs each, shared), every pod "
        "holds a ResourceClaim created allocated; the change timed to the pages is a slice republished",
    )
    ap.add_argument(
        "--bulk",
        choices=("api", "etcd"),
        default="api",
        help="etcd (--stack dra only): after the first, the pods and their claims are written straight into the "
        "lab's etcd in the API server's storage layout while the controllers are paused (minutes at 5,000 nodes "
        "instead of hours); nodes and slices still go through the API server",
    )
    ap.add_argument("--json", help="write each size's figures (summary) to this file")
    ap.add_argument("--beside", help="a --json file of the other stack: print its figures beside these, same size")
    ap.add_argument(
        "--watcher-only",
        action="store_true",
        help="measure only the watcher (initial list, memory, counts): for 5,000 / 150,000",
    )
    args = ap.parse_args()
    if args.bulk == "etcd" and args.stack != "dra":
        ap.error("--bulk etcd builds DRA pods and claims (--stack dra)")
    if args.gpu_every < 1:
        ap.error("--gpu-every: one pod in N, N at least 1")
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]

    bench = Bench(args)
    saved: dict = {}
    beside = json.loads(Path(args.beside).read_text()) if args.beside else {}

    def on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    threading.Thread(target=memory_guard, daemon=True).start()
    code = 0
    try:
        bench.acquire_lab()
        bench.ensure_plugin()
        print(
            f"bench/scale.py --stack {args.stack} against {bench.api.server} ({os.cpu_count()} CPUs, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB); "
            f"Django DEBUG as settings default; watcher debounce 0.5 s; no PROMETHEUS_URL"
            + ("" if args.stack == "dra" else f"; one workload pod in {args.gpu_every} requests a GPU"),
            flush=True,
        )
        for n in sizes:
            n_pods = n * args.pods_per_node
            log(f"building {n} nodes / {n_pods} pods")
            build = bench.grow(n, n_pods)
            r = bench.measure(n, n_pods)
            r["build_s"], r["stack"] = build, args.stack
            if args.stack != "dra":
                r["gpu_every"] = args.gpu_every
            report(r, {})
            saved[str(n)] = summary(r)
            if args.json:
                Path(args.json).write_text(json.dumps({"stack": args.stack, "sizes": saved}, indent=1))
            if str(n) in beside.get("sizes", {}):
                dp, dra = (saved[str(n)], beside["sizes"][str(n)])[:: 1 if args.stack == "device-plugin" else -1]
                print_beside(dra, dp)
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        code = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        bench.cleanup()
    return code


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker_main())
    if len(sys.argv) > 2 and sys.argv[1] == "--first":
        sys.exit(first_main(sys.argv[2]))
    sys.exit(main())
