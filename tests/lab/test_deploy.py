"""deploy/chart (Helm): what it renders, that `helm lint` passes and the rendered objects
are accepted by the lab's API server (server-side dry run), the least-privilege role
(exercised for real by test_gateway's serviceaccount runs; refusals in test_least_privilege),
and the Prometheus recording rules loaded into the lab's Prometheus and queried.

The render tests need only helm (lab/build.sh builds and caches it), not a running lab."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from brickadmin.cluster import vocabulary as vocab

from .conftest import CHART, NAMESPACE, REPO, ensure_release_namespace, helm, render_chart, wait_until

pytestmark = pytest.mark.lab

RULES = CHART / "files" / "brickadmin-rules.yaml"
PRODUCT = ("web", "worker", "notify", "beat", "watcher")

# exactly what brickadmin/cluster/kube.py calls (watch: the cluster watcher's streams),
# cluster-wide; the plugin's and the Lease's writes are Roles (below)
EXPECTED_CLUSTER_RULES = {
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "nodes/status"): {"patch"},
    ("", "pods"): {"get", "list", "watch", "delete"},  # delete: the Fix of a pod the kubelet refused
    ("", "pods/eviction"): {"create"},
    ("", "namespaces"): {"list", "watch", "create", "delete"},  # Workspace namespaces only (admission)
    ("", "resourcequotas"): {"list", "watch", "create", "patch"},  # in Workspace namespaces only
    ("", "limitranges"): {"create", "patch"},  # in Workspace namespaces only
    ("", "configmaps"): {"get", "list", "watch"},
    ("apps", "daemonsets"): {"get", "list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list"},
    ("batch", "jobs"): {"list", "watch", "create", "delete"},  # delete: cancelling a submitted Job
    ("scheduling.k8s.io", "priorityclasses"): {"list", "create"},
    ("nvidia.com", "clusterpolicies"): {"list"},  # the GPU Operator's: mig-manager's layouts ConfigMap
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},  # the watcher (DRA)
    ("resource.k8s.io", "resourceclaims"): {"list", "watch"},  # the watcher (DRA)
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},  # the watcher (DRA)
    ("resource.k8s.io", "resourceclaimtemplates"): {"list", "watch"},  # the watcher (DRA)
    ("resource.k8s.io", "devicetaintrules"): {"list", "watch"},  # the watcher (DRA)
    ("kueue.x-k8s.io", "resourceflavors"): {"get", "list", "create", "patch", "delete"},  # elastic quota
    ("kueue.x-k8s.io", "clusterqueues"): {"get", "list", "watch", "create", "patch", "delete"},  # elastic quota
    ("kueue.x-k8s.io", "localqueues"): {"create", "patch"},  # elastic quota, in the Workspace namespace
    ("kueue.x-k8s.io", "workloads"): {"list", "watch"},  # the watcher: what Kueue evicted, what waits and why
}
EXPECTED_PLUGIN_RULES = {("", "configmaps"): {"create", "patch"}, ("apps", "daemonsets"): {"create", "patch", "delete"}}
EXPECTED_LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}


def rules_of(role):
    got = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                got.setdefault((group, res), set()).update(rule["verbs"])
    return got


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@pytest.fixture(scope="module")
def docs():
    return render_chart()


def pod_specs(docs):
    """(name, pod spec) of every workload: Deployments and the migrations Job."""
    out = [(n, d["spec"]["template"]["spec"]) for n, d in by_kind(docs, "Deployment").items()]
    return out + [(n, d["spec"]["template"]["spec"]) for n, d in by_kind(docs, "Job").items()]


def env_of(container):
    return {e["name"]: e for e in container.get("env") or []}


# --- what the chart renders ------------------------------------------------------------------


def test_helm_lint_passes_with_the_default_and_the_optional_values():
    for extra in (
        [],
        [
            "--set",
            "prometheus.rule.enabled=true",
            "--set",
            "oidc.issuer=https://login.example.internal",
            "--set",
            "oidc.adminGroup=platform-admins",
            "--set",
            "redis.enabled=false",
            "--set",
            "devicePlugin.createNamespace=true",
            "--set",
            "oidc.caBundleConfigMap=corp-ca",
        ],
    ):
        r = subprocess.run([helm(), "lint", "--strict", str(CHART), *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout


def test_the_chart_renders_web_worker_beat_watcher_redis_with_the_service_account(docs):
    deployments = by_kind(docs, "Deployment")
    assert set(deployments) == {f"brickadmin-{c}" for c in (*PRODUCT, "redis")}
    assert all(d["metadata"]["namespace"] == NAMESPACE for d in deployments.values())
    assert deployments["brickadmin-web"]["spec"]["replicas"] == 2
    assert deployments["brickadmin-watcher"]["spec"]["replicas"] == 2
    assert deployments["brickadmin-beat"]["spec"]["replicas"] == 1
    assert deployments["brickadmin-beat"]["spec"]["strategy"] == {"type": "Recreate"}
    assert (
        deployments["brickadmin-watcher"]["spec"]["template"]["spec"]["containers"][0]["command"][-1] == "watch_cluster"
    )
    for name in ("brickadmin-web", "brickadmin-worker", "brickadmin-watcher"):
        spec = deployments[name]["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "brickadmin" and "automountServiceAccountToken" not in spec
        env = env_of(spec["containers"][0])
        assert env["BRICK_IN_CLUSTER"]["value"] == "1" and env["BRICK_CLUSTER"]["value"] == "kube"
        assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
        assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "brickadmin-secrets", "key": "DATABASE_URL"}
    # beat sends periodic tasks and never calls the API server: no token in its pod
    beat = deployments["brickadmin-beat"]["spec"]["template"]["spec"]
    assert beat["automountServiceAccountToken"] is False and "serviceAccountName" not in beat
    notify = deployments["brickadmin-notify"]["spec"]["template"]["spec"]  # emails and webhooks: no token either
    assert notify["automountServiceAccountToken"] is False and "serviceAccountName" not in notify
    assert deployments["brickadmin-redis"]["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert set(by_kind(docs, "Service")) == {"brickadmin-web", "brickadmin-redis"}
    assert by_kind(docs, "ServiceAccount")["brickadmin"]["metadata"]["namespace"] == NAMESPACE


def test_every_container_has_a_read_only_root_a_pinned_image_probes_and_resources(docs):
    for name, spec in pod_specs(docs):
        assert spec.get("securityContext", {}).get("runAsNonRoot") is True, name
        writable = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert {m["name"] for m in c["volumeMounts"] if not m.get("readOnly")} <= writable, name
            repo, _, tag = c["image"].rpartition(":")
            assert repo and tag and tag != "latest" and "@" not in tag, c["image"]
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], name
            if not name.endswith("-migrate"):
                assert "livenessProbe" in c or name.endswith("-watcher"), name
    web = by_kind(docs, "Deployment")["brickadmin-web"]["spec"]["template"]["spec"]
    probes = web["containers"][0]
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "initContainers" not in web  # migrations are the hook Job's, never a web pod's
    product_image = by_kind(docs, "Deployment")["brickadmin-web"]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert product_image == "registry.example.invalid/brickadmin:0.1.0"  # the chart's appVersion


def test_latest_is_refused_and_a_digest_pins_the_image():
    r = subprocess.run(
        [helm(), "template", "brickadmin", str(CHART), "--set", "image.tag=latest"], capture_output=True, text=True
    )
    assert r.returncode != 0 and "latest" in r.stderr
    digest = "sha256:" + "ab" * 32
    web = by_kind(render_chart(f"image.digest={digest}"), "Deployment")["brickadmin-web"]
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.example.invalid/brickadmin@{digest}"


def test_redis_has_a_password_from_the_secret_a_security_context_and_its_own_probe(docs):
    redis = by_kind(docs, "Deployment")["brickadmin-redis"]["spec"]["template"]["spec"]
    (c,) = redis["containers"]
    assert env_of(c)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "brickadmin-secrets",
        "key": "REDIS_PASSWORD",
    }
    assert c["command"][:3] == ["redis-server", "--requirepass", "$(REDIS_PASSWORD)"]
    assert redis["securityContext"]["runAsNonRoot"] is True and c["securityContext"]["readOnlyRootFilesystem"] is True
    for probe in ("readinessProbe", "livenessProbe"):
        assert (
            "redis-cli ping" in c[probe]["exec"]["command"][-1] and "REDIS_PASSWORD" in c[probe]["exec"]["command"][-1]
        )
    # the product's broker URL carries the same password (kubelet expands $(REDIS_PASSWORD))
    worker = by_kind(docs, "Deployment")["brickadmin-worker"]["spec"]["template"]["spec"]["containers"][0]
    env = list(env_of(worker))
    assert env.index("REDIS_PASSWORD") < env.index("REDIS_URL")
    assert env_of(worker)["REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@brickadmin-redis:6379/0"


def test_an_external_redis_url_comes_from_the_secret():
    docs = render_chart("redis.enabled=false")
    assert "brickadmin-redis" not in by_kind(docs, "Deployment") and "brickadmin-redis" not in by_kind(docs, "Service")
    assert "brickadmin-redis" not in by_kind(docs, "NetworkPolicy")
    worker = by_kind(docs, "Deployment")["brickadmin-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert env_of(worker)["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "brickadmin-secrets",
        "key": "REDIS_URL",
    }
    assert "REDIS_PASSWORD" not in env_of(worker)


def test_network_policies_expose_only_the_web_port_and_redis_to_the_product(docs):
    pols = by_kind(docs, "NetworkPolicy")
    deny = pols["brickadmin-deny-ingress"]["spec"]
    assert deny["policyTypes"] == ["Ingress"] and "ingress" not in deny  # every pod of the release: no ingress
    assert deny["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "brickadmin",
        "app.kubernetes.io/instance": "brickadmin",
    }
    web = pols["brickadmin-web"]["spec"]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    # only the ingress controller's pods reach the web port: no other pod forges X-Forwarded-For
    assert web["ingress"] == [
        {
            "ports": [{"port": "http", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}],
        }
    ]
    redis = pols["brickadmin-redis"]["spec"]
    assert redis["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "redis"
    ((rule,),) = [r["from"] for r in redis["ingress"]]
    exprs = {e["key"]: e["values"] for e in rule["podSelector"]["matchExpressions"]}
    assert exprs == {
        "app.kubernetes.io/name": ["brickadmin"],
        "app.kubernetes.io/instance": ["brickadmin"],
        "app.kubernetes.io/component": ["web", "worker", "notify", "beat", "watcher"],
    }
    assert "namespaceSelector" not in rule  # the release's own namespace only
    # the pods carry the labels the policies select
    for name, d in by_kind(docs, "Deployment").items():
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "brickadmin" and name.endswith(
            labels["app.kubernetes.io/component"]
        )
    only_ingress = render_chart("networkPolicy.webFrom[0].namespaceSelector.matchLabels.team=ingress")
    assert by_kind(only_ingress, "NetworkPolicy")["brickadmin-web"]["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "ingress"}}}
    ]


def test_the_web_server_believes_forwarded_headers_only_from_the_configured_proxies(docs):
    def web_command(rendered):
        (web,) = [d for n, d in by_kind(rendered, "Deployment").items() if n.endswith("-web")]
        (container,) = web["spec"]["template"]["spec"]["containers"]
        return container["command"], env_of(container)

    command, env = web_command(docs)
    assert command[command.index("--forwarded-allow-ips") + 1] == ""  # no peer, loopback included
    assert env["BRICK_TRUSTED_PROXIES"]["value"] == ""
    command, env = web_command(render_chart("trustedProxies={10.42.0.0/16,10.43.0.10}"))
    assert command[command.index("--forwarded-allow-ips") + 1] == "10.42.0.0/16,10.43.0.10"
    assert env["BRICK_TRUSTED_PROXIES"]["value"] == "10.42.0.0/16,10.43.0.10"


def test_notifications_have_a_worker_of_their_own_and_procedures_never_wait_behind_them(docs):
    deployments = by_kind(docs, "Deployment")
    (worker,) = deployments["brickadmin-worker"]["spec"]["template"]["spec"]["containers"]
    (notify,) = deployments["brickadmin-notify"]["spec"]["template"]["spec"]["containers"]
    assert worker["command"][worker["command"].index("-Q") + 1] == "celery"
    assert notify["command"][notify["command"].index("-Q") + 1] == "notify"
    assert env_of(notify)["REDIS_URL"] == env_of(worker)["REDIS_URL"]


def test_migrations_run_once_in_a_pre_install_and_pre_upgrade_hook_job(docs):
    (job,) = by_kind(docs, "Job").values()
    ann = job["metadata"]["annotations"]
    assert ann["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in ann["helm.sh/hook-delete-policy"]
    spec = job["spec"]["template"]["spec"]
    assert spec["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    # the Job has its whole environment inline: pre-install, nothing else of the release exists yet
    assert all("configMapRef" not in e for e in spec["containers"][0].get("envFrom", []))
    assert env_of(spec["containers"][0])["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "brickadmin-secrets"


def test_values_for_prometheus_oidc_replicas_and_the_database_secret():
    docs = render_chart(
        "prometheus.url=http://prom.monitoring:9090",
        "oidc.issuer=https://login.example.internal/r",
        "oidc.adminGroup=platform-admins",
        "oidc.caBundleConfigMap=corp-ca",
        "web.replicas=3",
        "worker.replicas=2",
        "secret.name=my-secrets",
        "secret.keys.databaseUrl=PG_URL",
    )
    deployments = by_kind(docs, "Deployment")
    assert deployments["brickadmin-web"]["spec"]["replicas"] == 3
    assert deployments["brickadmin-worker"]["spec"]["replicas"] == 2
    web = deployments["brickadmin-web"]["spec"]["template"]["spec"]
    env = env_of(web["containers"][0])
    assert env["PROMETHEUS_URL"]["value"] == "http://prom.monitoring:9090"
    assert env["BRICK_OIDC_ISSUER"]["value"] == "https://login.example.internal/r"
    assert env["BRICK_OIDC_ADMIN_GROUP"]["value"] == "platform-admins"
    assert env["BRICK_OIDC_CLIENT_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": "my-secrets",
        "key": "BRICK_OIDC_CLIENT_SECRET",
    }
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "my-secrets", "key": "PG_URL"}
    assert env["BRICK_OIDC_CA_BUNDLE"]["value"] == "/etc/brickadmin/oidc/ca.crt"
    assert {"name": "oidc-ca", "configMap": {"name": "corp-ca"}} in web["volumes"]
    # without an issuer, no OIDC settings at all (local accounts only)
    assert not [
        k
        for k in env_of(
            by_kind(render_chart(), "Deployment")["brickadmin-web"]["spec"]["template"]["spec"]["containers"][0]
        )
        if k.startswith("BRICK_OIDC")
    ]


def test_recording_rules_are_a_config_map_and_an_optional_prometheus_rule(docs):
    cm = by_kind(docs, "ConfigMap")["brickadmin-prometheus-rules"]
    assert cm["data"]["brickadmin-rules.yaml"] == RULES.read_text()
    assert "PrometheusRule" not in {d["kind"] for d in docs}
    (rule,) = by_kind(
        render_chart("prometheus.rule.enabled=true", "prometheus.rule.labels.release=kps"), "PrometheusRule"
    ).values()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())


def test_cluster_role_names_exactly_the_gateway_verbs(docs):
    (role,) = by_kind(docs, "ClusterRole").values()
    assert rules_of(role) == EXPECTED_CLUSTER_RULES
    (binding,) = by_kind(docs, "ClusterRoleBinding").values()
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "brickadmin", "namespace": NAMESPACE}]


def test_plugin_writes_and_the_lease_are_roles_in_their_own_namespaces(docs):
    roles, bindings = by_kind(docs, "Role"), by_kind(docs, "RoleBinding")
    plugin, lease = roles["brickadmin-device-plugin"], roles["brickadmin-watcher-lease"]
    assert plugin["metadata"]["namespace"] == vocab.PLUGIN_NAMESPACE and rules_of(plugin) == EXPECTED_PLUGIN_RULES
    assert lease["metadata"]["namespace"] == NAMESPACE and rules_of(lease) == EXPECTED_LEASE_RULES
    for name, role in roles.items():
        b = bindings[name]
        assert b["metadata"]["namespace"] == role["metadata"]["namespace"] and b["roleRef"]["name"] == name
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "brickadmin", "namespace": NAMESPACE}]


def test_admission_policies_name_the_workspace_label_and_the_service_account(docs):
    policies = by_kind(docs, "ValidatingAdmissionPolicy")
    bindings = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    assert (
        set(policies)
        == set(bindings)
        == {"brickadmin-workspace-namespaces", "brickadmin-workspace-quotas", "brickadmin-workspace-workloads"}
    )
    for name, p in policies.items():
        assert bindings[name]["spec"] == {"policyName": name, "validationActions": ["Deny"]}
        assert p["spec"]["failurePolicy"] == "Fail"
        assert p["spec"]["matchConditions"] == [
            {
                "name": "the-product",
                "expression": 'request.userInfo.username == "system:serviceaccount:brickadmin:brickadmin"',
            }
        ]
        for v in p["spec"]["validations"]:
            assert v["reason"] == "Forbidden"
            names = (f"'{vocab.WORKSPACE_LABEL}'", "'pod-security.kubernetes.io/enforce'")
            assert any(name in v["expression"] for name in names)
    (pod_security,) = [
        v
        for v in policies["brickadmin-workspace-namespaces"]["spec"]["validations"]
        if "pod-security" in v["expression"]
    ]
    assert "['baseline', 'restricted']" in pod_security["expression"]  # the chart's default level, or stricter
    restricted = by_kind(render_chart("workspacePodSecurity=restricted"), "ValidatingAdmissionPolicy")
    assert any(
        "['restricted']" in v["expression"]
        for v in restricted["brickadmin-workspace-namespaces"]["spec"]["validations"]
    )
    quota_rules = policies["brickadmin-workspace-quotas"]["spec"]["matchConstraints"]["resourceRules"]
    assert quota_rules[0]["resources"] == ["resourcequotas", "limitranges"]
    workload_rules = policies["brickadmin-workspace-workloads"]["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["resources"], r["operations"]) for r in workload_rules] == [
        (["jobs"], ["CREATE", "DELETE"]),
        (["pods"], ["DELETE"]),
    ]


def test_recording_rules_pass_promtool():
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required"
    r = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_alerts_fire_as_the_operator_guide_says():
    """promtool's unit test: quotas over capacity for 15 minutes, a GPU node serving no GPU."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required"
    r = subprocess.run(
        [promtool, "test", "rules", str(REPO / "tests" / "lab" / "brickadmin-alerts.promtest.yaml")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    guide = (REPO / "docs" / "operator-guide.md").read_text()
    alerts = [
        rule["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for rule in g["rules"] if "alert" in rule
    ]
    assert alerts and all(f"alert `{a}`" in guide for a in alerts)


# --- on the lab's API server ---------------------------------------------------------------


def test_the_lab_serves_validating_admission_policies(lab):
    groups = lab.admin._request("GET", "/apis/admissionregistration.k8s.io/v1")
    kinds = {r["kind"] for r in groups["resources"]}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds


def test_helm_template_is_accepted_by_the_lab_api_server_with_a_server_side_dry_run(lab):
    """Every object the chart renders (hooks included) through admission and validation,
    persisted nowhere. The PrometheusRule needs the Prometheus Operator's CRD, which the lab
    does not have: it is rendered off (and checked above)."""
    lab.load("seed-example")  # the device plugin's namespace, where the chart's Role goes
    ensure_release_namespace(lab)
    rendered = subprocess.run(
        [
            helm(),
            "template",
            "brickadmin",
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--set",
            "oidc.issuer=https://login.example.internal",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # --force-conflicts: the least-privilege tests may already hold these cluster-wide objects
    # (their admission policies) under their own field manager; a dry run persists nothing anyway
    r = subprocess.run(
        [
            lab.kubectl,
            "--kubeconfig",
            lab.kubeconfig,
            "apply",
            "--server-side",
            "--dry-run=server",
            "--force-conflicts",
            "--field-manager=helm-dry-run",
            "-f",
            "-",
        ],
        input=rendered,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    applied = [line for line in r.stdout.splitlines() if line.strip()]
    want = [d for d in yaml.safe_load_all(rendered) if d]
    assert len(applied) == len(want) and all(line.endswith("(server dry run)") for line in applied), r.stdout
    # nothing was persisted
    assert "brickadmin-web" not in {
        d["metadata"]["name"] for d in lab.admin._list(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")
    }


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
    wait_until(
        lambda: by("brick:node_gpu_type", "node", "gpu_type", "convention") == want_types, 60, "brick:node_gpu_type"
    )
    assert {r["metric"]["gpu_model"] for r in lab.prom("brick:node_gpu_type")} == {"NVIDIA-A30"}
    # the seed-example scenario's Total / Used / Available: nvidia.com/gpu 1 1 0, nvidia.com/gpu.shared 2 1 1
    want_logical = {("exclusive", "nvidia_com_gpu"): 1.0, ("shared", "nvidia_com_gpu_shared"): 2.0}
    wait_until(lambda: by("brick:gpu_logical:sum_by_type", "gpu_type", "resource") == want_logical, 60, "logical")
    wait_until(
        lambda: (
            by("brick:gpu_allocated:sum_by_type", "gpu_type", "resource")
            == {("exclusive", "nvidia_com_gpu"): 1.0, ("shared", "nvidia_com_gpu_shared"): 1.0}
        ),
        30,
        "allocated",
    )
    wait_until(
        lambda: (
            by("brick:gpu_available:by_type", "gpu_type", "resource")
            == {("exclusive", "nvidia_com_gpu"): 0.0, ("shared", "nvidia_com_gpu_shared"): 1.0}
        ),
        30,
        "available",
    )
    wait_until(
        lambda: by("brick:node_gpu_physical", "node") == {("dev-a1-ws04",): 1.0, ("dev-a1-ws02",): 1.0},
        30,
        "physical GPUs per node",
    )


def test_nothing_reads_the_old_kustomize_base():
    assert not (REPO / "deploy" / "kustomization.yaml").exists()
    assert not (REPO / "deploy" / "prometheus").exists()
