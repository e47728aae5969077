"""Fixtures for the lab tests (a real control plane on 127.0.0.1; see lab/lab.py).

The lab is found through BRICK_LAB_KUBECONFIG (lab/up's env file exports it) or the
default state dir. With CI set, a missing lab is started with lab/up, and if that fails
the tests FAIL; locally they skip (set BRICK_LAB_AUTOSTART=1 to start the lab instead).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from brickadmin.cluster import vocabulary as V
from brickadmin.cluster.base import ClusterError
from brickadmin.cluster.kube import KubeGateway

REPO = Path(__file__).resolve().parents[2]
LAB_DIR = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab"))
IN_CI = bool(os.environ.get("CI"))
sys.path.insert(0, str(REPO / "lab"))


def hold_lab(timeout: float | None = None) -> None:
    """Take the lab for this process until it exits (re-entrant, lab/lablock.py). The lab is
    one cluster per machine: pytest -n workers, other suites and other engineers' runs take
    turns instead of resetting each other's scenarios. Every Lab() takes it."""
    from lablock import LabBusy, hold

    try:
        hold(timeout if timeout is not None else float(os.environ.get("BRICK_LAB_LOCK_TIMEOUT", "1800")))
    except LabBusy as e:
        pytest.fail(str(e))


class Lab:
    def __init__(self, kubeconfig: str):
        hold_lab()
        self.kubeconfig = kubeconfig
        self.state = Path(kubeconfig).parent
        env = {}
        env_file = self.state / "env"
        if env_file.exists():
            for line in env_file.read_text().splitlines():
                if line.startswith("export ") and "=" in line:
                    k, v = line[len("export ") :].split("=", 1)
                    env[k] = v
        self.prometheus_url = os.environ.get(
            "BRICK_LAB_PROMETHEUS_URL", env.get("BRICK_LAB_PROMETHEUS_URL", "http://127.0.0.1:19090")
        )
        self.gpusim_url = os.environ.get(
            "BRICK_LAB_GPUSIM_URL", env.get("BRICK_LAB_GPUSIM_URL", "http://127.0.0.1:19400")
        )
        self.kubectl = env.get("BRICK_LAB_KUBECTL", "kubectl")
        self.admin = KubeGateway(kubeconfig)
        self.loaded: str | None = None

    # --- helpers the tests share ---------------------------------------------------
    def load(self, scenario: str) -> dict:
        import load_scenario

        load_scenario.GPUSIM = self.gpusim_url
        out = load_scenario.load(scenario, self.kubeconfig)
        self.loaded = scenario
        return out

    def gpusim(self, path: str = "/state"):
        with urllib.request.urlopen(self.gpusim_url + path, timeout=10) as r:
            data = r.read()
        return json.loads(data) if path != "/metrics" else data.decode()

    def gpusim_syncs(self, n: int = 3) -> None:
        """Wait until gpusim has gone round its loop n more times."""
        s0 = self.gpusim()["syncs"]
        wait_until(lambda: self.gpusim()["syncs"] >= s0 + n, 30, f"{n} gpusim syncs")

    def prom(self, promql: str) -> list[dict]:
        url = self.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())["data"]["result"]

    def nvidia(self, node: str, section: str = "allocatable") -> dict[str, str]:
        st = self.admin.get_node(node).get("status") or {}
        return {k: v for k, v in (st.get(section) or {}).items() if k.startswith("nvidia.com/")}

    def sa_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        out = self.admin._request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", body=body)
        return out["status"]["token"]


def wait_until(check, timeout: float = 30, what: str = "condition", interval: float = 0.3):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def _reachable(kubeconfig: str) -> str | None:
    """None when the lab answers, else why not."""
    if not Path(kubeconfig).exists():
        return f"no kubeconfig at {kubeconfig}"
    try:
        KubeGateway(kubeconfig, request_timeout=5).ping()
    except ClusterError as e:
        return str(e)
    return None


