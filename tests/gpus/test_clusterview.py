"""The materialised view: what the watcher publishes is what the pages show, a page view
reads it with a constant number of queries and no API call, and the pages say when the
numbers may be out of date."""

import io
import re
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone, translation

from brickadmin.cluster.models import TwinEvent, TwinHardware, TwinObject, TwinState
from brickadmin.cluster.snapshot import take_snapshot
from gpus.models import ViewNode, ViewState
from gpus.numbers import health, ledger
from gpus.view import publish as view_publish
from gpus.view import stored as clusterview
from gpus.view.reading import health_inputs, live_view
from tests import scenario_copies


@pytest.mark.parametrize("name", ["seed-example", "qks", "demo"])
def test_stored_view_equals_the_live_ledger(load_scenario, name):
    gw = load_scenario(name)
    live = live_view(gw)
    view_publish.publish(live.snapshot)
    stored = clusterview.stored_view()
    assert [ledger.node_to_dict(n) for n in stored.ledger.nodes] == [ledger.node_to_dict(n) for n in live.ledger.nodes]
    assert stored.ledger.by_type == live.ledger.by_type
    assert stored.ledger.by_resource == live.ledger.by_resource
    assert (stored.ledger.logical, stored.ledger.requested, stored.ledger.physical, stored.ledger.physical_used) == (
        live.ledger.logical,
        live.ledger.requested,
        live.ledger.physical,
        live.ledger.physical_used,
    )
    with translation.override("en"):
        expected = [(p.severity, p.kind, p.subject, p.message) for p in health.problems(health_inputs(live))]
        assert [(p.severity, p.kind, p.subject, p.message) for p in stored.problems()] == expected
    assert ViewNode.objects.count() == len(live.snapshot.nodes)  # every node, GPU or not


def test_publishing_rewrites_only_the_nodes_that_changed(load_scenario):
    gw = load_scenario("demo")
    first = view_publish.publish(take_snapshot(gw))
    second = view_publish.publish(take_snapshot(gw))
    assert second == first + 1
    assert set(ViewNode.objects.values_list("generation", flat=True)) == {first}
    gw.cordon("gpu-a30-01")
    third = view_publish.publish(take_snapshot(gw))
    changed = set(ViewNode.objects.filter(generation=third).values_list("name", flat=True))
    assert changed == {"gpu-a30-01"}
    assert clusterview.stored_view().ledger.node("gpu-a30-01").cordoned


def test_each_publication_says_how_long_its_phases_took(load_scenario):
    """The watcher's heartbeat carries them: working the view out, writing, committing, what runs
    after it, and the garbage collector's part of all that."""
    gw = load_scenario("demo")
    began = time.perf_counter()
    gen = view_publish.publish(take_snapshot(gw))
    took = time.perf_counter() - began
    phases = view_publish.PHASES[-1]
    assert phases["generation"] == gen
    parts = [phases[k] for k in ("prepare", "write", "commit", "after")]
    assert all(p >= 0 for p in parts) and sum(parts) <= took
    assert 0 <= phases["gc"] <= took


def test_preparing_a_view_writes_nothing_and_the_next_publication_is_the_changed_cluster(load_scenario):
    """What a warm standby does while it waits: the view's parts worked out from its own
    projection, nothing written; once it publishes, the view is the cluster as it is then."""
    gw = load_scenario("demo")
    view_publish.prepare(take_snapshot(gw))
    assert not ViewState.objects.exists() and not ViewNode.objects.exists()
    gw.cordon("gpu-a30-01")
    view_publish.prepare(take_snapshot(gw))
    gw.uncordon("gpu-a30-01")
    gw.label_node("gpu-a100-01", {"brick.test/after": "prepared"})
    view_publish.publish(take_snapshot(gw))
    stored, live = clusterview.stored_view(), live_view(gw)
    assert [ledger.node_to_dict(n) for n in stored.ledger.nodes] == [ledger.node_to_dict(n) for n in live.ledger.nodes]
    assert not stored.ledger.node("gpu-a30-01").cordoned
    assert stored.snapshot.node("gpu-a100-01")["metadata"]["labels"]["brick.test/after"] == "prepared"


def test_an_older_position_does_not_overwrite_a_newer_view(load_scenario):
    gw = load_scenario("seed-example")
    view_publish.publish(take_snapshot(gw), position=10)
    gw.cordon("dev-a1-ws04")
    view_publish.publish(take_snapshot(gw), position=9)  # a slower writer with an older read
    assert not clusterview.stored_view().ledger.node("dev-a1-ws04").cordoned


