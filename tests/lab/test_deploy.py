"""deploy/ (kustomize): the manifests, the least-privilege role (exercised for real by
test_gateway's serviceaccount runs), and the Prometheus recording rules loaded into the
lab's Prometheus and queried."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from .conftest import REPO, wait_until

pytestmark = pytest.mark.lab

RULES = REPO / "deploy" / "prometheus" / "brickadmin-rules.yaml"

# exactly what brickadmin/cluster/kube.py calls (watch: the cluster watcher's streams)
EXPECTED_RULES = {
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "nodes/status"): {"patch"},
    ("", "pods"): {"get", "list", "watch", "delete"},  # delete: the Fix of a pod the kubelet refused
    ("", "pods/eviction"): {"create"},
    ("", "namespaces"): {"list", "watch", "create", "delete"},
    ("", "resourcequotas"): {"list", "watch", "create", "patch"},
    ("", "limitranges"): {"create", "patch"},
    ("", "configmaps"): {"get", "list", "watch", "create", "patch"},
    ("apps", "daemonsets"): {"get", "list", "watch", "create", "patch", "delete"},
    ("policy", "poddisruptionbudgets"): {"list"},
    ("batch", "jobs"): {"list", "watch", "create", "delete"},  # watch: the watcher keeps the Jobs
    ("scheduling.k8s.io", "priorityclasses"): {"list", "create"},
}


def test_kustomize_builds_web_worker_beat_with_the_service_account(rbac):
    docs = rbac["docs"]
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert {"brickadmin-web", "brickadmin-worker", "brickadmin-beat", "brickadmin-watcher"} <= set(deployments)
    assert deployments["brickadmin-watcher"]["spec"]["replicas"] == 2
    assert deployments["brickadmin-watcher"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] \
        == "watch_cluster"
    for name in ("brickadmin-web", "brickadmin-worker", "brickadmin-beat", "brickadmin-watcher"):
        spec = deployments[name]["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "brickadmin"
        assert deployments[name]["metadata"]["namespace"] == "brickadmin"
    assert deployments["brickadmin-beat"]["spec"]["replicas"] == 1
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "brickadmin-prometheus-rules")
    assert cm["data"]["brickadmin-rules.yaml"] == RULES.read_text()


def test_cluster_role_names_exactly_the_gateway_verbs(rbac):
    role = next(d for d in rbac["docs"] if d["kind"] == "ClusterRole")
    got = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                got.setdefault((group, res), set()).update(rule["verbs"])
    assert got == EXPECTED_RULES
    binding = next(d for d in rbac["docs"] if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "brickadmin", "namespace": "brickadmin"}]


def test_the_watcher_lease_is_a_role_in_the_product_namespace_only(rbac):
    assert [d for d in rbac["docs"] if d["kind"] == "ClusterRole"
            and any("leases" in r["resources"] for r in d["rules"])] == []
    role = next(d for d in rbac["docs"] if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "brickadmin"
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]
    binding = next(d for d in rbac["docs"] if d["kind"] == "RoleBinding")
    assert binding["metadata"]["namespace"] == "brickadmin" and binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "brickadmin", "namespace": "brickadmin"}]


def test_recording_rules_pass_promtool():
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required"
    r = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_recording_rules_load_into_the_lab_prometheus_and_answer(lab):
    lab.load("seed-example")
    import json
    import urllib.request

    with urllib.request.urlopen(lab.prometheus_url + "/api/v1/rules", timeout=10) as r:
        groups = {g["name"]: g for g in json.loads(r.read())["data"]["groups"]}
    assert {"brickadmin.gpu.nodes", "brickadmin.gpu.types"} <= set(groups)
    assert all(rule["health"] == "ok" for g in groups.values() for rule in g["rules"]), groups

    def by(q, *keys):
        return {tuple(r["metric"].get(k) for k in keys): float(r["value"][1]) for r in lab.prom(q)}

    # GPU type per node from the node labels (kube_node_labels via the KSM allowlist)
    want_types = {("dev-a1-ws04", "exclusive", "brick"): 1.0, ("dev-a1-ws02", "shared", "brick"): 1.0}
    wait_until(lambda: by("brick:node_gpu_type", "node", "gpu_type", "convention") == want_types, 60,
               "brick:node_gpu_type")
    assert {r["metric"]["gpu_model"] for r in lab.prom("brick:node_gpu_type")} == {"NVIDIA-A30"}
    # the seed-example scenario's Total / Used / Available: nvidia.com/gpu 1 1 0, nvidia.com/gpu.shared 2 1 1
    want_logical = {("exclusive", "nvidia_com_gpu"): 1.0, ("shared", "nvidia_com_gpu_shared"): 2.0}
    wait_until(lambda: by("brick:gpu_logical:sum_by_type", "gpu_type", "resource") == want_logical, 60, "logical")
    wait_until(lambda: by("brick:gpu_allocated:sum_by_type", "gpu_type", "resource") == {
        ("exclusive", "nvidia_com_gpu"): 1.0, ("shared", "nvidia_com_gpu_shared"): 1.0}, 30, "allocated")
    wait_until(lambda: by("brick:gpu_available:by_type", "gpu_type", "resource") == {
        ("exclusive", "nvidia_com_gpu"): 0.0, ("shared", "nvidia_com_gpu_shared"): 1.0}, 30, "available")
    wait_until(lambda: by("brick:node_gpu_physical", "node") == {("dev-a1-ws04",): 1.0, ("dev-a1-ws02",): 1.0},
               30, "physical GPUs per node")
