from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workspaces"

    def ready(self):
        # What the Workspaces add to the gpus app is registered here: gpus never imports them.
        from gpus.procedures import registry
        from gpus.views import pictures

        from . import health, permissions, procedures

        registry.register(procedures.ProcedureRecreateWorkspace())
        registry.register(
            procedures.ProcedureSetQuota()
        )  # an admin's quota edit (workspaces/quota.py)  # the Fix of a missing namespace or quota
        health.register()  # importing it registered the Workspace checks; this adds their inputs
        pictures.VIEWERS["workspace"] = permissions.can_see_workspace
        from brickadmin import notify

        from . import notices

        notify.OWNER_RESOLVERS.append(notices.owner_of)
        # The audit details decisions record as codes, said in each reader's language.
        from brickadmin import wording

        from .phrases import PHRASES

        wording.register(PHRASES)  # fixes and reclaims tell the record's requester
        # what Kueue evicted is recorded as the watcher publishes the Workloads it follows
        from gpus.view import publish

        from . import elastic

        if elastic.record_from_view not in publish.PUBLISHED:
            publish.PUBLISHED.append(elastic.record_from_view)
