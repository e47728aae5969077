"""What a client or an identity provider can put in a request that is not a form field: the
session cookie, X-Forwarded-For, Last-Event-ID and the claims of an ID token. Each answers a
page that says what is wrong (or is left out), never a 500; on PostgreSQL a NUL or an
overlong value reaching a query was a 500."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from brickadmin.sso.models import ProviderIdentity
from gpus.run_stream import resume_after
from tests.sso.test_backend import id_token, key, provider, sign_in  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


# --- the session cookie ------------------------------------------------------------------


@pytest.mark.parametrize("cookie", ["abc\x00def", "\x00" * 40, "x" * 5000, "ünïcode-session", "a b;c"])
@pytest.mark.parametrize("page", ["/login/", "/"])
def test_a_session_cookie_no_session_could_have_is_a_fresh_session(cookie, page):
    client = Client(raise_request_exception=False)
    client.cookies[django_settings.SESSION_COOKIE_NAME] = cookie
    r = client.get(page)
    assert r.status_code in (200, 302)  # the sign-in page, or the redirect to it
    if page == "/":
        assert r["Location"].startswith("/login/")


def test_a_valid_session_still_signs_in(alice):
    client = Client()
    client.force_login(alice)
    assert client.get(reverse("dashboard")).status_code == 200


# --- X-Forwarded-For on the sign-in page ---------------------------------------------------


@pytest.mark.parametrize("forwarded", ["not-an-ip", "203.0.113.7:51234x", "\x00", "1.2.3.4.5", "x" * 300])
def test_a_forwarded_address_that_is_no_address_is_a_400(settings, alice, forwarded):
    settings.BRICK_TRUSTED_PROXY_COUNT = 1
    client = Client(REMOTE_ADDR="10.1.0.1", HTTP_X_FORWARDED_FOR=forwarded, raise_request_exception=False)
    r = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert r.status_code == 400
    assert "X-Forwarded-For" in r.content.decode()


@pytest.mark.parametrize(
    "forwarded,address",
    [("203.0.113.7:51234", "203.0.113.7"), ("[2001:db8::7]:443", "2001:db8::7"), (" 2001:db8::8 ", "2001:db8::8")],
)
def test_a_proxy_that_writes_the_port_is_read_as_the_address(settings, alice, forwarded, address):
    from axes.models import AccessFailureLog

    settings.BRICK_TRUSTED_PROXY_COUNT = 1
    client = Client(REMOTE_ADDR="10.1.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    r = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert r.status_code == 200
    assert AccessFailureLog.objects.get().ip_address == address


# --- Last-Event-ID -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["9" * 4301, "1" * 19, "9" * 100_000])
def test_an_overlong_last_event_id_starts_the_stream_at_the_beginning(value):
    assert resume_after(value, None) == 0
    assert resume_after(None, value) == 0


def test_an_overlong_last_event_id_header_is_a_400(admin_client):
    r = admin_client.get("/", HTTP_LAST_EVENT_ID="9" * 5000)
    assert r.status_code == 400 and "Last-Event-ID" in r.content.decode()


# --- the claims of an ID token -----------------------------------------------------------------

User = get_user_model()


@pytest.mark.parametrize("sub", ["sub\x00ada", "s" * 256, "sub\nada", ""])
def test_a_subject_with_a_nul_a_line_break_or_over_255_characters_signs_nobody_in(provider, key, monkeypatch, sub):  # noqa: F811
    assert sign_in(monkeypatch, id_token(key, sub=sub)) is None
    assert not User.objects.exists() and not ProviderIdentity.objects.exists()


@pytest.mark.parametrize(
    "email", ["ada@example.org\x00", "ada@example.org\r\nBcc: all@example.org", "a" * 300 + "@example.org", "no-at"]
)
def test_an_email_claim_that_is_no_single_address_is_not_stored(provider, key, monkeypatch, email):  # noqa: F811
    user = sign_in(monkeypatch, id_token(key, email=email))
    assert user is not None and user.username == "ada"
    assert User.objects.get(pk=user.pk).email == ""
    # a later valid address is taken
    again = sign_in(monkeypatch, id_token(key, email="ada@example.org"))
    assert User.objects.get(pk=again.pk).email == "ada@example.org"


def test_a_token_with_thousands_of_groups_creates_at_most_the_cap(provider, key, monkeypatch, settings):  # noqa: F811
    from tests.sso.conftest import ADMIN_GROUP

    groups = [f"team-{i}" for i in range(5000)] + [ADMIN_GROUP]
    user = sign_in(monkeypatch, id_token(key, groups=groups))
    assert user is not None
    assert Group.objects.count() <= settings.BRICK_OIDC_GROUPS_MAX
    names = set(user.groups.values_list("name", flat=True))
    assert len(names) == settings.BRICK_OIDC_GROUPS_MAX and ADMIN_GROUP in names  # the admin group first
    assert user.is_staff


def test_groups_within_the_cap_are_all_taken(provider, key, monkeypatch, settings):  # noqa: F811
    settings.BRICK_OIDC_GROUPS_MAX = 3
    user = sign_in(monkeypatch, id_token(key, groups=["a", "b", "c"]))
    assert set(user.groups.values_list("name", flat=True)) == {"a", "b", "c"}
