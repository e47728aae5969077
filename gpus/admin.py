"""The audit record of procedures in Django's admin: read-only (brickadmin/admin.py);
runs and steps are append-only."""

from django.contrib import admin

from brickadmin.admin import AuditAdmin

from .models import ManifestVersion, ProcedureRun, StepRun


class StepInline(admin.TabularInline):
    model = StepRun
    fields = ("seq", "step_key", "state", "attempt", "started_at", "finished_at", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return True  # shown inside a run, which AuditAdmin already limits to console admins


@admin.register(ProcedureRun)
class ProcedureRunAdmin(AuditAdmin):
    list_display = ("id", "procedure", "node", "status", "actor_name", "source", "created_at", "finished_at")
    list_filter = ("procedure", "status", "source", "created_at")
    search_fields = ("=id", "node", "actor_name", "message")
    date_hierarchy = "created_at"
    inlines = [StepInline]


@admin.register(StepRun)
class StepRunAdmin(AuditAdmin):
    list_display = ("run", "seq", "step_key", "state", "attempt", "recorded_at")
    list_filter = ("state", "run__procedure", "recorded_at")
    search_fields = ("=run__id", "run__node", "step_key", "title", "error")
    list_select_related = ("run",)


@admin.register(ManifestVersion)
class ManifestVersionAdmin(AuditAdmin):
    list_display = ("version", "actor_name", "note", "created_at", "applied_at")
    search_fields = ("actor_name", "note")
