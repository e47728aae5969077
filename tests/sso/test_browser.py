"""Single sign-on end to end in Chromium against a real OpenID provider on loopback
(oidc-provider, tests/sso/conftest.py): the login page's button, the provider's own password
page, the code flow back to the console, the admin role from the group claim (and gone at the
next sign-in once the group is), the Workspace maxima of the provider's groups, and a logout
that ends the provider's session."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from tests.sso.conftest import ADMIN_GROUP, PROVIDER_NAME, USERS
from workspaces.models import ResourceLimit, WorkspaceRequest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sign_in_at_provider(page, provider, login, password=None):
    """From the console's login page through the provider's password page and back."""
    page.click("[data-testid=sso-login]")
    page.wait_for_url(f"{provider.issuer}/interaction/**")
    page.fill("input[name=username]", login)
    page.fill("input[name=password]", password or USERS[login]["password"])
    page.click("#op-submit")


def test_admin_group_signs_in_as_admin_and_logout_ends_the_provider_session(
    browser, live_server, oidc_provider, load_scenario
):
    load_scenario("seed-example")
    page = browser.new_page()
    page.goto(f"{live_server.url}/workspaces/approvals/")  # not signed in: the login page
    assert page.url.startswith(f"{live_server.url}/login/")
    assert page.inner_text("[data-testid=sso-login]") == f"Sign in with {PROVIDER_NAME}"
    assert page.locator("form[data-testid=local-login] input[name=password]").count() == 1  # break-glass form

    # a wrong password stays at the provider
    sign_in_at_provider(page, oidc_provider, "ada", "not-her-password")
    assert page.url.startswith(oidc_provider.issuer)
    assert "Wrong username or password" in page.inner_text("#error")
    page.goto(f"{live_server.url}/login/?next=/workspaces/approvals/")

    sign_in_at_provider(page, oidc_provider, "ada")
    page.wait_for_url(f"{live_server.url}/workspaces/approvals/")  # back where she was going
    ada = get_user_model().objects.get(username="ada")  # preferred_username, keyed on sub
    assert ada.provider_identity.subject == USERS["ada"]["sub"]
    assert ada.provider_identity.issuer == oidc_provider.issuer
    assert ada.is_staff and not ada.is_superuser and not ada.has_usable_password()
    assert set(ada.groups.values_list("name", flat=True)) == {ADMIN_GROUP, "ml-team"}
    assert page.goto(f"{live_server.url}/workspaces/settings/").status == 200  # an admin page
    assert page.goto(f"{live_server.url}/lockouts/").status == 200

    # while the provider's session lasts, signing in again goes through without a password
    seen = []

    def record(request):
        seen.append(request.url)

    page.on("request", record)
    page.goto(f"{live_server.url}/login/")
    page.click("[data-testid=sso-login]")
    page.wait_for_url(f"{live_server.url}/")
    page.remove_listener("request", record)
    assert any(u.startswith(f"{oidc_provider.issuer}/auth") for u in seen)
    assert not any("/interaction/" in u for u in seen)

    # logout: the console, then the provider (it asks; yes), then back to the login page
    page.click("form[action='/logout/'] button")
    page.wait_for_url(f"{oidc_provider.issuer}/session/end**")
    page.click("button[name=logout][value=yes]")
    page.wait_for_url(f"{live_server.url}/login/**")
    assert page.goto(f"{live_server.url}/workspaces/settings/").url.startswith(f"{live_server.url}/login/")

    # the provider's session is over: signing in again asks for the password again; and
    # ada left the admin group meanwhile, so the console takes the admin role away
    oidc_provider.set_groups("ada", ["ml-team"])
    page.click("[data-testid=sso-login]")
    page.wait_for_url(f"{oidc_provider.issuer}/interaction/**")
    assert page.locator("input[name=password]").count() == 1
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", USERS["ada"]["password"])
    page.click("#op-submit")
    page.wait_for_url(f"{live_server.url}/workspaces/settings/")  # where the login page was sending her
    ada.refresh_from_db()
    assert not ada.is_staff
    assert set(ada.groups.values_list("name", flat=True)) == {"ml-team"}
    assert page.goto(f"{live_server.url}/workspaces/settings/").status == 403
    assert get_user_model().objects.filter(username="ada").count() == 1  # the same account again


def test_user_without_admin_group_is_refused_admin_pages_and_sees_own_workspaces(
    browser, live_server, oidc_provider, load_scenario, alice
):
    load_scenario("seed-example")
    # the admin set a maximum for the provider's group before anyone of it signed in
    ResourceLimit.objects.create(
        group=Group.objects.create(name="ml-team"), gpu=7, cpu=20, memory_gib=80, storage_gib=300
    )
    page = browser.new_page()
    page.goto(f"{live_server.url}/login/")
    sign_in_at_provider(page, oidc_provider, "bert")
    page.wait_for_url(f"{live_server.url}/")
    bert = get_user_model().objects.get(username="bert")
    assert not bert.is_staff
    for admin_page in ("/workspaces/approvals/", "/workspaces/settings/", "/workspaces/all/", "/lockouts/"):
        assert page.goto(f"{live_server.url}{admin_page}").status == 403, admin_page

    for owner, name in ((bert, "bert-own"), (alice, "alice-own")):
        WorkspaceRequest.objects.create(
            name=name, requester=owner, requester_name=owner.username, gpu=1, cpu=1, memory_gib=1, storage_gib=1
        )
    page.goto(f"{live_server.url}/workspaces/")
    assert page.locator("[data-testid=ws-bert-own]").count() == 1
    assert page.locator("[data-testid=ws-alice-own]").count() == 0
    page.goto(f"{live_server.url}/workspaces/new/")  # the provider's group's maximum applies
    assert "(Max 7 GPU)" in page.inner_text("[data-testid=workspace-request-form]")
