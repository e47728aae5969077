"""MIG geometry: which instance profiles a GPU model can hold, and how many at most.

From NVIDIA's MIG User Guide, "Supported MIG Profiles" (one table per GPU model). The console
uses it to derive physical GPUs where only MIG devices are visible (MIG ``single`` strategy,
which overrides GFD's ``nvidia.com/gpu.count``), and to refuse a MIG layout a model cannot hold
(as mig-manager does). Pure and stdlib only: lab/ loads the cluster modules on their own.
"""

from __future__ import annotations

import re

# Profile -> (compute slices it takes, most instances of it one GPU holds).
# The "+me" profiles (one media-extension instance per GPU) are left out of the
# per-GPU maxima below only where NVIDIA lists them as 1.
_A100_40GB = {
    "1g.5gb": (1, 7),
    "1g.5gb+me": (1, 1),
    "1g.10gb": (1, 4),
    "2g.10gb": (2, 3),
    "3g.20gb": (3, 2),
    "4g.20gb": (4, 1),
    "7g.40gb": (7, 1),
}
_80GB = {
    "1g.10gb": (1, 7),
    "1g.10gb+me": (1, 1),
    "1g.20gb": (1, 4),
    "2g.20gb": (2, 3),
    "3g.40gb": (3, 2),
    "4g.40gb": (4, 1),
    "7g.80gb": (7, 1),
}
_A30 = {"1g.6gb": (1, 4), "1g.6gb+me": (1, 1), "2g.12gb": (2, 2), "2g.12gb+me": (2, 1), "4g.24gb": (4, 1)}
_H100_94GB = {
    "1g.12gb": (1, 7),
    "1g.12gb+me": (1, 1),
    "1g.24gb": (1, 4),
    "2g.24gb": (2, 3),
    "3g.47gb": (3, 2),
    "4g.47gb": (4, 1),
    "7g.94gb": (7, 1),
}
_H100_96GB = {
    "1g.12gb": (1, 7),
    "1g.12gb+me": (1, 1),
    "1g.24gb": (1, 4),
    "2g.24gb": (2, 3),
    "3g.48gb": (3, 2),
    "4g.48gb": (4, 1),
    "7g.96gb": (7, 1),
}
_H200_141GB = {
    "1g.18gb": (1, 7),
    "1g.18gb+me": (1, 1),
    "1g.35gb": (1, 4),
    "2g.35gb": (2, 3),
    "3g.71gb": (3, 2),
    "4g.71gb": (4, 1),
    "7g.141gb": (7, 1),
}
_B200 = {
    "1g.23gb": (1, 7),
    "1g.23gb+me": (1, 1),
    "1g.45gb": (1, 4),
    "2g.45gb": (2, 3),
    "3g.90gb": (3, 2),
    "4g.90gb": (4, 1),
    "7g.180gb": (7, 1),
}
_RTX_PRO_6000 = {
    "1g.24gb": (1, 4),
    "1g.24gb+me": (1, 1),
    "1g.24gb+me.all": (1, 1),
    "1g.24gb-me": (1, 4),
    "1g.24gb+gfx": (1, 4),
    "2g.48gb": (2, 2),
    "2g.48gb+me": (2, 1),
    "2g.48gb+me.all": (2, 1),
    "2g.48gb-me": (2, 2),
    "2g.48gb+gfx": (2, 2),
    "4g.96gb": (4, 1),
    "4g.96gb+gfx": (4, 1),
}
# The parts the GPU Operator's stock default-mig-parted-config names beside the guide's tables
# (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml: its all-<profile> configs
# and the all-balanced entry of each device id).
_GH200_144GB = {
    "1g.18gb": (1, 7),
    "1g.18gb+me": (1, 1),
    "1g.36gb": (1, 4),
    "2g.36gb": (2, 3),
    "3g.72gb": (3, 2),
    "4g.72gb": (4, 1),
    "7g.144gb": (7, 1),
}
_GB200 = {
    "1g.23gb": (1, 7),
    "1g.23gb+me": (1, 1),
    "1g.47gb": (1, 4),
    "2g.47gb": (2, 3),
    "3g.93gb": (3, 2),
    "4g.93gb": (4, 1),
    "7g.186gb": (7, 1),
}
_B300 = {
    "1g.34gb": (1, 7),
    "1g.34gb+me": (1, 1),
    "1g.67gb": (1, 4),
    "2g.67gb": (2, 3),
    "3g.135gb": (3, 2),
    "4g.135gb": (4, 1),
    "7g.269gb": (7, 1),
}
_GB300 = {
    "1g.35gb": (1, 7),
    "1g.35gb+me": (1, 1),
    "1g.70gb": (1, 4),
    "2g.70gb": (2, 3),
    "3g.139gb": (3, 2),
    "4g.139gb": (4, 1),
    "7g.278gb": (7, 1),
}

# Model name (as vocabulary.gpu_model_name writes it) -> its profiles. Matched by the words
# that tell the models apart, most specific first.
_MODELS: tuple[tuple[tuple[str, ...], dict[str, tuple[int, int]]], ...] = (
    (("A100", "80GB"), _80GB),
    (("A100",), _A100_40GB),
    (("A800", "80GB"), _80GB),
    (("A800",), _A100_40GB),
    (("PG506",), _H100_96GB),
    (("A30",), _A30),
    (("H100", "NVL"), _H100_94GB),
    (("H800", "NVL"), _H100_94GB),
    (("H100", "94GB"), _H100_94GB),
    (("H100", "96GB"), _H100_96GB),
    (("GH200", "144G"), _GH200_144GB),
    (("GH200",), _H100_96GB),
    (("H20",), _H100_96GB),
    (("H100",), _80GB),
    (("H800",), _80GB),
    (("H200",), _H200_141GB),
    (("GB200",), _GB200),
    (("B200",), _B200),
    (("GB300",), _GB300),
    (("B300",), _B300),
    (("RTX", "PRO", "6000"), _RTX_PRO_6000),
)

