#!/usr/bin/env python3
"""The brickadmin lab: a real Kubernetes control plane on 127.0.0.1 with simulated GPU nodes.

    python lab/lab.py up      # build or reuse binaries, start (or reuse) everything
    python lab/lab.py down    # stop everything this lab started, wipe its state
    python lab/lab.py status

Components (all on loopback): etcd :12379, kube-apiserver :16443, kube-controller-manager,
kube-scheduler, KWOK (fake nodes), kube-state-metrics :18080, gpusim (device plugin +
kubelet + DCGM exporter) :19400, Prometheus :19090, Kueue (webhooks :19443, health :19481).
State lives under $BRICK_LAB_DIR (default /tmp/brickadmin-lab), never in the checkout;
binaries under ~/.cache/brickadmin-lab/<k8s version>/bin.
Only the standard library is used here, so any python3 can run it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STATE = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab"))
PKI = STATE / "pki"
LOGS = STATE / "logs"
PIDS = STATE / "pids"
HOST = "127.0.0.1"
# BRICK_LAB_PORT_OFFSET (with its own BRICK_LAB_DIR) runs a second lab beside the first
_OFFSET = int(os.environ.get("BRICK_LAB_PORT_OFFSET", "0"))
PORTS = {
    k: v + _OFFSET
    for k, v in {
        "etcd": 12379,
        "etcd-peer": 12380,
        "apiserver": 16443,
        "ksm": 18080,
        "ksm-telemetry": 18081,
        "prometheus": 19090,
        "gpusim": 19400,
        "kwok": 16247,
        "controller-manager": 16257,
        "scheduler": 16259,
        "kueue-webhook": 19443,
        "kueue-health": 19481,
        "kueue-metrics": 19482,
    }.items()
}
ADMIN_TOKEN_FILE = STATE / "admin.token"
KUBECONFIG = STATE / "kubeconfig"
HARDWARE = STATE / "hardware.json"
PROM_URL = f"http://{HOST}:{PORTS['prometheus']}"
API_URL = f"https://{HOST}:{PORTS['apiserver']}"
RULES_SRC = REPO / "deploy" / "chart" / "files" / "brickadmin-rules.yaml"


def _load_vocabulary():
    """brickadmin/cluster/vocabulary.py by path: lab.py runs without Django (the package's __init__ needs it)."""
    spec = importlib.util.spec_from_file_location("brick_vocabulary", REPO / "brickadmin" / "cluster" / "vocabulary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


V = _load_vocabulary()

# node labels kube-state-metrics exposes on kube_node_labels. KSM 2.15 supports exact keys
# or a lone "*" per resource, not prefixes such as nvidia.com/*, so the keys are listed.
NODE_LABELS_ALLOWLIST = [
    V.GPU_TYPE_LABEL,
    V.SHARING_LABEL,
    V.GPU_PRODUCT_LABEL,
    V.GPU_COUNT_LABEL,
    V.GPU_REPLICAS_LABEL,
    V.GPU_SHARING_STRATEGY_LABEL,
    V.GPU_MEMORY_LABEL,
    V.DEVICE_PLUGIN_CONFIG_LABEL,
    V.MIG_CONFIG_LABEL,
    V.MIG_STRATEGY_LABEL,
    V.GPU_PRESENT_LABEL,
]


def log(msg: str) -> None:
    print(f"[lab] {msg}", file=sys.stderr, flush=True)


def die(msg: str, code: int = 1) -> None:
    print(f"lab: ERROR: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def versions() -> dict[str, str]:
    out = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def bin_dir() -> Path:
    cache = Path(os.environ.get("BRICK_LAB_CACHE", Path.home() / ".cache" / "brickadmin-lab"))
    return cache / versions()["K8S_VERSION"] / "bin"


BINARIES = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kube-state-metrics",
    "helm",
    "kueue",
]  # helm: the chart tests


def find_go() -> str | None:
    if os.environ.get("GO"):
        return os.environ["GO"] if os.access(os.environ["GO"], os.X_OK) else None
    found = shutil.which("go")
    if found:
        return found
    for cand in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if os.access(cand, os.X_OK):
            return cand
    return None


def ensure_binaries() -> Path:
    bd = bin_dir()
    missing = [b for b in BINARIES if not os.access(bd / b, os.X_OK)]
    if not (bd / "kueue.config" / "webhook" / "manifests.yaml").exists():
        missing.append("kueue.config")  # Kueue's CRDs and webhooks, copied beside it by lab/build.sh
    if missing:
        go = find_go()
        if not go:
            die(
                "Go is not installed on this machine (no 'go' on PATH), and the lab's Kubernetes "
                f"binaries are not cached in {bd} (missing: {', '.join(missing)}). The lab builds "
                "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, KWOK, "
                "kube-state-metrics and Kueue from source: install Go >= 1.24 (e.g. apt-get install golang-go, "
                "or put /usr/local/go/bin on PATH) and run lab/up again.",
                2,
            )
        log(f"building missing binaries ({', '.join(missing)}) with {go}; a cold build takes many minutes")
        env = dict(os.environ, PATH=f"{Path(go).parent}:{os.environ.get('PATH', '')}")
        t0 = time.time()
        r = subprocess.run(["bash", str(HERE / "build.sh")], env=env, stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            die(f"lab/build.sh failed (exit {r.returncode}); see its output above")
        log(f"binaries ready in {time.time() - t0:.0f}s")
    for tool in ("prometheus", "openssl"):
        if not shutil.which(tool):
            pkg = {"prometheus": "prometheus", "openssl": "openssl"}[tool]
            die(f"'{tool}' is not installed: apt-get install -y {pkg}")
    return bd


# ---------------------------------------------------------------------------------------- PKI
def sh(*args: str, **kw) -> None:
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def server_cert(stem: str, subject: str, crt: str) -> None:
    """A key (<stem>.key) and a serving certificate (``crt``) for 127.0.0.1, signed by the
    lab's CA with ext.cnf's server extensions (make_pki)."""
    p = str(PKI)
    sh("openssl", "genrsa", "-out", f"{stem}.key", "2048")
    sh("openssl", "req", "-new", "-key", f"{stem}.key", "-subj", subject, "-out", f"{stem}.csr")
    sh(
        "openssl",
        "x509",
        "-req",
        "-in",
        f"{stem}.csr",
        "-CA",
        f"{p}/ca.crt",
        "-CAkey",
        f"{p}/ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-out",
        crt,
        "-extensions",
        "server",
        "-extfile",
        f"{p}/ext.cnf",
    )


def make_pki() -> None:
    if (PKI / "done").exists():
        return
    PKI.mkdir(parents=True, exist_ok=True)
    ext = PKI / "ext.cnf"
    ext.write_text(
        "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n"
        "[server]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
    )
    p = str(PKI)
    sh("openssl", "genrsa", "-out", f"{p}/ca.key", "2048")
    sh(
        "openssl",
        "req",
        "-x509",
        "-new",
        "-key",
        f"{p}/ca.key",
        "-subj",
        "/CN=brickadmin-lab-ca",
        "-days",
        "3650",
        "-out",
        f"{p}/ca.crt",
        "-extensions",
        "ca",
        "-config",
        str(ext),
    )
    server_cert(f"{p}/apiserver", "/CN=kube-apiserver", f"{p}/apiserver.crt")
    sh("openssl", "genrsa", "-out", f"{p}/sa.key", "2048")
    sh("openssl", "rsa", "-in", f"{p}/sa.key", "-pubout", "-out", f"{p}/sa.pub")
    (PKI / "done").write_text("ok\n")


def write_auth() -> str:
    if not ADMIN_TOKEN_FILE.exists():
        ADMIN_TOKEN_FILE.write_text(os.urandom(16).hex() + "\n")
    token = ADMIN_TOKEN_FILE.read_text().strip()
    (PKI / "tokens.csv").write_text(f'{token},lab-admin,lab-admin-uid,"system:masters"\n')
    ca = (PKI / "ca.crt").resolve()
    KUBECONFIG.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: brickadmin-lab
  cluster:
    server: {API_URL}
    certificate-authority: {ca}
users:
- name: lab-admin
  user:
    token: {token}
contexts:
- name: brickadmin-lab
  context: {{cluster: brickadmin-lab, user: lab-admin}}
current-context: brickadmin-lab
""")
    os.chmod(KUBECONFIG, 0o600)
    return token


# ---------------------------------------------------------------------------------- processes
def pid_of(name: str) -> int | None:
    f = PIDS / name
    if not f.exists():
        return None
    try:
        pid = int(f.read_text().strip())
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, PermissionError):
        return None
    # a zombie or a recycled pid does not count
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        expect = (PIDS / f"{name}.cmd").read_bytes() if (PIDS / f"{name}.cmd").exists() else b""
        # An empty cmdline is a process still inside exec() (the window is wide on a busy
        # machine): alive, not a recycled pid.
        if expect and cmdline and not cmdline.startswith(expect):
            return None
    except OSError:
        return None
    return pid


def start(name: str, argv: list[str], env: dict | None = None) -> int:
    PIDS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    out = open(LOGS / f"{name}.log", "ab")
    env = dict(env or os.environ)
    # Debian's etcd 3.4 has no watch progress requests, so the API server refuses the
    # streaming "watch list"; tell client-go based components to use plain list+watch.
    env.setdefault("KUBE_FEATURE_WatchListClient", "false")
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
        cwd=str(STATE),
    )
    (PIDS / name).write_text(f"{proc.pid}\n")
    (PIDS / f"{name}.cmd").write_bytes(argv[0].encode())
    log(f"started {name} (pid {proc.pid})")
    return proc.pid


def stop(name: str, timeout: float = 10) -> None:
    pid = pid_of(name)
    if pid is None:
        (PIDS / name).unlink(missing_ok=True)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            # reap if it is our child (it is not, normally)
            time.sleep(0.1)
        except ProcessLookupError:
            break
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    (PIDS / name).unlink(missing_ok=True)
    log(f"stopped {name}")


def http_ok(url: str, token: str | None = None, timeout: float = 2) -> bool:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    ctx = None
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=str(PKI / "ca.crt"))
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_for(what: str, check, timeout: float, name: str | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        if name and pid_of(name) is None:
            tail = (LOGS / f"{name}.log").read_text(errors="replace")[-3000:] if (LOGS / f"{name}.log").exists() else ""
            die(f"{name} exited while waiting for {what}; last log lines:\n{tail}")
        time.sleep(0.3)
    die(f"timed out after {timeout:.0f}s waiting for {what} (logs in {LOGS})")


def api(path: str, token: str, method: str = "GET", body: dict | None = None) -> dict:
    req = urllib.request.Request(
        API_URL + path, method=method, data=json.dumps(body).encode() if body is not None else None
    )
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    ctx = ssl.create_default_context(cafile=str(PKI / "ca.crt"))
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return json.loads(r.read() or b"{}")


# ---------------------------------------------------------------------------------- components
def python_for_tools() -> str:
    for cand in (os.environ.get("BRICK_LAB_PYTHON"), str(REPO / ".venv" / "bin" / "python"), sys.executable):
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)  # processes start in the state dir
    return "python3"


# Dynamic Resource Allocation is GA since 1.34 (resource.k8s.io/v1); what NVIDIA's driver publishes
# beyond whole GPUs needs alpha gates on 1.35 (k8s.io/kubernetes v1.35.4 pkg/features/kube_features.go):
# counters for dynamic MIG, device taints and (a gate of its own since 1.35) DeviceTaintRules,
# consumable shares. DRAAdminAccess and DRAPrioritizedList are beta and on. DeviceTaintRule is
# served from resource.k8s.io/v1alpha3, with effect None (the dry run) since 1.35.
DRA_FEATURE_GATES = (
    "--feature-gates=DRAPartitionableDevices=true,DRADeviceTaints=true,DRADeviceTaintRules=true,"
    "DRAConsumableCapacity=true"
)


def components(bd: Path, token: str) -> list[tuple[str, list[str], callable, float]]:
    p = str(PKI)
    kc = str(KUBECONFIG)
    etcd = [
        str(bd / "etcd"),
        "--name=lab",
        f"--data-dir={STATE}/etcd",
        f"--listen-client-urls=http://{HOST}:{PORTS['etcd']}",
        f"--advertise-client-urls=http://{HOST}:{PORTS['etcd']}",
        f"--listen-peer-urls=http://{HOST}:{PORTS['etcd-peer']}",
        f"--initial-advertise-peer-urls=http://{HOST}:{PORTS['etcd-peer']}",
        f"--initial-cluster=lab=http://{HOST}:{PORTS['etcd-peer']}",
        "--unsafe-no-fsync",
        "--quota-backend-bytes=2147483648",
        "--log-level=warn",
    ]
    apiserver = [
        str(bd / "kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{PORTS['etcd']}",
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        f"--secure-port={PORTS['apiserver']}",
        f"--tls-cert-file={p}/apiserver.crt",
        f"--tls-private-key-file={p}/apiserver.key",
        f"--client-ca-file={p}/ca.crt",
        f"--token-auth-file={p}/tokens.csv",
        "--authorization-mode=Node,RBAC",
        # admission: the defaults, which since v1.30 include ValidatingAdmissionPolicy
        # (GA, admissionregistration.k8s.io/v1): the chart's policies on the Workspace
        # label are enforced here as on a real cluster (tests/lab/test_least_privilege.py)
        f"--service-account-key-file={p}/sa.pub",
        f"--service-account-signing-key-file={p}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        "--endpoint-reconciler-type=none",
        "--event-ttl=10m",
        DRA_FEATURE_GATES,
        "--runtime-config=resource.k8s.io/v1alpha3=true",
        "--v=0",
    ]
    kcm = [
        str(bd / "kube-controller-manager"),
        f"--kubeconfig={kc}",
        "--leader-elect=false",
        f"--bind-address={HOST}",
        f"--secure-port={PORTS['controller-manager']}",
        f"--service-account-private-key-file={p}/sa.key",
        f"--root-ca-file={p}/ca.crt",
        "--use-service-account-credentials=false",
        "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle",
        "--concurrent-daemonset-syncs=5",
        "--node-monitor-grace-period=60s",
        DRA_FEATURE_GATES,
        "--v=0",
    ]
    sched = [
        str(bd / "kube-scheduler"),
        f"--kubeconfig={kc}",
        "--leader-elect=false",
        f"--bind-address={HOST}",
        f"--secure-port={PORTS['scheduler']}",
        DRA_FEATURE_GATES,
        "--v=0",
    ]
    kwok = [
        str(bd / "kwok"),
        f"--kubeconfig={kc}",
        f"--config={HERE / 'kwok.yaml'}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--manage-nodes-with-label-selector=",
        "--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
        "--disregard-status-with-label-selector=",
        "--cidr=10.244.0.1/16",
        "--node-ip=10.0.0.1",
        "--node-lease-duration-seconds=40",
        f"--server-address={HOST}:{PORTS['kwok']}",
    ]
    ksm = [
        str(bd / "kube-state-metrics"),
        f"--kubeconfig={kc}",
        f"--host={HOST}",
        f"--port={PORTS['ksm']}",
        f"--telemetry-host={HOST}",
        f"--telemetry-port={PORTS['ksm-telemetry']}",
        "--resources=nodes,pods,resourcequotas,daemonsets,namespaces,configmaps,jobs,poddisruptionbudgets",
        f"--metric-labels-allowlist=nodes=[{','.join(NODE_LABELS_ALLOWLIST)}]",
    ]
    gpusim = [
        python_for_tools(),
        str(HERE / "gpusim.py"),
        f"--kubeconfig={kc}",
        f"--hardware={HARDWARE}",
        f"--listen={HOST}:{PORTS['gpusim']}",
    ]
    kueue = [str(bd / "kueue"), f"--config={KUEUE_CONFIG}", f"--kubeconfig={kc}", "--zap-log-level=info"]
    prom = [
        "prometheus",
        f"--config.file={STATE}/prometheus.yml",
        f"--storage.tsdb.path={STATE}/prometheus",
        f"--web.listen-address={HOST}:{PORTS['prometheus']}",
        "--web.enable-lifecycle",
        "--storage.tsdb.retention.time=1d",
        "--log.level=warn",
    ]
    return [
        ("etcd", etcd, lambda: http_ok(f"http://{HOST}:{PORTS['etcd']}/health"), 30),
        ("kube-apiserver", apiserver, lambda: http_ok(f"{API_URL}/readyz", token), 120),
        ("kube-controller-manager", kcm, lambda: True, 5),
        ("kube-scheduler", sched, lambda: True, 5),
        ("kwok", kwok, lambda: True, 5),
        ("kube-state-metrics", ksm, lambda: http_ok(f"http://{HOST}:{PORTS['ksm']}/metrics", timeout=5), 60),
        ("gpusim", gpusim, lambda: http_ok(f"http://{HOST}:{PORTS['gpusim']}/healthz"), 30),
        ("prometheus", prom, lambda: http_ok(f"{PROM_URL}/-/ready"), 60),
        # ready once its caches are synced and its webhook server listens (cmd/kueue/main.go)
        ("kueue", kueue, lambda: http_ok(KUEUE_READY_URL), 180),
    ]


CORE = ("etcd", "kube-apiserver")


# ---------------------------------------------------------------------------------------- Kueue
# Kueue's controller manager (sigs.k8s.io/kueue, built by lab/build.sh with its CRDs and webhook
# manifests beside it) runs as a local process against the lab's API server. The API server calls
# its webhooks by URL on loopback, trusting a serving certificate from the lab's CA; Kueue's own
# certificate management is off (it issues for an in-cluster Service name and a Secret).
KUEUE_PKI = PKI / "kueue"
# Kueue v0.17 reads its metrics serving certificate from this fixed path whenever its internal
# certificate management is off (cmd/kueue/main.go); any valid pair does, nothing scrapes it.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
KUEUE_CONFIG = STATE / "kueue-config.yaml"
KUEUE_NAMESPACE = "kueue-system"
# The label of a Workspace namespace whose Jobs and pods Kueue manages
# (brickadmin/cluster/kueue.py MANAGED_NAMESPACE_LABEL = MANAGED_NAMESPACE_VALUE).
KUEUE_MANAGED = ("brick.cloud/kueue", "managed")
# The webhooks registered: Kueue's own kinds and the Job and pod integrations. Those of the
# integrations left off (Deployment, MPIJob, RayJob, ...) are not served, and the API server
# would refuse every such object with the call failing.
KUEUE_WEBHOOK_GROUPS = frozenset({"", "batch", "kueue.x-k8s.io"})
KUEUE_READY_URL = f"http://{HOST}:{PORTS['kueue-health']}/readyz"


def kueue_config() -> str:
    """Kueue's Configuration: the Job and pod integrations, for the namespaces the product
    labels (a Workspace approved with elastic quota); a Job or pod without a queue name outside
    them is left alone. One replica, no leader election."""
    key, value = KUEUE_MANAGED
    return f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: {KUEUE_NAMESPACE}
health:
  healthProbeBindAddress: {HOST}:{PORTS["kueue-health"]}
metrics:
  bindAddress: {HOST}:{PORTS["kueue-metrics"]}
webhook:
  host: {HOST}
  port: {PORTS["kueue-webhook"]}
  certDir: {KUEUE_PKI}
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels: {{{key}: {value}}}
integrations:
  frameworks: ["batch/job", "pod"]
clientConnection:
  qps: 50
  burst: 100
featureGates:
  VisibilityOnDemand: false  # an aggregated API server on a fixed port (8082), nothing reads it here
"""


def make_kueue_pki() -> None:
    """The webhook server's certificate (tls.crt, tls.key: controller-runtime's names), signed
    by the lab's CA for 127.0.0.1."""
    k = str(KUEUE_PKI)
    if not (KUEUE_PKI / "tls.crt").exists():
        KUEUE_PKI.mkdir(parents=True, exist_ok=True)
        server_cert(f"{k}/tls", "/CN=kueue-webhook", f"{k}/tls.crt.tmp")
        os.replace(f"{k}/tls.crt.tmp", f"{k}/tls.crt")
    if not (KUEUE_METRICS_CERTS / "tls.crt").exists():
        try:
            KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(KUEUE_PKI / "tls.key", KUEUE_METRICS_CERTS / "tls.key")
            os.chmod(KUEUE_METRICS_CERTS / "tls.key", 0o600)
            shutil.copyfile(KUEUE_PKI / "tls.crt", KUEUE_METRICS_CERTS / "tls.crt")
        except OSError as e:
            die(
                f"Kueue reads a metrics certificate from {KUEUE_METRICS_CERTS} (fixed in v0.17) and it "
                f"could not be written ({e}): create it once as root (any tls.crt and tls.key pair)"
            )


APPLY = ("apply", "--server-side", "--force-conflicts", "--field-manager=brickadmin-lab")


def kubectl(bd: Path, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run(
        [str(bd / "kubectl"), f"--kubeconfig={KUBECONFIG}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        die(f"kubectl {' '.join(args[:3])} failed: {r.stderr[-2000:]}")
    return r.stdout


def _kueue_served(token: str) -> bool:
    try:
        found = api("/apis/kueue.x-k8s.io/v1beta2", token)
    except (urllib.error.URLError, OSError):
        return False
    served = {r.get("name") for r in found.get("resources") or []}
    return {"clusterqueues", "localqueues", "resourceflavors", "workloads"} <= served


def install_kueue(bd: Path, token: str) -> None:
    """Kueue's CRDs (server-side: they are too large for the last-applied annotation), its
    namespace and its Configuration, before its controller starts."""
    config = bd / "kueue.config"
    kubectl(bd, *APPLY, "-f", str(config / "crd"))
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    kubectl(bd, *APPLY, "-f", "-", stdin=json.dumps(ns))
    # Kueue maps its kinds once at start: every CRD served first
    kubectl(bd, "wait", "--for=condition=Established", "--timeout=120s", "-f", str(config / "crd"))
    wait_for("Kueue's API (kueue.x-k8s.io/v1beta2)", lambda: _kueue_served(token), 60)
    make_kueue_pki()
    KUEUE_CONFIG.write_text(kueue_config())


def register_kueue_webhooks(bd: Path) -> None:
    """Kueue's Mutating/ValidatingWebhookConfigurations (config/components/webhook/manifests.yaml)
    with each webhook's clientConfig a URL on the lab's Kueue and the lab's CA. Its pod webhooks
    see the namespaces Kueue manages only (a pod elsewhere is not Kueue's, and a Kueue restart
    then blocks no other pod); the others keep Kueue's own selectors."""
    import base64

    text = kubectl(bd, "create", "--dry-run=client", "-o", "json", "-f", str(bd / "kueue.config" / "webhook"))
    docs, at, decoder = [], 0, json.JSONDecoder()
    while text[at:].strip():  # one JSON document per object, one after the other
        doc, end = decoder.raw_decode(text[at:].lstrip())
        at = len(text) - len(text[at:].lstrip()) + end
        docs.append(doc)
    ca = base64.b64encode((PKI / "ca.crt").read_bytes()).decode()
    key, value = KUEUE_MANAGED
    out = []
    for cfg in [item for doc in docs for item in doc.get("items") or [doc]]:
        cfg["metadata"] = {"name": "kueue-" + cfg["metadata"]["name"]}  # the release's kustomize prefix
        hooks = []
        for hook in cfg.get("webhooks") or []:
            groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
            if not groups or not groups <= KUEUE_WEBHOOK_GROUPS:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{HOST}:{PORTS['kueue-webhook']}{path}", "caBundle": ca}
            if groups == {""}:  # pods
                hook["namespaceSelector"] = {"matchLabels": {key: value}}
            hooks.append(hook)
        cfg["webhooks"] = hooks
        out.append(cfg)
    body = {"apiVersion": "v1", "kind": "List", "items": out}
    kubectl(bd, *APPLY, "-f", "-", stdin=json.dumps(body))


def write_prometheus_config() -> bool:
    """Copy the rules in and write the config; True when anything changed."""
    rules_dst = STATE / "brickadmin-rules.yaml"
    changed = False
    if RULES_SRC.exists():
        new = RULES_SRC.read_text()
        if not rules_dst.exists() or rules_dst.read_text() != new:
            rules_dst.write_text(new)
            changed = True
    elif not rules_dst.exists():
        rules_dst.write_text("groups: []\n")
        changed = True
    cfg = f"""global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files:
  - {rules_dst}
scrape_configs:
  - job_name: kube-state-metrics
    honor_labels: true
    static_configs: [{{targets: ['{HOST}:{PORTS["ksm"]}']}}]
  - job_name: dcgm-exporter
    honor_labels: true
    static_configs: [{{targets: ['{HOST}:{PORTS["gpusim"]}']}}]
"""
    path = STATE / "prometheus.yml"
    if not path.exists() or path.read_text() != cfg:
        path.write_text(cfg)
        changed = True
    return changed


def write_env() -> Path:
    env = STATE / "env"
    env.write_text(
        f"export BRICK_LAB_KUBECONFIG={KUBECONFIG}\n"
        f"export BRICK_LAB_PROMETHEUS_URL={PROM_URL}\n"
        f"export BRICK_LAB_GPUSIM_URL=http://{HOST}:{PORTS['gpusim']}\n"
        f"export BRICK_LAB_HARDWARE={HARDWARE}\n"
        f"export BRICK_LAB_DIR={STATE}\n"
        f"export BRICK_LAB_KUBECTL={bin_dir() / 'kubectl'}\n"
    )
    return env


def up() -> int:
    t0 = time.time()
    bd = ensure_binaries()
    STATE.mkdir(parents=True, exist_ok=True)
    core_alive = all(pid_of(n) for n in CORE)
    token = ADMIN_TOKEN_FILE.read_text().strip() if ADMIN_TOKEN_FILE.exists() else ""
    if core_alive and token and http_ok(f"{API_URL}/readyz", token):
        log(f"reusing the running lab in {STATE}")
    else:
        # anything left from a dead lab goes: a fresh control plane on a fresh etcd
        for name in [c[0] for c in components(bd, "x")][::-1]:
            stop(name)
        for d in ("etcd", "prometheus", "logs", "pids"):
            shutil.rmtree(STATE / d, ignore_errors=True)
        HARDWARE.unlink(missing_ok=True)
    make_pki()
    token = write_auth()
    if not HARDWARE.exists():
        HARDWARE.write_text("{}\n")
    prom_changed = write_prometheus_config()
    for name, argv, ready, timeout in components(bd, token):
        if pid_of(name) is None:
            t1 = time.time()
            if name == "kueue":
                install_kueue(bd, token)
            start(name, argv)
            wait_for(name, ready, timeout, name)
            if name == "kube-apiserver":
                bootstrap(token)
            if name == "kueue":
                register_kueue_webhooks(bd)
                log(f"kueue ready, its CRDs and webhooks registered, in {time.time() - t1:.1f}s")
        elif name == "kueue":
            register_kueue_webhooks(bd)  # idempotent: a lab left before they were registered gets them
        elif name == "prometheus" and prom_changed:
            try:
                urllib.request.urlopen(urllib.request.Request(f"{PROM_URL}/-/reload", method="POST"), timeout=5)
                log("reloaded prometheus configuration")
            except (urllib.error.URLError, OSError) as e:
                log(f"prometheus reload failed: {e}")
    wait_for("the default ServiceAccount", lambda: _has_default_sa(token), 60)
    env = write_env()
    log(f"lab up in {time.time() - t0:.1f}s")
    print(f"KUBECONFIG={KUBECONFIG}")
    print(f"PROMETHEUS_URL={PROM_URL}")
    print(f"# source {env} to export BRICK_LAB_* for the lab tests")
    return 0


def _has_default_sa(token: str) -> bool:
    try:
        api("/api/v1/namespaces/default/serviceaccounts/default", token)
        return True
    except (urllib.error.URLError, OSError):
        return False


def bootstrap(token: str) -> None:
    """Wait until the API server has its built-in objects (namespaces, priority classes)."""

    def ready() -> bool:
        try:
            api("/api/v1/namespaces/kube-system", token)
            api("/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical", token)
            return True
        except (urllib.error.URLError, OSError):
            return False

    wait_for("kube-system and built-in priority classes", ready, 60)


def down() -> int:
    if not STATE.exists():
        log("no lab state; nothing to do")
        return 0
    for name in [
        "kueue",
        "prometheus",
        "gpusim",
        "kube-state-metrics",
        "kwok",
        "kube-scheduler",
        "kube-controller-manager",
        "kube-apiserver",
        "etcd",
    ]:
        stop(name)
    shutil.rmtree(STATE, ignore_errors=True)
    log(f"lab down; removed {STATE}")
    return 0


def status() -> int:
    rc = 0
    for name in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "kube-state-metrics",
        "gpusim",
        "prometheus",
        "kueue",
    ]:
        pid = pid_of(name)
        rss = ""
        if pid:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS"):
                        rss = line.split(":", 1)[1].strip()
            except OSError:
                pass
        ready = ""
        if name == "kueue" and pid:  # its webhooks refuse admission until it is ready
            ready = "ready" if http_ok(KUEUE_READY_URL) else "NOT READY"
        print(f"{name:26s} {'running pid ' + str(pid) if pid else 'STOPPED':20s} {rss:12s} {ready}".rstrip())
        rc |= 0 if pid and ready != "NOT READY" else 1
    return rc


def rss_mib() -> float:
    total = 0
    for name in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "kube-state-metrics",
        "gpusim",
        "prometheus",
        "kueue",
    ]:
        pid = pid_of(name)
        if pid:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS"):
                    total += int(line.split()[1])
    return total / 1024


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "up"
    if cmd == "up":
        return up()
    if cmd == "down":
        return down()
    if cmd == "status":
        rc = status()
        print(f"total RSS: {rss_mib():.0f} MiB")
        return rc
    if cmd == "restart" and len(argv) > 2:  # restart one component, e.g. after editing gpusim.py
        stop(argv[2])
        return up()
    if cmd == "env":
        print(write_env().read_text(), end="")
        return 0
    die(f"unknown command {cmd!r} (up | down | status | env)")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
