"""The Dashboard and availability numbers follow approvals (allocated,
from quotas) and Jobs (requested, from pods)."""

import pytest

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers.ledger import compute
from workspaces import approvals as ws_approvals
from workspaces import jobs

from .conftest import text

pytestmark = pytest.mark.django_db


def numbers(gw, resource):
    row = compute(take_snapshot(gw)).resource(resource)
    return row.logical, row.allocated, row.available, row.requested


def test_approval_moves_allocated_and_available(twin, alice, admin_user, make_request, login):
    assert numbers(twin, "nvidia.com/gpu.shared") == (2, 1, 1, 0)
    req = make_request(alice, "team-a", gpu=1)
    assert numbers(twin, "nvidia.com/gpu.shared") == (2, 1, 1, 0)  # a request alone allocates nothing
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert numbers(twin, "nvidia.com/gpu.shared") == (2, 2, 0, 0)
    page = text(login(alice).get("/availability/").content)
    assert "nvidia.com/gpu.shared Shared (time-slicing) 2 2 0 None available: approval may be delayed" in page
    page = text(login(alice).get("/workspaces/new/").content)
    assert "nvidia.com/gpu.shared Shared (time-slicing) 2 2 0" in page
    # The approval queue's "Available now" follows too.
    other = make_request(alice, "team-b", gpu=1)
    q = text(login(admin_user).get("/workspaces/approvals/").content)
    # approving would leave it 1 short: never a negative Available, admins are told by how much
    assert "Shared (time-slicing) nvidia.com/gpu.shared" in q and "2 2 0 none available; over-allocated by 1" in q
    # A rejection changes nothing.
    ws_approvals.reject(other.pk, admin_user, "full")
    assert numbers(twin, "nvidia.com/gpu.shared") == (2, 2, 0, 0)


def test_overcommit_shows_negative_available(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a", gpu=2)
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu", overcommit=True)
    assert numbers(twin, "nvidia.com/gpu") == (1, 3, -2, 0)


def test_a_running_job_moves_requested_on_the_dashboard_not_allocated(approved, twin, alice, admin_user, login):
    ws = approved(alice, "team-a")
    before = numbers(twin, "nvidia.com/gpu")
    page = login(alice).get("/").content.decode()
    assert 'data-testid="gpu-used">0<' in page
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="", gpu=1)
    jobs.approve_job(job.pk, admin_user)
    logical, allocated, available, requested = numbers(twin, "nvidia.com/gpu")
    assert (logical, allocated, available) == before[:3]  # Jobs run outside quotas
    assert requested == 1
    page = login(alice).get("/").content.decode()
    assert 'data-testid="gpu-used">1<' in page
    # The Job node list now shows the GPU as taken.
    opts = {o.name: o for o in jobs.job_node_options(compute(take_snapshot(twin)))}
    assert (opts["dev-a1-ws04"].free, opts["dev-a1-ws04"].allocatable, opts["dev-a1-ws04"].selectable) == (0, 1, False)
    # Deleting the Job gives it back.
    twin.delete("batch/v1", "Job", job.k8s_name, "team-a")
    assert numbers(twin, "nvidia.com/gpu")[3] == 0
