from django.conf import settings
from django.db import DatabaseError

from brickadmin.cluster.gateway import cluster_problem
from gpus.view.stored import freshness


def view_freshness(request):
    """How old the numbers on every page are and whether the watcher keeps them up to date
    (one query, for signed-in users only)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    try:
        fresh = freshness(live=settings.BRICK_CLUSTER == "twin")
    except DatabaseError:  # the page that says the database is unavailable must still render
        return {}
    out = {"freshness": fresh, "worker_down": worker_down()}
    if fresh is None and settings.BRICK_CLUSTER != "twin" and not getattr(request, "cluster_error", None):
        # No view yet (the watcher never ran): say whether the cluster itself answers
        # (probed at most every 10 s). With a view, the watcher's heartbeat says it instead.
        out["cluster_error"] = cluster_problem()
    return out


def worker_down():
    """When the Celery worker or its beat stopped: the time the reaper (scheduled every 5 s,
    run by a worker) last ran, once that is older than BRICK_WORKER_STALE_SECONDS; None while it
    runs, and before any worker ever ran here (a pending run says that itself). One query."""
    from datetime import timedelta

    from django.utils import timezone

    from gpus.models import ServiceBeat

    seen = ServiceBeat.objects.filter(name="reaper").values_list("beat_at", flat=True).first()
    if seen is None or timezone.now() - seen < timedelta(seconds=settings.BRICK_WORKER_STALE_SECONDS):
        return None
    return seen
