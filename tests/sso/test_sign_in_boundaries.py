"""Where single sign-on ends and local sign-in begins, against the real provider on loopback
(tests/sso/conftest.py) driven over HTTP, and against the in-memory one of test_backend.py:
the admin group is compared exactly, a user of the provider never signs in with a local
password, an error callback ends a session only when it answers this browser's own login,
usernames that pass for another are refused, and a provider that is down is said to be."""

import re
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from brickadmin.sso.models import ProviderIdentity
from tests.sso.conftest import ADMIN_GROUP, USERS
from tests.sso.test_backend import id_token, key, provider, sign_in  # noqa: F401 (fixtures)

# What a group name can carry that a person does not see: spaces around it, a tab, a newline,
# a no-break space (U+00A0, drawn as a space), a zero-width space.
LOOK_ALIKE_ADMIN_GROUPS = [
    f" {ADMIN_GROUP} ",
    f"{ADMIN_GROUP}\t",
    f"{ADMIN_GROUP}\n",
    f"{ADMIN_GROUP}\u00a0",
    f"\u00a0{ADMIN_GROUP}",
    f"{ADMIN_GROUP}\u200b",
    ADMIN_GROUP.upper(),
]
# Usernames that pass for `admin`, `bob`, `scott` or `alice`: Cyrillic а, Greek ο, a Hangul
# compatibility letter drawn like a Latin o, Cyrillic ѕ, a no-break space. (Fullwidth
# letters are NFKC-folded to ASCII by Django's own forms: see the test below.)
LOOK_ALIKE_USERNAMES = ["\u0430dmin", "adm\u03bfn", "b\u3147b", "\u0455cott", "ali\u00a0ce"]


def sign_in_over_http(live_server, idp, login):
    """The whole code flow as a browser makes it, with requests: the console's button, the
    provider's password page, its consent, and the callback. Returns the session and the last
    response (the console's page the callback sent the browser to)."""
    session = requests.Session()
    page = session.get(f"{live_server.url}/oidc/authenticate/", timeout=30)
    assert page.url.startswith(f"{idp.issuer}/interaction/"), page.url
    uid = urlparse(page.url).path.rsplit("/", 1)[-1]
    done = session.post(
        f"{idp.issuer}/interaction/{uid}/login",
        timeout=30,
        data={"username": login, "password": USERS[login]["password"]},
    )
    return session, done


def signed_in(session, live_server) -> bool:
    """Whether the console lets this browser see a signed-in page."""
    page = session.get(f"{live_server.url}/workspaces/", timeout=30, allow_redirects=False)
    return page.status_code == 200


# --- the admin group is compared exactly ----------------------------------------------------

live_db = pytest.mark.django_db(transaction=True)


@live_db
@pytest.mark.parametrize("group", LOOK_ALIKE_ADMIN_GROUPS[:4])  # all of them: the next test
def test_a_group_that_only_looks_like_the_admin_group_grants_nothing(live_server, oidc_provider, group):
    oidc_provider.set_groups("ada", [group, "ml-team"])
    session, done = sign_in_over_http(live_server, oidc_provider, "ada")
    assert done.url == f"{live_server.url}/"  # signed in, as a user
    ada = get_user_model().objects.get(username="ada")
    assert not ada.is_staff and not ada.is_superuser
    assert session.get(f"{live_server.url}/workspaces/settings/", timeout=30).status_code == 403
    # the exact name, at the next sign-in (another browser), does
    oidc_provider.set_groups("ada", [ADMIN_GROUP])
    session, done = sign_in_over_http(live_server, oidc_provider, "ada")
    ada.refresh_from_db()
    assert ada.is_staff and session.get(f"{live_server.url}/workspaces/settings/", timeout=30).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("group", LOOK_ALIKE_ADMIN_GROUPS)
