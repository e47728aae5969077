"""Single sign-on with OpenID Connect (mozilla-django-oidc): see docs/operator-guide.md#single-sign-on."""
