from functools import wraps

from django.core.exceptions import PermissionDenied


def is_admin(user) -> bool:
    """Cluster admins are staff users. For users of the identity provider, is_staff is set at
    each sign-in from membership of BRICK_OIDC_ADMIN_GROUP (brickadmin/sso/backend.py)."""
    return user.is_authenticated and user.is_staff


def admin_required(view):
    """403 for signed-in users who are not cluster admins (anonymous visitors never
    get here: LoginRequiredMiddleware sends them to the login page)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not is_admin(request.user):
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapped
