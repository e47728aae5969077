"""Procedure M with the GPU Operator's stock default-mig-parted-config: mig-manager picks each
entry by the GPU's PCI device id, and the plan, the twin's mig-manager and the figures agree."""

from pathlib import Path

import pytest
import yaml

from brickadmin.cluster import scenarios
from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.models import TwinHardware
from brickadmin.cluster.twin import TwinGateway
from gpus.procedures.registry import get
from tests import mig_node

pytestmark = pytest.mark.usefixtures("fast_engine")

NODE = "gpu-mig-stock"
STOCK = Path(__file__).resolve().parents[2] / "scenarios" / "gpu-operator" / "default-mig-parted-config.yaml"


def stock_configmap():
    cm = yaml.safe_load(STOCK.read_text())
    cm["metadata"]["namespace"] = vocab.GPU_OPERATOR_NAMESPACE
    return cm


@pytest.fixture
def stock(twin):
    def make(model=mig_node.MODEL):
        twin.apply(mig_node.node(NODE))
        TwinHardware.objects.create(node=NODE, gpus=scenarios.gpus(NODE, model, 4, 81920))
        twin.apply(scenarios.namespace(vocab.GPU_OPERATOR_NAMESPACE))
        twin.apply(stock_configmap())
        return twin

    return make


def test_an_a100_80gb_pcie_gets_seven_instances_per_gpu_in_the_plan_and_on_the_node(stock):
    gw = stock()
    checks = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.10gb"})
    assert any("after: nvidia.com/mig-1g.10gb: 28" in str(c.detail) for c in checks)
    assert not any("Guessed" in str(c.detail) for c in checks)
    gw.label_node(NODE, {vocab.MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert gw.get_node(NODE)["metadata"]["labels"][vocab.MIG_CONFIG_STATE_LABEL] == "success"
    assert [len(g["mig"]) for g in TwinHardware.objects.get(node=NODE).gpus] == [7] * 4
    assert gw.get_node(NODE)["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "28"


def test_a_model_the_pci_id_list_does_not_name_is_guessed_and_the_plan_says_so(stock):
    stock("NVIDIA A100-SXM-64GB")
    checks = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.10gb"})
    guessed = [c for c in checks if "Guessed" in str(c.detail)]
    assert [c.level for c in guessed] == ["warn"]
    assert "GPU 0, 1, 2, 3 (NVIDIA A100-SXM-64GB)" in str(guessed[0].detail)
