from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    """django.contrib.admin with the read-only records site (brickadmin/admin.py)."""

    default_site = "brickadmin.admin.ConsoleAdminSite"

    def ready(self):
        super().ready()  # autodiscovers gpus/admin.py and workspaces/admin.py
        from django.contrib import admin

        from .admin import register_sign_in_records

        register_sign_in_records(admin.site)
