"""Who may see a Workspace: what the other apps ask (the utilisation chart of a Workspace,
gpus/views/pictures.py), through a rule registered from ``WorkspacesConfig.ready()``."""

from brickadmin.permissions import is_admin

from .models import WorkspaceRequest


def can_see_workspace(user, namespace: str) -> bool:
    """Admins see every Workspace; a user only the Workspaces approved for them."""
    if is_admin(user):
        return True
    if not user.is_authenticated or not namespace:
        return False
    return WorkspaceRequest.objects.filter(
        name=namespace, requester=user, status=WorkspaceRequest.Status.APPROVED
    ).exists()
