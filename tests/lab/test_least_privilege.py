"""The chart's least privilege, proven on the lab's API server as its ServiceAccount:
every verb the product needs is granted where it needs it (the authorizer's answer,
and test_gateway runs each operation for real), and what it must not do is refused, by RBAC
or by the admission policies on the Workspace label, with the cluster left as it was."""

from __future__ import annotations

import time

import pytest

from brickadmin.cluster.base import Forbidden
from brickadmin.cluster.kube import KubeGateway
from brickadmin.cluster.vocabulary import OWNER_LABEL, PLUGIN_NAMESPACE, WORKSPACE_LABEL
from workspaces.labels import namespace_labels

from .conftest import NAMESPACE, can, make_namespace, make_node, make_pod, wait_until
from .test_deploy import (
    EXPECTED_CLUSTER_RULES,
    EXPECTED_LEASE_RULES,
    EXPECTED_PLUGIN_RULES,
)

pytestmark = pytest.mark.lab

PLAIN = "lab-lp-plain"  # a namespace that is not a Workspace


@pytest.fixture(scope="module")
def seeded(lab):
    lab.load("seed-example")
    make_namespace(lab, PLAIN)
    return lab


@pytest.fixture
def sa(seeded, rbac):
    return KubeGateway(seeded.kubeconfig, token=rbac["token"])


def refused(call):
    with pytest.raises(Forbidden) as e:
        call()
    assert e.value.status == 403 and not e.value.transient
    return e.value.message


def _ds(ns, name):
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"brick.cloud/never": "true"},
                    "containers": [{"name": "c", "image": "busybox"}],
                },
            },
        },
    }


def _split(res):
    return res.split("/", 1) if "/" in res else (res, "")


def test_every_verb_the_product_needs_is_granted(seeded, rbac):
    token = rbac["token"]
    for (group, res), verbs in EXPECTED_CLUSTER_RULES.items():
        resource, sub = _split(res)
        for verb in verbs:  # cluster-wide (a Workspace namespace is any namespace to RBAC)
            assert can(
                seeded,
                token,
                verb,
                resource,
                None if resource in ("nodes", "namespaces", "priorityclasses") else "ws-exclusive",
                group,
                sub,
            ), (verb, res)
    for (group, res), verbs in EXPECTED_PLUGIN_RULES.items():
        for verb in verbs:
            assert can(seeded, token, verb, res, PLUGIN_NAMESPACE, group), (verb, res)
    for (group, res), verbs in EXPECTED_LEASE_RULES.items():
        for verb in verbs:
            assert can(seeded, token, verb, res, NAMESPACE, group), (verb, res)


@pytest.mark.parametrize(
    "verb,resource,namespace,group",
    [
        ("delete", "nodes", None, ""),
        ("update", "nodes", None, ""),
        ("get", "secrets", "kube-system", ""),
        ("list", "secrets", None, ""),
        ("patch", "namespaces", None, ""),  # relabelling kube-system a Workspace
        ("create", "daemonsets", "kube-system", "apps"),
        ("patch", "daemonsets", "kube-system", "apps"),
        ("delete", "daemonsets", "kube-system", "apps"),
        ("patch", "configmaps", "kube-system", ""),
        ("delete", "configmaps", PLUGIN_NAMESPACE, ""),  # the manifest never deletes one
        ("update", "leases", "kube-system", "coordination.k8s.io"),
        ("create", "pods", "kube-system", ""),
        ("create", "clusterrolebindings", None, "rbac.authorization.k8s.io"),
        ("delete", "validatingadmissionpolicies", None, "admissionregistration.k8s.io"),
        ("delete", "resourcequotas", "ws-exclusive", ""),
        ("update", "jobs", "ws-exclusive", "batch"),
    ],
)
def test_what_the_product_never_does_is_not_granted(seeded, rbac, verb, resource, namespace, group):
    assert not can(seeded, rbac["token"], verb, resource, namespace, group)


def test_deleting_kube_system_is_refused(seeded, sa):
    """Kube-system (like default and kube-public) is also immortal to the API server's
    NamespaceLifecycle plugin, which answers first; the policy's own refusal is proven on
    namespaces nothing else protects (next test)."""
    refused(lambda: sa.delete("v1", "Namespace", "kube-system"))
    assert not seeded.admin._request("GET", "/api/v1/namespaces/kube-system")["metadata"].get("deletionTimestamp")


def test_deleting_a_namespace_that_is_not_a_workspace_is_refused(seeded, sa):
    for ns in (PLAIN, PLUGIN_NAMESPACE, NAMESPACE):  # the throwaway one first
        why = refused(lambda ns=ns: sa.delete("v1", "Namespace", ns))
        assert "only Workspace namespaces" in why and ns in why  # the admission policy's answer
        assert not seeded.admin._request("GET", f"/api/v1/namespaces/{ns}")["metadata"].get("deletionTimestamp")


