"""PodDisruptionBudgets on the lab's real control plane against the twin: for each case the lab's
disruption controller (kube-controller-manager) and the twin's arithmetic (vocabulary.pdb_status)
must give the budget the same status, and an eviction must end the same way on both (the pod
evicted, or refused with the same status code, message and cause).

The twin is loaded with the objects read back from the lab (pods, budgets, workloads), so both
decide over the very same cluster state.
"""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes.client.exceptions import ApiException

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.base import ClusterError, NotFound
from brickadmin.cluster.twin import TwinGateway

from .conftest import make_namespace, make_node, wait_until

pytestmark = [pytest.mark.lab, pytest.mark.django_db]

NODE = "eviction-parity-node"
KWOK_STATUS = {"kwok.x-k8s.io/status": "custom"}  # KWOK leaves such a pod's status (and deletion) alone
HOLD = "brick.cloud/eviction-parity"  # a finalizer that keeps a deleted pod terminating
STATUS_NUMBERS = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")
WORKLOADS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "ReplicaSet": "/apis/apps/v1/namespaces/{ns}/replicasets",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "ReplicationController": "/api/v1/namespaces/{ns}/replicationcontrollers",
}
API_VERSIONS = {
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "ReplicationController": "v1",
    "Pod": "v1",
    "PodDisruptionBudget": "policy/v1",
}


@pytest.fixture(scope="module")
def node(lab):
    make_node(lab, NODE)
    yield NODE
    lab.admin.delete("v1", "Node", NODE)


@pytest.fixture
def ns(lab, node, request):
    name = "evp-" + request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    make_namespace(lab, name)
    yield name
    # pods KWOK leaves alone have no kubelet to finish them: let them go at once
    for pod in lab.admin.list_pods(name):
        path = f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}"
        try:
            if pod["metadata"].get("finalizers"):
                lab.admin._request(
                    "PATCH", path, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
                )
            lab.admin._request("DELETE", path, body={"gracePeriodSeconds": 0})
        except NotFound:
            pass
    lab.admin.delete("v1", "Namespace", name)


# --- making the cluster state ------------------------------------------------------------


def _spec():
    return {
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": "busybox"}],
    }


def make_pod(lab, ns, name, labels, *, kwok=True, hold=False):
    """A Running pod: Ready by KWOK, or (kwok=False) with a status the test writes itself."""
    md = {"name": name, "namespace": ns, "labels": labels}
    if not kwok:
        md["annotations"] = dict(KWOK_STATUS)
    if hold:
        md["finalizers"] = [HOLD]
    lab.admin._request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        body={"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": _spec()},
    )
    if not kwok:
        lab.admin._request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}/status",
            content_type="application/merge-patch+json",
            body={"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        )
    wait_until(lambda: v.pod_ready(lab.admin.get_pod(ns, name)), 30, f"{name} Running and Ready")


def make_workload(lab, kind, ns, name, replicas, labels):
    path = WORKLOADS[kind].format(ns=ns)
    body = {
        "apiVersion": API_VERSIONS[kind],
        "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _spec()},
        },
    }
    if kind == "StatefulSet":
        body["spec"]["serviceName"] = name
    lab.admin._request("POST", path, body=body)
    wait_until(
        lambda: len([p for p in lab.admin.list_pods(ns) if v.pod_ready(p)]) >= replicas,
        60,
        f"{replicas} pods of {kind} {name} Ready",
    )
    return sorted(p["metadata"]["name"] for p in lab.admin.list_pods(ns))


def set_ready(lab, ns, name, ready: bool):
    """What the kubelet writes when a readiness probe fails (or passes again)."""
    lab.admin._request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/{name}/status",
        content_type="application/strategic-merge-patch+json",
        body={"status": {"conditions": [{"type": "Ready", "status": str(ready)}]}},
    )
    wait_until(lambda: v.pod_ready(lab.admin.get_pod(ns, name)) == ready, 10, f"{name} Ready={ready}")


def make_budget(lab, ns, name, spec, labels):
    lab.admin._request(
        "POST",
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        body={
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": ns},
            "spec": {**spec, "selector": {"matchLabels": labels}},
        },
    )


def start_terminating(lab, ns, name):
    lab.admin._request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}")
    wait_until(lambda: v.being_deleted(lab.admin.get_pod(ns, name)), 10, f"{name} terminating")


