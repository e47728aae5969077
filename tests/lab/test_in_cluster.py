"""The in-cluster path: the web, worker and watcher processes run on this
host with the environment the chart gives their pods, and nothing else to reach the cluster:
the ServiceAccount's token and the cluster CA at the standard paths
(/var/run/secrets/kubernetes.io/serviceaccount/, bind-mounted into a private mount namespace
with `unshare --mount`, so the host's own /var/run is untouched), KUBERNETES_SERVICE_HOST/PORT,
BRICK_IN_CLUSTER=1, DJANGO_DEBUG=0, no kubeconfig. As that ServiceAccount, bound by the chart's
RBAC and admission policies, an admin signs in over HTTP, runs procedure A through the worker
and approves a Workspace."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import require_service

from .conftest import NAMESPACE, REPO, apply_roles, wait_until

pytestmark = [pytest.mark.lab]

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
PY = sys.executable
PORT_RE = re.compile(r"https://([0-9.]+):(\d+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mount_namespaces_work() -> str:
    """'' when this host can give a process a private mount namespace with a bind mount."""
    if not shutil.which("unshare"):
        return "unshare (util-linux) is not installed"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    return "" if r.returncode == 0 else f"unshare --mount is not allowed here: {r.stderr.strip()}"


class Pod:
    """Processes started as a pod's containers would see the cluster."""

    def __init__(self, tmp: Path, env: dict):
        self.tmp, self.env, self.procs = tmp, env, []

    def argv(self, *cmd: str) -> list[str]:
        script = f'mount --bind "$0" {SA_DIR} && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(self.tmp / "sa"), *cmd]

    def run(self, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*cmd), env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout)

    def start(self, name: str, *cmd: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "wb")
        p = subprocess.Popen(
            self.argv(*cmd), env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append((name, p))
        return p

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        for _name, p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for _name, p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


@pytest.fixture
def pod(lab, chart_rbac, transactional_db, tmp_path):
    """The environment of the chart's web/worker pods, for processes on this host."""
    why = _mount_namespaces_work()
    require_service(not why, f"a private mount namespace for the ServiceAccount files ({why})")
    from django.db import connection

    from tests.gpus.conftest import database_url

    redis_url = os.environ.get("REDIS_URL", "")
    require_service(
        redis_url.startswith("redis://") and connection.vendor == "postgresql",
        "PostgreSQL and Redis (bin/test starts them)",
    )
    lab.load("seed-example")
    rbac = apply_roles(lab, chart_rbac)  # after the load, which re-made the plugin's namespace
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(rbac["token"])
    shutil.copy(lab.state / "pki" / "ca.crt", sa / "ca.crt")
    (sa / "namespace").write_text(NAMESPACE)
    made = []  # the mount point on the host: made here (empty) if missing, removed after
    for d in (SA_DIR.parents[1], SA_DIR.parent, SA_DIR):
        if not d.exists():
            d.mkdir()
            made.append(d)
    host, port = PORT_RE.search(Path(lab.kubeconfig).read_text()).groups()
    var = tmp_path / "var"
    var.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",  # no ~/.kube/config to fall back on
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        # what the chart's brickadmin.env gives every product container
        "BRICK_CLUSTER": "kube",
        "BRICK_IN_CLUSTER": "1",
        "DJANGO_DEBUG": "0",
        "BRICK_VAR_DIR": str(var),
        "POD_NAMESPACE": NAMESPACE,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_CSRF_TRUSTED_ORIGINS": "https://127.0.0.1",
        "PROMETHEUS_URL": lab.prometheus_url,
        "DATABASE_URL": database_url(),  # the test database
        "DJANGO_SECRET_KEY": "in-cluster-test-" + uuid.uuid4().hex * 2,
        "REDIS_URL": redis_url.rsplit("/", 1)[0] + "/7",  # a broker database of its own
        "BRICK_SNAPSHOT_CACHE_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    }
    p = Pod(tmp_path, env)
    yield p
    p.stop()
    for d in reversed(made):
        d.rmdir()


class Browser:
    """A signed-in admin over plain HTTP behind a TLS-terminating proxy (X-Forwarded-Proto),
    as an ingress sends it. Secure cookies are carried by hand (the client is not https)."""

    def __init__(self, base: str):
        import requests

        self.base, self.http, self.cookies = base, requests.Session(), {}
        self.origin = "https://" + base.split("://", 1)[1]

    def _send(self, method, path, data=None):
        r = self.http.request(
            method,
            self.base + path,
            data=data,
            allow_redirects=False,
            timeout=60,
            headers={
                "X-Forwarded-Proto": "https",
                "Origin": self.origin,
                "Referer": self.origin + path,
                "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            },
        )
        self.cookies.update({c.name: c.value for c in r.cookies})
        return r

    def get(self, path):
        return self._send("GET", path)

    def post(self, path, data):
        return self._send("POST", path, {**data, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")})


def test_web_and_worker_in_cluster_run_procedure_a_and_approve_a_workspace(lab, pod, admin_user, alice):
    from gpus.models import ProcedureRun
    from workspaces import approvals as ws_approvals
    from workspaces.models import WorkspaceRequest

    # Who the in-cluster configuration makes the product: the chart's ServiceAccount.
    who = pod.run(
        PY,
        "-c",
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'brickadmin.settings');"
        "django.setup(); from brickadmin.cluster.gateway import get_gateway; g = get_gateway();"
        "r = g._request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', body={"
        "'apiVersion': 'authentication.k8s.io/v1', 'kind': 'SelfSubjectReview'});"
        "print(g.configuration.host, r['status']['userInfo']['username'])",
    )
    assert who.returncode == 0, who.stderr[-3000:]
    assert who.stdout.split() == [
        f"https://{pod.env['KUBERNETES_SERVICE_HOST']}:{pod.env['KUBERNETES_SERVICE_PORT']}",
        f"system:serviceaccount:{NAMESPACE}:{NAMESPACE}",
    ]
    assert not SA_DIR.joinpath("token").exists()  # the host's /var/run never saw the token

    static = pod.run(PY, "manage.py", "collectstatic", "--noinput", "-v0", timeout=300)  # the image bakes them
    assert static.returncode == 0, static.stderr[-3000:]
    port = _free_port()
    pod.start("watcher", PY, "manage.py", "watch_cluster")
    pod.start(
        "worker",
        PY,
        "-m",
        "celery",
        "-A",
        "brickadmin",
        "worker",
        "--loglevel=INFO",
        "--concurrency=1",
        "--without-gossip",
        "--without-mingle",
    )
    web = pod.start(
        "web",
        PY,
        "-m",
        "gunicorn",
        "brickadmin.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        "--timeout",
        "120",
        "--worker-tmp-dir",
        str(pod.tmp),
    )
    browser = Browser(f"http://127.0.0.1:{port}")

    def ready():
        assert web.poll() is None, pod.log("web")
        try:
            return browser.get("/readyz").status_code == 200
        except OSError:
            return False

    wait_until(ready, 90, "the web process to be ready")
    assert browser.get("/login/").status_code == 200
    r = browser.post("/login/", {"username": "root", "password": "pw-root-123"})
    assert r.status_code == 302, r.text[-2000:]
    # the watcher (leader through its Lease, as the ServiceAccount) publishes the view the pages read
    wait_until(
        lambda: browser.get("/nodes/").status_code == 200 and "dev-a1-ws04" in browser.get("/nodes/").text,
        120,
        f"the watcher's view of the lab (watcher log: {pod.log('watcher')[-800:]})",
    )

    # Procedure A: started on the web, run by the worker, as the ServiceAccount. The plan asks
    # for the capacity acknowledgement when the node's GPUs leave a type over-allocated.
    plan = browser.get("/procedures/A/plan/?node=dev-a1-ws04").text
    ack = re.search(r'name="capacity_acknowledged" value="(\d+)"', plan)
    start = {"node": "dev-a1-ws04", **({"capacity_acknowledged": ack.group(1)} if ack else {})}
    r = browser.post("/procedures/A/start/", start)
    assert r.status_code == 302, r.text[-2000:]
    run = ProcedureRun.objects.get(pk=int(re.search(r"/runs/(\d+)/", r.headers["Location"]).group(1)))
    assert run.actor_name == "root"

    def finished():
        run.refresh_from_db()
        return run.status in ("succeeded", "failed", "cancelled", "interrupted") and run.status

    status = wait_until(finished, 300, f"the run to finish (worker log: {pod.log('worker')[-1500:]})", interval=1)
    assert status == "succeeded", (run.message, pod.log("worker"))
    assert lab.nvidia("dev-a1-ws04") == {"nvidia.com/gpu.shared": "2"}
    assert not lab.admin.get_node("dev-a1-ws04")["spec"].get("unschedulable")
    assert "succeeded" in browser.get(f"/runs/{run.pk}/").text.lower()

    # A Workspace approval on the web: the namespace and quotas made as the ServiceAccount
    name = f"ws-incluster-{uuid.uuid4().hex[:6]}"
    req = ws_approvals.create_request(alice, name=name, gpu=1, cpu=2, memory_gib=4, storage_gib=10)
    try:
        wait_until(
            lambda: "nvidia.com/gpu.shared" in browser.get("/workspaces/approvals/").text,
            60,
            "the approval page to offer Shared",
        )
        r = browser.post(f"/workspaces/approvals/{req.pk}/approve/", {f"r{req.pk}-resource": "nvidia.com/gpu.shared"})
        assert r.status_code == 302, r.text[-3000:]
        assert WorkspaceRequest.objects.get(pk=req.pk).status == "approved"
        ns = lab.admin._request("GET", f"/api/v1/namespaces/{name}")
        assert ns["metadata"]["labels"]["brick.cloud/workspace"] == "true"
        quotas = {q["metadata"]["name"]: q["spec"]["hard"] for q in lab.admin.list_resource_quotas(name)}
        # Kueue runs in the lab: the approval grants a guarantee of 1 with the default burst
        # (BRICK_KUEUE_BURST_PERCENT, 100), its ClusterQueue holds the guarantee and the
        # ResourceQuota guarantee + burst
        assert quotas["workspace-compute"]["requests.nvidia.com/gpu.shared"] == "2"
        queue = lab.admin._request("GET", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/brick-ws-{name}")
        (gpu,) = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert (gpu["name"], str(gpu["nominalQuota"]), str(gpu["borrowingLimit"])) == (
            "nvidia.com/gpu.shared",
            "1",
            "1",
        )
    finally:
        lab.admin.delete("v1", "Namespace", name)
        lab.admin.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", f"brick-ws-{name}")
    for proc_name, p in pod.procs:
        assert p.poll() is None, f"{proc_name} exited:\n{pod.log(proc_name)}"


def test_the_chart_environment_is_what_this_test_gives_the_processes():
    """The variables above are the chart's (brickadmin.env), so the test runs what a pod runs."""
    from .conftest import render_chart

    docs = render_chart()
    web = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "brickadmin-web")
    env = {e["name"]: e.get("value") for e in web["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BRICK_CLUSTER"] == "kube" and env["BRICK_IN_CLUSTER"] == "1" and env["DJANGO_DEBUG"] == "0"
    assert {
        "DATABASE_URL",
        "DJANGO_SECRET_KEY",
        "REDIS_URL",
        "PROMETHEUS_URL",
        "POD_NAMESPACE",
        "BRICK_VAR_DIR",
        "DJANGO_ALLOWED_HOSTS",
        "DJANGO_CSRF_TRUSTED_ORIGINS",
    } <= set(env)
    assert "BRICK_KUBECONFIG" not in env  # in a pod: the ServiceAccount files and KUBERNETES_SERVICE_*
