"""Brute force on the sign-in page: repeated failures lock out a username from the address
they came from, for a cool-off that further failures do not extend; the same username signs
in from elsewhere, so no one can lock the admin out of the console. The lockout is said
plainly, recorded, shown to admins and undone from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
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


def test_thirty_wrong_passwords_lock_the_username_from_that_address_only(alice, bob, admin_user):
    for _ in range(30):
        _c, r = attempt("10.0.0.1", "alice", "wrong-password")
        assert r.status_code in (200, 429)
    client, r = attempt("10.0.0.1", "alice", "pw-alice-123")
    assert r.status_code == 429 and not signed_in(client)
    page = r.content.decode()
    assert "Sign-in locked" in page and "locked here for 15 minutes after the failure that locked it" in page
    # the same user with the right password from another address signs in
    client, r = attempt("10.0.0.2", "alice", "pw-alice-123")
    assert r.status_code == 302 and signed_in(client)
    # another user behind the same address (a shared proxy or NAT) signs in too
    client, r = attempt("10.0.0.1", "bob", "pw-bob-123")
    assert r.status_code == 302 and signed_in(client)


def test_the_admin_stays_reachable_while_an_attacker_keeps_failing(admin_user):
    for _ in range(40):
        attempt("198.51.100.66", "root", "guess")
        client, r = attempt("10.0.0.7", "root", "pw-root-123")  # the admin, from their own desk
        assert r.status_code == 302 and signed_in(client)
    client, r = attempt("198.51.100.66", "root", "pw-root-123")
    assert r.status_code == 429 and not signed_in(client)  # the attacker's address stays locked


@contextmanager
def at(moment):
    """Every clock read by Django and django-axes says `moment`."""
    with ExitStack() as stack:
        for clock in ("django.utils.timezone.now", "axes.handlers.proxy.now", "axes.attempts.now"):
            stack.enter_context(mock.patch(clock, return_value=moment))
        yield


def test_failures_during_the_lockout_do_not_extend_it(alice, settings):
    from django.utils import timezone

    start = timezone.now()
    with at(start):
        for _ in range(settings.AXES_FAILURE_LIMIT):
            attempt("10.0.0.8", "alice", "wrong")
    with at(start + timedelta(minutes=14)):
        for _ in range(10):  # the attacker keeps trying while it is locked
            _c, r = attempt("10.0.0.8", "alice", "wrong")
            assert r.status_code == 429
        client, r = attempt("10.0.0.8", "alice", "pw-alice-123")
        assert r.status_code == 429 and not signed_in(client)
    with at(start + settings.AXES_COOLOFF_TIME + timedelta(seconds=1)):
        client, r = attempt("10.0.0.8", "alice", "pw-alice-123")  # 15 minutes after the locking failure
        assert r.status_code == 302 and signed_in(client)


def test_the_break_glass_account_is_unlocked_from_the_command_line(admin_user, capsys):
    for address in ("10.0.0.11", "10.0.0.12"):
        for _ in range(6):
            attempt(address, "root", "wrong")
    assert attempt("10.0.0.11", "root", "pw-root-123")[1].status_code == 429
    call_command("unlock_sign_in", "root", "--address", "10.0.0.11")
    assert "root: unlocked from 10.0.0.11." in capsys.readouterr().out
    assert attempt("10.0.0.12", "root", "pw-root-123")[1].status_code == 429  # only the address given
    client, r = attempt("10.0.0.11", "root", "pw-root-123")
    assert r.status_code == 302 and signed_in(client)
    call_command("unlock_sign_in", "root")
    assert "root: unlocked from 10.0.0.12." in capsys.readouterr().out
    assert attempt("10.0.0.12", "root", "pw-root-123")[1].status_code == 302
    call_command("unlock_sign_in", "nobody")
    assert "nothing to unlock" in capsys.readouterr().out


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
    locked = html.split('data-testid="locked-sign-ins"')[1].split("</section>")[0]
    assert "alice" in locked and "10.0.0.4" in locked
    export = admin.get(reverse("lockouts"), {"format": "csv"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    lines = b"".join(export.streaming_content).decode().splitlines()
    assert lines[0] == "username,address,failures,until" and lines[1].startswith("alice,10.0.0.4,5,")
    # the row's Unlock button: alice signs in from that address again
    r = admin.post(reverse("lockout_unlock"), {"username": "alice", "address": "10.0.0.4"}, follow=True)
    assert "alice can sign in from 10.0.0.4 again." in r.content.decode()
    client, r = attempt("10.0.0.4", "alice", "pw-alice-123")
    assert r.status_code == 302 and signed_in(client)
    assert reverse("lockouts") in admin.get(reverse("dashboard")).content.decode()  # in the admin nav
    user = Client()
    user.force_login(alice)
    assert user.get(reverse("lockouts")).status_code == 403


def test_the_address_behind_trusted_proxies(settings):
    from brickadmin.lockout import client_ip

    request = RequestFactory().post("/login/", REMOTE_ADDR="10.1.0.1", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.7")
    assert client_ip(request) == "10.1.0.1"  # no proxy trusted: the header is ignored
    settings.BRICK_TRUSTED_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.7"  # what the one proxy saw, not what the client claims


def test_check_deploy_still_passes():
    env = dict(
        os.environ,
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="brick.example.org",
        DJANGO_SECRET_KEY="check-deploy-only-not-a-real-key-0123456789abcdefghijklmnop",
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_username_longer_than_the_field_is_a_form_error_not_a_500(db):
    """Found by the Hypothesis test on PostgreSQL: a 1,000-character username reached
    authenticate() and django-axes' varchar(255) insert failed (DataError, 500)."""
    from axes.models import AccessAttempt

    client, r = attempt("10.0.0.5", "[" * 1000, "x")
    assert r.status_code == 200 and 'id="err-username"' in r.content.decode()
    assert not AccessAttempt.objects.exists() and not signed_in(client)


