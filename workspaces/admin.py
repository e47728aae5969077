"""Workspaces, Jobs, decisions and settings in Django's admin: read-only (brickadmin/admin.py).
Decisions go through the approval queue (it talks to the cluster and records a Decision);
limits and Job approval through the Workspace settings page, which records them too."""

from django.contrib import admin

from brickadmin.admin import AuditAdmin

from .models import Decision, JobSettings, ResourceLimit, WorkspaceJob, WorkspaceRequest


@admin.register(Decision)
class DecisionAdmin(AuditAdmin):
    list_display = ("at", "actor_name", "action", "subject", "gpu_resource", "amount", "overcommit")
    list_filter = ("action", "overcommit", "at")
    search_fields = ("actor_name", "subject", "gpu_resource", "detail")
    date_hierarchy = "at"


@admin.register(WorkspaceRequest)
class WorkspaceRequestAdmin(AuditAdmin):
    list_display = ("name", "requester_name", "status", "gpu", "gpu_resource", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "requester_name")


@admin.register(WorkspaceJob)
class WorkspaceJobAdmin(AuditAdmin):
    list_display = ("id", "owner_name", "workspace", "node", "gpu", "status", "created_at")
    list_filter = ("status",)
    search_fields = ("=id", "owner_name", "workspace__name", "node", "image")


@admin.register(ResourceLimit)
class ResourceLimitAdmin(AuditAdmin):
    list_display = ("__str__", "user", "group", "gpu", "cpu", "memory_gib", "storage_gib")


@admin.register(JobSettings)
class JobSettingsAdmin(AuditAdmin):
    list_display = ("__str__", "approval_required", "updated_by_name", "updated_at")
