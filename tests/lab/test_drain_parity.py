"""The drain parity pods (tests/foundation/drain_pods.py) on the lab's real API server:
KubeGateway.drain must give, pod by pod, the answers the twin gives."""

from __future__ import annotations

import copy

import pytest

from brickadmin.cluster.base import NotFound
from tests.foundation import drain_pods as fx

from .conftest import make_namespace, make_node, wait_until

pytestmark = pytest.mark.lab


def _create(lab, path, body):
    return lab.admin._request("POST", path, body=body)


def _pod_body(pod):
    body = copy.deepcopy(pod)
    body.pop("status", None)
    return body


@pytest.fixture
def parity(lab):
    make_namespace(lab, fx.NS)
    node = make_node(lab, fx.NODE, labels={"parity": "yes"})
    ds = _create(lab, f"/apis/apps/v1/namespaces/{fx.NS}/daemonsets", fx.daemonset())
    uid = ds["metadata"]["uid"]
    # the DaemonSet controller makes the DaemonSet-controlled pod itself
    wait_until(
        lambda: [
            p
            for p in lab.admin.list_pods(fx.NS, label_selector=f"app={fx.DS}")
            if (p.get("status") or {}).get("phase") == "Running"
        ],
        60,
        "the DaemonSet's pod",
    )
    for b in fx.pdbs():
        _create(
            lab,
            f"/apis/policy/v1/namespaces/{fx.NS}/poddisruptionbudgets",
            {k: b[k] for k in ("apiVersion", "kind", "metadata", "spec")},
        )
    pods = {r: p for r, p in fx.pods(uid, node["metadata"]["uid"]).items() if r not in fx.ONLY_SIMULATED}
    for role, pod in pods.items():
        if role == "daemonset-controller":
            continue
        _create(lab, f"/api/v1/namespaces/{fx.NS}/pods", _pod_body(pod))
    for role, pod in pods.items():
        if role in ("daemonset-controller", fx.COMPLETED):
            continue
        wait_until(
            lambda name=pod["metadata"]["name"]: (
                (lab.admin.get_pod(fx.NS, name).get("status") or {}).get("phase") == "Running"
            ),
            30,
            f"{role} Running",
        )
    # a finished pod: what kubelet would report once its container exited
    name = pods[fx.COMPLETED]["metadata"]["name"]
    lab.admin._request(
        "PATCH",
        f"/api/v1/namespaces/{fx.NS}/pods/{name}/status",
        content_type="application/merge-patch+json",
        body={"status": {"phase": "Succeeded"}},
    )
    wait_until(lambda: lab.admin.get_pod(fx.NS, name)["status"]["phase"] == "Succeeded", 30, "the pod Succeeded")

    def budgets_observed():
        items = lab.admin.list_pod_disruption_budgets(fx.NS)
        want = {b["metadata"]["name"]: b["status"]["disruptionsAllowed"] for b in fx.pdbs()}
        return len(items) == len(want) and all(
            (b.get("status") or {}).get("observedGeneration")
            and (b.get("status") or {}).get("disruptionsAllowed") == want[b["metadata"]["name"]]
            for b in items
        )

    # eviction reads each budget's status, which the disruption controller fills in
    wait_until(budgets_observed, 60, "PDB status as the fixtures expect it")
    yield lab
    lab.admin.delete("v1", "Namespace", fx.NS)
    lab.admin.delete("v1", "Node", fx.NODE)


def test_kube_drain_gives_the_twins_answers(parity):
    live = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p
        for p in parity.admin.list_pods(fx.NS, field_selector=f"spec.nodeName={fx.NODE}")
    }
    expected = {role: a for role, a in fx.EXPECTED.items() if role not in fx.ONLY_SIMULATED}
    assert {p["metadata"]["labels"][fx.ROLE] for p in live.values()} == set(expected)
    result = parity.admin.drain(fx.NODE, timeout_seconds=8)
    got = fx.answers(result, live)
    assert got == expected
    assert not result.done
    # the outcome on the cluster, not only the report
    for key, pod in live.items():
        ns, name = key.split("/", 1)
        if got[pod["metadata"]["labels"][fx.ROLE]] == "evicted":
            with pytest.raises(NotFound):
                parity.admin.get_pod(ns, name)
        else:
            assert parity.admin.get_pod(ns, name)["metadata"].get("deletionTimestamp") is None
