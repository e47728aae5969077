"""The simulated cluster ("twin"): the gateway protocol over objects in the database.

It reproduces what the procedures depend on and nothing more:
- the DaemonSet controller places the brick-nvidia device-plugin pod on a node from
  its labels (nodeSelector) and taints (tolerations), and replaces pods whose
  template changed (rollout restart);
- the device plugin + kubelet (deviceplugin.py, shared with the lab's simulator)
  set capacity/allocatable from the config *as it was when the plugin pod started*,
  and never drop a vanished resource by themselves;
- drain honours PodDisruptionBudgets and skips DaemonSet and mirror pods; each eviction is
  decided as the API server's Eviction API decides, from the status the disruption
  controller would give the budget at that moment (vocabulary.py);
- a DaemonSet's spec.selector is immutable (422), as on a real API server;
- a loaded node's status stays as the scenario wrote it until its device plugin starts,
  restarts or stops;
- the resource quota controller writes each ResourceQuota's status (hard, and used from the
  namespace's pods: quotausage.py) whenever a pod, a claim or the quota is written.

The twin is three parts behind one class: its store (twin_store.py: the rows and the event
log a watch reads), its controllers (twin_controllers.py: DaemonSet rollouts, the device
plugin and kubelet, mig-manager, the disruption controller, the quota controller) and its API
(twin_api.py: the gateway's methods).
"""

from __future__ import annotations

from .models import TwinObject
from .twin_api import _LABEL_VALUE_RE, UNSCHEDULABLE_TAINT, TwinApi
from .twin_controllers import TwinControllers
from .twin_store import (
    API_VERSIONS,
    CLUSTER_SCOPED,
    EVENT_LOG_KEEP,
    PRUNE_EVERY,
    TwinStore,
    TwinWatch,
    field_selector_matches,
    now_iso,
)
from .vocabulary import GPU_TYPE_LABEL as GPU_NODE_LABEL
from .vocabulary import requirement_matches

__all__ = [
    "API_VERSIONS",
    "CLUSTER_SCOPED",
    "EVENT_LOG_KEEP",
    "GPU_NODE_LABEL",
    "PRUNE_EVERY",
    "UNSCHEDULABLE_TAINT",
    "_LABEL_VALUE_RE",
    "TwinGateway",
    "TwinObject",
    "TwinWatch",
    "field_selector_matches",
    "now_iso",
    "requirement_matches",
]


class TwinGateway(TwinApi, TwinControllers, TwinStore):
    """The gateway over the twin tables. Every write runs the simulated controllers
    for what it touched, inside one transaction, and bumps the generation."""

    name = "twin"
