"""Procedure C on a BRICK cluster whose time-slicing ConfigMap shares by MPS: its nodes are MPS
nodes, and the pre-check refuses the replicas the MPS control daemon would refuse."""

import copy

import pytest

from brickadmin.cluster.twin import TwinGateway
from brickadmin.cluster.vocabulary import PLUGIN_CONFIG_KEY, PLUGIN_NAMESPACE, TS_CONFIGMAP
from gpus.procedures.registry import get
from gpus.view.live import LiveRead


@pytest.fixture
def mps_demo(demo):
    """The demo cluster with its time-slicing config sharing by MPS instead."""
    cm = next(c for c in demo.list_configmaps(namespace=PLUGIN_NAMESPACE) if c["metadata"]["name"] == TS_CONFIGMAP)
    cm = copy.deepcopy(cm)
    text = cm["data"][PLUGIN_CONFIG_KEY].replace("timeSlicing:", "mps:")
    cm["data"][PLUGIN_CONFIG_KEY] = "flags:\n  mpsRoot: /run/nvidia/mps\n" + text if "flags:" not in text else text
    cm["metadata"] = {"name": TS_CONFIGMAP, "namespace": PLUGIN_NAMESPACE}
    demo.apply({"apiVersion": "v1", "kind": "ConfigMap", **{k: cm[k] for k in ("metadata", "data")}})
    return demo


def test_the_nodes_of_an_mps_config_are_mps_nodes(mps_demo):
    led = LiveRead.of(TwinGateway()).ledger()
    shared = [n for n in led.nodes if n.convention == "brick" and n.sharing_label == "timeslicing"]
    assert shared and {(n.mode, n.sharing_strategy) for n in shared} == {("mps", "mps")}
    # procedure C still changes their replicas; A is not offered on them (they already share)
    assert all(get("C").offered_on(n) and not get("A").offered_on(n) for n in shared)


def test_c_refuses_more_mps_clients_than_one_mps_server_takes_per_gpu(mps_demo):
    checks = get("C").prechecks(TwinGateway(), "", {"replicas": 49})
    [block] = [c for c in checks if c.level == "block"]
    assert "one MPS server takes at most 48 clients per GPU" in str(block.detail)
    assert "the plugin would refuse 49 replicas" in str(block.detail)
    assert str(block.fix) == "Choose at most 48 replicas."
    allowed = get("C").prechecks(TwinGateway(), "", {"replicas": 48})
    assert not any("MPS server" in str(c.detail) for c in allowed)