def test_findings_are_stored_in_every_site_language(load_scenario, admin_client):
    load_scenario("demo")
    en = admin_client.get(reverse("health")).content.decode()
    admin_client.cookies["django_language"] = "ko"
    ko = admin_client.get(reverse("health"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "allocatable" in en
    assert en != ko and re.search(r"[\uac00-\ud7a3]", ko)


@pytest.fixture
def real_cluster_that_does_not_answer(unreachable):
    return unreachable


def _publish_scenario(name, watcher="watcher-1", seen=None):
    """The view of scenario ``name`` published as the watcher publishes it. The twin is only
    its source here (these pages read the view), so whatever an earlier call left in it is
    dropped and the scenario copied in: a load replacing it object by object takes seconds."""
    for model in (TwinEvent, TwinObject, TwinHardware, TwinState):
        model.objects.all().delete()
    gw = scenario_copies.load(name)
    view_publish.publish(take_snapshot(gw), watcher=watcher)
    ViewState.objects.filter(pk=1).update(watcher_seen_at=seen or timezone.now())


PAGES = [
    ("dashboard", []),
    ("dashboard_models", []),
    ("availability", []),
    ("node_list", []),
    ("node_detail", ["gpu-a30-01"]),
    ("health", []),
    ("workspace_request", []),
    ("approval_queue", []),
    ("job_list", []),
    ("job_queue", []),
    ("job_create", []),
    ("cluster_workspaces", []),
]


PAGES += [("manifest", [])]  # its drift is the view's device-plugin objects against the version shown


@pytest.mark.parametrize("name,args", PAGES)
def test_pages_read_the_view_without_calling_the_api_server(
    db, admin_client, real_cluster_that_does_not_answer, name, args
):
    _publish_scenario("demo")
    resp = admin_client.get(reverse(name, args=args))
    assert resp.status_code == 200, resp.content.decode()[:500]
    assert 'data-testid="watcher-down"' not in resp.content.decode()
    # not even the "does the API server answer?" probe: it would have found nothing there
    # (the Jobs pages read their Jobs' state from the view too).
    assert "The cluster cannot be reached." not in resp.content.decode()


def test_dashboard_numbers_come_from_the_view_on_a_real_cluster(db, alice_client, real_cluster_that_does_not_answer):
    _publish_scenario("seed-example")
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert re.search(r'data-testid="gpu-total">3<', html)
    assert 'data-testid="view-age"' in html


def test_a_silent_watcher_is_said_plainly(db, alice_client, real_cluster_that_does_not_answer):
    _publish_scenario("seed-example", seen=timezone.now() - timedelta(minutes=5))
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert "The cluster watcher is not running." in html
    assert re.search(r'data-testid="gpu-total">3<', html), "the last numbers are still shown, marked"


def test_no_view_yet_says_so(db, alice_client, real_cluster_that_does_not_answer):
    resp = alice_client.get(reverse("dashboard"))
    assert resp.status_code == 503
    assert "The cluster cannot be reached." in resp.content.decode()


def _queries(client, name, args=()):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse(name, args=list(args))).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("name,args", PAGES)
def test_a_page_costs_the_same_queries_whatever_the_cluster_size(
    db, admin_client, real_cluster_that_does_not_answer, name, args, settings
):
    settings.PAGE_SIZE = 5
    _publish_scenario("seed-example")
    args = ["dev-a1-ws02"] if name == "node_detail" else args
    _queries(admin_client, name, args)  # first use creates settings rows (JobSettings)
    small = _queries(admin_client, name, args)
    _publish_scenario("demo")
    args = ["gpu-a30-01"] if name == "node_detail" else args
    assert _queries(admin_client, name, args) == small


def test_the_manifest_page_reads_its_drift_from_the_view(db, admin_client, real_cluster_that_does_not_answer):
    """The page looks: its drift is the view's device-plugin objects against the version shown
    (the apply, an action, reads the cluster itself)."""
    _publish_scenario("seed-example")
    page = admin_client.get(reverse("manifest")).content.decode()
    assert page.count('data-state="in-sync"') == 7  # three ConfigMaps, four DaemonSets
    assert "The cluster cannot be reached." not in page


def test_the_watcher_and_a_live_view_gather_the_health_inputs_in_one_place(load_scenario, monkeypatch):
    """A check's new input is gathered once (view_publish.health_inputs), for the stored view's
    findings and for a live view's alike."""
    from gpus.view import reading

    gathered = []
    real = view_publish.health_inputs
    monkeypatch.setattr(view_publish, "health_inputs", lambda *a, **kw: gathered.append(a) or real(*a, **kw))
    gw = load_scenario("seed-example")
    view_publish.publish(take_snapshot(gw))
    reading.read_problems(reading.live_view(gw))
    assert len(gathered) == 2


def test_a_publication_rewrites_only_the_workspace_rows_that_changed(load_scenario):
    from gpus.models import ViewWorkspace

    gw = load_scenario("demo")
    gw.create_namespace("ws-new", {"brick.cloud/workspace": "true", "brick.cloud/owner": "dana"})
    gw.create_resource_quota("ws-new", "workspace-quota", {"requests.nvidia.com/gpu": "1"})
    first = view_publish.publish(take_snapshot(gw))
    rows = dict(ViewWorkspace.objects.values_list("namespace", "generation"))
    assert len(rows) > 1 and set(rows.values()) == {first}
    view_publish.publish(take_snapshot(gw))
    assert dict(ViewWorkspace.objects.values_list("namespace", "generation")) == rows, "nothing changed"
    gw.create_resource_quota("ws-new", "more-gpu", {"requests.nvidia.com/gpu": "2"})
    third = view_publish.publish(take_snapshot(gw))
    after = dict(ViewWorkspace.objects.values_list("namespace", "generation"))
    assert after == {**rows, "ws-new": third}
    assert ViewWorkspace.objects.get(namespace="ws-new").quota == 3


def test_the_dashboard_card_reads_the_stored_summary_not_every_finding(
    db, admin_client, real_cluster_that_does_not_answer
):
    """The card shows each kind's count and first subjects from the summary stored with the
    view; the page does not load the stored findings (the Health page does)."""
    _publish_scenario("demo")
    with CaptureQueriesContext(connection) as ctx:
        html = admin_client.get(reverse("dashboard")).content.decode()
    assert not [q for q in ctx.captured_queries if "gpus_viewproblem" in q["sql"]]
    card = re.search(r'data-testid="attention">(.*?)</ul>', html, re.S).group(1)
    groups = health.summary(clusterview.stored_view().problems())
    assert groups, "the demo has findings"
    for g in groups:
        item = re.search(rf'<li[^>]*data-kind="{g.kind}">(.*?)</li>', card, re.S).group(1)
        assert f'<span class="tag {g.severity}">{g.count}</span>' in item
        for p in g.problems[:5]:
            assert p.subject in item


def test_workspace_findings_follow_the_records_and_the_lines_within_one_generation(load_scenario, alice):
    """The Workspace findings are kept between page views of one generation, yet a record
    written (an adoption writes nothing to the cluster) or a line changed shows at once."""
    from gpus.models import ViewWorkspace
    from workspaces.health import workspace_problems
    from workspaces.models import WorkspaceRequest

    gw = load_scenario("demo")
    gw.create_namespace("ws-kubectl", {"brick.cloud/owner": "dana"})
    gw.create_resource_quota("ws-kubectl", "gpu", {"requests.nvidia.com/gpu": "2"})
    view_publish.publish(take_snapshot(gw))

    def kinds():
        return sorted((p.kind, p.subject) for p in workspace_problems() if p.subject == "ws-kubectl")

    assert kinds() == [("workspace-unrecorded", "ws-kubectl")]
    assert kinds() == [("workspace-unrecorded", "ws-kubectl")], "the same again"
    WorkspaceRequest.objects.create(
        name="ws-kubectl",
        requester=alice,
        requester_name="alice",
        gpu=1,
        cpu=1,
        memory_gib=1,
        storage_gib=1,
        gpu_resource="nvidia.com/gpu",
        status=WorkspaceRequest.Status.APPROVED,
    )
    assert kinds() == [("workspace-quota-edited", "ws-kubectl")], "recorded now, with 1 GPU against the quota's 2"
    ViewWorkspace.objects.filter(namespace="ws-kubectl").update(gpu_quotas={"nvidia.com/gpu": 1})
    assert kinds() == []


# --- a view stored by an older version of the product --------------------------------------


def _stored_by_an_older_version(logical=999):
    """The stored generation as an older version of the product left it: an older schema
    version and numbers of that older form (which this code must not show)."""
    from gpus.models import ViewResourceRow, ViewTypeRow

    state = ViewState.objects.get(pk=1)
    ViewState.objects.filter(pk=1).update(
        schema=view_publish.SCHEMA_VERSION - 1, totals={**state.totals, "logical": logical}
    )
    ViewTypeRow.objects.update(logical=logical)
    ViewResourceRow.objects.update(logical=logical)


def test_the_reader_never_serves_a_view_of_an_older_schema(load_scenario):
    view_publish.publish(take_snapshot(load_scenario("seed-example")))
    _stored_by_an_older_version()
    assert not clusterview.has_view()
    with pytest.raises(clusterview.ViewOutdated):
        clusterview.stored_view()


def test_the_twin_pages_show_the_view_published_again_after_an_upgrade(load_scenario, alice_client):
    gw = load_scenario("seed-example")
    alice_client.get(reverse("dashboard"))  # this process's view of the twin, published
    _stored_by_an_older_version()
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert re.search(r'data-testid="gpu-total">3<', html)
    state = ViewState.objects.get(pk=1)
    assert state.schema == view_publish.SCHEMA_VERSION and state.totals["logical"] == 3
    stored = clusterview.stored_view()
    live = live_view(gw)
    assert stored.ledger.by_resource == live.ledger.by_resource and stored.ledger.by_type == live.ledger.by_type


def test_a_real_cluster_s_pages_wait_for_the_watcher_to_publish_an_upgraded_view(
    db, alice_client, settings, real_cluster_that_does_not_answer
):
    from django.core.management import call_command

    _publish_scenario("seed-example")
    _stored_by_an_older_version()
    resp = alice_client.get(reverse("dashboard"))
    assert resp.status_code == 503
    assert "being rebuilt for this version" in resp.content.decode()
    assert "999" not in resp.content.decode()
    kube = settings.BRICK_CLUSTER
    settings.BRICK_CLUSTER = "twin"  # the watcher starts (against the cluster the view was of)
    call_command("watch_cluster", "--once", "--identity", "watcher-2", stdout=io.StringIO())
    settings.BRICK_CLUSTER = kube
    ViewState.objects.filter(pk=1).update(watcher_seen_at=timezone.now())
    html = alice_client.get(reverse("dashboard")).content.decode()
    assert re.search(r'data-testid="gpu-total">3<', html)
    assert ViewState.objects.get(pk=1).schema == view_publish.SCHEMA_VERSION


def test_an_upgrade_rewrites_every_row_and_keeps_how_long_a_workspace_has_been_idle(load_scenario):
    from gpus.models import ViewWorkspace

    gw = load_scenario("demo")
    gw.create_namespace("ws-idle", {"brick.cloud/workspace": "true", "brick.cloud/owner": "dana"})
    gw.create_resource_quota("ws-idle", "workspace-quota", {"requests.nvidia.com/gpu": "1"})  # no pod uses it
    first = view_publish.publish(take_snapshot(gw))
    idle = dict(ViewWorkspace.objects.exclude(idle_since=None).values_list("namespace", "idle_since"))
    assert "ws-idle" in idle
    _stored_by_an_older_version()
    ViewNode.objects.update(ledger=None)  # a node row of the older form
    second = view_publish.publish(take_snapshot(gw))
    assert set(ViewNode.objects.values_list("generation", flat=True)) == {second} != {first}
    assert all(ledger.node_from_dict(n.ledger) for n in ViewNode.objects.filter(is_gpu=True))
    assert dict(ViewWorkspace.objects.exclude(idle_since=None).values_list("namespace", "idle_since")) == idle
    assert clusterview.stored_view().ledger.logical == live_view(gw).ledger.logical


def test_the_watcher_keeps_no_sql_of_its_publications_with_debug_on(load_scenario, settings):
    """No request ever ends in the watcher's process, so nothing else empties Django's query
    log: with DEBUG on (the demo) it would hold the SQL of its last 9,000 queries, node rows
    and all. After each publication it holds none; the view is published all the same."""
    from brickadmin import metrics
    from gpus.management.commands.watch_cluster import publisher

    settings.DEBUG = True
    gw = load_scenario("demo")
    publish = publisher(metrics.DeviceFeed(60), "watcher-under-test")
    snapshot = take_snapshot(gw)
    generation = publish(snapshot, None)
    assert connection.queries == []
    assert ViewState.objects.get(pk=1).generation == generation
    assert ViewNode.objects.count() == len(snapshot.nodes)
