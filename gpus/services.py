"""The ledger for a request: one snapshot, one computation, errors turned into a banner."""
from __future__ import annotations

import logging

from brickadmin.cluster import ClusterError
from brickadmin.cluster.snapshot import take_snapshot, without_gc_pauses

from . import ledger as ledger_mod

log = logging.getLogger(__name__)


def current_ledger(request=None):
    """(ledger, snapshot), or (None, None) when the cluster cannot be read; then
    ``request.cluster_error`` carries the reason for the banner on every page."""
    try:
        snapshot = take_snapshot()
    except ClusterError as exc:
        log.warning("cluster unreachable: %s", exc)
        if request is not None:
            request.cluster_error = str(exc)
        return None, None
    # A cached snapshot (the twin unchanged) keeps its ledger: compute once per snapshot.
    if snapshot.ledger is None:
        with without_gc_pauses():
            snapshot.ledger = ledger_mod.compute(snapshot)
    return snapshot.ledger, snapshot
