"""The NVIDIA device plugin's config file, as far as the product reads it: its time-slicing
section and the replicas of nvidia.com/gpu.

Source: NVIDIA/k8s-device-plugin api/config/v1/config.go, sharing.go, replicas.go
(the full validation of a config is brickadmin/cluster/pluginconfig.py).
Tests: tests/foundation/test_plugin_config.py.
"""

from __future__ import annotations

from .names import GPU, PLUGIN_CONFIG_KEY, TS_CONFIGMAP, KubeObject
from .quantity import label_int


def parse_plugin_config(config: str | KubeObject | None) -> KubeObject:
    """The plugin's config file (a ConfigMap's ``config.yaml``) as a dict; YAML errors raise."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return config
    import yaml  # here, so the module stays loadable without PyYAML (lab/lab.py)

    return yaml.safe_load(config) or {}


def time_slicing(config: str | KubeObject | None) -> KubeObject:
    """The ``sharing.timeSlicing`` section of a plugin config ({} when absent)."""
    return (parse_plugin_config(config).get("sharing") or {}).get("timeSlicing") or {}


def time_slicing_replicas(config: str | KubeObject | None) -> int | None:
    """Replicas of ``nvidia.com/gpu`` under time-slicing; None when the config names none.
    The plugin reads replicas as a plain int, not a quantity: anything else reads as 0
    here (the callers' checks then refuse it)."""
    for res in time_slicing(config).get("resources") or []:
        if res.get("name") == GPU:
            return label_int(res.get("replicas", 1), 0)
    return None


def configmap_replicas(configmaps: list[KubeObject]) -> int | None:
    """Time-slicing replicas in the BRICK time-slicing ConfigMap among ``configmaps``
    (live objects or manifest documents); None when it or its replicas are missing."""
    for cm in configmaps:
        if cm.get("kind", "ConfigMap") == "ConfigMap" and cm["metadata"]["name"] == TS_CONFIGMAP:
            replicas = time_slicing_replicas((cm.get("data") or {}).get(PLUGIN_CONFIG_KEY) or "")
            if replicas is not None:
                return replicas
    return None
