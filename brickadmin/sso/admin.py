from django.contrib import admin

from .models import ProviderIdentity


@admin.register(ProviderIdentity)
class ProviderIdentityAdmin(admin.ModelAdmin):
    """Which console user each provider subject is (deleting a row unlinks it: the subject's
    next sign-in creates a new user, or is refused if that username is taken)."""

    list_display = ("user", "subject", "issuer", "last_login_groups")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "last_login_groups")

    def has_add_permission(self, request):
        return False
