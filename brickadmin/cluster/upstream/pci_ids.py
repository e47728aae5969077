"""NVIDIA GPUs' PCI device ids, and the PCI id rule mig-parted matches a ``device-filter`` by.

Sources:
- The ids: the PCI ID Repository's list for vendor 10de (NVIDIA), as NVIDIA ships it in
  NVIDIA/go-nvlib pkg/pciids/default_pci.ids (version 2025.07.11, vendored by mig-parted);
  the B300 and GB300 ids, newer than that list, from the comments of the GPU Operator's own
  default-mig-parted-config (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml).
  The names are both that list's ("A100 PCIe 80GB") and what nvidia-smi, DCGM's ``modelName``
  and GFD's ``nvidia.com/gpu.product`` call the part ("NVIDIA A100 80GB PCIe").
- The id syntax and matching: NVIDIA/mig-parted pkg/types/device.go (``NewDeviceIDFromString``,
  ``Matches``) and api/spec/v1/helpers.go (``MatchesDeviceFilter``).

Only the MIG-capable parts are listed: a GPU without MIG is never partitioned, whatever entry
of a mig-parted config selects it. Pure and stdlib only (lab/gpusim.py loads it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .names import gpu_model_name

NVIDIA_VENDOR = 0x10DE

# Device id (device << 16 | vendor, as mig-parted writes it) -> the names the part goes by.
DEVICE_IDS: dict[int, tuple[str, ...]] = {
    0x20B010DE: ("A100 SXM4 40GB", "NVIDIA A100-SXM4-40GB"),
    0x20B110DE: ("A100 PCIe 40GB", "NVIDIA A100-PCIE-40GB"),
    0x20B210DE: ("A100 SXM4 80GB", "NVIDIA A100-SXM4-80GB"),
    0x20B510DE: ("A100 PCIe 80GB", "NVIDIA A100 80GB PCIe"),
    0x20B610DE: ("PG506-232", "NVIDIA PG506-232"),
    0x20B710DE: ("A30 PCIe", "NVIDIA A30"),
    # 0x20F1 is a second A100 PCIe 40GB (the same name as 0x20B1): both sit in the same
    # entries of the stock config, so a name resolves to the first.
    0x20F110DE: ("A100 PCIe 40GB",),
    0x20F310DE: ("A800-SXM4-80GB", "NVIDIA A800-SXM4-80GB"),
    0x20F510DE: ("A800 80GB PCIe", "NVIDIA A800 80GB PCIe"),
    0x20F610DE: ("A800 40GB PCIe", "NVIDIA A800 40GB PCIe"),
    0x232110DE: ("H100L 94GB", "NVIDIA H100 NVL"),
    0x232210DE: ("H800 PCIe", "NVIDIA H800 PCIe"),
    0x232410DE: ("H800", "NVIDIA H800"),
    0x232910DE: ("H20", "NVIDIA H20"),
    0x233010DE: ("H100 SXM5 80GB", "NVIDIA H100 80GB HBM3"),
    0x233110DE: ("H100 PCIe", "NVIDIA H100 PCIe"),
    0x233510DE: ("H200 SXM 141GB", "NVIDIA H200"),
    0x233A10DE: ("H800L 94GB", "NVIDIA H800 NVL"),
    0x233B10DE: ("H200 NVL", "NVIDIA H200 NVL"),
    0x233D10DE: ("H100 96GB", "NVIDIA H100 96GB HBM3"),
    0x234210DE: ("GH200 120GB / 480GB", "NVIDIA GH200 480GB", "NVIDIA GH200 120GB"),
    0x234810DE: ("GH200 144G HBM3e", "NVIDIA GH200 144G HBM3e"),
    0x290110DE: ("B200", "NVIDIA B200"),
    0x294110DE: ("HGX GB200", "NVIDIA GB200"),
    0x2BB510DE: ("RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    0x318210DE: ("B300", "NVIDIA B300 SXM6 AC"),
    0x31C210DE: ("GB300", "NVIDIA GB300"),
}


def _words(name: str) -> frozenset[str]:
    """A model name's words, whichever source wrote it (GFD's label, DCGM, the PCI list),
    without the vendor and the list's "/" between two sizes."""
    return frozenset(w for w in gpu_model_name(name).upper().split() if w not in ("NVIDIA", "/"))


