"""Django's admin (/django-admin/) as a read-only window on the records, for the console's
admins: every model is shown with search and filters, and nothing can be
added, changed or deleted here. Changes go through the console, which audits them (a limit
or a setting changed here would leave no Decision behind).

The console's admins are staff users without model permissions (brickadmin/permissions.py),
so the admin's usual rule would show them a page saying they can see nothing; AuditAdmin
lets them look. The site is installed by ``ConsoleAdminConfig`` (brickadmin/apps.py)."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from .permissions import is_admin


class ConsoleAdminSite(admin.AdminSite):
    site_header = _("brickadmin records (read-only)")
    site_title = _("brickadmin records")
    index_title = _("Audit records: look and search here; change things in the console")
    site_url = "/"


class AuditAdmin(admin.ModelAdmin):
    """View and search only, for every console admin (superusers included)."""

    actions = None

    def has_module_permission(self, request):
        return is_admin(request.user)

    def has_view_permission(self, request, obj=None):
        return is_admin(request.user)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class AccessAttemptAdmin(AuditAdmin):
    list_display = ("attempt_time", "username", "ip_address", "failures_since_start", "path_info")
    list_filter = ("attempt_time",)
    search_fields = ("username", "ip_address", "user_agent")
    fields = ("attempt_time", "username", "ip_address", "failures_since_start", "path_info", "user_agent")
    date_hierarchy = "attempt_time"


class AccessFailureLogAdmin(AuditAdmin):
    list_display = ("attempt_time", "username", "ip_address", "locked_out", "path_info")
    list_filter = ("locked_out", "attempt_time")
    search_fields = ("username", "ip_address", "user_agent")
    fields = ("attempt_time", "username", "ip_address", "locked_out", "path_info", "user_agent")
    date_hierarchy = "attempt_time"


class AccessLogAdmin(AuditAdmin):
    list_display = ("attempt_time", "logout_time", "username", "ip_address", "path_info")
    list_filter = ("attempt_time",)
    search_fields = ("username", "ip_address", "user_agent")
    fields = ("attempt_time", "logout_time", "username", "ip_address", "path_info", "user_agent")
    date_hierarchy = "attempt_time"


def register_sign_in_records(site) -> None:
    """Django-axes' records (AXES_ENABLE_ADMIN is off: its own admin allows deleting them)."""
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    site.register(AccessAttempt, AccessAttemptAdmin)
    site.register(AccessFailureLog, AccessFailureLogAdmin)
    site.register(AccessLog, AccessLogAdmin)
