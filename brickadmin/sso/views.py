"""Sign-in and sign-out pages: the login page (the provider's button and the local form),
the two legs of the provider sign-in (mozilla-django-oidc's views, endpoints from discovery),
and the logout that also ends the provider's session (RP-initiated logout)."""

from __future__ import annotations

import logging
from urllib.parse import urlencode, urlparse

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from brickadmin.forms import LoginForm

from . import discovery

log = logging.getLogger(__name__)


def provider_name() -> str:
    return settings.BRICK_OIDC_PROVIDER_NAME or urlparse(settings.BRICK_OIDC_ISSUER).hostname or "SSO"


class LoginView(auth_views.LoginView):
    """Django's login page (the local form, django-axes in front of it) and, with single
    sign-on configured, the "Sign in with <provider>" button above it."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_enabled"] = settings.BRICK_OIDC_ENABLED
        if settings.BRICK_OIDC_ENABLED:
            context["sso_provider_name"] = provider_name()
        return context


def _sso_on():
    if not settings.BRICK_OIDC_ENABLED:
        raise Http404


@method_decorator(login_not_required, name="dispatch")
class ProviderLoginView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider's authorization endpoint (state, nonce, PKCE S256)."""

    def __init__(self, **kwargs):
        View.__init__(self, **kwargs)  # the library reads its endpoints here; ours come from discovery

    @property
    def OIDC_OP_AUTH_ENDPOINT(self):  # noqa: N802 (the library's attribute name)
        return discovery.metadata()["authorization_endpoint"]

    @property
    def OIDC_RP_CLIENT_ID(self):  # noqa: N802
        return settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        _sso_on()
        try:
            # Read again, not from the cache: a cached document says nothing of whether the
            # provider is up, and a browser sent to a dead provider gets its browser's error page.
            discovery.metadata(refresh=True)
        except discovery.ProviderUnavailable as exc:
            log.warning("single sign-on unavailable: %s", exc)
            messages.error(
                request, _("The identity provider cannot be reached. Try again later, or sign in with a local account.")
            )
            return redirect(settings.LOGIN_URL)
        return super().get(request)


@method_decorator(login_not_required, name="dispatch")
class ProviderCallbackView(OIDCAuthenticationCallbackView):
    """The provider sends the browser back here with a code; the backend does the rest."""

    def get(self, request):
        _sso_on()
        if request.GET.get("error") and not self._carries_own_state(request):
            # The library signs out whoever is signed in on any `?error=`: a link anyone can
            # send. Only the provider's answer to this browser's own login may end its session.
            log.warning("single sign-on: an error callback without this browser's state was ignored")
            return self.login_failure()
        return super().get(request)

    @staticmethod
    def _carries_own_state(request) -> bool:
        state = request.GET.get("state")
        return bool(state) and state in (request.session.get("oidc_states") or {})

    def login_success(self):
        response = super().login_success()
        # The role and groups are read at sign-in: a provider session lasts a working day at
        # most, so someone taken out of the admin group is no admin the next day at the latest.
        self.request.session.set_expiry(settings.BRICK_OIDC_SESSION_SECONDS)
        return response

    def login_failure(self):
        messages.error(self.request, _("Single sign-on did not sign you in. Try again, or ask an admin."))
        return redirect(settings.LOGIN_URL)


@require_POST
def logout(request):
    """Ends the console session and, for a provider sign-in, the provider's session too: the
    browser goes to the provider's end_session_endpoint with the ID token as a hint and comes
    back to the login page, so the next sign-in asks for the password again."""
    id_token = request.session.get("oidc_id_token")
    end_session = None
    if id_token and settings.BRICK_OIDC_ENABLED:
        try:
            end_session = discovery.metadata().get("end_session_endpoint")
        except discovery.ProviderUnavailable as exc:
            log.warning("single sign-on: the provider's session was not ended: %s", exc)
    auth.logout(request)
    if not end_session:
        return redirect(settings.LOGOUT_REDIRECT_URL)
    params = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
        }
    )
    return redirect(f"{end_session}{'&' if '?' in end_session else '?'}{params}")
