"""The NVIDIA device plugin's config file, as far as the product reads it: its time-slicing
section, the replicas of nvidia.com/gpu, and the rules of its two sharing strategies.

Source: NVIDIA/k8s-device-plugin api/config/v1/config.go, sharing.go, replicas.go;
internal/rm/rm.go (ValidateRequest: failRequestsGreaterThanOne); cmd/mps-control-daemon/mps/
device.go (the clients an MPS server takes per GPU). The full validation of a config is
brickadmin/cluster/pluginconfig.py.
Tests: tests/foundation/test_plugin_config.py.
"""

from __future__ import annotations

from .names import GPU, MPS_CONFIGMAP, PLUGIN_CONFIG_KEY, TS_CONFIGMAP, KubeObject
from .quantity import label_int

# sharing.go SharingStrategy: the values GFD writes to nvidia.com/gpu.sharing-strategy.
SHARING_STRATEGY_MPS, SHARING_STRATEGY_NONE, SHARING_STRATEGY_TIME_SLICING = "mps", "none", "time-slicing"
# cmd/mps-control-daemon/mps/device.go maxClients: an MPS server's clients per GPU.
MPS_MAX_CLIENTS, MPS_MAX_CLIENTS_BEFORE_VOLTA = 48, 16


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


def mps_replicas(config: str | KubeObject | None) -> int | None:
    """Replicas of ``nvidia.com/gpu`` under ``sharing.mps``; None when the config names none."""
    section = (parse_plugin_config(config).get("sharing") or {}).get("mps") or {}
    for res in section.get("resources") or []:
        if isinstance(res, dict) and res.get("name") == GPU:
            return label_int(res.get("replicas", 1), 0)
    return None


def mps_configmap_replicas(configmaps: list[KubeObject]) -> int | None:
    """MPS replicas in the BRICK MPS ConfigMap among ``configmaps`` (live objects or manifest
    documents); None when it or its replicas are missing."""
    for cm in configmaps:
        if cm.get("kind", "ConfigMap") == "ConfigMap" and cm["metadata"]["name"] == MPS_CONFIGMAP:
            try:
                return mps_replicas((cm.get("data") or {}).get(PLUGIN_CONFIG_KEY) or "")
            except Exception:  # noqa: BLE001  (a config that is not YAML: the plugin refuses it)
                return None
    return None


# --- sharing.go, config.go, rm.go: the active strategy and failRequestsGreaterThanOne ------------


def _replicated(section: object) -> bool:
    """replicas.go isReplicated: some resource of the section has more than one replica."""
    if not isinstance(section, dict):
        return False
    return any(isinstance(r, dict) and label_int(r.get("replicas"), 0) > 1 for r in section.get("resources") or [])


def active_sharing_strategy(config: str | KubeObject | None) -> str:
    """sharing.go Sharing.SharingStrategy: mps when ``sharing.mps`` replicates something, else
    time-slicing when ``sharing.timeSlicing`` does, else none."""
    sharing = parse_plugin_config(config).get("sharing") or {}
    if _replicated(sharing.get("mps")):
        return SHARING_STRATEGY_MPS
    if _replicated(sharing.get("timeSlicing")):
        return SHARING_STRATEGY_TIME_SLICING
    return SHARING_STRATEGY_NONE


def replicated_resources(config: str | KubeObject | None) -> KubeObject:
    """sharing.go Sharing.ReplicatedResources: the MPS section whenever one is given (even one
    that replicates nothing), else the time-slicing one ({} when absent)."""
    sharing = parse_plugin_config(config).get("sharing") or {}
    section = sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing")
    return section if isinstance(section, dict) else {}


def fail_requests_greater_than_one(config: str | KubeObject | None) -> bool:
    """Whether the plugin refuses a container asking for more than one replica. config.go
    NewConfig sets an MPS section's unset ``failRequestsGreaterThanOne`` to true ("the
    historical MPS behavior"); a time-slicing section's unset one stays false."""
    sharing = parse_plugin_config(config).get("sharing") or {}
    value = replicated_resources(config).get("failRequestsGreaterThanOne")
    if value is None:
        return sharing.get("mps") is not None
    return value is True


def validate_request(strategy: str, fail_greater_than_one: bool | None, requested: int, replicas: bool) -> str:
    """rm.go ResourceManager.ValidateRequest, past its check that every device id is known: why
    the plugin refuses to allocate ``requested`` devices ("" when it allocates them) under a
    sharing ``strategy`` and the section's ``failRequestsGreaterThanOne`` (None: unset).
    ``replicas``: the devices asked for are replicas (the resource is shared). The kubelet then
    fails the pod (UnexpectedAdmissionError)."""
    if strategy not in (SHARING_STRATEGY_TIME_SLICING, SHARING_STRATEGY_MPS):
        return ""
    if replicas and requested > 1 and fail_greater_than_one:
        return f"invalid request: maximum request size for shared resources is 1; found {requested}"
    return ""


def request_error(config: str | KubeObject | None, requested: int, replicas: bool) -> str:
    """``validate_request`` for a plugin started with this config file (NewConfig's defaults
    applied: under MPS a request for more than one replica is refused unless the config says
    ``failRequestsGreaterThanOne: false``)."""
    return validate_request(
        active_sharing_strategy(config), fail_requests_greater_than_one(config), requested, replicas
    )


# --- cmd/mps-control-daemon/mps/device.go --------------------------------------------------------


def _semver(version: str) -> tuple[tuple[int, int, int], str] | None:
    """golang.org/x/mod/semver Canonical, for "vMAJOR[.MINOR[.PATCH]][-pre][+build]": the
    numbers and the prerelease; None when it is not a version (no leading zeros)."""
    if not version.startswith("v"):
        return None
    core = version[1:].split("+", 1)[0]
    core, _dash, pre = core.partition("-")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or (_dash and not pre):
        return None
    for p in parts:
        if not (p.isascii() and p.isdigit()) or (len(p) > 1 and p[0] == "0"):
            return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return (numbers[0], numbers[1], numbers[2]), pre


def is_at_least_volta(compute_capability: str) -> bool:
    """device.go isAtLeastVolta: the compute capability, with one leading "v" optional, compared
    as a semantic version to 7.5 (the code's bound: a 7.0 Volta GPU counts as before it). A
    capability that is no version compares below every version."""
    found = _semver("v" + compute_capability.removeprefix("v"))
    if found is None:
        return False
    numbers, pre = found
    return numbers > (7, 5, 0) or (numbers == (7, 5, 0) and not pre)


def mps_max_clients(compute_capability: str) -> int:
    """device.go maxClients: the clients one MPS server (one GPU) takes."""
    return MPS_MAX_CLIENTS if is_at_least_volta(compute_capability) else MPS_MAX_CLIENTS_BEFORE_VOLTA


def mps_replicas_error(compute_capability: str, replicas: int) -> str:
    """device.go assertReplicas: why the MPS control daemon refuses ``replicas`` of a GPU of this
    compute capability ("" when it takes them)."""
    most = mps_max_clients(compute_capability)
    if replicas > most:
        return f"invalid device maximum allowed replicas exceeded: {replicas} > {most}"
    return ""