def test_behind_a_proxy_each_client_is_locked_alone_and_cannot_choose_its_address(settings, alice):
    settings.BRICK_TRUSTED_PROXY_COUNT = 1  # an ingress controller appends the address it saw

    def through_proxy(forwarded, password):
        client = Client(REMOTE_ADDR="10.1.0.1", HTTP_X_FORWARDED_FOR=forwarded)
        return client, client.post(reverse("login"), {"username": "alice", "password": password})

    for _ in range(settings.AXES_FAILURE_LIMIT):
        through_proxy("203.0.113.7", "wrong")
    # the same client writing another address in front of what the proxy appends: still locked
    client, r = through_proxy("198.51.100.1, 203.0.113.7", "pw-alice-123")
    assert r.status_code == 429 and not signed_in(client)
    # alice at another desk behind the same proxy signs in
    client, r = through_proxy("203.0.113.8", "pw-alice-123")
    assert r.status_code == 302 and signed_in(client)


# --- an account's budget across addresses ------------------------------------------------------


def test_eighty_guesses_from_twenty_addresses_lock_the_account_for_unknown_browsers(admin_user, settings, capsys):
    settings.BRICK_LOGIN_ACCOUNT_SLOW_AFTER = 1000  # the slowing is the next test's
    earlier, r = attempt("10.0.0.7", "root", "pw-root-123")  # the admin signed in with this browser before
    assert r.status_code == 302
    admins_browser = Client(REMOTE_ADDR="10.0.0.7")  # signed out; the browser keeps its device cookie
    admins_browser.cookies["brick_device"] = earlier.cookies["brick_device"].value
    for i in range(20):
        for _ in range(4):  # under the per-address limit of 5
            attempt(f"198.51.100.{i + 1}", "root", "guess")
    # the right password from a 21st address, a browser that never signed in: refused
    client, r = attempt("198.51.100.99", "root", "pw-root-123")
    assert r.status_code == 429 and not signed_in(client) and int(r["Retry-After"]) > 0
    assert "from several addresses" in r.content.decode()
    # the admin's own browser is not locked out by the attacker
    r = admins_browser.post(reverse("login"), {"username": "root", "password": "pw-root-123"})
    assert r.status_code == 302 and signed_in(admins_browser)
    # a browser holding another account's device cookie is still unknown for root
    other = Client(REMOTE_ADDR="198.51.100.98")
    other.cookies["brick_device"] = "forged"
    r = other.post(reverse("login"), {"username": "root", "password": "pw-root-123"})
    assert r.status_code == 429
    # the break-glass command unlocks the account
    call_command("unlock_sign_in", "root")
    client, r = attempt("198.51.100.99", "root", "pw-root-123")
    assert r.status_code == 302 and signed_in(client)


def test_past_the_slowing_point_each_attempt_waits_longer(alice, settings):
    from django.utils import timezone

    settings.BRICK_LOGIN_ACCOUNT_SLOW_AFTER = 3
    start = timezone.now()
    with at(start):
        for i in range(3):
            attempt(f"192.0.2.{i + 1}", "alice", "wrong")
        _c, r = attempt("192.0.2.10", "alice", "wrong")  # the 4th failure: 1 s after the 3rd at the earliest
    with at(start + timedelta(seconds=0.5)):
        client, r = attempt("192.0.2.11", "alice", "pw-alice-123")
        assert r.status_code == 429 and not signed_in(client) and r["Retry-After"] in ("1", "2")
    with at(start + timedelta(seconds=3)):
        client, r = attempt("192.0.2.11", "alice", "pw-alice-123")
        assert r.status_code == 302 and signed_in(client)


def test_refused_attempts_are_not_counted_and_the_lock_ages_out(alice, settings):
    from django.utils import timezone

    settings.BRICK_LOGIN_ACCOUNT_SLOW_AFTER = 1000
    settings.BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT = 6
    start = timezone.now()
    with at(start):
        for i in range(6):
            attempt(f"192.0.2.{i + 1}", "alice", "wrong")
    with at(start + timedelta(minutes=10)):
        for i in range(30):  # the attacker keeps going while it is locked: refused, not counted
            assert attempt(f"192.0.2.{i + 50}", "alice", "wrong")[1].status_code == 429
    with at(start + settings.AXES_COOLOFF_TIME + timedelta(seconds=1)):
        client, r = attempt("192.0.2.99", "alice", "pw-alice-123")
        assert r.status_code == 302 and signed_in(client)


def test_the_forwarded_address_is_read_only_from_the_configured_proxies(settings):
    from brickadmin.lockout import client_ip

    settings.BRICK_TRUSTED_PROXY_COUNT = 1
    settings.BRICK_TRUSTED_PROXIES = ["10.42.0.0/16"]
    through_ingress = RequestFactory().post("/login/", REMOTE_ADDR="10.42.3.4", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert client_ip(through_ingress) == "203.0.113.7"
    # another pod reaching the web pod directly, writing the header itself: its own address
    direct = RequestFactory().post("/login/", REMOTE_ADDR="10.99.0.5", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert client_ip(direct) == "10.99.0.5"
    loopback = RequestFactory().post("/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert client_ip(loopback) == "127.0.0.1"


def test_the_demo_server_believes_no_forwarded_header():
    demo = (ROOT / "bin" / "demo").read_text()
    assert "--no-proxy-headers" in demo.split("uvicorn brickadmin.asgi:application", 1)[1].split("&\n", 1)[0]
