"""The personal settings page: "Also by email" is offered only to an account with an email
address. Without one the box is off and disabled, the hint says to add an address first, and
whatever is posted (a tampered form included) saves it off."""

import re

import pytest
from django.urls import reverse

from brickadmin.accounts.models import Delivery, Preference
from brickadmin.notify import notify

from .conftest import text

pytestmark = pytest.mark.django_db

NO_ADDRESS = "Your account has no email address: add one first"


def email_box(html: str) -> str:
    (box,) = re.findall(r'<input type="checkbox" name="email_notifications"[^>]*>', html)
    return box


def test_without_an_email_address_the_box_is_off_disabled_and_says_to_add_one(alice, login):
    html = login(alice).get(reverse("profile")).content.decode()
    box = email_box(html)
    assert "disabled" in box and "checked" not in box
    assert 'aria-describedby="help-email_notifications"' in box
    assert NO_ADDRESS in text(html)


def test_posting_email_on_without_an_address_saves_it_off_and_no_email_is_queued(alice, login):
    page = login(alice).post(
        reverse("profile"), {"time_zone": "", "language": "", "email_notifications": "on", "webhook_url": ""}
    )
    assert page.status_code == 302
    assert Preference.objects.get(user=alice).email_notifications is False
    notify(alice, "test", lambda: ("Subject", "Body"))
    assert not Delivery.objects.exists()


def test_a_stored_choice_made_before_the_address_went_is_saved_off_at_the_next_save(alice, login):
    Preference.objects.create(user=alice, email_notifications=True, language="ko")
    client = login(alice)
    assert "checked" not in email_box(client.get(reverse("profile")).content.decode())
    client.post(reverse("profile"), {"time_zone": "", "language": "ko", "email_notifications": "on"})
    assert Preference.objects.get(user=alice).email_notifications is False


def test_with_an_email_address_the_box_is_offered_and_keeps_what_is_chosen(alice, login):
    alice.email = "alice@example.test"
    alice.save()
    client = login(alice)
    html = client.get(reverse("profile")).content.decode()
    box = email_box(html)
    assert "disabled" not in box and "checked" in box  # on by default
    assert NO_ADDRESS not in text(html)
    client.post(reverse("profile"), {"time_zone": "", "language": "", "webhook_url": ""})  # unticked
    assert Preference.objects.get(user=alice).email_notifications is False
    assert "checked" not in email_box(client.get(reverse("profile")).content.decode())
    client.post(reverse("profile"), {"time_zone": "", "language": "", "email_notifications": "on"})
    assert Preference.objects.get(user=alice).email_notifications is True


def test_the_hint_is_in_korean_for_a_korean_reader(alice, login):
    client = login(alice)
    client.cookies["django_language"] = "ko"
    html = text(client.get(reverse("profile"), HTTP_ACCEPT_LANGUAGE="ko").content)
    assert NO_ADDRESS not in html
    assert "계정에 이메일 주소가 없습니다" in html
