"""Time on the run page: every step has one number, its place in the plan;
the run and each step say how long they took; times are shown in the zone the person chose
on their settings page, else their browser's, else the site's (TIME_ZONE_DISPLAY), and name it."""

import re
import zoneinfo

import pytest
from django.test import Client
from django.urls import reverse

from brickadmin.accounts.models import Preference
from gpus.models import ProcedureRun
from gpus.procedures import service
from gpus.tasks import execute_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def done_run(twin, fast_engine):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"
    return run


def step_numbers(page):
    return [int(n) for n in re.findall(r'<tr id="step-[^"]+"[^>]*>\s*<td><strong>(\d+)\. ', page)]


def test_steps_are_numbered_once_each_in_plan_order(done_run, admin_client):
    page = admin_client.get(reverse("run_detail", args=[done_run.pk])).content.decode()
    assert step_numbers(page) == list(range(10))  # 0 is the pre-check; no "1. Cordon" beside "1. Drain"
    assert "1. Cordon dev-a1-ws04" in page and "2. Drain dev-a1-ws04" in page


def test_the_plan_numbers_its_steps_the_same_way(twin, admin_client):
    plan = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"}).content.decode()
    assert '<ol class="plan-steps" start="0">' in plan and "<strong>Cordon dev-a1-ws04</strong>" in plan


def test_a_run_and_each_step_say_how_long_they_took(done_run, admin_client):
    page = admin_client.get(reverse("run_detail", args=[done_run.pk])).content.decode()
    took = re.search(r'data-testid="run-took">took ([^<]+)<', page)
    assert took and took.group(1).endswith(" s")
    steps = re.findall(r'data-testid="step-took">([^<]*)<', page)
    assert len(steps) == 10 and all(re.fullmatch(r"\d+\.\d s", s) for s in steps), steps
    runs = admin_client.get(reverse("run_list")).content.decode()
    assert re.search(r'<td class="num">\d+\.\d s</td>', runs)


def test_the_chosen_time_zone_changes_the_times_a_run_page_shows(done_run, admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    url = reverse("run_detail", args=[done_run.pk])
    utc = done_run.created_at.astimezone(zoneinfo.ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S")
    seoul = done_run.created_at.astimezone(zoneinfo.ZoneInfo("Asia/Seoul")).strftime("%Y-%m-%d %H:%M:%S")
    page = client.get(url).content.decode()
    assert f"at {utc} UTC" in page  # the server's TIME_ZONE by default, named

    form = client.get(reverse("profile"))
    token = form.cookies["csrftoken"].value if "csrftoken" in form.cookies else client.cookies["csrftoken"].value
    assert client.post(reverse("profile"), {"time_zone": "Asia/Seoul"}).status_code == 403  # no CSRF token
    assert client.post(reverse("profile"), {"time_zone": "Asia/Seoul", "csrfmiddlewaretoken": token}).status_code == 302
    page = client.get(url).content.decode()
    assert f"at {seoul} KST" in page and f"at {utc} UTC" not in page
    assert "Started by root at" in page

    refused = client.post(reverse("profile"), {"time_zone": "Mars/Olympus_Mons", "csrfmiddlewaretoken": token})
    body = refused.content.decode()
    assert refused.status_code == 400 and 'id="err-time_zone"' in body and "Mars/Olympus_Mons is not one of" in body
    assert Preference.objects.get(user=admin_user).time_zone == "Asia/Seoul"  # unchanged


def test_a_time_zone_is_one_person_s_choice(done_run, admin_user, django_user_model):
    other = django_user_model.objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    Preference.objects.create(user=admin_user, time_zone="America/New_York")
    mine, theirs = Client(), Client()
    mine.force_login(admin_user)
    theirs.force_login(other)
    url = reverse("run_detail", args=[done_run.pk])
    assert re.search(r"at [0-9: -]+ E[SD]T", mine.get(url).content.decode())
    assert " UTC" in theirs.get(url).content.decode()
    assert ProcedureRun.objects.count() == 1


def started_at_on(client, run):
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    return re.search(r"Started by root at ([0-9: -]+ [A-Z+0-9-]+)", page).group(1)


def in_zone(run, zone):
    return run.created_at.astimezone(zoneinfo.ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def test_times_are_shown_in_the_browsers_time_zone_when_none_is_chosen(done_run, admin_client):
    admin_client.cookies["brick_tz"] = "Asia/Seoul"  # static/js/timezone.js writes it
    assert started_at_on(admin_client, done_run) == in_zone(done_run, "Asia/Seoul")
    assert started_at_on(admin_client, done_run).endswith(" KST")


def test_a_browser_zone_the_machine_does_not_know_is_ignored(done_run, admin_client):
    for nonsense in ("Mars/Olympus_Mons", "../../etc/localtime", "UTC\x00", "A" * 300, ""):
        admin_client.cookies["brick_tz"] = nonsense
        assert started_at_on(admin_client, done_run) == in_zone(done_run, "UTC"), repr(nonsense)


def test_the_site_display_zone_is_the_default_and_configurable(done_run, admin_client, settings):
    assert started_at_on(admin_client, done_run) == in_zone(done_run, "UTC")  # TIME_ZONE_DISPLAY's default
    settings.TIME_ZONE_DISPLAY = "Asia/Seoul"
    assert started_at_on(admin_client, done_run) == in_zone(done_run, "Asia/Seoul")
    admin_client.cookies["brick_tz"] = "Europe/Berlin"  # the browser's zone comes first
    assert started_at_on(admin_client, done_run) == in_zone(done_run, "Europe/Berlin")


def test_the_zone_a_person_chose_comes_before_their_browsers(done_run, admin_client, admin_user):
    Preference.objects.create(user=admin_user, time_zone="America/New_York")
    admin_client.cookies["brick_tz"] = "Asia/Seoul"
    assert started_at_on(admin_client, done_run) == in_zone(done_run, "America/New_York")


def test_the_help_and_health_texts_name_steps_by_the_numbers_the_plans_show(twin, admin_client):
    plan_a = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"}).content.decode()
    steps_a = re.findall(r"<li[^>]*>\s*<strong>([^<]+)</strong>", plan_a.split('class="plan-steps"', 1)[1])
    status_patch = next(i for i, t in enumerate(steps_a) if t.startswith("Remove the stale"))
    help_page = admin_client.get(reverse("help")).content.decode()
    assert f"step {status_patch} of A/B" in help_page  # what Fix of a stale resource does
    numbers = set(re.findall(r"step (\d+) of (?:procedure )?A/B", help_page))
    assert numbers == {str(status_patch)}, numbers