# --- reading it back, and the two deciders ---------------------------------------------------


def cluster_state(lab, ns) -> list[dict]:
    objects = []
    for kind, path in WORKLOADS.items():
        objects += [
            dict(o, kind=kind, apiVersion=API_VERSIONS[kind])
            for o in lab.admin._request("GET", path.format(ns=ns)).get("items") or []
        ]
    objects += [dict(p, kind="Pod", apiVersion="v1") for p in lab.admin.list_pods(ns)]
    objects += [
        dict(b, kind="PodDisruptionBudget", apiVersion="policy/v1") for b in lab.admin.list_pod_disruption_budgets(ns)
    ]
    return objects


def settled_status(lab, ns, budget) -> tuple[list[dict], dict, dict]:
    """The cluster state once the lab's disruption controller has caught up with it, with the
    lab's budget status and the twin's for the same objects (they must agree)."""
    last = {}

    def agree():
        objects = cluster_state(lab, ns)
        pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == budget)
        lab_st = pdb.get("status") or {}
        if lab_st.get("observedGeneration") != pdb["metadata"].get("generation"):
            return None
        pods = [o for o in objects if o["kind"] == "Pod"]
        workloads = [o for o in objects if o["kind"] in WORKLOADS]
        twin_st = v.pdb_status(pdb, pods, workloads)
        last.update(lab={k: lab_st.get(k, 0) for k in STATUS_NUMBERS}, twin={k: twin_st[k] for k in STATUS_NUMBERS})
        return (objects, lab_st, twin_st) if last["lab"] == last["twin"] else None

    try:
        return wait_until(agree, 30, f"the lab's status of {budget}")
    except AssertionError:
        assert last.get("lab") == last.get("twin"), "the lab's disruption controller and the twin disagree"
        raise


def lab_evict(lab, ns, name) -> tuple[int, str, str]:
    """POST the Eviction to the real API server: (HTTP status, message, the first cause's message)."""
    client = lab.admin.api_client
    m, url, hdrs, b, post = client.param_serialize(
        method="POST",
        resource_path=f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}},
        auth_settings=["BearerToken"],
    )
    try:
        resp = client.call_api(m, url, header_params=hdrs, body=b, post_params=post, _request_timeout=(3, 30))
        status, data = resp.status, resp.read()
    except ApiException as e:
        status, data = e.status, e.body
    if 200 <= status <= 299:
        return status, "evicted", ""
    st = json.loads(data)
    causes = (st.get("details") or {}).get("causes") or [{}]
    return status, st.get("message", ""), causes[0].get("message", "")


def twin_evict(objects, ns, name) -> tuple[int, str, str]:
    """The same Eviction on the twin loaded with the lab's objects."""
    gw = TwinGateway()
    gw.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *copy.deepcopy(objects)], {})
    before = {p["metadata"]["name"] for p in gw.list_pods(ns)}
    try:
        gw.evict_pod(ns, name)
    except ClusterError as e:
        refusal = v.eviction_refusal(
            next(p for p in gw.list_pods(ns) if p["metadata"]["name"] == name),
            [dict(b, status=gw.pdb_status(b)) for b in gw.list_pod_disruption_budgets(ns)],
        )
        assert e.message == f"{refusal.message} {refusal.cause}".strip()
        return e.status, refusal.message, refusal.cause
    assert before - {p["metadata"]["name"] for p in gw.list_pods(ns)} == {name}
    return 201, "evicted", ""


def same_outcome(lab, ns, budget, pod) -> tuple[int, str, str]:
    objects, _, _ = settled_status(lab, ns, budget)
    twin = twin_evict(objects, ns, pod)
    real = lab_evict(lab, ns, pod)
    assert twin == real, f"evicting {pod}: twin {twin} != lab {real}"
    return real


REFUSED = v.EVICTION_REFUSED


# --- the cases --------------------------------------------------------------------------------


def test_unready_running_pod_under_min_available(lab, ns):
    """minAvailable 2 over three Running pods, one of them not Ready: the budget is met by the
    two Ready ones, so no Ready pod may go, but the unready one may (IfHealthyBudget)."""
    app = {"app": "web"}
    for name in ("web-a", "web-b", "web-c"):
        make_pod(lab, ns, name, app)
    make_budget(lab, ns, "web", {"minAvailable": 2}, app)
    set_ready(lab, ns, "web-c", False)
    assert same_outcome(lab, ns, "web", "web-a") == (
        429,
        REFUSED,
        "The disruption budget web needs 2 healthy pods and has 2 currently",
    )
    assert same_outcome(lab, ns, "web", "web-c")[1] == "evicted"
    wait_until(lambda: "web-c" not in {p["metadata"]["name"] for p in lab.admin.list_pods(ns)}, 30, "web-c gone")
    assert same_outcome(lab, ns, "web", "web-b")[0] == 429


