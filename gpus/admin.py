"""Read-only Django admin for the audit record: runs and steps are append-only."""
from django.contrib import admin

from .models import ManifestVersion, ProcedureRun, StepRun


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


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


@admin.register(ProcedureRun)
class ProcedureRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "procedure", "node", "status", "actor_name", "created_at", "finished_at")
    list_filter = ("procedure", "status")
    search_fields = ("node", "actor_name")
    inlines = [StepInline]


@admin.register(StepRun)
class StepRunAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "step_key", "state", "attempt", "recorded_at")
    list_filter = ("state",)


@admin.register(ManifestVersion)
class ManifestVersionAdmin(ReadOnlyAdmin):
    list_display = ("version", "actor_name", "note", "created_at", "applied_at")
