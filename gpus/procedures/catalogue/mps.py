"""The conversions to and from MPS, on the skeleton of A and B (cordon, drain, relabel, verify the
plugin and allocatable, remove the stale resource, uncordon, Prometheus): E (exclusive → MPS),
H (MPS → exclusive), I (time-slicing → MPS) and J (MPS → time-slicing). MPS is the device
plugin's ``sharing.mps``: the BRICK MPS DaemonSet serves nvidia.com/gpu.shared, each replica an
MPS client, beside NVIDIA's MPS control daemon, which runs where nvidia.com/mps.capable=true.
BRICK has no GPU feature discovery, so the conversion sets that label with the sharing label and
takes it away when the node leaves MPS; Restore puts both back."""

from __future__ import annotations

from django.utils.translation import gettext_lazy

from brickadmin.cluster import vocabulary as vocab
from brickadmin.wording import said
from gpus.numbers import capacity as capacity_mod
from gpus.numbers import ledger as ledger_mod

from ..base import Check, mode_name
from ..steps import (
    GPU_SHARED,
    MpsControlDaemonRunning,
)
from .common import RESTORED_LABELS
from .conversions import ProcedureB, _Conversion

MPS_RESTORED_LABELS = (*RESTORED_LABELS, vocab.MPS_CAPABLE_LABEL)


def _on_mps(n) -> bool:
    """A node the BRICK MPS DaemonSet serves (its sharing label says mps)."""
    return n.convention == "brick" and n.sharing_label == ledger_mod.MODE_MPS


class _ToMps(_Conversion):
    """A conversion whose node ends up shared by MPS."""

    target = "mps"
    restored_labels = MPS_RESTORED_LABELS
    source_modes: tuple[str, ...] = ()

    def daemon_steps(self):
        return [MpsControlDaemonRunning()]  # the MPS plugin waits for NVIDIA's control daemon

    def capacity_change(self, gateway, ledger, snapshot, node, params):
        n = ledger.node(node)
        if n is None:
            return None
        replicas = ledger_mod.brick_mps_replicas(snapshot.plugin_configmaps)
        return capacity_mod.conversion_change(n, GPU_SHARED, replicas)

    def eligibility(self, n):
        if n.convention != "brick":
            return said("precheck.not_brick_node")
        if _on_mps(n):
            return said("precheck.already_mps")
        if n.mode not in self.source_modes:
            return said("precheck.not_source_mode", mode=mode_name(n.mode))
        return ""

    def offered_on(self, n):
        partitioned = any(d.mig for d in n.devices)  # the plan would refuse it: M leads there
        return n.convention == "brick" and not _on_mps(n) and n.mode in self.source_modes and not partitioned

    def conversion_checks(self, gateway, node, params):
        checks = super().conversion_checks(gateway, node, params)
        if any(c.level == "block" for c in checks):
            return checks
        from gpus.view.live import LiveRead

        n = LiveRead.of(gateway).ledger().node(node)
        partitioned = [d for d in n.devices if d.mig] if n is not None else []
        if partitioned:
            # internal/plugin/mps.go getMPSOptions: the plugin exits when a resource holds MIG devices
            from ..registry import find

            mig = find("M")
            offered = mig is not None and mig.offered_on(n)
            checks.append(
                Check(
                    False,
                    said("precheck.mps_of_mig", n=len(partitioned), node=node),
                    said("precheck.fix_mig_off_for_mps"),
                    level="block",
                    link=mig.pick_url(n.name) if offered else "",
                    link_text=mig.label if offered else "",
                )
            )
        return checks


class ProcedureExclusiveToMps(_ToMps):
    code = "E"
    label = gettext_lazy("E. Exclusive → MPS")
    description = gettext_lazy(
        "Cordon and drain a node, label it for MPS (brick.cloud/gpu.sharing=mps and "
        "nvidia.com/mps.capable=true), verify the MPS control daemon, the MPS plugin and physical × "
        "replicas, remove the stale nvidia.com/gpu, uncordon, check Prometheus."
    )
    action_label = gettext_lazy("Convert to MPS (E)")
    source_modes = ("exclusive", "mig", "unlabelled")  # a MIG node is refused until its GPUs leave MIG mode


class ProcedureTimeSlicingToMps(_ToMps):
    code = "I"
    label = gettext_lazy("I. Time-slicing → MPS")
    description = gettext_lazy(
        "The same skeleton from time-slicing to MPS: its nvidia.com/gpu.shared replicas become MPS "
        "clients, each with its share of the GPU's memory and compute."
    )
    action_label = gettext_lazy("Convert to MPS (I)")
    source_modes = (ledger_mod.MODE_TIMESLICING,)
    fixes = ()  # a label typo meaning MPS is fixed by E


class ProcedureMpsToExclusive(ProcedureB):
    code = "H"
    from_mps = True
    label = gettext_lazy("H. MPS → Exclusive")
    description = gettext_lazy(
        "The same skeleton back from MPS to exclusive, taking nvidia.com/mps.capable away so the MPS "
        "control daemon leaves the node, after a pre-check that the shared quota still fits without it."
    )
    action_label = gettext_lazy("Convert to exclusive (H)")
    restored_labels = MPS_RESTORED_LABELS
    fixes = ()  # a label typo meaning exclusive is fixed by B

    def offered_on(self, n):
        return _on_mps(n)

    def eligibility(self, n):
        if n.convention == "brick" and not _on_mps(n):
            return said("precheck.not_mps", label=vocab.SHARING_LABEL)
        return super().eligibility(n)


class ProcedureMpsToTimeSlicing(_Conversion):
    code = "J"
    from_mps = True
    label = gettext_lazy("J. MPS → Time-slicing")
    description = gettext_lazy(
        "The same skeleton from MPS to time-slicing, taking nvidia.com/mps.capable away so the MPS "
        "control daemon leaves the node: its replicas are time-sliced again."
    )
    action_label = gettext_lazy("Convert to time-slicing (J)")
    target = "timeslicing"
    restored_labels = MPS_RESTORED_LABELS
    fixes = ()

    def offered_on(self, n):
        return _on_mps(n)

    def eligibility(self, n):
        if n.convention != "brick":
            return said("precheck.not_brick_node")
        if not _on_mps(n):
            return said("precheck.not_mps", label=vocab.SHARING_LABEL)
        return ""
