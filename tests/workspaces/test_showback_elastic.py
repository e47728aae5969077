"""Showback with elastic quota on Kueue: each Workspace's borrowed and lent physical GPU-hours
per month; a Workspace is allocated its guarantee less what it lent plus what it borrowed, so
the Workspaces and the unallocated rest still add up to the cluster. Without Kueue the page
and its CSV are what they were."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from gpus.view.reading import read_cluster
from workspaces import showback, showback_rollups
from workspaces.models import ShowbackMonth

from .conftest import text
from .test_elastic import approve_two

pytestmark = pytest.mark.django_db
HOUR = datetime(2026, 11, 3, 14, 20, tzinfo=UTC)


@pytest.fixture
def kueue_twin(twin, settings):
    settings.BRICK_TWIN_KUEUE = True
    return twin


def test_borrowed_and_lent_gpu_hours_per_workspace_and_month_add_up_to_the_cluster(
    kueue_twin, alice, bob, admin_user, make_request
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)  # team-a borrows 2 of team-b's guarantee
    read_cluster()
    for h in range(3):
        showback_rollups.roll_up(HOUR.replace(hour=14 + h))
    rows = {r.namespace: r for r in ShowbackMonth.objects.filter(month=HOUR.date().replace(day=1))}
    a, b, cluster = rows["team-a"], rows["team-b"], rows[ShowbackMonth.CLUSTER]
    # a time-sliced A30 replica (replicas 2) is half a physical GPU; each guarantee is 2 replicas
    assert (a.borrowed, a.lent, b.borrowed, b.lent) == (3.0, 0.0, 0.0, 3.0)
    assert a.allocated == 6.0  # (guarantee 2 + borrowed 2) x 0.5, three hours: not its ceiling's
    assert b.allocated == 0.0  # all of its guarantee lent
    workspaces = [r for ns, r in rows.items() if ns != ShowbackMonth.CLUSTER]
    assert cluster.allocated == pytest.approx(sum(r.allocated for r in workspaces))
    assert cluster.borrowed == cluster.lent == 3.0
    assert cluster.unallocated == pytest.approx(cluster.physical - sum(r.allocated for r in workspaces))


def test_the_admin_and_the_owner_read_borrowed_and_lent_on_the_page_and_in_the_csv(
    kueue_twin, alice, bob, admin_user, make_request, login
):
    approve_two(kueue_twin, alice, bob, admin_user, make_request)
    read_cluster()
    showback_rollups.roll_up(HOUR)
    admin = login(admin_user)
    words = text(admin.get(reverse("showback"), {"month": "2026-11"}).content)
    assert "1.00 borrowed, 1.00 lent" in words
    csv = b"".join(admin.get(reverse("showback"), {"month": "2026-11", "format": "csv"}).streaming_content).decode()
    head, *lines = csv.strip().splitlines()
    assert head == "workspace,month,hours,allocated,share,requested,borrowed,lent,used,used_note"
    by_ws = {line.split(",")[0]: line.split(",") for line in lines}
    assert by_ws["team-a"][6:8] == ["1.00", "0.00"] and by_ws["team-b"][6:8] == ["0.00", "1.00"]
    from workspaces.models import WorkspaceRequest

    b = WorkspaceRequest.objects.get(name="team-b")
    own = text(login(bob).get(f"/workspaces/{b.pk}/").content)
    assert "Borrowed Lent" in own and "2026-11 1 0.00 0.00 0.00 1.00" in own


def test_without_kueue_the_figures_and_the_csv_are_what_they_were(twin, admin_user, login):
    read_cluster()
    showback_rollups.roll_up(HOUR)
    row = ShowbackMonth.objects.get(namespace=ShowbackMonth.CLUSTER)
    assert (row.borrowed, row.lent) == (0.0, 0.0)
    assert all(len(v) == 4 for v in showback_rollups.ShowbackHour.objects.get().lines.values())
    csv = b"".join(
        login(admin_user).get(reverse("showback"), {"month": "2026-11", "format": "csv"}).streaming_content
    ).decode()
    assert csv.splitlines()[0] == "workspace,month,hours,allocated,share,requested,used,used_note"


def test_an_hour_with_a_lender_and_a_borrower_sums_to_the_guarantees():
    from types import SimpleNamespace

    from .test_showback import sliced_node

    nodes = [sliced_node("n1", replicas=4), sliced_node("n2", replicas=4)]
    lines = [
        SimpleNamespace(namespace="a", gpu_quotas={"nvidia.com/gpu.shared": 6}, pods=[], utilisation=None),
        SimpleNamespace(namespace="b", gpu_quotas={"nvidia.com/gpu.shared": 6}, pods=[], utilisation=None),
    ]
    elastic = {
        "a": [showback.ElasticLine("nvidia.com/gpu.shared", 4, 2, 0)],
        "b": [showback.ElasticLine("nvidia.com/gpu.shared", 4, 0, 2)],
    }
    figures = showback.hour_figures(nodes, lines, measured=False, elastic=elastic)
    assert {ns: (f.allocated, f.borrowed, f.lent) for ns, f in figures.items()} == {
        "a": (1.5, 0.5, 0.0),
        "b": (0.5, 0.0, 0.5),
    }
    assert showback.unallocated(2.0, figures.values()) == 0.0
    without = showback.hour_figures(nodes, lines, measured=False)
    assert showback.unallocated(2.0, without.values()) == -1.0  # the ceilings overcommit
