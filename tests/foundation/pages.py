"""Every page of the console, for the page-by-page tests (accessibility, layout): a world
with something on each list, made through the services as a person would make it, and the
URLs each role may open (each with the status it answers)."""

from dataclasses import dataclass

from gpus.procedures import service
from gpus.tasks import execute_run
from workspaces import approvals as ws_approvals
from workspaces import jobs as ws_jobs

EXCLUSIVE_NODE = "dev-a1-ws04"
SHARED_NODE = "dev-a1-ws02"


@dataclass
class Page:
    name: str
    path: str
    status: int = 200


def build_world(load_scenario, admin, alice, bob) -> dict:
    """The seed scenario, approved Workspaces (one of the admin's own), one pending and one
    rejected request, a Job waiting and one approved, a finished run and a pending one.
    Returns the ids."""
    load_scenario("seed-example")
    ws = ws_approvals.approve(
        ws_approvals.create_request(alice, name="team-alpha", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    ws_approvals.approve(
        ws_approvals.create_request(
            bob, name="team-bravo-with-a-rather-long-name", gpu=1, cpu=4, memory_gib=16, storage_gib=50
        ).pk,
        admin,
        "nvidia.com/gpu",
        overcommit=True,
    )
    ws_approvals.create_request(alice, name="team-charlie", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    ws_approvals.reject(
        ws_approvals.create_request(bob, name="team-delta", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin,
        "No budget this quarter",
    )
    job = ws_jobs.create_job(
        alice,
        ws,
        node=EXCLUSIVE_NODE,
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command="python train.py --epochs 10",
        gpu=1,
    )
    ws_jobs.approve_job(job.pk, admin)
    waiting = ws_jobs.create_job(alice, ws, node=EXCLUSIVE_NODE, image="busybox", command="sleep 60", gpu=1)
    done = service.start_run("C", "", {"replicas": 2}, actor_name=admin.get_username(), dispatch=False)
    execute_run(done.pk)
    pending = service.start_run("B", SHARED_NODE, {}, actor_name=admin.get_username(), dispatch=False)
    own = ws_approvals.approve(
        ws_approvals.create_request(admin, name="ops-tools", gpu=1, cpu=1, memory_gib=4, storage_gib=10).pk,
        admin,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    # an hour of showback from the cluster view, so its page and the Workspace pages show figures
    from gpus.view.reading import read_cluster
    from workspaces import showback_rollups

    read_cluster()
    showback_rollups.roll_up()
    return {
        "workspace": ws.pk,
        "job": job.pk,
        "waiting_job": waiting.pk,
        "run": done.pk,
        "pending_run": pending.pk,
        "admin_workspace": own.pk,
    }


def user_pages(ids, workspace="workspace") -> list[Page]:
    return [
        Page("dashboard", "/"),
        Page("availability", "/availability/"),
        Page("GPU by model", "/dashboard/models/"),
        Page("help", "/help/"),
        Page("workspace list", "/workspaces/"),
        Page("workspace request", "/workspaces/new/"),
        Page("workspace detail", f"/workspaces/{ids[workspace]}/"),
        Page("jobs", "/workspaces/jobs/"),
        Page("job form", "/workspaces/jobs/new/"),
        Page("job detail", f"/workspaces/jobs/{ids['job']}/"),
        Page("personal settings", "/profile/"),
        Page("403", "/nodes/", 403),
        Page("404", "/no-such-page/", 404),
    ]


def admin_pages(ids) -> list[Page]:
    return user_pages(ids, "admin_workspace")[:-2] + [
        Page("nodes", "/nodes/"),
        Page("node detail (exclusive)", f"/nodes/{EXCLUSIVE_NODE}/"),
        Page("node detail (shared)", f"/nodes/{SHARED_NODE}/"),
        Page("evidence", "/evidence/"),
        Page("health", "/health/"),
        Page("procedures", "/procedures/"),
        Page("wizard A pick", "/procedures/A/"),
        Page("wizard B pick", "/procedures/B/"),
        Page("wizard C pick", "/procedures/C/"),
        Page("wizard D pick", "/procedures/D/"),
        Page("wizard A plan", f"/procedures/A/plan/?node={EXCLUSIVE_NODE}"),
        Page("wizard C plan", "/procedures/C/plan/?replicas=4"),
        Page("fix plan", f"/fixes/S/?node={SHARED_NODE}&stale_resource=nvidia.com/gpu"),
        Page("runs", "/runs/"),
        Page("run (done)", f"/runs/{ids['run']}/"),
        Page("run (pending)", f"/runs/{ids['pending_run']}/"),
        Page("manifest", "/manifest/"),
        Page("approvals", "/workspaces/approvals/"),
        Page("job queue", "/workspaces/approvals/jobs/"),
        Page("all workspaces", "/workspaces/all/"),
        Page("workspaces in the cluster", "/workspaces/cluster/"),
        Page("showback", "/workspaces/showback/"),
        Page("cluster workspace detail", "/workspaces/cluster/team-alpha/"),
        Page("cluster workspace without a record", "/workspaces/cluster/ws-shared/"),
        Page("adopt a namespace", "/workspaces/cluster/ws-exclusive/adopt/"),
        Page("workspace settings", "/workspaces/settings/"),
        Page("audit", "/workspaces/audit/"),
        Page("lockouts", "/lockouts/"),
        Page("404", "/no-such-page/", 404),
    ]


ANONYMOUS_PAGES = [Page("login", "/login/")]
