"""The mig-parted config mig-manager reads, and the MIG layout it gives a node's GPUs: pure.

The GPU Operator's mig-manager takes its named layouts from a ConfigMap (default
``default-mig-parted-config``, key ``config.yaml``) in NVIDIA/mig-parted's format:

    version: v1
    mig-configs:
      all-1g.10gb:
        - devices: all            # or [0, 1] (GPU indexes on the node)
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}

A node labelled ``nvidia.com/mig.config=<name>`` gets that layout; mig-manager refuses (state
``failed``, the GPUs unchanged) a name the ConfigMap lacks or a layout a GPU cannot hold.
The geometry is mig.py's. Stdlib only (PyYAML imported by the one function that reads text):
lab/gpusim.py loads this module too.
"""

from __future__ import annotations

from .mig import layout_error, reason


class MigPartedError(ValueError):
    """The config is not in mig-parted's format (mig-manager cannot read it either)."""


def parse(config: str | dict | None) -> dict[str, list[dict]]:
    """The named configs of a mig-parted config file: {name: [entry, ...]}. Raises
    MigPartedError for what mig-parted would not read."""
    if isinstance(config, str):
        import yaml  # here, so the module stays loadable without PyYAML

        try:
            config = yaml.safe_load(config)
        except yaml.YAMLError as exc:
            raise MigPartedError(reason("mig.not_yaml", err=str(exc))) from None
    if not isinstance(config, dict):
        raise MigPartedError(reason("mig.no_parted_config"))
    if str(config.get("version")) != "v1":
        raise MigPartedError(reason("mig.unknown_version", version=repr(config.get("version"))))
    configs = config.get("mig-configs")
    if not isinstance(configs, dict):
        raise MigPartedError(reason("mig.no_mig_configs"))
    out: dict[str, list[dict]] = {}
    for name, entries in configs.items():
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise MigPartedError(reason("mig.config_not_a_list", name=name))
        for entry in entries:
            _check_entry(str(name), entry)
        out[str(name)] = entries
    return out


def _check_entry(name: str, entry: dict) -> None:
    devices = entry.get("devices", "all")
    if devices != "all" and not (isinstance(devices, list) and all(isinstance(d, int) for d in devices)):
        raise MigPartedError(reason("mig.bad_devices", name=name))
    if not isinstance(entry.get("mig-enabled"), bool):
        raise MigPartedError(reason("mig.bad_mig_enabled", name=name))
    mig_devices = entry.get("mig-devices") or {}
    if not isinstance(mig_devices, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in mig_devices.values()
    ):
        raise MigPartedError(reason("mig.bad_mig_devices", name=name))


def _selects(entry: dict, index: int, gpu: dict) -> bool:
    """Whether a config entry applies to the GPU at ``index``. ``device-filter`` names PCI
    device ids; a GPU known only by its model name (the twin's, DCGM's) is taken as selected
    when the model holds every profile the entry names, which is what NVIDIA's default
    configs filter by."""
    devices = entry.get("devices", "all")
    if devices != "all" and index not in devices:
        return False
    wanted = entry.get("device-filter")
    if wanted is None:
        return True
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    if gpu.get("deviceId"):
        return str(gpu["deviceId"]).lower() in {str(w).lower() for w in wanted}
    return not layout_error(gpu.get("model", ""), {p: 1 for p in entry.get("mig-devices") or {}})


def layout(configs: dict[str, list[dict]], name: str, gpus: list[dict]) -> tuple[list[dict] | None, str]:
    """The node's GPUs (``[{uuid, model, memoryMiB, mig}]``) after mig-manager applies the
    config ``name`` (each GPU it sets says ``migEnabled``, as the device plugin reads it): (new
    GPUs, "") or (None, why mig-manager refuses). A GPU no entry
    selects is left as it is; of several entries selecting one GPU the last one counts."""
    if name not in configs:
        return None, reason("mig.no_config", name=name)
    out = [dict(g) for g in gpus]
    for index, gpu in enumerate(gpus):
        chosen = [e for e in configs[name] if _selects(e, index, gpu)]
        if not chosen:
            continue
        entry = chosen[-1]
        devices = {str(p): int(n) for p, n in (entry.get("mig-devices") or {}).items()}
        if entry["mig-enabled"]:
            refused = layout_error(gpu.get("model", ""), devices)
            if refused:
                return None, reason("mig.gpu_reason", index=index, reason=refused)
            out[index]["mig"] = [p for p, n in devices.items() for _ in range(n)]
        else:
            out[index].pop("mig", None)
        out[index]["migEnabled"] = entry["mig-enabled"]  # MIG mode may be on with no instance yet
    return out, ""
