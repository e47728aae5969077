from django.contrib import admin
from django.urls import include, path

from . import views
from .accounts import views as account_views
from .sso import views as sso_views

urlpatterns = [
    path("login/", sso_views.LoginView.as_view(), name="login"),
    path("logout/", sso_views.logout, name="logout"),
    path("oidc/", include("brickadmin.sso.urls")),  # single sign-on (404 unless BRICK_OIDC_ISSUER is set)
    path("i18n/", include("django.conf.urls.i18n")),
    path("django-admin/", admin.site.urls),
    path("lockouts/", views.lockouts, name="lockouts"),
    path("lockouts/unlock/", views.lockout_unlock, name="lockout_unlock"),
    path("profile/", account_views.profile, name="profile"),
    path("notifications/", account_views.notifications, name="notifications"),
    path("notifications/undelivered/", account_views.deliveries, name="notification_deliveries"),
    path("", include("gpus.urls")),
    path("workspaces/", include("workspaces.urls")),
]

handler500 = "brickadmin.views.server_error"
