"""Showback in physical GPU-hours: each Workspace's quota, pod requests and use converted to
physical GPUs (an exclusive GPU 1, a time-sliced replica 1/replicas, a MIG instance its slices
of its GPU), hour by hour, summed per month; the Workspaces and the unallocated rest add up to
the cluster; an hour rolled up again replaces itself; old hours and months are pruned; the
admin's page shows it with a bar per month and exports CSV in the reader's language."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.urls import reverse

from brickadmin.cluster import mig
from brickadmin.cluster import scenarios as s
from brickadmin.cluster import vocabulary as vocab
from gpus.numbers import ledger
from gpus.view.reading import read_cluster
from workspaces import showback, showback_rollups
from workspaces.models import ShowbackHour, ShowbackMonth

from .conftest import text

A100 = "NVIDIA A100 80GB PCIe"
MIG_1G = "nvidia.com/mig-1g.10gb"
HOUR = datetime(2026, 11, 3, 14, 20, tzinfo=UTC)


def exclusive_node(name, gpus=2):
    node = s.node(
        name,
        model=A100,
        sharing="none",
        gpu_count=gpus,
        extra_status={"capacity": {vocab.GPU: str(gpus)}, "allocatable": {vocab.GPU: str(gpus)}},
    )
    return ledger.node_ledger(node, {}, None, "labels", "running", 1)


def sliced_node(name, replicas=4, pods=()):
    node = s.node(
        name,
        model=A100,
        sharing="timeslicing",
        gpu_count=1,
        extra_status={"capacity": {vocab.GPU_SHARED: str(replicas)}, "allocatable": {vocab.GPU_SHARED: str(replicas)}},
    )
    return ledger.node_ledger(node, {}, None, "labels", "running", replicas, pods=pods)


def mig_node(name):
    """One A100 80GB split into seven 1g.10gb instances (GPU Operator, MIG strategy mixed)."""
    node = s.node(
        name,
        model=A100,
        gpu_count=1,
        labels={vocab.MIG_STRATEGY_LABEL: "mixed", vocab.GPU_PRESENT_LABEL: "true"},
        extra_status={"capacity": {MIG_1G: "7", vocab.GPU: "0"}, "allocatable": {MIG_1G: "7", vocab.GPU: "0"}},
    )
    return ledger.node_ledger(node, {}, s.gpus(name, A100, 1, 81920, mig=[["1g.10gb"] * 7]), "twin", "running", 1)


def workspace(namespace, quotas, pods=(), utilisation=None):
    return SimpleNamespace(namespace=namespace, gpu_quotas=quotas, pods=list(pods), utilisation=utilisation)


def pod_line(name, node, resource, amount=1, gpus=()):
    return {"name": name, "node": node, "phase": "Running", "requests": {resource: amount}, "gpus": list(gpus)}


# --- the conversion -------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, profile, fraction",
    [
        (A100, "1g.10gb", 1 / 7),  # seven compute slices
        (A100, "3g.40gb", 3 / 7),
        (A100, "7g.80gb", 1.0),
        ("NVIDIA A30", "1g.6gb", 1 / 4),  # four compute slices
        ("NVIDIA A30", "2g.12gb", 2 / 4),
        ("NVIDIA RTX PRO 6000 Blackwell", "1g.24gb", 1 / 4),
        ("Unknown GPU", "2g.20gb", 2 / 7),  # the A100/H100 family's geometry
        (A100, "not-a-profile", 0.0),
    ],
)
def test_a_mig_instance_is_its_compute_slices_of_its_gpu(model, profile, fraction):
    assert mig.gpu_fraction(model, profile) == pytest.approx(fraction)


def test_an_exclusive_gpu_is_one_a_replica_one_over_replicas_a_mig_slice_its_fraction():
    assert ledger.physical_share(exclusive_node("ex"), vocab.GPU) == 1.0
    assert ledger.physical_share(sliced_node("ts", replicas=4), vocab.GPU_SHARED) == pytest.approx(1 / 4)
    assert ledger.physical_share(sliced_node("ts", replicas=2), vocab.GPU_SHARED) == pytest.approx(1 / 2)
    assert ledger.physical_share(mig_node("mg"), MIG_1G) == pytest.approx(1 / 7)
    assert ledger.physical_share(exclusive_node("ex"), vocab.GPU_SHARED) == 0.0  # not served there


def test_a_quota_of_a_resource_is_worth_the_clusters_average_of_it():
    shares = ledger.physical_shares([sliced_node("ts2", replicas=2), sliced_node("ts4", replicas=4)])
    # 2 replicas of 1/2 and 4 of 1/4: six units for two GPUs
    assert shares[vocab.GPU_SHARED] == pytest.approx(2 / 6)


def test_the_workspaces_and_the_unallocated_rest_add_up_to_the_cluster():
    nodes = [exclusive_node("ex", gpus=2), sliced_node("ts", replicas=4), mig_node("mg")]
    physical = sum(n.physical for n in nodes)
    figures = showback.hour_figures(
        nodes,
        [
            workspace("whole", {vocab.GPU: 1}),
            workspace("sliced", {vocab.GPU_SHARED: 2}),
            workspace("mig", {MIG_1G: 3}),
            workspace("nothing", {}),
        ],
        measured=False,
    )
    assert physical == 4
    assert {ns: f.allocated for ns, f in figures.items()} == pytest.approx({"whole": 1.0, "sliced": 0.5, "mig": 3 / 7})
    rest = showback.unallocated(physical, figures.values())
    assert rest == pytest.approx(4 - 1 - 0.5 - 3 / 7)
    assert sum(f.allocated for f in figures.values()) + rest == pytest.approx(physical)


def test_requested_counts_each_pod_on_its_own_node():
    nodes = [exclusive_node("ex"), sliced_node("ts", replicas=4), mig_node("mg")]
    figures = showback.hour_figures(
        nodes,
        [
            workspace(
                "team",
                {vocab.GPU_SHARED: 4},
                [
                    pod_line("a", "ts", vocab.GPU_SHARED, 2),
                    pod_line("b", "mg", MIG_1G, 2),
                    pod_line("c", "ex", vocab.GPU, 1),
                ],
            )
        ],
        measured=False,
    )
    assert figures["team"].requested == pytest.approx(2 / 4 + 2 / 7 + 1)
    assert figures["team"].used is None and figures["team"].measurable  # no DCGM: not measured


def _sliced_pod(ns, name):
    return s.gpu_pod(ns, name, "ts", vocab.GPU_SHARED, 1)


def test_used_on_a_time_sliced_gpu_shared_by_workspaces_is_not_measurable_never_the_devices_figure():
    node = sliced_node("ts", replicas=4, pods=[_sliced_pod("team-a", "a"), _sliced_pod("team-b", "b")])
    lines = [
        workspace("team-a", {vocab.GPU_SHARED: 1}, [pod_line("a", "ts", vocab.GPU_SHARED)], utilisation=None),
        workspace("team-b", {vocab.GPU_SHARED: 1}, [pod_line("b", "ts", vocab.GPU_SHARED)], utilisation=None),
    ]
    figures = showback.hour_figures([node], lines, measured=True)
    assert figures["team-a"] == showback.HourFigures(0.25, 0.25, None, measurable=False)
    assert figures["team-b"].measurable is False


def test_a_time_sliced_gpu_one_workspace_has_to_itself_is_measured_whole():
    node = sliced_node("ts", replicas=4, pods=[_sliced_pod("team-a", "a"), _sliced_pod("team-a", "b")])
    pods = [
        pod_line("a", "ts", vocab.GPU_SHARED, gpus=["ts · GPU 0"]),
        pod_line("b", "ts", vocab.GPU_SHARED, gpus=["ts · GPU 0"]),
    ]
    figures = showback.hour_figures([node], [workspace("team-a", {vocab.GPU_SHARED: 2}, pods, 60.0)], measured=True)
    assert figures["team-a"].requested == pytest.approx(0.5)
    assert figures["team-a"].used == pytest.approx(0.6)  # the whole device, 60 % busy, all its own
    assert figures["team-a"].measurable


def test_used_on_exclusive_gpus_is_what_the_pods_hold_times_their_utilisation():
    node = exclusive_node("ex", gpus=2)
    line = workspace("team", {vocab.GPU: 2}, [pod_line("a", "ex", vocab.GPU, 2)], utilisation=25.0)
    assert showback.hour_figures([node], [line], measured=True)["team"].used == pytest.approx(0.5)
    idle = workspace("idle", {vocab.GPU: 1})
    assert showback.hour_figures([node], [idle], measured=True)["idle"].used == 0.0  # no pod: nothing used


# --- the rollups ----------------------------------------------------------------------


def fig(allocated, requested=0.0, used=None, measurable=True):
    return showback.HourFigures(allocated, requested, used, measurable)


def month_rows(month="2026-11-01"):
    return {r.namespace: r for r in ShowbackMonth.objects.filter(month=month)}


@pytest.mark.django_db
def test_rolling_an_hour_up_again_replaces_it_never_doubles():
    showback_rollups.store_hour(HOUR, 4.0, True, {"team-a": fig(1.0, 0.5, 0.25), "team-b": fig(0.5)})
    showback_rollups.store_hour(HOUR + timedelta(hours=1), 4.0, True, {"team-a": fig(1.0, 0.5, 0.25)})
    # the same hour again, later in the hour, with what the cluster shows now
    showback_rollups.store_hour(HOUR + timedelta(minutes=30), 4.0, True, {"team-a": fig(2.0, 1.0, 0.5)})
    showback_rollups.store_hour(HOUR + timedelta(minutes=35), 4.0, True, {"team-a": fig(2.0, 1.0, 0.5)})

    assert ShowbackHour.objects.count() == 2
    rows = month_rows()
    assert set(rows) == {"", "team-a"}  # team-b held nothing in the hour as it stands now
    assert (rows["team-a"].hours, rows["team-a"].allocated, rows["team-a"].requested) == (2, 3.0, 1.5)
    assert (rows["team-a"].used, rows["team-a"].used_hours) == (0.75, 2)
    cluster = rows[""]
    assert (cluster.hours, cluster.physical, cluster.allocated) == (2, 8.0, 3.0)
    assert cluster.unallocated + rows["team-a"].allocated == pytest.approx(cluster.physical)


@pytest.mark.django_db
def test_a_months_workspaces_and_unallocated_add_up_to_the_clusters_physical_gpu_hours():
    for h in range(24):
        showback_rollups.store_hour(
            HOUR + timedelta(hours=h),
            4.0,
            False,
            {"whole": fig(1.0), "sliced": fig(0.5), "mig": fig(3 / 7 if h % 2 else 1 / 7)},
        )
    rows = month_rows()
    cluster = rows.pop("")
    assert cluster.physical == pytest.approx(96.0)
    assert sum(r.allocated for r in rows.values()) + cluster.unallocated == pytest.approx(cluster.physical)
    assert rows["mig"].allocated == pytest.approx(12 * 3 / 7 + 12 / 7)
    assert rows["mig"].used_state == "not-measured"


@pytest.mark.django_db
def test_hours_on_shared_time_sliced_gpus_leave_used_not_measurable():
    showback_rollups.store_hour(HOUR, 1.0, True, {"team-a": fig(0.25, 0.25, None, measurable=False)})
    showback_rollups.store_hour(HOUR + timedelta(hours=1), 1.0, True, {"team-a": fig(0.25, 0.25, 0.1)})
    row = month_rows()["team-a"]
    assert (row.used_state, row.unmeasurable_hours, row.used_hours) == ("not-measurable", 1, 1)


@pytest.mark.django_db
def test_retention_prunes_old_hours_and_months(settings):
    settings.BRICK_SHOWBACK_RETENTION_DAYS = 40
    now = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)
    old, recent = datetime(2026, 9, 30, 10, tzinfo=UTC), datetime(2026, 11, 20, 10, tzinfo=UTC)
    for moment in (old, recent, now):
        showback_rollups.store_hour(moment, 2.0, False, {"team-a": fig(1.0)})
    assert showback_rollups.prune(now) == (1, 2)  # the September hour; its month's two rows
    assert sorted(ShowbackHour.objects.values_list("hour", flat=True)) == [recent, now]
    assert sorted({m.isoformat() for m in ShowbackMonth.objects.values_list("month", flat=True)}) == [
        "2026-11-01",
        "2026-12-01",
    ]


@pytest.mark.django_db
def test_the_default_retention_is_400_days():
    assert showback_rollups.retention_days() == 400


# --- from the cluster view to the page -----------------------------------------------------


@pytest.mark.django_db
def test_the_seed_clusters_hour_from_its_view(twin):
    """One A30 exclusive GPU, one A30 time-sliced with replicas 2; quotas of one of each."""
    read_cluster()
    row = showback_rollups.roll_up(HOUR)
    assert row.physical == 2.0
    figures = {ns: showback.HourFigures.from_list(v) for ns, v in row.lines.items()}
    assert {ns: f.allocated for ns, f in figures.items()} == {"ws-exclusive": 1.0, "ws-shared": 0.5}
    assert showback.unallocated(row.physical, figures.values()) == 0.5


@pytest.mark.django_db
def test_the_admin_reads_the_month_with_its_bars_and_exports_csv_in_korean(twin, admin_user, alice, login):
    for h in range(3):
        showback_rollups.store_hour(
            HOUR + timedelta(hours=h),
            2.0,
            True,
            {"ws-exclusive": fig(1.0, 1.0, 0.5), "ws-shared": fig(0.5, 0.5, None, measurable=False)},
        )
    showback_rollups.store_hour(datetime(2026, 10, 5, 3, tzinfo=UTC), 2.0, True, {"ws-exclusive": fig(1.0)})
    admin = login(admin_user)
    page = admin.get(reverse("showback"), {"month": "2026-11"})
    html = page.content.decode()
    assert page.status_code == 200
    words = text(html)
    assert "Physical GPU-hours of the cluster 6.00" in words and "Unallocated 1.50" in words
    assert html.count('class="pic-figure pic-capacity"') == 2  # a bar for October, one for November
    assert 'data-used="not-measurable"' in html and 'data-used="measured"' in html

    csv = b"".join(admin.get(reverse("showback"), {"month": "2026-11", "format": "csv"}).streaming_content).decode()
    head, *lines = csv.strip().splitlines()
    assert head == "workspace,month,hours,allocated,share,requested,used,used_note"
    assert lines[0] == "ws-exclusive,2026-11,3,3.00,50.0,3.00,1.50,"
    assert lines[1].startswith("ws-shared,2026-11,3,1.50,25.0,1.50,not measurable per tenant (time-sliced GPU),")

    korean = admin.get(reverse("showback"), {"month": "2026-11", "format": "csv"}, HTTP_ACCEPT_LANGUAGE="ko")
    body = b"".join(korean.streaming_content).decode()
    assert "not measurable" not in body and "ws-shared,2026-11,3,1.50,25.0,1.50," in body
    assert login(alice).get(reverse("showback")).status_code == 403


@pytest.mark.django_db
def test_the_page_says_so_before_any_hour_is_rolled_up(admin_user, login):
    page = login(admin_user).get(reverse("showback"), {"month": "1999-99"})
    assert page.status_code == 200 and 'data-testid="showback-empty"' in page.content.decode()


@pytest.mark.django_db
def test_the_owner_sees_their_own_workspaces_figures_and_no_one_elses(approved, alice, bob, login):
    ws = approved(alice, "team-a")
    showback_rollups.store_hour(HOUR, 2.0, True, {"team-a": fig(0.5, 0.5, 0.2), "team-b": fig(1.0, 1.0, 0.9)})
    page = login(alice).get(reverse("workspace_detail", args=[ws.pk])).content.decode()
    assert 'data-testid="own-showback"' in page
    words = text(page)
    assert "2026-11 1 0.50 0.50 0.20" in words and "0.90" not in words
