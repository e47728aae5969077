"""What Kueue takes back is recorded: a Workload of a Workspace evicted or preempted by Kueue
becomes one audited row on the Workspace's history and in the audit log (who lost what, for
whom, when), its owner is told, and the pages say which quota is guaranteed (asked before it
is reclaimed) and which borrowed (taken back without asking). Why a pod waits reads Kueue's
Workload conditions beside the scheduler's reasons."""

from html import unescape

import pytest

from brickadmin.accounts.models import Notification
from gpus.models import OwnerNotice
from workspaces import elastic
from workspaces.models import Decision, WorkspaceRequest

from .conftest import text
from .test_elastic import approve_two

pytestmark = pytest.mark.django_db

A_UID = "7c1f0e52-0000-4000-8000-00000000000a"
B_UID = "7c1f0e52-0000-4000-8000-00000000000b"


@pytest.fixture
def kueue_twin(twin, settings):
    settings.BRICK_TWIN_KUEUE = True
    return twin


def workload(namespace, name, uid, gpus, *, owner_kind="Job", owner=None, priority=0, created="2026-05-04T10:00:00Z"):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": created,
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": owner_kind, "name": owner or name, "uid": uid, "controller": True}
            ],
        },
        "spec": {
            "queueName": "default",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "train", "resources": {"requests": {"nvidia.com/gpu.shared": str(gpus)}}}
                            ]
                        }
                    },
                }
            ],
        },
    }


def reclaimed_status(at="2026-05-04T12:00:05Z", preemptor="/brick-gpu-shared/brick-ws-team-b"):
    """A Workload's status as Kueue's preemptor writes it when a cohort takes borrowed quota back
    (pkg/scheduler/preemption/preemption.go: Evicted and Preempted together, the admission cleared)."""
    message = (
        f"Preempted to accommodate a workload (UID: {B_UID}, JobUID: {B_UID}) due to reclamation within the "
        f"cohort; preemptor path: {preemptor}; preemptee path: /brick-gpu-shared/brick-ws-team-a"
    )
    return {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu.shared in flavor brick-gpu-shared, 2 more needed",
                "lastTransitionTime": at,
            },
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message, "lastTransitionTime": at},
            {
                "type": "Preempted",
                "status": "True",
                "reason": "InCohortReclamation",
                "message": message,
                "lastTransitionTime": at,
            },
        ]
    }


def put(gw, manifest, status):
    gw.apply(manifest)
    gw.set_kueue_status("Workload", manifest["metadata"]["name"], status, manifest["metadata"]["namespace"])


def test_a_workload_reclaimed_by_the_cohort_is_one_audited_row_the_owner_is_told(
    kueue_twin, alice, bob, admin_user, admin_client, login, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    put(kueue_twin, workload("team-a", "job-train-5f2c1", A_UID, 1, owner="train"), reclaimed_status())
    elastic.read_kueue(kueue_twin)

    (row,) = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED)
    assert row.workspace == WorkspaceRequest.objects.get(name="team-a")
    assert (row.actor_name, row.subject, row.gpu_resource, row.amount) == (
        "Kueue",
        "team-a",
        "nvidia.com/gpu.shared",
        2,
    )
    assert row.at.isoformat() == "2026-05-04T12:00:05+00:00"
    assert (
        "Kueue took back 2 nvidia.com/gpu.shared borrowed by Job/train (Workload job-train-5f2c1) for Workspace "
        "team-b, whose guarantee they were (InCohortReclamation)"
    ) in row.detail

    # the owner is told: on their Workspace page and by a notification
    (notice,) = OwnerNotice.objects.filter(namespace="team-a")
    assert notice.owner_name == "alice" and "borrowed by Job/train" in notice.message
    (note,) = Notification.objects.filter(recipient=alice, kind="kueue-evicted")
    assert note.subject == "Kueue took GPUs back from Job/train in Workspace team-a"
    assert not Notification.objects.filter(recipient=bob, kind="kueue-evicted").exists()
    ws = WorkspaceRequest.objects.get(name="team-a")
    assert "Kueue took back 2 nvidia.com/gpu.shared" in text(login(alice).get(f"/workspaces/{ws.pk}/").content)

    # the admin sees it in the audit log and on the Workspace's detail
    audit = text(admin_client.get("/workspaces/audit/?q=team-a").content)
    assert "Kueue evicted a Workload" in audit and "for Workspace team-b" in audit
    detail = text(admin_client.get("/workspaces/cluster/team-a/").content)
    assert "Kueue took back 2 nvidia.com/gpu.shared borrowed by Job/train" in detail