def test_unready_pod_when_the_budget_is_not_met(lab, ns):
    """minAvailable 3 with one of three pods unready: the application is disrupted already, so
    IfHealthyBudget keeps even the unready pod, and AlwaysAllow lets it go."""
    app = {"app": "db"}
    for name in ("db-a", "db-b", "db-c"):
        make_pod(lab, ns, name, app)
    make_budget(lab, ns, "db", {"minAvailable": 3}, app)
    set_ready(lab, ns, "db-c", False)
    assert same_outcome(lab, ns, "db", "db-c") == (
        429,
        REFUSED,
        "The disruption budget db needs 3 healthy pods and has 2 currently",
    )
    lab.admin._request(
        "PATCH",
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/db",
        content_type="application/merge-patch+json",
        body={"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
    )
    assert same_outcome(lab, ns, "db", "db-c")[1] == "evicted"
    assert same_outcome(lab, ns, "db", "db-a")[0] == 429


def test_max_unavailable_against_a_deployment_with_an_unready_pod(lab, ns):
    """maxUnavailable 1 counts from the Deployment's 4 replicas (through its ReplicaSet): 3 must
    be healthy, 3 are, so a Ready pod is refused and the unready one goes."""
    app = {"app": "api"}
    pods = make_workload(lab, "Deployment", ns, "api", 4, app)
    make_budget(lab, ns, "api", {"maxUnavailable": 1}, app)
    set_ready(lab, ns, pods[0], False)
    assert same_outcome(lab, ns, "api", pods[1]) == (
        429,
        REFUSED,
        "The disruption budget api needs 3 healthy pods and has 3 currently",
    )
    assert same_outcome(lab, ns, "api", pods[0])[1] == "evicted"


def test_max_unavailable_two_allows_one_more(lab, ns):
    app = {"app": "api"}
    pods = make_workload(lab, "Deployment", ns, "api", 4, app)
    make_budget(lab, ns, "api", {"maxUnavailable": 2}, app)
    set_ready(lab, ns, pods[0], False)
    assert same_outcome(lab, ns, "api", pods[1])[1] == "evicted"


def test_percentage_budgets(lab, ns):
    """maxUnavailable 30% of a 4-replica StatefulSet rounds up to 2; a percentage minAvailable
    over pods without a controller expects none and so allows nothing."""
    app = {"app": "kv"}
    make_workload(lab, "StatefulSet", ns, "kv", 4, app)
    make_budget(lab, ns, "kv", {"maxUnavailable": "30%"}, app)
    set_ready(lab, ns, "kv-3", False)
    assert same_outcome(lab, ns, "kv", "kv-0")[1] == "evicted"  # 3 healthy, 2 needed
    loose = {"app": "loose"}
    for name in ("loose-a", "loose-b"):
        make_pod(lab, ns, name, loose)
    make_budget(lab, ns, "loose", {"minAvailable": "50%"}, loose)
    assert same_outcome(lab, ns, "loose", "loose-a") == (
        429,
        REFUSED,
        "The disruption budget loose does not allow evicting pods currently",
    )


def test_terminating_pod(lab, ns):
    """A pod being deleted is not healthy: minAvailable 2 over two Ready pods and a terminating
    one allows nothing; the terminating pod itself may be evicted (no budget is asked)."""
    app = {"app": "q"}
    make_pod(lab, ns, "q-a", app)
    make_pod(lab, ns, "q-b", app)
    make_pod(lab, ns, "q-going", app, kwok=False, hold=True)
    make_budget(lab, ns, "q", {"minAvailable": 2}, app)
    start_terminating(lab, ns, "q-going")
    assert same_outcome(lab, ns, "q", "q-a") == (
        429,
        REFUSED,
        "The disruption budget q needs 2 healthy pods and has 2 currently",
    )
    assert same_outcome(lab, ns, "q", "q-going")[1] == "evicted"
