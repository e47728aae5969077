"""The live read for decisions (gpus/live.py): what a pre-check, an approval or a fix
reads of the cluster is the cluster now, each object read once per decision."""

import dataclasses

import pytest

from brickadmin.cluster import NotFound
from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger
from gpus.procedures.registry import get
from gpus.view import live
from gpus.view.live import LiveRead

SHARED = "nvidia.com/gpu.shared"


@pytest.mark.parametrize("name", ["seed-example", "qks", "demo"])
def test_the_ledger_is_the_cluster_s_as_it_is_now(load_scenario, name):
    gw = load_scenario(name)
    fresh = ledger.compute(take_snapshot(gw))
    read = LiveRead(gw).ledger()
    assert [ledger.node_to_dict(n) for n in read.nodes] == [ledger.node_to_dict(n) for n in fresh.nodes]
    assert read.by_resource == fresh.by_resource


def test_quotas_are_listed_again_behind_a_reused_snapshot(load_scenario, monkeypatch):
    """A real cluster's snapshot may be reused for BRICK_SNAPSHOT_CACHE_SECONDS; the quotas,
    which approvals change, never are."""
    gw = load_scenario("seed-example")
    reused = take_snapshot(gw)
    allocated_then = ledger.compute(reused).resource(SHARED).allocated
    gw.create_namespace("ws-new", {"brick.cloud/workspace": "true", "brick.cloud/owner": "dana"})
    gw.create_resource_quota("ws-new", "workspace-compute", {"requests.nvidia.com/gpu.shared": "1"})
    monkeypatch.setattr(live, "take_snapshot", lambda gateway: dataclasses.replace(reused))
    assert LiveRead(gw).ledger().resource(SHARED).allocated == allocated_then + 1


def test_one_decision_sees_one_cluster_and_the_next_decision_reads_it_again(load_scenario):
    gw = load_scenario("seed-example")
    decision = LiveRead(gw)
    assert not (decision.get_node("dev-a1-ws04").get("spec") or {}).get("unschedulable")
    gw.cordon("dev-a1-ws04")
    assert not (decision.get_node("dev-a1-ws04").get("spec") or {}).get("unschedulable")
    assert (LiveRead(gw).get_node("dev-a1-ws04").get("spec") or {}).get("unschedulable")


def test_a_decision_passes_its_reads_on_to_the_checks_it_calls(load_scenario):
    gw = load_scenario("seed-example")
    decision = LiveRead(gw)
    assert LiveRead.of(decision) is decision
    assert LiveRead.of(gw).gateway is gw


def test_a_missing_object_is_not_found_each_time_it_is_asked(load_scenario):
    gw = load_scenario("seed-example")
    decision = LiveRead(gw)
    for _ in range(2):
        with pytest.raises(NotFound):
            decision.get_node("no-such-node")
    assert decision.pod("ws-shared", "no-such-pod") is None


def test_owners_are_the_workspace_owner_labels(load_scenario):
    owners = LiveRead(load_scenario("seed-example")).owners()
    assert (owners["ws-shared"], owners["ws-exclusive"], owners["brick-nvidia"]) == ("bob", "alice", "")


def test_the_pods_on_a_node_are_the_cluster_s(load_scenario):
    gw = load_scenario("demo")
    node = next(p["spec"]["nodeName"] for p in gw.list_gpu_pods())
    on_node = LiveRead(gw).pods_on(node)
    assert on_node and {p["spec"]["nodeName"] for p in on_node} == {node}
    first = on_node[0]["metadata"]
    assert LiveRead(gw).pod(first["namespace"], first["name"])["metadata"]["name"] == first["name"]


def test_without_prometheus_a_measured_figure_is_none(load_scenario, settings):
    settings.PROMETHEUS_URL = ""
    assert LiveRead(load_scenario("seed-example")).measured("sum(up)") is None


@pytest.mark.parametrize(
    "code,node,params",
    [
        ("A", "dev-a1-ws04", {}),
        ("B", "dev-a1-ws02", {}),
        ("C", "", {"replicas": 2}),
        ("D", "dev-a1-ws04", {"sharing": "none"}),
    ],
)
def test_a_pre_check_reads_the_same_through_one_live_read_as_through_the_gateway(load_scenario, code, node, params):
    gw = load_scenario("seed-example")
    through_gateway = [(c.level, c.detail, c.items) for c in get(code).prechecks(gw, node, params)]
    through_live_read = [(c.level, c.detail, c.items) for c in get(code).prechecks(LiveRead(gw), node, params)]
    assert through_live_read == through_gateway and through_gateway
