"""The built-in procedures, in the order the pages list them; GpusConfig.ready() registers
them. Each is defined in its family's module of ``catalogue/``: the conversions A, B, D
(conversions.py), the device plugin's C, P, T (plugin.py), the MIG layout M (mig.py), Restore R
(restore.py), the node and pod Fixes S, F, U, N (fixes.py; N stops mig-manager on a node
DRA partitions) and the DRA levers G, X, K, L (dra.py: a
DeviceTaintRule on one GPU, its removal, a node to DRA and back); the Workspace repairs are in
workspaces/procedures.py."""

from __future__ import annotations

from .catalogue.common import PrecheckStep
from .catalogue.conversions import ProcedureA, ProcedureB, ProcedureD
from .catalogue.dra import ProcedureRemoveTaintRule, ProcedureTaintGpu, ProcedureToDevicePlugin, ProcedureToDra
from .catalogue.fixes import (
    ProcedureDeleteFailedPod,
    ProcedureRemoveStale,
    ProcedureStopMigManager,
    ProcedureUncordon,
)
from .catalogue.mig import ProcedureMigLayout, mig_configs, reason_said
from .catalogue.mps import (
    ProcedureExclusiveToMps,
    ProcedureMpsToExclusive,
    ProcedureMpsToTimeSlicing,
    ProcedureTimeSlicingToMps,
)
from .catalogue.plugin import ProcedureAddToleration, ProcedureC, ProcedureRestartPlugin
from .catalogue.restore import ProcedureRestore

# Read from here by the tests (step 0, mig-manager's layouts and its refusals).
__all__ = ["BUILT_IN", "PrecheckStep", "mig_configs", "reason_said"]

BUILT_IN = (
    ProcedureA(),
    ProcedureB(),
    ProcedureC(),
    ProcedureD(),
    ProcedureExclusiveToMps(),
    ProcedureMpsToExclusive(),
    ProcedureTimeSlicingToMps(),
    ProcedureMpsToTimeSlicing(),
    ProcedureMigLayout(),
    ProcedureRestore(),
    ProcedureRemoveStale(),
    ProcedureRestartPlugin(),
    ProcedureDeleteFailedPod(),
    ProcedureAddToleration(),
    ProcedureUncordon(),
    ProcedureTaintGpu(),
    ProcedureRemoveTaintRule(),
    ProcedureToDra(),
    ProcedureToDevicePlugin(),
    ProcedureStopMigManager(),
)  # registry.py lists them by code; Workspace repairs: workspaces/procedures.py
