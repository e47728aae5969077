"""Each reader's zone and language: the browser's time zone applies however the browser wrote
its cookie, the settings page says which zone is in effect, notifications go in the language
the reader uses the console in unless they chose another, and what the product writes (a
quota change's reason, Showback's columns) reads in Korean to a Korean reader."""

import pytest
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _

from brickadmin import notify
from brickadmin.accounts.models import Notification, Preference
from brickadmin.wording import said

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("written", ["Asia/Seoul", "Asia%2FSeoul"])
def test_the_browsers_zone_applies_however_its_cookie_is_written(alice_client, written):
    alice_client.cookies["brick_tz"] = written
    body = alice_client.get(reverse("profile")).content.decode()
    assert 'data-testid="zone-name">Asia/Seoul<' in body
    assert "KST" in body and "your browser&#x27;s time zone" in body


def test_without_a_cookie_the_settings_page_says_the_browsers_zone_comes_next(alice_client):
    body = alice_client.get(reverse("profile")).content.decode()
    assert 'data-testid="zone-name">UTC<' in body and "until your browser reports its own" in body


def test_a_chosen_zone_wins_over_the_browsers(alice_client, alice):
    Preference.objects.create(user=alice, time_zone="America/New_York")
    alice_client.cookies["brick_tz"] = "Asia%2FSeoul"
    body = alice_client.get(reverse("profile")).content.decode()
    assert 'data-testid="zone-name">America/New_York<' in body and "the zone you chose" in body


def settings_title():
    return (_("Personal settings"), "")


def test_a_korean_reader_is_notified_in_korean_without_choosing_it(alice_client, alice):
    alice_client.cookies["django_language"] = "ko"
    assert alice_client.get(reverse("profile")).status_code == 200
    assert Preference.objects.get(user=alice).ui_language == "ko"
    notify.notify(alice, "test", settings_title)
    assert Notification.objects.get(recipient=alice).subject == "개인 설정"


def test_a_chosen_notification_language_wins_over_the_consoles(alice_client, alice):
    Preference.objects.create(user=alice, language="en")
    alice_client.cookies["django_language"] = "ko"
    alice_client.get(reverse("profile"))
    notify.notify(alice, "test", settings_title)
    assert Notification.objects.get(recipient=alice).subject == "Personal settings"


def test_an_english_reader_costs_no_write(alice_client, alice):
    alice_client.get(reverse("profile"))
    assert not Preference.objects.filter(user=alice).exists()


def test_the_products_own_quota_reason_reads_in_the_readers_language():
    from workspaces.templatetags.workspaces_tags import quota_reason

    reason = said("reason.released", who="bob", admin="root")
    params = {"reason": "Released by the owner bob, asked by root", "reason_said": reason.as_record()}
    with translation.override("ko"):
        korean = quota_reason(params)
    assert "bob" in korean and "Released" not in korean
    assert quota_reason({"reason": "typed by a person"}) == "typed by a person"


def test_showback_columns_are_korean_to_a_korean_reader():
    from workspaces.showback_views import showback_table

    with translation.override("ko"):
        labels = [str(c.label) for c in showback_table(1.0).columns]
    assert "할당" in labels and not [w for w in labels if w.isascii() and w.isalpha() and w != "Workspace"]