# "1g.5gb", "3g.40gb", "1g.10gb+me": compute slices, memory, an optional media extension (or,
# on the RTX PRO 6000, all media engines "+me.all", none "-me", or graphics "+gfx").
_PROFILE_RE = re.compile(r"^([1-9])g\.([0-9]{1,3})gb(\+me|\+me\.all|-me|\+gfx)?$")


def profiles_of(model: str) -> dict[str, tuple[int, int]]:
    """The MIG profiles a GPU model holds ({} for a model without MIG or not in the guide)."""
    words = set((model or "").upper().replace("-", " ").split())
    for needed, profiles in _MODELS:
        if all(n in words for n in needed):
            return profiles
    return {}


def max_per_gpu(model: str, profile: str) -> int | None:
    """How many instances of ``profile`` one GPU of ``model`` holds at most; None when unknown."""
    entry = profiles_of(model).get(profile)
    return entry[1] if entry else None


def compute_slices(profile: str) -> int | None:
    """The compute slices a profile takes, from its name ("3g.40gb" -> 3)."""
    m = _PROFILE_RE.match(profile or "")
    return int(m.group(1)) if m else None


def slices_per_gpu(model: str) -> int | None:
    """The compute slices one GPU of ``model`` has: 4 where its smallest profile fits four
    times (A30, RTX PRO 6000), else 7; None for a model without MIG or not in the guide."""
    profiles = profiles_of(model)
    if not profiles:
        return None
    return 4 if max(n for _, n in profiles.values()) == 4 else 7


def gpu_fraction(model: str, profile: str) -> float:
    """The share of its physical GPU one MIG instance of ``profile`` is: its compute slices
    over the GPU's (1g.10gb on a seven-slice A100 80GB: 1/7; 1g.24gb on a four-slice RTX PRO
    6000: 1/4). A model not in the guide is taken as seven-slice, the A100/H100 family's
    geometry; 0 for a name that is no MIG profile."""
    slices = compute_slices(profile)
    if not slices:
        return 0.0
    return min(1.0, slices / (slices_per_gpu(model) or 7))


class Reason(str):
    """A refusal as its English text (the ``str`` itself: logs, the lab, comparisons), with the
    message code and parameters it was worded from, so the console says it in its reader's
    language (gpus/procedures/phrases.py registers each code with this same English template;
    tests/foundation/test_migparted.py holds the two equal). A parameter may be a Reason."""

    code: str
    params: dict[str, object]

    def __new__(cls, code: str, template: str, **params: object) -> Reason:
        obj = super().__new__(cls, template % params)
        obj.code, obj.params = code, params
        return obj


# code -> English template, of every Reason the pure modules give
REASONS = {
    "mig.no_profiles": "%(model)s has no MIG profiles",
    "mig.model_no_profiles": "this GPU model has no MIG profiles",
    "mig.no_profile": "%(model)s has no MIG profile %(profile)s",
    "mig.at_most": "%(model)s holds at most %(most)s × %(profile)s",
    "mig.slices": "%(model)s has %(total)s compute slices; this layout needs %(used)s",
    "mig.no_config": "no MIG config named '%(name)s' in the mig-parted config",
    "mig.gpu_reason": "GPU %(index)s: %(reason)s",
    # the mig-parted config file itself (migparted.parse)
    "mig.not_yaml": "not YAML: %(err)s",
    "mig.no_parted_config": "no mig-parted config",
    "mig.unknown_version": "unknown version %(version)s (mig-parted reads v1)",
    "mig.no_mig_configs": "no mig-configs",
    "mig.config_not_a_list": "%(name)s: a config is a list of device entries",
    "mig.bad_devices": "%(name)s: devices must be 'all' or a list of GPU indexes",
    "mig.bad_mig_enabled": "%(name)s: mig-enabled must be true or false",
    "mig.bad_mig_devices": "%(name)s: mig-devices maps a profile to a count",
    "mig.bad_device_filter": "%(name)s: device-filter must be a PCI device id or a list of them",
}


def reason(code: str, **params: object) -> Reason:
    return Reason(code, REASONS[code], **params)


def layout_error(model: str, devices: dict[str, int]) -> str:
    """Why one GPU of ``model`` cannot hold this set of instances ({profile: count}), or "".

    mig-manager refuses such a layout; this checks what the geometry tables say (each profile
    known for the model, within its maximum, and the compute slices adding up), which is
    what tells a layout apart from a typo. Placement rules beyond that are NVIDIA's own."""
    profiles = profiles_of(model)
    if not profiles:
        return reason("mig.no_profiles", model=model) if model else reason("mig.model_no_profiles")
    used = 0
    total = slices_per_gpu(model) or 7
    for profile, count in devices.items():
        if count <= 0:
            continue
        if profile not in profiles:
            return reason("mig.no_profile", model=model, profile=profile)
        slices, most = profiles[profile]
        if count > most:
            return reason("mig.at_most", model=model, most=most, profile=profile)
        used += slices * count
    if used > total:
        return reason("mig.slices", model=model, total=total, used=used)
    return ""


def physical_from_mig_devices(model: str, profile: str, devices: int) -> int | None:
    """Physical GPUs that ``devices`` MIG devices of one profile take at least (MIG ``single``:
    every GPU partitioned alike); None when the geometry of that model is unknown."""
    most = max_per_gpu(model, profile)
    if not most or devices <= 0:
        return None if not most else 0
    return -(-devices // most)
