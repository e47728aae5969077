"""Two watchers and one view: a watcher that lost the Lease (killed, paused, cut off from
the API server) never writes the view again (its renew deadline and the fencing token on
the generation write), a publication cut short leaves the previous generation whole, the
pages say when the numbers may be behind, and a silent reaper is a Health finding."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.urls import reverse
from django.utils import timezone

from brickadmin.cluster.lease import LeaderElector
from brickadmin.cluster.snapshot import take_snapshot
from brickadmin.cluster.twin import TwinGateway
from gpus.models import ServiceBeat, ViewNode, ViewState
from gpus.view import publish as view_publish
from gpus.view import stored as clusterview


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def electors(clock):
    gw = TwinGateway()
    a = LeaderElector(gw, "brickadmin", "watch", "watcher-a", lease_duration=15, renew_deadline=10, clock=clock)
    b = LeaderElector(gw, "brickadmin", "watch", "watcher-b", lease_duration=15, renew_deadline=10, clock=clock)
    return a, b


def fence_of(elector):
    return view_publish.Fence(elector.identity, elector.token, holds=elector.holds)


def cordoned(name):
    return clusterview.stored_view().ledger.node(name).cordoned


def test_a_former_leader_s_publication_is_refused_and_pages_keep_the_newer_one(load_scenario, admin_client):
    gw = load_scenario("seed-example")
    clock = Clock()
    a, b = electors(clock)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    view_publish.claim(fence_of(a))
    view_publish.publish(take_snapshot(gw), watcher="watcher-a", fence=fence_of(a))
    # a is paused (SIGSTOP) past its Lease; b takes it over and publishes
    clock.now += 16
    assert b.try_acquire_or_renew() and b.token > a.token
    view_publish.claim(fence_of(b))
    newer = view_publish.publish(take_snapshot(gw), watcher="watcher-b", fence=fence_of(b))
    # a wakes up with a change it had seen, and its own timer not yet run out (it was
    # checked just before the pause): the write itself is refused
    gw.cordon("dev-a1-ws02")
    woken = view_publish.Fence("watcher-a", a.token, holds=lambda: True)
    with pytest.raises(view_publish.StalePublisher):
        view_publish.publish(take_snapshot(gw), watcher="watcher-a", fence=woken)
    state = ViewState.objects.get(pk=1)
    assert (state.generation, state.holder, state.fencing_token) == (newer, "watcher-b", b.token)
    assert not cordoned("dev-a1-ws02")
    assert not view_publish.heartbeat("watcher-a", {}, fence=woken)
    assert ViewState.objects.get(pk=1).watcher == "watcher-b"
    # the holder's next publication shows the change
    view_publish.publish(take_snapshot(gw), watcher="watcher-b", fence=fence_of(b))
    assert cordoned("dev-a1-ws02")


def test_a_new_leader_s_claim_fences_the_old_one_before_its_first_publication(load_scenario):
    gw = load_scenario("seed-example")
    clock = Clock()
    a, b = electors(clock)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    first = view_publish.publish(take_snapshot(gw), watcher="watcher-a", fence=fence_of(a))
    clock.now += 16
    assert b.try_acquire_or_renew()
    view_publish.claim(fence_of(b))  # b is still listing the cluster
    gw.cordon("dev-a1-ws02")
    with pytest.raises(view_publish.StalePublisher):
        view_publish.publish(take_snapshot(gw), fence=view_publish.Fence("watcher-a", a.token))
    assert ViewState.objects.get(pk=1).generation == first and not cordoned("dev-a1-ws02")
    with pytest.raises(view_publish.StalePublisher):  # nor can it claim the view back
        view_publish.claim(view_publish.Fence("watcher-a", a.token))


def test_a_leader_that_could_not_renew_for_its_renew_deadline_publishes_nothing(load_scenario):
    """Cut off from the API server (its renewals fail) but not from the database: past its
    renew deadline it stops writing, before its Lease can expire and a standby take over."""
    gw = load_scenario("seed-example")
    clock = Clock()
    a, _b = electors(clock)
    assert a.try_acquire_or_renew()
    first = view_publish.publish(take_snapshot(gw), fence=fence_of(a))
    clock.now += 9.9
    assert view_publish.heartbeat("watcher-a", {}, fence=fence_of(a))  # within the deadline
    clock.now += 0.2  # no successful renewal for 10.1 s (renew deadline 10, lease 15)
    gw.cordon("dev-a1-ws02")
    with pytest.raises(view_publish.StalePublisher):
        view_publish.publish(take_snapshot(gw), fence=fence_of(a))
    assert not view_publish.heartbeat("watcher-a", {}, fence=fence_of(a))
    assert ViewState.objects.get(pk=1).generation == first and not cordoned("dev-a1-ws02")


def test_a_lease_created_again_lifts_its_token_above_the_view_s(load_scenario):
    gw = load_scenario("seed-example")
    clock = Clock()
    a, b = electors(clock)
    assert a.try_acquire_or_renew()
    view_publish.claim(view_publish.Fence("watcher-a", 7))  # the view has seen token 7
    with pytest.raises(view_publish.StalePublisher) as refused:
        view_publish.claim(fence_of(a))  # the Lease was deleted and created again: token 0
    assert a.raise_token(refused.value.token + 1) and a.token == 8
    view_publish.claim(fence_of(a))
    assert gw.get_lease("brickadmin", "watch")["spec"]["leaseTransitions"] == 8
    assert not b.raise_token(100)  # only the holder can lift it


def test_a_publication_cut_short_leaves_the_previous_generation_whole(load_scenario, monkeypatch):
    gw = load_scenario("demo")
    first = view_publish.publish(take_snapshot(gw))
    before = sorted(ViewNode.objects.values_list("name", "digest"))
    totals = ViewState.objects.get(pk=1).totals
    for node in ("gpu-a30-01", "gpu-a100-01"):
        gw.cordon(node)

    def database_gone(*args, **kwargs):  # the database restarts after the node rows were written
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(view_publish, "_write_workspaces", database_gone)
    with pytest.raises(OperationalError):
        view_publish.publish(take_snapshot(gw))
    state = ViewState.objects.get(pk=1)
    assert state.generation == first and state.totals == totals
    assert sorted(ViewNode.objects.values_list("name", "digest")) == before
    assert not cordoned("gpu-a30-01") and not cordoned("gpu-a100-01")
    monkeypatch.undo()
    view_publish.publish(take_snapshot(gw))
    assert cordoned("gpu-a30-01") and cordoned("gpu-a100-01")


@pytest.fixture
def real_cluster(unreachable):
    return unreachable


def _seen(status=None, seconds_ago=0):
    seen = timezone.now() - timedelta(seconds=seconds_ago)
    ViewState.objects.filter(pk=1).update(watcher="watcher-b", watcher_seen_at=seen, watcher_status=status or {})


def test_pages_say_the_numbers_may_be_behind_while_a_standby_takes_over(load_scenario, alice_client, real_cluster):
    from brickadmin.cluster import scenarios

    objects, hardware, plugin_configs = scenarios.read("seed-example")
    gw = TwinGateway()
    gw.load(objects, hardware, plugin_configs)
    view_publish.publish(take_snapshot(gw), watcher="watcher-a")

    def banners():
        html = alice_client.get(reverse("dashboard")).content.decode()
        return 'data-testid="watcher-behind"' in html, 'data-testid="watcher-down"' in html

    _seen(seconds_ago=1)
    assert banners() == (False, False)  # a watcher beating, nothing broken
    _seen(seconds_ago=view_publish.BEHIND_SECONDS + 2)
    assert banners() == (True, False)  # the leader's beats stopped: the Lease has not expired yet
    _seen({"catching_up": True})
    assert banners() == (True, False)  # the standby claimed the view, listing the cluster
    _seen({"behind": True, "published": 3})
    assert banners() == (True, False)  # a leader cut off from the API server, still beating
    _seen(seconds_ago=600)
    assert banners() == (False, True)  # no watcher at all: the stronger banner


def test_a_reaper_that_stopped_is_on_the_health_page(load_scenario, admin_client):
    from gpus.procedures import reaper

    load_scenario("seed-example")
    reaper.beat()  # what the periodic task does
    assert "reaper-stopped" not in admin_client.get(reverse("health")).content.decode()
    ServiceBeat.objects.filter(name="reaper").update(beat_at=timezone.now() - timedelta(minutes=5))
    html = admin_client.get(reverse("health")).content.decode()
    row = html[html.index('data-kind="reaper-stopped"') :].split("</tr>")[0]
    assert "Celery beat or the worker is not running" in row and "celery -A brickadmin worker --beat" in row


def test_two_candidates_creating_the_lease_at_once_get_one_lease_and_one_conflict(transactional_db):
    import threading

    from django.db import connection

    from brickadmin.cluster import Conflict

    start, outcomes = threading.Barrier(2), []

    def create(identity):
        start.wait()
        try:
            TwinGateway().create_lease("ns", {"metadata": {"name": "l"}, "spec": {"holderIdentity": identity}})
            outcomes.append(identity)
        except Conflict:
            outcomes.append("conflict")
        finally:
            connection.close()

    for _ in range(5):
        from brickadmin.cluster.models import TwinObject

        TwinObject.objects.filter(kind="Lease").delete()
        outcomes.clear()
        threads = [threading.Thread(target=create, args=(who,)) for who in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        holder = TwinGateway().get_lease("ns", "l")["spec"]["holderIdentity"]
        assert sorted(outcomes) == sorted([holder, "conflict"])


def test_watch_cluster_once_publishes_as_the_lease_holder_and_gives_the_lease_back(load_scenario):
    from django.conf import settings
    from django.core.management import call_command

    from gpus.management.commands.watch_cluster import LEASE_NAME

    gw = load_scenario("seed-example")
    call_command("watch_cluster", "--once", "--identity", "once-1")
    state = ViewState.objects.get(pk=1)
    assert (state.generation, state.holder) == (1, "once-1")
    assert not gw.get_lease(settings.BRICK_LEASE_NAMESPACE, LEASE_NAME)["spec"]["holderIdentity"]


def test_a_watch_cluster_once_that_lost_the_lease_while_listing_publishes_nothing(load_scenario, monkeypatch):
    """A --once run whose Lease another watcher took over while it listed the cluster (it was
    paused, or the list took long): its publication is refused like a former leader's."""
    from django.conf import settings
    from django.core.management import CommandError, call_command

    from gpus.management.commands import watch_cluster

    gw = load_scenario("seed-example")
    clock = Clock()
    other = LeaderElector(
        TwinGateway(), settings.BRICK_LEASE_NAMESPACE, watch_cluster.LEASE_NAME, "watcher-b", clock=clock
    )
    listing = watch_cluster.ClusterWatcher.prime

    def list_while_another_takes_the_lease_over(self):
        listing(self)
        assert not other.try_acquire_or_renew()  # the --once run holds it
        clock.now += 16  # by the other's clock, the Lease has not been renewed for its duration
        assert other.try_acquire_or_renew()
        view_publish.claim(fence_of(other))

    monkeypatch.setattr(watch_cluster.ClusterWatcher, "prime", list_while_another_takes_the_lease_over)
    gw.cordon("dev-a1-ws02")
    with pytest.raises(CommandError, match="refused"):
        call_command("watch_cluster", "--once", "--identity", "once-1")
    state = ViewState.objects.get(pk=1)
    assert (state.generation, state.holder, state.fencing_token) == (0, "watcher-b", other.token)
    assert gw.get_lease(settings.BRICK_LEASE_NAMESPACE, watch_cluster.LEASE_NAME)["spec"]["holderIdentity"] == (
        "watcher-b"
    )


def test_a_reaper_that_never_started_is_on_the_health_page_once_the_console_has_been_up_a_while(
    load_scenario, admin_client
):
    load_scenario("seed-example")
    assert "reaper-stopped" not in admin_client.get(reverse("health")).content.decode(), "just started: not yet"
    ServiceBeat.objects.filter(name="console-up").update(beat_at=timezone.now() - timedelta(minutes=5))
    html = admin_client.get(reverse("health")).content.decode()
    row = html[html.index('data-kind="reaper-stopped"') :].split("</tr>")[0]
    assert "The reaper has never run" in row and "celery -A brickadmin worker --beat" in row
    admin_client.cookies["django_language"] = "ko"
    ko = admin_client.get(reverse("health"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "reaper가 한 번도 실행되지 않았습니다" in ko
    from gpus.procedures import reaper

    reaper.beat()  # beat started at last
    assert "reaper-stopped" not in admin_client.get(reverse("health")).content.decode()
