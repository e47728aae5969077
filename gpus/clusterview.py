"""The materialised cluster view: what the pages read instead of the API server.

The cluster watcher (``manage.py watch_cluster``, brickadmin/cluster/watch.py) keeps a
small Kubernetes-shaped projection of the cluster up to date by list-then-watch and hands
each new projection, as a ``Snapshot``, to ``publish()``, which computes the ledger and the
health findings (pure) and writes them to the database."""
from __future__ import annotations

from brickadmin.cluster.snapshot import Snapshot


def publish(snapshot: Snapshot, *, watcher: str = "") -> int:
    """Materialise ``snapshot`` (the ledger, per node, per model × type, per resource, and
    the health findings) as the view's next generation; returns the generation."""
    raise NotImplementedError  # written by the lead; the watcher only calls it
