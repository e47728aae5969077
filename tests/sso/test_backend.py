"""The single sign-on backend with a real RSA key pair and a provider whose documents are
served from memory: tampered and expired ID tokens are refused (and refused without a 500),
the identity is the provider's subject, groups and the admin role follow every sign-in,
local accounts are never taken over, discovery is cached, and the local form with its
django-axes lockout keeps working while single sign-on is on."""

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.exceptions import SuspiciousOperation
from django.test import RequestFactory

from brickadmin.sso import discovery
from brickadmin.sso.backend import ProviderBackend
from brickadmin.sso.models import ProviderIdentity
from tests.sso.conftest import ADMIN_GROUP, CLIENT_ID, enable_sso
from workspaces.approvals import limits_for

ISSUER = "https://idp.example.test/realms/brick"
KID = "key-1"


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key, kid=KID):
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


@pytest.fixture(scope="module")
def key():
    return new_key()


@pytest.fixture
def provider(settings, monkeypatch, key):
    """Single sign-on on, the provider's discovery document and JWKS served from memory;
    `provider.fetched` lists every URL read."""
    enable_sso(settings, ISSUER)
    docs = {
        f"{ISSUER}/.well-known/openid-configuration": {
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/auth",
            "token_endpoint": f"{ISSUER}/token",
            "jwks_uri": f"{ISSUER}/jwks",
            "end_session_endpoint": f"{ISSUER}/logout",
        },
        f"{ISSUER}/jwks": {"keys": [public_jwk(key)]},
    }

    class Served:
        fetched = []

    def fetch_json(url):
        Served.fetched.append(url)
        if url not in docs:
            raise discovery.ProviderUnavailable(url)
        return docs[url]

    Served.docs = docs
    discovery.forget()
    monkeypatch.setattr(discovery, "fetch_json", fetch_json)
    yield Served
    discovery.forget()


def id_token(key, *, kid=KID, nonce="n-1", **claims):
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "aud": CLIENT_ID,
        "sub": "sub-ada",
        "iat": now,
        "exp": now + 300,
        "nonce": nonce,
        "preferred_username": "ada",
        "email": "ada@example.org",
        "groups": [ADMIN_GROUP, "ml-team"],
    }
    payload.update(claims)
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, key, algorithm="RS256", headers={"kid": kid})


def callback_request(path="/oidc/callback/?code=c-1&state=s-1"):
    request = RequestFactory().get(path)
    SessionMiddleware(lambda r: None).process_request(request)
    return request


def sign_in(monkeypatch, token, *, nonce="n-1"):
    """The whole authenticate() of a callback, the token endpoint answering `token`."""
    backend = ProviderBackend()
    monkeypatch.setattr(backend, "get_token", lambda payload: {"id_token": token, "access_token": "at"})
    return backend.authenticate(callback_request(), nonce=nonce, code_verifier="v" * 64)


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


# --- the ID token -------------------------------------------------------------------------


def test_a_valid_token_is_accepted(provider, key):
    claims = ProviderBackend().verify_token(id_token(key), nonce="n-1")
    assert claims["sub"] == "sub-ada"


def test_a_token_whose_signature_was_changed_is_refused(provider, key):
    header, payload, signature = id_token(key).split(".")
    flipped = "A" if signature[10] != "A" else "B"
    with pytest.raises(SuspiciousOperation):
        ProviderBackend().verify_token(f"{header}.{payload}.{signature[:10]}{flipped}{signature[11:]}", nonce="n-1")


def test_a_token_whose_claims_were_changed_is_refused(provider, key):
    """Signed for a user without the admin group, then edited to add it."""
    header, _payload, signature = id_token(key, groups=["ml-team"]).split(".")
    forged = b64(
        {**jwt.decode(id_token(key, groups=["ml-team"]), options={"verify_signature": False}), "groups": [ADMIN_GROUP]}
    )
    with pytest.raises(SuspiciousOperation):
        ProviderBackend().verify_token(f"{header}.{forged}.{signature}", nonce="n-1")


def test_a_token_signed_by_another_key_under_the_providers_key_id_is_refused(provider):
    with pytest.raises(SuspiciousOperation):
        ProviderBackend().verify_token(id_token(new_key()), nonce="n-1")


