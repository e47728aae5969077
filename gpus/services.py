"""Kept for callers not yet moved to ``gpus.reading.read_cluster`` (gpus/views/wizards.py)."""
from __future__ import annotations

from .reading import read_cluster


def current_ledger(request=None):
    """(ledger, snapshot). Raises ClusterError (the middleware renders it): never returns
    (None, None) any more and writes nothing onto ``request``. Use ``read_cluster()``."""
    view = read_cluster()
    return view.ledger, view.snapshot
