"""A GPU Operator node where mig-manager runs, and mig-manager's ConfigMap: for the MIG layout
tests on the twin and in the lab."""

from brickadmin.cluster import scenarios
from brickadmin.cluster import vocabulary as vocab

MODEL = "NVIDIA A100 80GB PCIe"

# The shape of the GPU Operator's default-mig-parted-config (NVIDIA/mig-parted README format).
MIG_PARTED_CONFIG = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-1g.5gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
"""


def node(name: str, count: int = 4) -> dict:
    """Exclusive whole GPUs, mig-manager applied all-disabled (as GFD and the operator label it)."""
    return scenarios.node(
        name,
        model=MODEL,
        gpu_count=count,
        labels={
            vocab.GPU_PRESENT_LABEL: "true",
            vocab.MIG_STRATEGY_LABEL: "mixed",
            vocab.MIG_MANAGER_DEPLOY_LABEL: "true",
            vocab.MIG_CONFIG_LABEL: "all-disabled",
            vocab.MIG_CONFIG_STATE_LABEL: "success",
        },
        extra_status={"capacity": {vocab.GPU: str(count)}, "allocatable": {vocab.GPU: str(count)}},
    )


def hardware(name: str, count: int = 4) -> list[dict]:
    return scenarios.gpus(name, MODEL, count, 81920)


def operator_objects() -> list[dict]:
    return [
        scenarios.namespace(vocab.GPU_OPERATOR_NAMESPACE),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": vocab.MIG_PARTED_CONFIGMAP, "namespace": vocab.GPU_OPERATOR_NAMESPACE},
            "data": {vocab.MIG_PARTED_CONFIG_KEY: MIG_PARTED_CONFIG},
        },
    ]