def test_the_group_claim_is_kept_exactly_as_sent(provider, key, monkeypatch, group):  # noqa: F811
    user = sign_in(monkeypatch, id_token(key, groups=[group]))
    assert not user.is_staff
    kept = [] if group.endswith(("\t", "\n")) else [group]  # control characters: no group of that name
    assert list(user.groups.values_list("name", flat=True)) == kept
    assert sign_in(monkeypatch, id_token(key, groups=[ADMIN_GROUP])).is_staff


# --- a user of the provider never signs in locally ------------------------------------------


@live_db
def test_a_local_password_on_a_provider_user_does_not_sign_in(live_server, oidc_provider):
    sign_in_over_http(live_server, oidc_provider, "ada")
    ada = get_user_model().objects.get(username="ada")
    assert ada.is_staff and not ada.has_usable_password()
    ada.set_password("a-local-password-9")  # as `manage.py changepassword ada` would
    ada.save()
    browser = requests.Session()
    login = browser.get(f"{live_server.url}/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    answer = browser.post(
        f"{live_server.url}/login/",
        timeout=30,
        allow_redirects=False,
        data={"csrfmiddlewaretoken": token, "username": "ada", "password": "a-local-password-9"},
        headers={"Referer": f"{live_server.url}/login/"},
    )
    assert answer.status_code == 200 and 'name="password"' in answer.text  # the form again, with its error
    assert not signed_in(browser, live_server)


@pytest.mark.django_db
def test_the_django_admin_sets_no_local_password_on_a_provider_user(client, provider, key, monkeypatch):  # noqa: F811
    ada = sign_in(monkeypatch, id_token(key))
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw-1")
    client.force_login(root)
    page = client.get(f"/django-admin/auth/user/{ada.pk}/password/", follow=True)
    assert "signs in through single sign-on: a local password cannot be set" in page.content.decode()
    sent = client.post(
        f"/django-admin/auth/user/{ada.pk}/password/",
        {"password1": "a-local-password-9", "password2": "a-local-password-9", "usable_password": "true"},
    )
    assert sent.status_code == 302 and sent["Location"] == f"/django-admin/auth/user/{ada.pk}/change/"
    ada.refresh_from_db()
    assert not ada.has_usable_password()
    # a local account's password is still the admin's to set
    alice = get_user_model().objects.create_user("alice", password="old-alice-pw-1")
    client.post(
        f"/django-admin/auth/user/{alice.pk}/password/",
        {"password1": "new-alice-pw-77", "password2": "new-alice-pw-77", "usable_password": "true"},
    )
    alice.refresh_from_db()
    assert alice.check_password("new-alice-pw-77")


@pytest.mark.django_db
def test_the_local_form_refuses_a_provider_user_even_with_a_password(client, provider, key, monkeypatch):  # noqa: F811
    ada = sign_in(monkeypatch, id_token(key))
    ada.set_password("a-local-password-9")
    ada.save()
    answer = client.post("/login/", {"username": "ada", "password": "a-local-password-9"})
    assert answer.status_code == 200 and "_auth_user_id" not in client.session
    # the break-glass account next to it signs in as before
    get_user_model().objects.create_user("root", password="break-glass-pw-1", is_staff=True)
    assert client.post("/login/", {"username": "root", "password": "break-glass-pw-1"}).status_code == 302


# --- an error callback ends only this browser's own login ----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["error=x", "error=access_denied&state=forged", "error=login_required&state="])
def test_an_error_callback_without_this_browsers_state_signs_nobody_out(client, provider, query):  # noqa: F811
    root = get_user_model().objects.create_user("root", password="break-glass-pw-1", is_staff=True)
    client.force_login(root)
    answer = client.get(f"/oidc/callback/?{query}")
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    assert client.session["_auth_user_id"] == str(root.pk)
    assert client.get("/workspaces/settings/").status_code == 200  # still signed in, still admin