def test_creating_a_namespace_without_the_workspace_label_is_refused(seeded, sa):
    name = f"lp-nolabel-{int(time.time() * 1000) % 100000}"
    assert "only Workspace namespaces" in refused(lambda: sa.create_namespace(name, {OWNER_LABEL: "alice"}))
    assert "only Workspace namespaces" in refused(lambda: sa.create_namespace(name, {WORKSPACE_LABEL: "false"}))
    assert name not in {n["metadata"]["name"] for n in seeded.admin.list_namespaces()}


def test_creating_a_workspace_namespace_without_pod_security_is_refused(seeded, sa):
    """A stolen token cannot make a Workspace namespace where a privileged pod would run: the
    chart's policy wants pod-security.kubernetes.io/enforce at baseline or stricter."""
    name = f"lp-nopsa-{int(time.time() * 1000) % 100000}"
    why = refused(lambda: sa.create_namespace(name, {WORKSPACE_LABEL: "true", OWNER_LABEL: "alice"}))
    assert "pod-security.kubernetes.io/enforce=baseline or stricter" in why
    lax = {WORKSPACE_LABEL: "true", OWNER_LABEL: "alice", "pod-security.kubernetes.io/enforce": "privileged"}
    assert "or stricter" in refused(lambda: sa.create_namespace(name, lax))
    assert name not in {n["metadata"]["name"] for n in seeded.admin.list_namespaces()}


def test_a_daemonset_in_kube_system_is_refused(seeded, sa):
    name = "lp-intruder"
    refused(lambda: sa.apply(_ds("kube-system", name)))
    assert name not in {d["metadata"]["name"] for d in seeded.admin.list_daemonsets("kube-system")}
    # nor can it touch or delete one that is there
    seeded.admin.apply(_ds("kube-system", "lp-resident"), field_manager="lab-tests")
    refused(lambda: sa.rollout_restart_daemonset("kube-system", "lp-resident"))
    refused(lambda: sa.delete("apps/v1", "DaemonSet", "lp-resident", "kube-system"))
    live = seeded.admin.get_daemonset("kube-system", "lp-resident")
    assert not live["metadata"].get("deletionTimestamp")
    assert "kubectl.kubernetes.io/restartedAt" not in (live["spec"]["template"]["metadata"].get("annotations") or {})
    seeded.admin.delete("apps/v1", "DaemonSet", "lp-resident", "kube-system")


def test_a_configmap_outside_the_plugin_namespace_is_refused(seeded, sa):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "lp-cm", "namespace": "kube-system"},
        "data": {"config.yaml": "version: v1\n"},
    }
    refused(lambda: sa.apply(cm))
    assert "lp-cm" not in {c["metadata"]["name"] for c in seeded.admin.list_configmaps("kube-system")}


def test_a_quota_or_limit_range_in_a_namespace_that_is_not_a_workspace_is_refused(seeded, sa):
    for ns in (PLAIN, "kube-system"):
        why = refused(lambda ns=ns: sa.create_resource_quota(ns, "lp-quota", {"requests.nvidia.com/gpu": "64"}))
        assert "Workspace" in why and ns in why
        refused(
            lambda ns=ns: sa.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": "lp-quota", "namespace": ns},
                    "spec": {"hard": {"pods": "1"}},
                }
            )
        )
        refused(
            lambda ns=ns: sa.apply(
                {
                    "apiVersion": "v1",
                    "kind": "LimitRange",
                    "metadata": {"name": "lp-limits", "namespace": ns},
                    "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1"}}]},
                }
            )
        )
        assert seeded.admin.list_resource_quotas(ns) == []
        assert seeded.admin._request("GET", f"/api/v1/namespaces/{ns}/limitranges")["items"] == []


