"""Kueue followed by the cluster watcher: where the cluster serves Kueue, its ClusterQueues and
Workloads are listed and watched with the other kinds, the published view carries them, and the
quota pages and the eviction records follow them without the beat's read. A cluster without
Kueue is watched as before: nothing listed but the 404, nothing watched, no error, no Kueue."""

import pytest
from django.core.management import call_command

from brickadmin.accounts.models import Notification
from brickadmin.cluster.twin import TwinGateway
from brickadmin.cluster.watch import ClusterWatcher
from gpus.models import OwnerNotice, ViewState
from workspaces import approvals as ws_approvals
from workspaces import elastic
from workspaces.models import Decision, KueueFacts

from .conftest import text
from .test_kueue_reclaims import A_UID, put, reclaimed_status, workload

pytestmark = pytest.mark.django_db

KUEUE_STREAMS = ("ClusterQueue", "Workload")


class Watched(TwinGateway):
    """The twin, noting which kinds the watcher watches."""

    def __init__(self):
        super().__init__()
        self.watched: list[str] = []

    def watch(self, kind, namespace=None, **kwargs):
        self.watched.append(kind)
        return super().watch(kind, namespace, **kwargs)


def test_a_cluster_without_kueue_is_watched_as_before(twin, admin_client, alice, make_request):
    gw = Watched()
    w = ClusterWatcher(gw)
    w.prime()
    assert w.sync() is False
    snap = w.snapshot()
    assert snap.kueue_served is False and snap.kueue_cluster_queues == [] and snap.kueue_workloads == []
    status = w.status()
    assert status["errors"] == 0 and not status["behind"] and status["relists"] == 0
    for kind in KUEUE_STREAMS:
        assert "could not find the requested resource" in status["streams"][kind]["unserved"]
        assert status["streams"][kind]["objects"] == 0
    assert not set(KUEUE_STREAMS) & set(gw.watched)  # not served: never watched
    assert snap.nodes and snap.namespaces  # the rest as ever

    # the pages: Kueue not served, nothing of it offered, nothing recorded
    make_request(alice, "team-f", gpu=2)
    page = admin_client.get("/workspaces/approvals/").content.decode()
    assert 'data-testid="elastic-grant"' not in page
    assert ViewState.objects.get(pk=1).extra["kueue"] == {"served": False, "queues": [], "waiting": []}
    seen = elastic.facts()
    assert seen.served is False and seen.queues == [] and seen.waiting == []
    assert not KueueFacts.objects.exists()  # no beat's read: the view alone said it
    assert not Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).exists()


def approved_pair(gw, alice, bob, admin_user, make_request):
    """team-a and team-b approved with a guarantee of 2 and a burst of 2 each; team-a borrows 2,
    team-b has one Workload waiting (Kueue's status, as its controller writes it)."""
    for user, name in ((alice, "team-a"), (bob, "team-b")):
        req = make_request(user, name, gpu=2)
        ws_approvals.approve(
            req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True, grant=elastic.kueue.Grant(2, 2)
        )

    def usage(total, borrowed):
        return [
            {
                "name": "brick-gpu-shared",
                "resources": [{"name": "nvidia.com/gpu.shared", "total": str(total), "borrowed": str(borrowed)}],
            }
        ]

    for queue, (total, borrowed, pending) in (("brick-ws-team-a", (4, 2, 0)), ("brick-ws-team-b", (0, 0, 1))):
        status = {
            "flavorsReservation": usage(total, borrowed),
            "flavorsUsage": usage(total, borrowed),
            "pendingWorkloads": pending,
            "fairSharing": {"weightedShare": 0},  # not read by any page: not kept
        }
        gw.set_kueue_status("ClusterQueue", queue, status)
    KueueFacts.objects.all().delete()  # what the approval read: from here the pages have the view alone


def test_with_kueue_the_view_carries_its_workloads_and_the_pages_follow_them_without_the_beat(
    twin, settings, alice, bob, admin_user, admin_client, make_request, login
):
    settings.BRICK_TWIN_KUEUE = True
    approved_pair(twin, alice, bob, admin_user, make_request)
    reclaimed = reclaimed_status()
    reclaimed["requeueState"] = {"count": 1}  # not read by any page: not kept
    put(twin, workload("team-a", "job-train-5f2c1", A_UID, 1, owner="train"), reclaimed)

    # the watcher's projection: both kinds, only what the pages read
    w = ClusterWatcher(Watched())
    w.prime()
    snap = w.snapshot()
    assert snap.kueue_served is True
    assert [q["metadata"]["name"] for q in snap.kueue_cluster_queues] == ["brick-ws-team-a", "brick-ws-team-b"]
    assert "fairSharing" not in snap.kueue_cluster_queues[0]["status"]
    assert snap.kueue_cluster_queues[0]["spec"]["cohortName"] == "brick-gpu-shared"
    (wl,) = snap.kueue_workloads
    assert wl["metadata"]["uid"] == A_UID and wl["metadata"]["ownerReferences"][0]["name"] == "train"
    assert {c["type"]: c["reason"] for c in wl["status"]["conditions"]}["Preempted"] == "InCohortReclamation"
    assert "requeueState" not in wl["status"]
    assert elastic.kueue.workload_gpus(wl) == {"nvidia.com/gpu.shared": 2}

    # the watcher publishes (as it does in a deployment, at each change); the quota page, with no
    # beat's read: the figures and the record come from the view
    call_command("watch_cluster", "--once")
    page = text(admin_client.get("/workspaces/cluster/team-a/quota/").content)
    assert "team-a nvidia.com/gpu.shared 2 4 2 0 2 all of the guarantee 0" in page
    assert "team-b nvidia.com/gpu.shared 2 0 0 2 2 all of the guarantee 1" in page
    assert not KueueFacts.objects.exists()
    (row,) = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED)
    assert (row.subject, row.amount, row.actor_name) == ("team-a", 2, "Kueue")
    assert "borrowed by Job/train (Workload job-train-5f2c1) for Workspace team-b" in row.detail
    assert OwnerNotice.objects.filter(namespace="team-a", actor_name="Kueue").count() == 1
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 1

    # Kueue moves on: team-b's Workload admitted, team-a back to its guarantee; the pages follow
    # its next event, and the eviction seen again (published again, then read by the beat) is
    # still the one row
    def usage(total):
        return [{"name": "brick-gpu-shared", "resources": [{"name": "nvidia.com/gpu.shared", "total": str(total)}]}]

    twin.set_kueue_status("ClusterQueue", "brick-ws-team-a", {"flavorsReservation": usage(2), "pendingWorkloads": 1})
    twin.set_kueue_status("ClusterQueue", "brick-ws-team-b", {"flavorsReservation": usage(2), "pendingWorkloads": 0})
    call_command("watch_cluster", "--once")
    page = text(admin_client.get("/workspaces/cluster/team-a/quota/").content)
    assert "team-a nvidia.com/gpu.shared 2 2 0 0 2 all of the guarantee 1" in page
    assert "team-b nvidia.com/gpu.shared 2 2 0 0 2 all of the guarantee 0" in page
    elastic.read_kueue(twin)
    assert Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).count() == 1
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 1
    ws = row.workspace
    assert "Kueue took back 2 nvidia.com/gpu.shared" in text(login(alice).get(f"/workspaces/{ws.pk}/").content)
