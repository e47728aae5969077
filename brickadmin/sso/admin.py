from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _

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


class ConsoleUserAdmin(UserAdmin):
    """Django's user admin, except that a user of the provider gets no local password: the
    console would then let them in without the provider's group check (brickadmin.sso.backend.
    LocalBackend refuses such a password anyway)."""

    def user_change_password(self, request, id, form_url=""):
        user = self.get_object(request, unquote(id))
        if user is not None and ProviderIdentity.objects.filter(user=user).exists():
            messages.error(
                request,
                _("%(user)s signs in through single sign-on: a local password cannot be set.")
                % {"user": user.get_username()},
            )
            return redirect(reverse(f"{self.admin_site.name}:auth_user_change", args=[user.pk]))
        return super().user_change_password(request, id, form_url)


User = get_user_model()
if admin.site.is_registered(User):  # django.contrib.auth's admin, discovered before this one
    admin.site.unregister(User)
admin.site.register(User, ConsoleUserAdmin)
