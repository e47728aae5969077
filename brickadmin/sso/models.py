from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class ProviderIdentity(models.Model):
    """Who a user is at the identity provider: its issuer and subject (`sub`), the only
    stable identifier OpenID Connect promises. A user signs in through the provider only
    as the account linked here; a local account (no row) is never taken over by a provider
    user of the same name, so the break-glass accounts stay local."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identity")
    issuer = models.CharField(_("Issuer"), max_length=255)
    subject = models.CharField(_("Subject (sub)"), max_length=255)
    last_login_groups = models.JSONField(_("Groups at the last sign-in"), default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")]
        verbose_name = _("provider identity")
        verbose_name_plural = _("provider identities")

    def __str__(self):
        return f"{self.user.get_username()} = {self.subject} @ {self.issuer}"
