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
An entry with a ``device-filter`` (a PCI device id or a list of them, "0x20B510DE") applies
only to the GPUs of those ids, and mig-parted applies the entries in order, so of several
entries selecting one GPU the last one counts (cmd/nvidia-mig-parted/assert/assert.go
``WalkSelectedMigConfigForEachGPU``). A GPU's id is the one its node reports (``deviceId``
in the twin's and gpusim's hardware), else its model's in NVIDIA's PCI id list
(upstream/pci_ids.py); only a GPU neither names is matched by guess (``guessed_gpus``).
The geometry is mig.py's. Stdlib only (PyYAML imported by the one function that reads text):
lab/gpusim.py loads this module too.
"""

from __future__ import annotations

from .mig import layout_error, reason
from .upstream.pci_ids import DeviceIDError, device_id_from_string, device_id_of, matches_device_filter


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
    wanted = entry.get("device-filter")
    if wanted is not None and not (
        isinstance(wanted, str) or isinstance(wanted, list) and all(isinstance(w, str) for w in wanted)
    ):
        raise MigPartedError(reason("mig.bad_device_filter", name=name))
    if not isinstance(entry.get("mig-enabled"), bool):
        raise MigPartedError(reason("mig.bad_mig_enabled", name=name))
    mig_devices = entry.get("mig-devices") or {}
    if not isinstance(mig_devices, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in mig_devices.values()
    ):
        raise MigPartedError(reason("mig.bad_mig_devices", name=name))


def gpu_device_id(gpu: dict) -> str:
    """The GPU's PCI device id: the one its node reports, else its model's in NVIDIA's PCI id
    list; "" when neither says it."""
    return str(gpu.get("deviceId") or "") or device_id_of(str(gpu.get("model") or ""))


def _filtered(entry: dict) -> bool:
    return entry.get("device-filter") not in (None, "", [])


def _selects(entry: dict, index: int, gpu: dict) -> bool:
    """Whether a config entry applies to the GPU at ``index``, as mig-parted decides it: the
    ``device-filter`` by PCI device id, then ``devices`` by index. A GPU whose id is unknown
    (a model missing from NVIDIA's list) is taken as selected when the model holds every
    profile the entry names: a guess, which ``guessed_gpus`` owns up to."""
    devices = entry.get("devices", "all")
    if devices != "all" and index not in devices:
        return False
    if not _filtered(entry):
        return True
    try:
        hardware = device_id_from_string(gpu_device_id(gpu))
    except DeviceIDError:
        return not layout_error(gpu.get("model", ""), {p: 1 for p in entry.get("mig-devices") or {}})
    return matches_device_filter(entry.get("device-filter"), hardware)


def guessed_gpus(configs: dict[str, list[dict]], name: str, gpus: list[dict]) -> list[int]:
    """The indexes of the GPUs whose entry of config ``name`` was guessed: an entry of it
    filters by PCI device id and neither the node nor NVIDIA's list says the GPU's id."""
    if not any(_filtered(e) for e in configs.get(name) or []):
        return []
    out = []
    for index, gpu in enumerate(gpus):
        try:
            device_id_from_string(gpu_device_id(gpu))
        except DeviceIDError:
            out.append(index)
    return out


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
