"""Choices with meaning: each value carries its label and its colour (the CSS class of its tag).

The values are the strings the ledger computes and compares ("exclusive", "timeslicing",
"mig-1g.5gb", ...); TextChoices members compare equal to them."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class GpuMode(models.TextChoices):
    """How a GPU node serves its GPUs."""

    EXCLUSIVE = "exclusive", _("Exclusive")
    TIMESLICING = "timeslicing", _("Time-slicing")
    # Whole GPUs shared by NVIDIA's MPS (a client per replica, memory limited per client)
    MPS = "mps", _("MPS")
    # NVIDIA's MIG strategies: mixed advertises nvidia.com/mig-<profile>, single advertises
    # every MIG device as nvidia.com/gpu.
    MIG = "mig", _("MIG mixed")
    MIG_SINGLE = "mig-single", _("MIG single")
    # GPUs published by NVIDIA's DRA driver as ResourceSlices, not by the device plugin
    DRA = "dra", _("DRA")
    UNLABELLED = "unlabelled", _("Unrecognised labels")

    @property
    def colour(self) -> str:
        return "mode-mig" if self.value.startswith("mig") else f"mode-{self.value}"

    @classmethod
    def of(cls, value) -> GpuMode | None:
        try:
            return cls(value)
        except ValueError:
            return None


class GpuType(models.TextChoices):
    """What a GPU resource is: a whole GPU, a time-sliced share, or a MIG partition
    (the value is then ``mig-<profile>``, e.g. ``mig-1g.5gb``: see ``of``)."""

    EXCLUSIVE = "exclusive", _("Exclusive")
    SHARED = "shared", _("Shared (time-slicing)")
    MIG = "mig", _("MIG")
    # GPU Operator: plain nvidia.com/gpu, whole on some nodes and time-sliced on others.
    MIXED = "mixed", _("Exclusive or shared, by node")

    @property
    def colour(self) -> str:
        return {
            "exclusive": "mode-exclusive",
            "shared": "mode-timeslicing",
            "mig": "mode-mig",
            "mixed": "mode-timeslicing",
        }[self.value]

    @classmethod
    def of(cls, value) -> GpuType | None:
        """The member for a value; every ``mig-<profile>`` is MIG."""
        value = str(value or "")
        if value.startswith("mig-"):
            return cls.MIG
        try:
            return cls(value)
        except ValueError:
            return None

    @classmethod
    def label_of(cls, value) -> str:
        """The label of a value, with the MIG profile: 'MIG 1g.5gb'."""
        member = cls.of(value)
        if member is None:
            return str(value)
        if member is cls.MIG and str(value).startswith("mig-"):
            return f"{member.label} {str(value)[4:]}"
        return str(member.label)
