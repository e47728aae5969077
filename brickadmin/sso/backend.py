"""The authentication backend of single sign-on: mozilla-django-oidc's authorization-code flow
(state, nonce and PKCE are checked by its views), with what the product adds:

- endpoints from the provider's discovery document (cached; read only when a provider
  sign-in happens, never for a local one);
- the ID token's RS256 signature verified with the provider's JWKS, and its issuer,
  audience, expiry and issue time required and checked (the library leaves aud unchecked);
- the user is the provider's (issuer, sub): the username comes from `preferred_username`
  (else `sub`), never from the email; a local account of the same name is never taken over;
- at every sign-in the user's Django groups become exactly the provider's groups (so the
  Workspace maxima per group apply) and the admin role (`is_staff`, brickadmin.permissions)
  is granted when the configured admin group is among them and taken away when it is not.
"""

from __future__ import annotations

import logging
import unicodedata

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from brickadmin.accounts.usernames import is_look_alike_safe

from . import discovery
from .models import ProviderIdentity

log = logging.getLogger(__name__)

SIGN_ALGORITHM = "RS256"
USERNAME_MAX = 150  # django.contrib.auth's User.username
GROUP_NAME_MAX = 150  # django.contrib.auth's Group.name
IDENTIFIER_MAX = 255  # ProviderIdentity.issuer and .subject
EMAIL_MAX = 254  # django.contrib.auth's User.email


def has_control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def usable_identifier(value) -> bool:
    """`sub` and `iss` as stored: a non-empty string of at most 255 characters, on one line and
    without a NUL (PostgreSQL refuses one in text)."""
    return isinstance(value, str) and 0 < len(value) <= IDENTIFIER_MAX and not has_control(value)


def email_from(claims: dict) -> str | None:
    """The `email` claim when it is one address Django accepts (no NUL, no CR or LF, which
    would add headers to a notification's email, at most 254 characters); None otherwise."""
    from django.core.validators import validate_email

    value = claims.get("email")
    if not isinstance(value, str) or len(value) > EMAIL_MAX or has_control(value):
        return None
    try:
        validate_email(value)
    except ValidationError:
        return None
    return value


def username_from(claims: dict) -> str:
    """`preferred_username` when it is a valid Django username that cannot pass for another
    (brickadmin/accounts/usernames.py), else `sub`."""
    validate = UnicodeUsernameValidator()
    for candidate in (claims.get("preferred_username"), claims.get("sub")):
        if not isinstance(candidate, str):
            continue
        candidate = candidate.strip()
        if not candidate or len(candidate) > USERNAME_MAX:
            continue
        try:
            validate(candidate)
        except ValidationError:
            continue
        if is_look_alike_safe(candidate):
            return candidate
    raise SuspiciousOperation("neither preferred_username nor sub is a usable username")


def groups_from(claims: dict) -> list[str]:
    """The provider's groups: the claim named by BRICK_OIDC_GROUPS_CLAIM (a dotted path reaches
    into nested objects, e.g. `realm_access.roles`), a list of names or one name. Names are
    kept exactly as sent: " brick-admins " (or with a tab, a newline or a no-break space) is
    another group than brick-admins, so it never grants the admin role. Names holding control
    characters (no provider's group is named so; NUL breaks PostgreSQL) are left out."""
    value = claims
    for part in settings.BRICK_OIDC_GROUPS_CLAIM.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    names = []
    for name in value:
        if (
            isinstance(name, str)
            and name
            and len(name) <= GROUP_NAME_MAX
            and name not in names
            and not has_control(name)
        ):
            names.append(name)
    return names


def groups_kept(groups: list[str]) -> list[str]:
    """The groups a sign-in makes the user a member of: at most BRICK_OIDC_GROUPS_MAX, the admin
    group and groups that already exist first, then new ones in the token's order. A token
    naming thousands of groups creates no more than that; the admin role is read from the
    whole claim (update_user)."""
    cap = settings.BRICK_OIDC_GROUPS_MAX
    if len(groups) <= cap:
        return groups
    wanted = set(groups)
    first = [settings.BRICK_OIDC_ADMIN_GROUP] if settings.BRICK_OIDC_ADMIN_GROUP in wanted else []
    existing = set(Group.objects.filter(name__in=groups).values_list("name", flat=True))
    ordered = first + [g for g in groups if g in existing and g not in first]
    ordered += [g for g in groups if g not in existing and g not in first]
    log.warning("single sign-on: a token names %d groups; the first %d are kept", len(groups), cap)
    return ordered[:cap]