def lab_kubeconfig() -> str:
    """The running lab's kubeconfig. In CI (or with BRICK_LAB_AUTOSTART) a missing lab is
    started with lab/up; in CI a lab that cannot be reached fails the test, elsewhere it skips."""
    kubeconfig = os.environ.get("BRICK_LAB_KUBECONFIG") or str(LAB_DIR / "kubeconfig")
    why = _reachable(kubeconfig)
    if why and (IN_CI or os.environ.get("BRICK_LAB_AUTOSTART")):
        r = subprocess.run([str(REPO / "lab" / "up")], capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            pytest.fail(f"the lab is missing and lab/up failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        kubeconfig = str(LAB_DIR / "kubeconfig")
        why = _reachable(kubeconfig)
    if why:
        if IN_CI:
            pytest.fail(f"the Kubernetes lab is required in CI but is not reachable: {why}")
        pytest.skip(f"the Kubernetes lab is not running ({why}); start it with lab/up")
    return kubeconfig


@pytest.fixture(scope="session")
def lab():
    return Lab(lab_kubeconfig())  # holds the lab for this process (see hold_lab)


CHART = REPO / "deploy" / "chart"
RELEASE = NAMESPACE = "brickadmin"  # the lab's release: helm install brickadmin deploy/chart -n brickadmin
RBAC_KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def helm() -> str:
    """The helm binary lab/build.sh caches beside the lab's other binaries. In CI (or with
    BRICK_LAB_AUTOSTART) a missing one is built; otherwise the test skips."""
    import lab as lab_cli  # lab/lab.py

    path = Path(os.environ.get("BRICK_LAB_HELM") or lab_cli.bin_dir() / "helm")
    if not os.access(path, os.X_OK) and (IN_CI or os.environ.get("BRICK_LAB_AUTOSTART")):
        r = subprocess.run(
            ["bash", str(REPO / "lab" / "build.sh"), "helm"], capture_output=True, text=True, timeout=3600
        )
        if r.returncode != 0:
            pytest.fail(f"lab/build.sh helm failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    if not os.access(path, os.X_OK):
        if IN_CI:
            pytest.fail(f"helm is required in CI but is not at {path} (lab/build.sh helm)")
        pytest.skip(f"helm is not built ({path}); run lab/build.sh helm")
    return str(path)


def render_chart(*values: str, release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict]:
    """``helm template`` of deploy/chart (``--set`` pairs), as documents."""
    import yaml

    args = [helm(), "template", release, str(CHART), "--namespace", namespace]
    for v in values:
        args += ["--set", v]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def ensure_release_namespace(lab: Lab, name: str = NAMESPACE) -> None:
    """The release namespace, labelled part-of=brickadmin so a scenario load keeps it."""
    lab.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "brickadmin"}},
        },
        field_manager="lab-tests",
    )


