"""The identity provider's metadata and signing keys, fetched once and cached.

Discovery reads `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0);
the document must name the configured issuer. The JWKS is read from its `jwks_uri` and read
again once when a token names a key it does not hold (the provider rotated its keys).
Both stay in Django's cache for BRICK_OIDC_DISCOVERY_CACHE_SECONDS; the provider's sign-in
button reads the document again, so a provider that is down is said to be. Nothing here runs for a
local sign-in: a provider that is down never blocks the break-glass accounts."""

from __future__ import annotations

import requests
from django.conf import settings
from django.core.cache import cache


class ProviderUnavailable(Exception):
    """The provider's metadata or keys could not be read (down, or not an OpenID provider)."""


REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")


def fetch_json(url: str) -> dict:
    """One GET of a JSON document from the provider (the only network call of this module)."""
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
        response.raise_for_status()
        doc = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    return doc


def issuer() -> str:
    return settings.BRICK_OIDC_ISSUER.rstrip("/")


def metadata(refresh: bool = False) -> dict:
    """The provider's discovery document (cached; `refresh` reads it again, and raises
    ProviderUnavailable when the provider does not answer even if a copy is cached)."""
    key = f"brick-oidc-discovery:{issuer()}"
    doc = None if refresh else cache.get(key)
    if doc is None:
        doc = fetch_json(f"{issuer()}/.well-known/openid-configuration")
        missing = [k for k in REQUIRED if not doc.get(k)]
        if missing:
            raise ProviderUnavailable(f"the discovery document lacks {', '.join(missing)}")
        if str(doc["issuer"]).rstrip("/") != issuer():
            raise ProviderUnavailable(
                f"the discovery document names issuer {doc['issuer']!r}, not the configured {issuer()!r}"
            )
        cache.set(key, doc, settings.BRICK_OIDC_DISCOVERY_CACHE_SECONDS)
    return doc


def jwks(refresh: bool = False) -> dict:
    """The provider's signing keys (cached; `refresh` reads them again)."""
    uri = metadata()["jwks_uri"]
    key = f"brick-oidc-jwks:{uri}"
    doc = None if refresh else cache.get(key)
    if doc is None:
        doc = fetch_json(uri)
        if not isinstance(doc.get("keys"), list):
            raise ProviderUnavailable(f"{uri}: no keys")
        cache.set(key, doc, settings.BRICK_OIDC_DISCOVERY_CACHE_SECONDS)
    return doc


def forget() -> None:
    """Drop the cached metadata and keys (tests; a changed provider)."""
    try:
        uri = cache.get(f"brick-oidc-discovery:{issuer()}", {}).get("jwks_uri")
    finally:
        cache.delete(f"brick-oidc-discovery:{issuer()}")
    if uri:
        cache.delete(f"brick-oidc-jwks:{uri}")
