"""DeviceTaintRules on the lab (Kubernetes 1.35: effect None is served): the dra scenario's
dry-run rule is accepted and evicts nothing, the product reads it from the real API server with
the pods NoExecute would evict, and procedure G's NoExecute rule makes kube-controller-manager's
device taint eviction evict exactly the pods its pre-check named."""

from __future__ import annotations

import time

import pytest

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger as ledger_mod
from gpus.procedures import engine, registry, service
from gpus.procedures.catalogue.common import EVICTIONS_ACK

from .conftest import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.django_db]

NODE, DEVICE, RULES = "dra-a100-01", "gpu-1", "/apis/resource.k8s.io/v1alpha3/devicetaintrules"
SHARING = {"ws-dra/infer-0", "ws-dra/infer-1", "ws-dra/infer-2"}  # the claim shared-gpu, on gpu-1


@pytest.fixture(scope="module")
def taint_lab(lab):
    lab.load("dra")
    return lab


def running(lab) -> dict[str, str]:
    """ws-dra's Running pods: "namespace/name" -> uid."""
    return {
        f"ws-dra/{p['metadata']['name']}": p["metadata"]["uid"]
        for p in lab.admin.list_pods(namespace="ws-dra")
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def test_a_dry_run_rule_is_served_evicts_nothing_and_is_read_with_the_pods_it_would_evict(taint_lab):
    rules = taint_lab.admin._request("GET", RULES).get("items") or []
    [rule] = [r for r in rules if r["metadata"]["name"] == "dra-a100-01-gpu-1-maintenance"]
    assert rule["spec"]["taint"]["effect"] == "None"
    before = running(taint_lab)
    assert SHARING <= set(before)
    time.sleep(3)  # the eviction controller has seen the rule: still nobody evicted
    assert running(taint_lab) == before
    node = ledger_mod.compute(take_snapshot(taint_lab.admin)).node(NODE)
    [gpu1] = [d for d in node.dra.devices if d.name == DEVICE]
    assert [t["effect"] for t in gpu1.taints] == ["None"]
    assert set(gpu1.pods) == SHARING


def test_a_noexecute_rule_from_procedure_g_evicts_the_pods_its_precheck_named(taint_lab):
    params = {"device": DEVICE, "effect": "NoExecute", "taint_key": "brick.cloud/maintenance", "taint_value": "lab"}
    checks = registry.get("G").prechecks(taint_lab.admin, NODE, params)
    [ack] = [c for c in checks if c.level == "ack"]
    named = {str(i).split(" ")[0] for i in ack.items}
    assert named == SHARING and ack.ack_count == 3
    before = running(taint_lab)
    run = service.start_run("G", NODE, {**params, EVICTIONS_ACK: 3}, actor_name="lab-test", dispatch=False)
    engine.execute(run.pk, gateway=taint_lab.admin)
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    # kube-controller-manager's device taint eviction deletes the pods using the tainted device
    wait_until(lambda: not (SHARING & set(running(taint_lab))), 60, "the pods on gpu-1 evicted")
    after = running(taint_lab)
    assert {k for k in before if k not in after or after[k] != before[k]} == named