def test_the_same_eviction_read_again_is_still_one_row_and_one_notice(kueue_twin, alice, bob, admin_user, make_request):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    put(kueue_twin, workload("team-a", "job-train-5f2c1", A_UID, 1), reclaimed_status())
    for _ in range(3):
        elastic.read_kueue(kueue_twin)
    assert Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).count() == 1
    assert OwnerNotice.objects.filter(namespace="team-a").count() == 1
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 1

    # admitted again, then reclaimed again later: a second eviction, a second row
    kueue_twin.set_kueue_status("Workload", "job-train-5f2c1", {"conditions": []}, "team-a")
    elastic.read_kueue(kueue_twin)
    kueue_twin.set_kueue_status("Workload", "job-train-5f2c1", reclaimed_status(at="2026-05-04T14:30:00Z"), "team-a")
    elastic.read_kueue(kueue_twin)
    elastic.read_kueue(kueue_twin)
    rows = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).order_by("at")
    assert [r.at.isoformat() for r in rows] == ["2026-05-04T12:00:05+00:00", "2026-05-04T14:30:00+00:00"]


def test_an_eviction_that_ended_between_two_reads_is_recorded_once_and_the_owner_told(
    kueue_twin, alice, bob, admin_user, make_request
):
    """Reclaimed and admitted again before the beat read it: Kueue's reset conditions
    ("Previously: ...") and its eviction count say what happened; read again, still one row."""
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    evicted = reclaimed_status()["conditions"]
    message = next(c["message"] for c in evicted if c["type"] == "Preempted")
    at = "2026-05-04T12:03:00Z"
    readmitted = {
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": at},
            {
                "type": "Evicted",
                "status": "False",
                "reason": "QuotaReserved",
                "message": "Previously: " + message,
                "lastTransitionTime": at,
            },
            {
                "type": "Preempted",
                "status": "False",
                "reason": "QuotaReserved",
                "message": "Previously: " + message,
                "lastTransitionTime": at,
            },
        ],
        "schedulingStats": {
            "evictions": [{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": 1}]
        },
    }
    put(kueue_twin, workload("team-a", "job-train-5f2c1", A_UID, 1, owner="train"), readmitted)
    elastic.read_kueue(kueue_twin)
    elastic.read_kueue(kueue_twin)

    (row,) = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED)
    assert (row.subject, row.amount, row.actor_name) == ("team-a", 2, "Kueue")
    assert "Kueue took back 2 nvidia.com/gpu.shared borrowed by Job/train" in row.detail
    assert "for Workspace team-b" in row.detail
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 1

    # evicted again (the count says 2) and still evicted at the next read: a second row
    again = reclaimed_status(at="2026-05-04T12:10:00Z")
    again["schedulingStats"] = {
        "evictions": [{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": 2}]
    }
    kueue_twin.set_kueue_status("Workload", "job-train-5f2c1", again, "team-a")
    elastic.read_kueue(kueue_twin)
    assert Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).count() == 2


def test_a_preemption_inside_the_workspace_and_an_eviction_say_what_they_were(
    kueue_twin, alice, bob, admin_user, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    in_queue = reclaimed_status()
    for c in in_queue["conditions"]:
        if c["type"] == "Preempted":
            c["reason"] = "InClusterQueue"
            c["message"] = c["message"].replace("reclamation within the cohort", "prioritization in the ClusterQueue")
    put(kueue_twin, workload("team-a", "job-low", A_UID, 1, owner="low"), in_queue)
    timeout = {
        "conditions": [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "PodsReadyTimeout",
                "message": "Exceeded the PodsReady timeout team-b/job-slow",
                "lastTransitionTime": "2026-05-04T13:00:00Z",
            }
        ]
    }
    put(kueue_twin, workload("team-b", "job-slow", B_UID, 1, owner="slow"), timeout)
    elastic.read_kueue(kueue_twin)
    rows = {r.subject: r.detail for r in Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED)}
    assert rows["team-a"].startswith(
        "Kueue preempted Job/low (Workload job-low, 2 nvidia.com/gpu.shared) for a Workload of higher priority "
        "in the same Workspace"
    )
    assert rows["team-b"].startswith(
        "Kueue evicted Job/slow (Workload job-slow, 2 nvidia.com/gpu.shared): PodsReadyTimeout. Exceeded"
    )


def test_an_eviction_outside_any_workspace_is_not_the_consoles_to_record(
    kueue_twin, alice, bob, admin_user, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    kueue_twin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    put(kueue_twin, workload("research", "job-x", A_UID, 1), reclaimed_status())
    elastic.read_kueue(kueue_twin)
    assert not Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED).exists()


def test_the_pages_say_which_quota_is_asked_before_reclaim_and_which_is_taken_back(
    kueue_twin, alice, bob, admin_user, admin_client, login, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)  # team-a borrows 2
    ws = WorkspaceRequest.objects.get(name="team-a")
    owner = unescape(text(login(alice).get(f"/workspaces/{ws.pk}/").content))
    assert (
        "Your guarantee of 2 is yours: an admin asks you before taking any of it back. What you borrow above it "
        "(2 now) Kueue takes back without asking"
    ) in owner
    admin = unescape(text(admin_client.get("/workspaces/cluster/team-a/quota/").content))
    assert "Guaranteed GPUs are taken back only after asking the owner" in admin
    assert "borrowed GPUs are taken back by Kueue without asking" in admin


# --- why a pod waits: Kueue's Workload conditions beside the scheduler's --------------------


def pending_status(message, at="2026-05-04T12:00:00Z"):
    return {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": message,
                "lastTransitionTime": at,
            }
        ]
    }


