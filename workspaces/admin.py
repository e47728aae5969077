from django.contrib import admin

from .models import Decision, JobSettings, ResourceLimit, WorkspaceJob, WorkspaceRequest


@admin.register(ResourceLimit)
class ResourceLimitAdmin(admin.ModelAdmin):
    list_display = ("__str__", "user", "group", "gpu", "cpu", "memory_gib", "storage_gib")


@admin.register(WorkspaceRequest)
class WorkspaceRequestAdmin(admin.ModelAdmin):
    list_display = ("name", "requester_name", "status", "gpu", "gpu_resource", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "requester_name")
    # Decisions go through the approval queue (it talks to the cluster); not editable here.
    readonly_fields = [f.name for f in WorkspaceRequest._meta.fields]


@admin.register(WorkspaceJob)
class WorkspaceJobAdmin(admin.ModelAdmin):
    list_display = ("id", "owner_name", "workspace", "node", "gpu", "status", "created_at")
    readonly_fields = [f.name for f in WorkspaceJob._meta.fields]


@admin.register(Decision)
class DecisionAdmin(admin.ModelAdmin):
    list_display = ("at", "actor_name", "action", "subject", "gpu_resource", "amount", "overcommit")
    list_filter = ("action", "overcommit")

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


admin.site.register(JobSettings)