def test_an_existing_quota_outside_a_workspace_cannot_be_raised(seeded, sa):
    seeded.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "lp-team-quota", "namespace": PLAIN},
            "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
        },
        field_manager="lab-tests",
    )
    refused(
        lambda: sa.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "lp-team-quota", "namespace": PLAIN},
                "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
            }
        )
    )
    (q,) = seeded.admin.list_resource_quotas(PLAIN)
    assert q["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}
    seeded.admin.delete("v1", "ResourceQuota", "lp-team-quota", PLAIN)


def test_in_a_workspace_namespace_the_same_writes_succeed(seeded, sa):
    """The policies confine, they do not block the product: its whole Workspace flow."""
    ns = f"lp-ws-{int(time.time() * 1000) % 100000}"
    sa.create_namespace(ns, namespace_labels("alice"))
    sa.create_resource_quota(ns, "workspace-compute", {"requests.nvidia.com/gpu": "1"})
    sa.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "workspace-compute", "namespace": ns},
            "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
        },
        field_manager="brickadmin",
    )
    sa.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "workspace-defaults", "namespace": ns},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]},
        }
    )
    (q,) = seeded.admin.list_resource_quotas(ns)
    assert q["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    sa.delete("v1", "Namespace", ns)
    wait_until(
        lambda: ns not in {n["metadata"]["name"] for n in seeded.admin.list_namespaces()},
        120,
        "the Workspace namespace to be deleted",
    )


def test_the_lease_is_writable_in_the_release_namespace_only(seeded, sa):
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "lp-lease"},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15},
    }
    refused(
        lambda: sa.create_lease("kube-system", {**body, "metadata": {"name": "lp-lease", "namespace": "kube-system"}})
    )
    try:
        sa.create_lease(NAMESPACE, {**body, "metadata": {"name": "lp-lease", "namespace": NAMESPACE}})
        assert sa.get_lease(NAMESPACE, "lp-lease")["spec"]["holderIdentity"] == "x"
    finally:
        seeded.admin.delete("coordination.k8s.io/v1", "Lease", "lp-lease", NAMESPACE)


# --- Jobs and pods: only in Workspace namespaces; drains evict anywhere --------------------


def _job(name):
    return {
        "metadata": {"name": name, "labels": {"brick.cloud/job": "true"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"brick.cloud/never": "true"},  # never runs: the Job object is the point
                    "containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}],
                }
            },
        },
    }


def _workspace(seeded, sa):
    """A Workspace namespace made as the product makes one (as the ServiceAccount)."""
    ns = f"lp-jobs-{int(time.time() * 1000) % 100000}"
    sa.create_namespace(ns, namespace_labels("alice"))
    wait_until(
        lambda: any(
            s["metadata"]["name"] == "default"
            for s in seeded.admin._request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts")["items"]
        ),
        30,
        f"default ServiceAccount in {ns}",
    )
    return ns


def test_a_job_in_kube_system_or_any_namespace_that_is_not_a_workspace_is_refused(seeded, sa):
    for ns in ("kube-system", PLAIN, PLUGIN_NAMESPACE, NAMESPACE):
        why = refused(lambda ns=ns: sa.create_job(ns, _job("lp-intruder")))
        assert "only in Workspace namespaces" in why and ns in why  # the admission policy's answer
        assert "lp-intruder" not in {j["metadata"]["name"] for j in seeded.admin.list_jobs(ns)}
    # nor can it cancel (delete) a Job that is there
    seeded.admin.create_job("kube-system", _job("lp-resident"))
    refused(lambda: sa.delete("batch/v1", "Job", "lp-resident", "kube-system"))
    (job,) = [j for j in seeded.admin.list_jobs("kube-system") if j["metadata"]["name"] == "lp-resident"]
    assert not job["metadata"].get("deletionTimestamp")
    seeded.admin.delete("batch/v1", "Job", "lp-resident", "kube-system")


def test_a_pod_delete_outside_a_workspace_is_refused_and_the_pod_stays(seeded, sa):
    for ns in ("kube-system", PLAIN):
        make_pod(seeded, ns, "lp-resident-pod", None, wait_running=False)
        why = refused(lambda ns=ns: sa.delete("v1", "Pod", "lp-resident-pod", ns))
        assert "only in Workspace namespaces" in why and ns in why
        assert not seeded.admin.get_pod(ns, "lp-resident-pod")["metadata"].get("deletionTimestamp")
        seeded.admin._request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods/lp-resident-pod", query={"gracePeriodSeconds": 0}
        )


def test_in_a_workspace_namespace_jobs_are_submitted_and_cancelled_and_failed_pods_deleted(seeded, sa):
    """The product's own Job submission and cancel, and the Fix that deletes a failed pod."""
    ns = _workspace(seeded, sa)
    try:
        out = sa.create_job(ns, _job("train-1"))
        assert out["metadata"]["namespace"] == ns
        assert "train-1" in {j["metadata"]["name"] for j in seeded.admin.list_jobs(ns)}
        sa.delete("batch/v1", "Job", "train-1", ns)
        wait_until(
            lambda: "train-1" not in {j["metadata"]["name"] for j in seeded.admin.list_jobs(ns)},
            60,
            "the cancelled Job to go",
        )
        make_pod(seeded, ns, "refused-by-kubelet", None, wait_running=False)
        seeded.admin._request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/refused-by-kubelet/status",
            body={"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "Allocate failed"}},
            content_type="application/merge-patch+json",
        )
        sa.delete("v1", "Pod", "refused-by-kubelet", ns)
        wait_until(
            lambda: not sa.list_pods(ns, field_selector="metadata.name=refused-by-kubelet"), 60, "the failed pod to go"
        )
    finally:
        sa.delete("v1", "Namespace", ns)