def test_why_my_pod_waits_reads_kueues_conditions_and_place_in_the_queue(
    kueue_twin, alice, bob, admin_user, admin_client, login, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    said = (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu.shared in "
        "flavor brick-gpu-shared, 2 more needed"
    )
    put(
        kueue_twin,
        workload("team-b", "job-first", A_UID, 1, owner="first", created="2026-05-04T09:00:00Z"),
        pending_status(said),
    )
    put(
        kueue_twin,
        workload("team-b", "job-second", B_UID, 1, owner="second", created="2026-05-04T08:00:00Z", priority=-10),
        pending_status(said),
    )
    admitted = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue brick-ws-team-b",
                "lastTransitionTime": "2026-05-04T08:00:00Z",
            }
        ]
    }
    put(kueue_twin, workload("team-b", "job-running", "u-3", 1, owner="running"), admitted)
    elastic.read_kueue(kueue_twin)

    ws = WorkspaceRequest.objects.get(name="team-b")
    page = unescape(text(login(bob).get(f"/workspaces/{ws.pk}/").content))
    assert (
        "Kueue has not admitted Job/first (Workload job-first) yet: it is number 1 of 2 waiting in this "
        "Workspace's queue."
    ) in page  # higher priority first, though younger
    assert "Kueue has not admitted Job/second (Workload job-second) yet: it is number 2 of 2" in page
    assert f"Kueue says: {said}" in page
    assert "job-running" not in page
    assert "It starts when your guarantee has room for it" in page
    admin = text(admin_client.get("/workspaces/cluster/team-b/").content)
    assert "number 1 of 2" in admin and "Raise the guarantee or the burst ceiling" in admin
    # the other Workspace's owner reads nothing of it
    a = WorkspaceRequest.objects.get(name="team-a")
    assert "Kueue has not admitted" not in text(login(alice).get(f"/workspaces/{a.pk}/").content)


def test_without_kueue_the_waits_are_the_schedulers_alone(twin, alice, admin_user, login, approved):
    ws = approved(alice, "plain")
    page = text(login(alice).get(f"/workspaces/{ws.pk}/").content)
    assert "Kueue has not admitted" not in page and "Kueue says" not in page


# --- a changed grant is undone like a quota change -----------------------------------------


def test_undoing_a_grant_change_puts_the_cluster_queue_back_through_the_audited_run(
    kueue_twin, alice, bob, admin_user, admin_client, make_request, monkeypatch
):
    from brickadmin.cluster.kueue import Grant
    from gpus.models import ProcedureRun
    from gpus.tasks import execute_run

    from .conftest import objects

    for k in ("BRICK_PROCEDURE_RETRY_BACKOFF", "BRICK_PROCEDURE_VERIFY_TIMEOUT", "BRICK_PROCEDURE_STEP_PAUSE"):
        monkeypatch.setenv(k, "0")
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    admin_client.post(
        "/workspaces/cluster/team-b/quota/", {"guarantee": "1", "burst": "3", "lend": "1", "reason": "B lends more"}
    )
    changed = ProcedureRun.objects.get(procedure="Q", params__workspace="team-b")
    execute_run(changed.pk)
    assert elastic.grant_now(kueue_twin, "team-b", "nvidia.com/gpu.shared") == Grant(1, 3, 1)

    page = admin_client.get("/workspaces/cluster/team-b/quota/").content.decode()
    history = unescape(text(page))
    assert f"#{changed.pk}" in history and "4 → 4 · guarantee 1, burst ceiling 3, lend ceiling 1" in history
    assert 'data-testid="quota-undo"' in page
    undo = f"/workspaces/cluster/team-b/quota/?gpu=4&undo_of={changed.pk}&reason=Undo+of+run+%23{changed.pk}"
    preview = unescape(text(admin_client.get(undo).content))
    assert "Its ClusterQueue goes back to guarantee 2, burst ceiling 2, lend ceiling 2." in preview
    assert "The quota is 4 already." not in preview  # the ceiling stays; the grant changes back

    response = admin_client.post(
        "/workspaces/cluster/team-b/quota/", {"gpu": "4", "reason": f"Undo of run #{changed.pk}", "undo_of": changed.pk}
    )
    undone = ProcedureRun.objects.filter(procedure="Q", params__workspace="team-b").exclude(pk=changed.pk).get()
    assert response.status_code == 302 and undone.params["undo_of"] == changed.pk
    execute_run(undone.pk)
    undone.refresh_from_db()
    assert undone.status == "succeeded", undone.message
    assert elastic.grant_now(kueue_twin, "team-b", "nvidia.com/gpu.shared") == Grant(2, 2, None)
    (res,) = objects(kueue_twin, "ClusterQueue")["brick-ws-team-b"]["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"
    ]
    assert res == {"name": "nvidia.com/gpu.shared", "nominalQuota": "2", "borrowingLimit": "2"}
    changes = Decision.objects.filter(subject="team-b", action=Decision.Action.QUOTA)
    assert changes.count() == 3  # granted, changed, undone: each recorded