def test_an_expired_token_is_refused(provider, key, settings):
    past = int(time.time()) - 3600
    with pytest.raises(SuspiciousOperation, match="expired"):
        ProviderBackend().verify_token(id_token(key, iat=past - 300, exp=past), nonce="n-1")
    # within the allowed clock skew it still counts
    just = int(time.time()) - settings.BRICK_OIDC_CLOCK_SKEW_SECONDS // 2
    assert ProviderBackend().verify_token(id_token(key, exp=just), nonce="n-1")


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "another-client"},
        {"iss": "https://evil.example.test"},
        {"exp": None},
        {"sub": None},
        {"aud": [CLIENT_ID, "another-client"]},  # several audiences and no azp
    ],
)
def test_tokens_for_another_client_issuer_or_without_required_claims_are_refused(provider, key, claims):
    with pytest.raises(SuspiciousOperation):
        ProviderBackend().verify_token(id_token(key, **claims), nonce="n-1")


def test_a_wrong_nonce_is_refused(provider, key):
    with pytest.raises(SuspiciousOperation):
        ProviderBackend().verify_token(id_token(key, nonce="replayed"), nonce="n-1")


def test_unsigned_and_symmetric_tokens_are_refused(provider, key):
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "sub-ada", "iat": now, "exp": now + 60, "nonce": "n-1"}
    unsigned = f"{b64({'alg': 'none', 'kid': KID})}.{b64(claims)}."
    # HS256 keyed with the provider's public key, the classic algorithm confusion
    public_pem = key.public_key().public_bytes(
        encoding=serialization.Encoding.PEM, format=serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = b64({"alg": "HS256", "kid": KID, "typ": "JWT"})
    body = f"{header}.{b64(claims)}"
    mac = base64.urlsafe_b64encode(hmac.new(public_pem, body.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    for token in (unsigned, f"{body}.{mac}"):
        with pytest.raises(SuspiciousOperation):
            ProviderBackend().verify_token(token, nonce="n-1")


@pytest.mark.django_db
def test_refused_tokens_sign_nobody_in_and_create_nobody(provider, key, monkeypatch):
    past = int(time.time()) - 3600
    header, payload, signature = id_token(key).split(".")
    for token in (f"{header}.{payload}.{signature[:-4]}AAAA", id_token(key, iat=past - 60, exp=past)):
        assert sign_in(monkeypatch, token) is None  # None, not an exception: the login page says so
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_a_rotated_key_is_fetched_again(provider, key, monkeypatch):
    sign_in(monkeypatch, id_token(key))  # the first key is cached now
    new = new_key()
    provider.docs[f"{ISSUER}/jwks"] = {"keys": [public_jwk(new, kid="key-2")]}
    user = sign_in(monkeypatch, id_token(new, kid="key-2"))
    assert user is not None and user.username == "ada"


# --- the user -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_user_is_the_providers_subject_with_its_groups_and_role(provider, key, monkeypatch):
    user = sign_in(monkeypatch, id_token(key))
    assert user.username == "ada" and user.email == "ada@example.org"
    assert ProviderIdentity.objects.get(user=user).subject == "sub-ada"
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert set(user.groups.values_list("name", flat=True)) == {ADMIN_GROUP, "ml-team"}

    # out of the admin group at the provider: the next sign-in takes the role away
    again = sign_in(monkeypatch, id_token(key, groups=["ml-team"]))
    assert again.pk == user.pk and not again.is_staff
    assert list(again.groups.values_list("name", flat=True)) == ["ml-team"]
    # renamed at the provider: the same account (the subject is the identity), renamed
    renamed = sign_in(monkeypatch, id_token(key, preferred_username="ada.l"))
    assert renamed.pk == user.pk and renamed.username == "ada.l"
    # no groups claim at all: no groups, no admin role
    bare = sign_in(monkeypatch, id_token(key, groups=None))
    assert not bare.is_staff and not bare.groups.exists()


@pytest.mark.django_db
def test_the_username_falls_back_to_sub_and_never_comes_from_the_email(provider, key, monkeypatch):
    user = sign_in(monkeypatch, id_token(key, preferred_username=None, sub="f3a9-77"))
    assert user.username == "f3a9-77"
    other = sign_in(monkeypatch, id_token(key, preferred_username="bad name!", sub="c0de", email="ada@example.org"))
    assert other.username == "c0de" and other.pk != user.pk  # same email, another subject: another user


@pytest.mark.django_db
def test_a_local_account_is_never_taken_over_by_a_provider_user_of_its_name(provider, key, monkeypatch):
    local = get_user_model().objects.create_user("root", password="break-glass-pw", is_staff=True)
    assert sign_in(monkeypatch, id_token(key, preferred_username="ROOT", sub="sub-x")) is None
    local.refresh_from_db()
    assert local.check_password("break-glass-pw") and not ProviderIdentity.objects.exists()


@pytest.mark.django_db
def test_the_workspace_maximum_of_a_provider_group_applies(provider, key, monkeypatch):
    from workspaces.models import ResourceLimit

    ResourceLimit.objects.create(
        group=Group.objects.create(name="ml-team"), gpu=6, cpu=8, memory_gib=32, storage_gib=100
    )
    user = sign_in(monkeypatch, id_token(key, groups=["ml-team"]))
    assert limits_for(user)["gpu"] == 6
    user = sign_in(monkeypatch, id_token(key, groups=[]))  # left the group: the defaults again
    assert limits_for(user)["gpu"] == 4


def test_a_nested_groups_claim(provider, key, monkeypatch, settings):
    from brickadmin.sso.backend import groups_from

    settings.BRICK_OIDC_GROUPS_CLAIM = "realm_access.roles"
    assert groups_from({"realm_access": {"roles": ["a", "b", "a", 3, ""]}}) == ["a", "b"]
    assert groups_from({"realm_access": "x"}) == []


# --- discovery, the pages, and the local form ---------------------------------------------


def test_discovery_is_cached_and_must_name_the_issuer(provider):
    discovery.metadata()
    discovery.metadata()
    assert provider.fetched.count(f"{ISSUER}/.well-known/openid-configuration") == 1
    discovery.forget()
    provider.docs[f"{ISSUER}/.well-known/openid-configuration"]["issuer"] = "https://other.example.test"
    with pytest.raises(discovery.ProviderUnavailable, match="issuer"):
        discovery.metadata()


@pytest.mark.django_db
def test_the_login_page_offers_the_provider_and_the_local_form(client, provider):
    page = client.get("/login/?next=/workspaces/").content.decode()
    assert "Sign in with Test IdP" in page and 'href="/oidc/authenticate/?next=/workspaces/"' in page
    assert 'name="password"' in page
    response = client.get("/oidc/authenticate/?next=/workspaces/")
    assert response.status_code == 302 and response["Location"].startswith(f"{ISSUER}/auth?")
    query = response["Location"]
    for param in ("code_challenge_method=S256", "code_challenge=", "nonce=", "state=", f"client_id={CLIENT_ID}"):
        assert param in query
    assert provider.fetched == [f"{ISSUER}/.well-known/openid-configuration"]  # no JWKS yet


@pytest.mark.django_db
def test_a_callback_with_an_unknown_state_is_refused(client, provider):
    client.get("/oidc/authenticate/")
    assert client.get("/oidc/callback/?code=c&state=forged").status_code == 400


@pytest.mark.django_db
def test_without_an_issuer_there_is_no_single_sign_on(client, settings):
    settings.BRICK_OIDC_ENABLED = False
    page = client.get("/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=c&state=s").status_code == 404


@pytest.mark.django_db
def test_a_provider_that_is_down_sends_back_to_the_login_page(client, provider):
    provider.docs.clear()
    response = client.get("/oidc/authenticate/", follow=True)
    assert response.redirect_chain[-1][0].startswith("/login/")
    assert "cannot be reached" in response.content.decode()


@pytest.mark.django_db
def test_local_accounts_sign_in_without_the_provider_and_axes_still_locks_them(client, provider, settings):
    provider.docs.clear()  # the provider is down: the break-glass account must not care
    get_user_model().objects.create_user("root", password="break-glass-pw", is_staff=True)
    assert client.post("/login/", {"username": "root", "password": "break-glass-pw"}).status_code == 302
    assert provider.fetched == []  # a local sign-in never asks the provider anything
    client.post("/logout/")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "root", "password": "wrong"})
    locked = client.post("/login/", {"username": "root", "password": "break-glass-pw"})
    assert locked.status_code == 429 and "Sign-in locked" in locked.content.decode()


@pytest.mark.django_db
def test_logout_of_a_provider_user_ends_the_provider_session(client, provider, key, monkeypatch):
    user = sign_in(monkeypatch, id_token(key))
    client.force_login(user, backend="brickadmin.sso.backend.ProviderBackend")
    session = client.session
    session["oidc_id_token"] = "the-id-token"
    session.save()
    response = client.post("/logout/")
    location = response["Location"]
    assert location.startswith(f"{ISSUER}/logout?") and "id_token_hint=the-id-token" in location
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in location
    assert "_auth_user_id" not in client.session
    # a local user's logout stays local
    client.force_login(get_user_model().objects.create_user("root", password="pw-root-123"))
    assert client.post("/logout/")["Location"] == "/login/"


@pytest.mark.django_db
def test_the_callback_refuses_a_tampered_token_with_the_login_page_not_an_error(client, provider, key, monkeypatch):
    """Through the real views: the state and nonce the login step stored, a code, and a
    token endpoint that answers a token whose signature was changed."""
    client.get("/oidc/authenticate/")
    state, stored = next(iter(client.session["oidc_states"].items()))
    header, payload, signature = id_token(key, nonce=stored["nonce"]).split(".")
    tampered = f"{header}.{payload}.{signature[:-6]}AAAAAA"
    monkeypatch.setattr(
        ProviderBackend, "get_token", lambda self, payload: {"id_token": tampered, "access_token": "at"}
    )
    response = client.get(f"/oidc/callback/?code=c-1&state={state}", follow=True)
    assert response.redirect_chain[-1][0].startswith("/login/")
    assert "Single sign-on did not sign you in" in response.content.decode()
    assert "_auth_user_id" not in client.session and not get_user_model().objects.exists()
    # the same state cannot be played again
    assert client.get(f"/oidc/callback/?code=c-1&state={state}").status_code == 400


@pytest.mark.django_db
def test_the_callback_signs_in_with_a_valid_token_for_a_working_day_at_most(
    client, provider, key, monkeypatch, settings
):
    client.get("/oidc/authenticate/?next=/workspaces/")
    state, stored = next(iter(client.session["oidc_states"].items()))
    assert len(stored["code_verifier"]) >= 43  # PKCE
    token = id_token(key, nonce=stored["nonce"])
    sent = {}
    monkeypatch.setattr(
        ProviderBackend,
        "get_token",
        lambda self, payload: sent.update(payload) or {"id_token": token, "access_token": "at"},
    )
    response = client.get(f"/oidc/callback/?code=c-1&state={state}")
    assert response.status_code == 302 and response["Location"] == "/workspaces/"
    assert (
        sent["code_verifier"] == stored["code_verifier"] and sent["redirect_uri"] == "http://testserver/oidc/callback/"
    )
    assert client.session["_auth_user_backend"] == "brickadmin.sso.backend.ProviderBackend"
    assert client.session.get_expiry_age() == settings.BRICK_OIDC_SESSION_SECONDS
    assert client.session["oidc_id_token"] == token  # the logout's id_token_hint
    assert client.get("/workspaces/settings/").status_code == 200  # ada is in the admin group


@pytest.mark.django_db
def test_failed_provider_sign_ins_lock_nobody_out(client, provider, key, monkeypatch, settings):
    """A provider sign-in carries no username: were its failures counted by django-axes, they
    would all land on one empty username and anyone could lock single sign-on for everyone.
    Passwords are checked (and locked) at the provider; the console's lockouts are the local form's."""
    monkeypatch.setattr(
        ProviderBackend, "get_token", lambda self, payload: {"id_token": "garbage", "access_token": "at"}
    )
    for i in range(settings.AXES_FAILURE_LIMIT + 2):
        client.get("/oidc/authenticate/", REMOTE_ADDR=f"192.0.2.{i + 1}")
        state = next(iter(client.session["oidc_states"]))
        response = client.get(f"/oidc/callback/?code=c&state={state}", REMOTE_ADDR=f"192.0.2.{i + 1}")
        assert response.status_code == 302 and response["Location"] == "/login/"
    from axes.models import AccessAttempt

    assert not AccessAttempt.objects.exists()
    client.get("/oidc/authenticate/", REMOTE_ADDR="192.0.2.200")
    state, stored = next(iter(client.session["oidc_states"].items()))
    token = id_token(key, nonce=stored["nonce"])
    monkeypatch.setattr(ProviderBackend, "get_token", lambda self, payload: {"id_token": token, "access_token": "at"})
    response = client.get(f"/oidc/callback/?code=c&state={state}", REMOTE_ADDR="192.0.2.200")
    assert response.status_code == 302 and response["Location"] == "/" and "_auth_user_id" in client.session
