"""Brute force on the sign-in page: repeated failures lock out the username
and, separately, the address, for a cool-off; the lockout is said plainly, recorded, and
shown to admins."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def attempt(address, username, password):
    client = Client(REMOTE_ADDR=address)
    resp = client.post(reverse("login"), {"username": username, "password": password})
    return client, resp


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_thirty_wrong_passwords_then_the_right_one_is_refused(alice, bob, admin_user):
    for _ in range(30):
        _c, r = attempt("10.0.0.1", "alice", "wrong-password")
        assert r.status_code in (200, 429)
    client, r = attempt("10.0.0.1", "alice", "pw-alice-123")
    assert r.status_code == 429 and not signed_in(client)
    page = r.content.decode()
    assert "Sign-in locked" in page and "locked for 15 minutes after the last attempt" in page
    # per user: the right password from another address is refused too
    client, r = attempt("10.0.0.2", "alice", "pw-alice-123")
    assert r.status_code == 429 and not signed_in(client)
    # per address: another user from the same address is refused
    client, r = attempt("10.0.0.1", "bob", "pw-bob-123")
    assert r.status_code == 429 and not signed_in(client)
    # another user from another address is not affected
    client, r = attempt("10.0.0.3", "bob", "pw-bob-123")
    assert r.status_code == 302 and signed_in(client)


def test_lockout_follows_the_settings(settings, alice):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        attempt("10.0.0.9", "alice", "nope")
    client, r = attempt("10.0.0.9", "alice", "pw-alice-123")
    assert r.status_code == 302 and signed_in(client)  # two failures: still allowed
    for _ in range(3):
        attempt("10.0.0.9", "alice", "nope")
    client, r = attempt("10.0.0.9", "alice", "pw-alice-123")
    assert r.status_code == 429 and not signed_in(client)


def test_failures_are_recorded_and_admins_see_the_lockouts(alice, admin_user):
    from axes.models import AccessAttempt, AccessFailureLog

    for _ in range(6):
        attempt("10.0.0.4", "alice", "wrong")
    assert AccessFailureLog.objects.filter(username="alice", ip_address="10.0.0.4").count() == 6
    assert AccessFailureLog.objects.filter(locked_out=True).exists()
    assert AccessAttempt.objects.filter(username="alice").exists()
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get(reverse("lockouts"))
    assert page.status_code == 200
    html = page.content.decode()
    locked_users = html.split('data-testid="locked-usernames"')[1].split("</section>")[0]
    locked_addresses = html.split('data-testid="locked-addresses"')[1].split("</section>")[0]
    assert "alice" in locked_users and "10.0.0.4" in locked_addresses
    assert reverse("lockouts") in admin.get(reverse("dashboard")).content.decode()  # in the admin nav
    user = Client()
    user.force_login(alice)
    assert user.get(reverse("lockouts")).status_code == 403


def test_the_address_behind_trusted_proxies(settings):
    from brickadmin.lockout import client_ip

    request = RequestFactory().post("/login/", REMOTE_ADDR="10.1.0.1",
                                    HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7")
    assert client_ip(request) == "10.1.0.1"  # no proxy trusted: the header is ignored
    settings.BRICK_TRUSTED_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.7"  # what the one proxy saw, not what the client claims


def test_check_deploy_still_passes():
    env = dict(os.environ, DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="brick.example.org",
               DJANGO_SECRET_KEY="check-deploy-only-not-a-real-key-0123456789abcdefghijklmnop")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_username_longer_than_the_field_is_a_form_error_not_a_500(db):
    """Found by the Hypothesis test on PostgreSQL: a 1,000-character username reached
    authenticate() and django-axes' varchar(255) insert failed (DataError, 500)."""
    from axes.models import AccessAttempt

    client, r = attempt("10.0.0.5", "[" * 1000, "x")
    assert r.status_code == 200 and 'id="err-username"' in r.content.decode()
    assert not AccessAttempt.objects.exists() and not signed_in(client)
