"""The one read path of the pages: the cluster's snapshot and its ledger, and the health
problems computed from them.

``read_cluster()`` raises ``brickadmin.cluster.ClusterError`` when the cluster cannot be
read; ``brickadmin.middleware.ClusterErrorMiddleware`` turns it into the 503 page with the
banner. A page that still has something to show without the cluster catches it itself
(and calls ``brickadmin.middleware.show_cluster_error`` for the banner)."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from brickadmin.cluster.snapshot import Snapshot, take_snapshot, without_gc_pauses

from . import health as health_mod
from . import ledger as ledger_mod

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterView:
    snapshot: Snapshot
    ledger: ledger_mod.Ledger


_memo_lock = threading.Lock()
_memo: dict = {}  # {"snapshot": the last snapshot, "ledger": its ledger}


def ledger_of(snapshot: Snapshot) -> ledger_mod.Ledger:
    """The snapshot's ledger, computed once per snapshot: a cached snapshot (the twin
    unchanged, or a real cluster within BRICK_SNAPSHOT_CACHE_SECONDS) is the same object,
    so its ledger is reused. The memo holds the snapshot itself, so the identity it is
    keyed on cannot be reused by another object."""
    with _memo_lock:
        if _memo.get("snapshot") is snapshot:
            return _memo["ledger"]
    with without_gc_pauses():
        led = ledger_mod.compute(snapshot)
    with _memo_lock:
        _memo.update(snapshot=snapshot, ledger=led)
    return led


def read_cluster(gateway=None) -> ClusterView:
    """The snapshot and its ledger. Raises ClusterError when the cluster cannot be read."""
    snapshot = take_snapshot(gateway)
    return ClusterView(snapshot=snapshot, ledger=ledger_of(snapshot))


def health_inputs(view: ClusterView, *, drift: bool = True) -> health_mod.HealthInputs:
    """Gather what the health checks read, once, before the pure checks run: the view, and
    the managed manifest's drift (the current manifest version, from the database, against
    the snapshot's device-plugin ConfigMaps and DaemonSets: no API call). An invalid
    manifest leaves the drift out (None)."""
    items = None
    if drift:
        from . import manifest as manifest_mod

        snap = view.snapshot
        live = {(kind, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                for kind, objs in (("ConfigMap", snap.plugin_configmaps), ("DaemonSet", snap.plugin_daemonsets))
                for o in objs}
        try:
            items = manifest_mod.drift(manifest_mod.parse(manifest_mod.current().content), live=live)
        except manifest_mod.ManifestError as exc:
            log.warning("manifest drift not read: %s", exc)
    return health_mod.HealthInputs(ledger=view.ledger, snapshot=view.snapshot, drift=items)


def read_problems(view: ClusterView, *, drift: bool = True) -> list[health_mod.Problem]:
    """Every health problem of the view (the one list the Dashboard card, the Health page
    and the Nodes list read)."""
    return health_mod.problems(health_inputs(view, drift=drift))