_BY_WORDS: dict[frozenset[str], int] = {}
for _id, _names in DEVICE_IDS.items():
    for _name in _names:
        _BY_WORDS.setdefault(_words(_name), _id)


def device_id_of(model: str) -> str:
    """The PCI device id of a GPU model as mig-parted writes it ("0x20B510DE"), or "" when
    the list does not name the model."""
    found = _BY_WORDS.get(_words(model)) if model else None
    return f"0x{found:08X}" if found is not None else ""


# --- mig-parted pkg/types/device.go ---------------------------------------------


@dataclass(frozen=True)
class DeviceID:
    """A GPU's id as read from its PCIe config space: device, vendor and, optionally, the
    subsystem's device and vendor."""

    device: int
    vendor: int
    subsystem_device: int = 0
    subsystem_vendor: int = 0
    has_subsystem: bool = False

    def __str__(self) -> str:
        primary = f"0x{self.device:04X}{self.vendor:04X}"
        if self.has_subsystem:
            return f"{primary}:0x{self.subsystem_device:04X}{self.subsystem_vendor:04X}"
        return primary

    def primary(self) -> DeviceID:
        return DeviceID(self.device, self.vendor)

    def matches(self, hardware: DeviceID) -> bool:
        """Whether a filter id selects the hardware: device and vendor equal, and the subsystem
        too when the filter names one."""
        if (self.device, self.vendor) != (hardware.device, hardware.vendor):
            return False
        if self.has_subsystem:
            return (self.subsystem_device, self.subsystem_vendor) == (
                hardware.subsystem_device,
                hardware.subsystem_vendor,
            )
        return True


class DeviceIDError(ValueError):
    pass


def _parse_uint32(text: str) -> int:
    """Go's strconv.ParseUint(text, 0, 32): a 0x, 0o or 0b prefix, or a leading 0 (octal),
    picks the base; an underscore only between digits or after the prefix; no sign, no space.
    Python's int(text, 0) has the same rules but for the leading-0 octal and what it strips."""
    if not text.isascii() or not text.replace("_", "").isalnum():
        raise DeviceIDError(text)
    if len(text) > 1 and text[0] == "0" and text[1].lower() not in "xob":
        text = "0o" + text[1:]
    try:
        value = int(text, 0)
    except ValueError:
        raise DeviceIDError(text) from None
    if value >= 1 << 32:
        raise DeviceIDError(text)
    return value


def device_id_from_string(text: str) -> DeviceID:
    """``NewDeviceIDFromString``: "<devicevendor>" or "<devicevendor>:<subdevicevendor>"."""
    parts = text.split(":")
    if len(parts) > 2:
        raise DeviceIDError(f"invalid DeviceID format '{text}'")
    try:
        raw = _parse_uint32(parts[0])
    except DeviceIDError:
        raise DeviceIDError(f"unable to create DeviceID from string '{text}'") from None
    out = DeviceID(raw >> 16, raw & 0xFFFF)
    if len(parts) == 2:
        try:
            sub = _parse_uint32(parts[1])
        except DeviceIDError:
            raise DeviceIDError(f"unable to create Subsystem from string '{text}'") from None
        out = DeviceID(out.device, out.vendor, sub >> 16, sub & 0xFFFF, True)
    return out


# --- mig-parted api/spec/v1/helpers.go ------------------------------------------


def matches_device_filter(device_filter: object, hardware: DeviceID) -> bool:
    """``MatchesDeviceFilter``: no filter (absent, "" or an empty list) selects every GPU; else
    one of the filter's ids must match. A filter id mig-parted cannot parse is the zero id,
    which matches no GPU."""
    if isinstance(device_filter, str):
        wanted = [device_filter] if device_filter else []
    elif isinstance(device_filter, list):
        wanted = [str(f) for f in device_filter]
    else:
        wanted = []
    if not wanted:
        return True
    for text in wanted:
        try:
            if device_id_from_string(text).matches(hardware):
                return True
        except DeviceIDError:
            if DeviceID(0, 0).matches(hardware):
                return True
    return False
