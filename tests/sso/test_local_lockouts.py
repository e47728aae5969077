"""The local form's lockouts never reach single sign-on: failed local passwords typed under a
provider user's name lock nothing the provider signs in."""

import pytest

from brickadmin.sso.backend import ProviderBackend
from tests.sso.test_backend import id_token, key, provider  # noqa: F401  (fixtures)


def provider_sign_in(client, key, monkeypatch, address):  # noqa: F811
    client.get("/oidc/authenticate/", REMOTE_ADDR=address)
    state, stored = next(iter(client.session["oidc_states"].items()))
    token = id_token(key, nonce=stored["nonce"])
    monkeypatch.setattr(ProviderBackend, "get_token", lambda self, payload: {"id_token": token, "access_token": "at"})
    return client.get(f"/oidc/callback/?code=c&state={state}", REMOTE_ADDR=address)


@pytest.mark.django_db
def test_local_password_failures_never_lock_a_provider_user_out(
    client,
    provider,  # noqa: F811  (a fixture imported above)
    key,  # noqa: F811  (a fixture imported above)
    monkeypatch,  # noqa: F811
    settings,
):
    assert provider_sign_in(client, key, monkeypatch, "192.0.2.50")["Location"] == "/"
    client.post("/logout/")
    for _ in range(settings.AXES_FAILURE_LIMIT * 3):  # someone types passwords for ada on the local form
        client.post("/login/", {"username": "ada", "password": "guess"}, REMOTE_ADDR="192.0.2.50")
    response = provider_sign_in(client, key, monkeypatch, "192.0.2.50")  # same address, same name
    assert response.status_code == 302 and response["Location"] == "/" and "_auth_user_id" in client.session