@pytest.fixture(scope="session")
def chart_rbac(lab):
    """The chart's ServiceAccount, RBAC and admission policies applied to the lab, and a token."""
    docs = render_chart()
    wanted = [d for d in docs if d["kind"] in RBAC_KINDS]
    assert {d["kind"] for d in wanted} == RBAC_KINDS
    ensure_release_namespace(lab)
    sa = next(d for d in wanted if d["kind"] == "ServiceAccount")
    for d in wanted:
        if d["kind"] not in ("Role", "RoleBinding"):  # those: the rbac fixture, every time
            lab.admin.apply(d, field_manager="lab-tests")
    wait_until(
        lambda: _exists(lab, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{sa['metadata']['name']}"),
        30,
        "the ServiceAccount",
    )
    token = lab.sa_token(NAMESPACE, sa["metadata"]["name"], seconds=4 * 3600)
    _wait_for_policies(lab, token)
    return {
        "token": token,
        "docs": docs,
        "namespace": NAMESPACE,
        "name": sa["metadata"]["name"],
        "namespaced": [d for d in wanted if d["kind"] in ("Role", "RoleBinding")],
    }


def _wait_for_policies(lab: Lab, token: str) -> None:
    """RBAC and admission policies take effect through informers, a moment after they are
    stored: wait (with dry-run requests as the ServiceAccount, persisting nothing) until the
    role lets a Workspace namespace through and the policies refuse the rest."""
    sa = KubeGateway(lab.kubeconfig, token=token)

    def dry_create(path: str, body: dict) -> bool:
        try:
            sa._request("POST", path, query={"dryRun": "All"}, body=body)
            return True
        except ClusterError as e:
            if e.status != 403:
                raise
            return False

    def ns(name, labels):
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}

    # a Workspace namespace as the console makes it (the namespace policy refuses one without
    # its Pod Security level: on a lab whose policies are already in force, always)
    workspace = {V.WORKSPACE_LABEL: "true", V.POD_SECURITY_ENFORCE_LABEL: "baseline"}
    wait_until(
        lambda: dry_create("/api/v1/namespaces", ns("lab-policy-probe", workspace)),
        30,
        "the ClusterRole to be in force",
    )
    wait_until(
        lambda: not dry_create("/api/v1/namespaces", ns("lab-policy-probe", {})),
        30,
        "the namespace policy to be in force",
    )
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "lab-policy-probe"},
        "spec": {"hard": {"pods": "1"}},
    }
    wait_until(
        lambda: not dry_create("/api/v1/namespaces/kube-system/resourcequotas", quota),
        30,
        "the quota policy to be in force",
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "lab-policy-probe"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    wait_until(
        lambda: not dry_create("/apis/batch/v1/namespaces/kube-system/jobs", job), 30, "the Job policy to be in force"
    )


@pytest.fixture
def rbac(lab, chart_rbac):
    """chart_rbac, with its Roles (re-)applied: a scenario load deletes and re-creates the
    device plugin's namespace, and its Role with it."""
    return apply_roles(lab, chart_rbac)


def apply_roles(lab: Lab, chart_rbac: dict) -> dict:
    """The chart's Roles and RoleBindings applied where their namespace exists, and in force."""
    present = [d for d in chart_rbac["namespaced"] if _exists(lab, f"/api/v1/namespaces/{d['metadata']['namespace']}")]
    for d in present:  # no plugin namespace in this scenario: nothing of the plugin to write
        lab.admin.apply(d, field_manager="lab-tests")
    # RBAC is read from an informer: wait until the API server authorises with the Roles
    for d in present:
        if d["kind"] == "Role":
            rule, ns = d["rules"][0], d["metadata"]["namespace"]
            wait_until(
                lambda rule=rule, ns=ns: can(
                    lab, chart_rbac["token"], rule["verbs"][0], rule["resources"][0], ns, rule["apiGroups"][0]
                ),
                30,
                f"the Role {d['metadata']['name']} to be in force",
            )
    return chart_rbac


def can(
    lab: Lab, token: str, verb: str, resource: str, namespace: str | None = None, group: str = "", subresource: str = ""
) -> bool:
    """What the API server's authorizer says for this token (a SelfSubjectAccessReview)."""
    gw = KubeGateway(lab.kubeconfig, token=token)
    attrs = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if subresource:
        attrs["subresource"] = subresource
    out = gw._request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        },
    )
    return bool(out["status"].get("allowed"))


def _exists(lab, path) -> bool:
    try:
        lab.admin._request("GET", path)
        return True
    except ClusterError:
        return False


def token_subject(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def make_node(lab: Lab, name: str, labels: dict | None = None, taints: list | None = None) -> dict:
    """A fresh KWOK node (deleted first if a previous run left it)."""
    lab.admin.delete("v1", "Node", name)
    wait_until(lambda: not _exists(lab, f"/api/v1/nodes/{name}"), 30, f"old node {name} to go")
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
        },
    }
    lab.admin._request("POST", "/api/v1/nodes", body=body)
    wait_until(
        lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (lab.admin.get_node(name).get("status") or {}).get("conditions") or []
        ),
        30,
        f"node {name} Ready",
    )
    return lab.admin.get_node(name)


def make_namespace(lab: Lab, name: str, labels: dict | None = None) -> None:
    if _exists(lab, f"/api/v1/namespaces/{name}"):
        lab.admin.delete("v1", "Namespace", name)
        wait_until(lambda: not _exists(lab, f"/api/v1/namespaces/{name}"), 120, f"old namespace {name} to go")
    lab.admin._request(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}},
    )
    wait_until(
        lambda: _exists(lab, f"/api/v1/namespaces/{name}/serviceaccounts/default"),
        30,
        f"default ServiceAccount in {name}",
    )


def make_pod(
    lab: Lab,
    ns: str,
    name: str,
    node: str | None,
    *,
    labels: dict | None = None,
    emptydir: bool = False,
    gpu: dict | None = None,
    wait_running: bool = True,
) -> dict:
    spec = {
        "containers": [{"name": "main", "image": "busybox"}],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node:
        spec["nodeName"] = node
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    if gpu:
        spec["containers"][0]["resources"] = {"limits": dict(gpu), "requests": dict(gpu)}
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {"app": name}},
        "spec": spec,
    }
    lab.admin._request("POST", f"/api/v1/namespaces/{ns}/pods", body=body)
    if wait_running:
        wait_until(
            lambda: (lab.admin.get_pod(ns, name).get("status") or {}).get("phase") == "Running",
            30,
            f"pod {ns}/{name} Running",
        )
    return lab.admin.get_pod(ns, name)
