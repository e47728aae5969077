"""Celery tasks of the Workspaces: the showback rollup (the beat runs it every few minutes;
each run replaces the hour in progress with the cluster view as it is, and prunes)."""

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(name="workspaces.tasks.roll_up_showback")
def roll_up_showback() -> str:
    from gpus.view.reading import ViewUnavailable

    from . import showback_rollups

    try:
        row = showback_rollups.roll_up()
    except ViewUnavailable:
        return "no cluster view yet"
    hours, months = showback_rollups.prune()
    return f"{row.hour:%Y-%m-%d %H}:00 UTC: {len(row.lines)} Workspaces; pruned {hours} hours, {months} months"


@shared_task(name="workspaces.tasks.read_kueue")
def read_kueue() -> str:
    """Whether the cluster serves Kueue, and its ClusterQueues, kept for the pages."""
    from . import elastic

    seen = elastic.read_kueue()
    return "Kueue served" if seen.served else "Kueue not served"


@shared_task(name="workspaces.tasks.tell_waiting_pods")
def tell_waiting_pods() -> str:
    """Each owner told once per cause of a GPU pod that waits or was refused (workspaces/waits.py)."""
    from gpus.view.reading import ViewUnavailable

    from . import waits

    try:
        return f"{waits.tell_owners()} told"
    except ViewUnavailable:
        return "no cluster view yet"