@pytest.mark.django_db
def test_the_providers_error_answer_to_this_browsers_login_ends_its_session(client, provider):  # noqa: F811
    root = get_user_model().objects.create_user("root", password="break-glass-pw-1", is_staff=True)
    client.force_login(root)
    location = client.get("/oidc/authenticate/")["Location"]
    state = parse_qs(urlparse(location).query)["state"][0]
    answer = client.get(f"/oidc/callback/?error=access_denied&state={state}")
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    assert state not in client.session.get("oidc_states", {})  # not playable again


@live_db
def test_a_forged_error_callback_leaves_a_provider_session_alone(live_server, oidc_provider):
    session, _done = sign_in_over_http(live_server, oidc_provider, "bert")
    assert signed_in(session, live_server)
    session.get(f"{live_server.url}/oidc/callback/?error=x", timeout=30)
    assert signed_in(session, live_server)


# --- usernames that pass for another ----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name", LOOK_ALIKE_USERNAMES)
def test_the_django_admin_refuses_a_look_alike_username(client, name):
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw-1")
    client.force_login(root)
    page = client.post(
        "/django-admin/auth/user/add/",
        {"username": name, "usable_password": "true", "password1": "a-good-pw-4711", "password2": "a-good-pw-4711"},
    )
    assert page.status_code == 200 and "can look like another account" in page.content.decode()
    assert not get_user_model().objects.filter(username=name).exists()
    # nor can an existing account be renamed to one
    alice = get_user_model().objects.create_user("alice", password="pw-alice-123")
    client.post(
        f"/django-admin/auth/user/{alice.pk}/change/",
        {"username": name, "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00", "is_active": "on"},
    )
    alice.refresh_from_db()
    assert alice.username == "alice"


@pytest.mark.django_db
def test_a_fullwidth_username_is_the_ascii_one_and_cannot_be_a_second_account(client):
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw-1")
    client.force_login(root)
    page = client.post(
        "/django-admin/auth/user/add/",
        {
            "username": "\uff52\uff4f\uff4f\uff54",
            "usable_password": "true",
            "password1": "a-good-pw-4711",
            "password2": "a-good-pw-4711",
        },
    )
    assert page.status_code == 200 and "already exists" in page.content.decode()
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["root"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["maria.k", "ops+gpu@example.org", "김민지", "lab-admin_2"])
def test_ascii_and_korean_usernames_are_accepted(client, name):
    root = get_user_model().objects.create_superuser("root", password="break-glass-pw-1")
    client.force_login(root)
    page = client.post(
        "/django-admin/auth/user/add/",
        {"username": name, "usable_password": "true", "password1": "a-good-pw-4711", "password2": "a-good-pw-4711"},
    )
    assert page.status_code == 302
    assert get_user_model().objects.get(username=name).check_password("a-good-pw-4711")


@pytest.mark.django_db
def test_createsuperuser_refuses_a_look_alike_username(monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "break-glass-pw-1")
    with pytest.raises(CommandError, match="can look like another account"):
        call_command("createsuperuser", "--noinput", "--username", "\u0430dmin", "--email", "a@example.org")
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_a_provider_username_that_passes_for_another_falls_back_to_the_subject(provider, key, monkeypatch):  # noqa: F811
    user = sign_in(monkeypatch, id_token(key, preferred_username="\u0430da", sub="u-77"))
    assert user.username == "u-77" and ProviderIdentity.objects.get(user=user).subject == "u-77"


# --- a provider that is down ----------------------------------------------------------------


@live_db
def test_with_the_provider_down_the_button_says_so_instead_of_sending_there(live_server, oidc_provider):
    browser = requests.Session()
    first = browser.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=30)
    assert first.status_code == 302 and first.headers["Location"].startswith(f"{oidc_provider.issuer}/")
    oidc_provider.stop()  # its discovery document is still in the console's cache
    again = browser.get(f"{live_server.url}/oidc/authenticate/", allow_redirects=False, timeout=30)
    assert again.status_code == 302 and again.headers["Location"] == "/login/"
    page = browser.get(f"{live_server.url}/login/", timeout=30).text
    assert "The identity provider cannot be reached" in page
    assert 'name="password"' in page  # the break-glass form is there