def test_a_drain_still_evicts_pods_of_every_namespace(seeded, sa):
    """Eviction is the pods/eviction subresource, which the policy does not match: a drain
    empties a node whatever namespaces its pods are in (PodDisruptionBudgets still apply)."""
    node = "lp-drain-1"
    make_node(seeded, node)
    for ns in ("kube-system", PLAIN):
        make_pod(seeded, ns, "lp-on-drained-node", node)
    result = sa.drain(node, timeout_seconds=60)
    assert result.done and sorted(result.evicted) == ["kube-system/lp-on-drained-node", f"{PLAIN}/lp-on-drained-node"]
    assert seeded.admin.list_pods(field_selector=f"spec.nodeName={node}") == []
    seeded.admin.delete("v1", "Node", node)


@pytest.fixture
def product_as_the_service_account(sa, settings, monkeypatch):
    """get_gateway() answers the ServiceAccount's gateway: the product's own services run as it."""
    from brickadmin.cluster import gateway

    settings.BRICK_CLUSTER, settings.BRICK_KUBECONFIG, settings.BRICK_IN_CLUSTER = "kube", "the-chart-sa", False
    monkeypatch.setitem(gateway._kube_gateways, ("the-chart-sa", False), sa)
    return sa


@pytest.mark.django_db
def test_the_products_job_submission_and_cancel_work_in_a_workspace_and_not_elsewhere(
    seeded, sa, product_as_the_service_account, alice, admin_user
):
    from workspaces import approvals
    from workspaces import jobs as ws_jobs
    from workspaces.models import WorkspaceJob, WorkspaceRequest

    def workspace(name):
        return WorkspaceRequest.objects.create(
            name=name,
            requester=alice,
            requester_name="alice",
            gpu=1,
            cpu=1,
            memory_gib=1,
            storage_gib=1,
            status=WorkspaceRequest.Status.APPROVED,
        )

    def pending_job(ws):
        return WorkspaceJob.objects.create(
            workspace=ws, owner=alice, owner_name="alice", node="dev-a1-ws04", image="busybox", command="", gpu=1
        )

    ns = _workspace(seeded, sa)
    try:
        job = ws_jobs.submit_job(pending_job(workspace(ns)), admin_user)
        assert job.status == WorkspaceJob.Status.SUBMITTED
        assert job.k8s_name in {j["metadata"]["name"] for j in seeded.admin.list_jobs(ns)}
        ws_jobs.cancel_job(job.pk, admin_user)
        wait_until(
            lambda: job.k8s_name not in {j["metadata"]["name"] for j in seeded.admin.list_jobs(ns)},
            60,
            "the cancelled Job to go",
        )
    finally:
        sa.delete("v1", "Namespace", ns)
    # a record naming kube-system (however it came to be) reaches nothing there
    stray = pending_job(workspace("kube-system"))
    with pytest.raises(approvals.WorkspaceError, match="only in Workspace namespaces"):
        ws_jobs.submit_job(stray, admin_user)
    stray.refresh_from_db()
    assert stray.status == WorkspaceJob.Status.PENDING and "only in Workspace namespaces" in stray.last_error
    assert stray.k8s_name not in {j["metadata"]["name"] for j in seeded.admin.list_jobs("kube-system")}


def test_a_workspace_namespace_refuses_privileged_pods_and_admits_gpu_pods(seeded, sa, settings):
    """With the chart's Pod Security level (``baseline``) the namespace the product makes for
    a Workspace refuses a privileged container at the API server itself, whoever sends it."""
    settings.BRICK_WORKSPACE_POD_SECURITY = "baseline"

    ns = f"lp-psa-{int(time.time() * 1000) % 100000}"
    sa.create_namespace(ns, namespace_labels("alice"))

    def pod(name, privileged):
        container = {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        if privileged:
            container["securityContext"] = {"privileged": True}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}
        return seeded.admin._request("POST", f"/api/v1/namespaces/{ns}/pods", body=body)

    try:
        why = refused(lambda: pod("escape", privileged=True))
        assert "violates PodSecurity" in why and '"baseline:latest"' in why
        assert pod("train", privileged=False)["metadata"]["name"] == "train"
    finally:
        seeded.admin._request("DELETE", f"/api/v1/namespaces/{ns}/pods/train", query={"gracePeriodSeconds": 0})
        sa.delete("v1", "Namespace", ns)