class ProviderBackend(OIDCAuthenticationBackend):
    """Signs in users of the identity provider configured by BRICK_OIDC_*."""

    def __init__(self, *args, **kwargs):  # no network: Django builds every backend for each sign-in, local ones too
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = SIGN_ALGORITHM
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    # Endpoints from discovery, read when first used.
    @property
    def OIDC_OP_TOKEN_ENDPOINT(self):  # noqa: N802 (the library's attribute names)
        return discovery.metadata()["token_endpoint"]

    @property
    def OIDC_OP_USER_ENDPOINT(self):  # noqa: N802
        return discovery.metadata().get("userinfo_endpoint")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self):  # noqa: N802
        return discovery.metadata()["jwks_uri"]

    def authenticate(self, request, **kwargs):
        if not settings.BRICK_OIDC_ENABLED or request is None or "code" not in request.GET:
            return None  # a local sign-in: not ours
        try:
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, discovery.ProviderUnavailable, requests.RequestException) as exc:
            log.warning("single sign-on refused: %s", exc)
            return None

    # --- the ID token ------------------------------------------------------------------
    def retrieve_matching_jwk(self, token):
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"ID token unreadable: {exc}") from exc
        for refresh in (False, True):  # an unknown key id: the provider may have rotated its keys
            for key in discovery.jwks(refresh=refresh)["keys"]:
                if (
                    key.get("kid") == header.get("kid")
                    and key.get("kty") == "RSA"
                    and key.get("alg", SIGN_ALGORITHM) == SIGN_ALGORITHM
                    and key.get("use", "sig") == "sig"
                ):
                    try:
                        return jwt.PyJWK(key, algorithm=SIGN_ALGORITHM)
                    except jwt.PyJWKError as exc:
                        raise SuspiciousOperation(f"the provider's key {key.get('kid')} is unusable: {exc}") from exc
        raise SuspiciousOperation("ID token signed with a key the provider does not publish")

    def _verify_jws(self, payload, key):
        try:
            if jwt.get_unverified_header(payload).get("alg") != SIGN_ALGORITHM:
                raise SuspiciousOperation(f"ID token not signed with {SIGN_ALGORITHM}")
            claims = jwt.decode(
                payload,
                key,
                algorithms=[SIGN_ALGORITHM],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=discovery.metadata()["issuer"],
                leeway=settings.BRICK_OIDC_CLOCK_SKEW_SECONDS,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.InvalidTokenError as exc:  # bad signature, expired, wrong issuer or audience
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("ID token for several audiences without this client as azp")
        return claims

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo endpoint's (same subject only)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            info = super().get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("userinfo is about another subject than the ID token")
            claims.update(info)
        claims["iss"] = payload["iss"]
        return claims

    # --- the user ----------------------------------------------------------------------
    def verify_claims(self, claims):
        if not (usable_identifier(claims.get("sub")) and usable_identifier(claims.get("iss"))):
            log.warning("single sign-on refused: sub or iss is empty, over 255 characters or holds a control character")
            return False
        return True

    def describe_user_by_claims(self, claims):
        return f"subject {claims.get('sub')} of {claims.get('iss')}"

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(
            provider_identity__issuer=claims["iss"], provider_identity__subject=claims["sub"]
        )

    @transaction.atomic
    def create_user(self, claims):
        username = username_from(claims)
        if self.UserModel.objects.filter(username__iexact=username).exists():
            # A local account (the break-glass admin, say) is never taken over by name.
            raise SuspiciousOperation(f"the username {username!r} belongs to another account")
        user = self.UserModel(username=username)
        user.set_unusable_password()  # provider users cannot use the local form
        user.save()
        ProviderIdentity.objects.create(user=user, issuer=claims["iss"], subject=claims["sub"])
        log.info("single sign-on: created %s for %s", username, self.describe_user_by_claims(claims))
        return self.update_user(user, claims)

    @transaction.atomic
    def update_user(self, user, claims):
        wanted = username_from(claims)
        if (
            wanted != user.username
            and not self.UserModel.objects.filter(username__iexact=wanted).exclude(pk=user.pk).exists()
        ):
            user.username = wanted  # renamed at the provider
        email = email_from(claims)
        if email is not None:
            user.email = email
        elif "email" in claims:
            log.warning("single sign-on: the email claim of %s is not one address; not stored", user.username)
        groups = groups_from(claims)
        admin_group = settings.BRICK_OIDC_ADMIN_GROUP
        was_admin = user.is_staff
        user.is_staff = bool(admin_group) and admin_group in groups
        user.is_superuser = False  # the console's admin role is is_staff; nothing more from a claim
        user.save()
        kept = groups_kept(groups)
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in kept])
        ProviderIdentity.objects.filter(user=user).update(last_login_groups=kept)
        if was_admin != user.is_staff:
            log.info("single sign-on: %s %s the admin role", user.username, "gains" if user.is_staff else "loses")
        return user


class LocalBackend(ModelBackend):
    """The local form's backend: Django's, except that a user of the provider never signs in
    with a password, even one set on it by hand (the Django admin, `changepassword`): their
    sign-in goes through the provider, which checks the admin group every time."""

    def user_can_authenticate(self, user):
        return super().user_can_authenticate(user) and not ProviderIdentity.objects.filter(user=user).exists()
