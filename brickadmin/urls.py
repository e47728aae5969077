from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views
from .forms import LoginForm

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(authentication_form=LoginForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("django-admin/", admin.site.urls),
    path("lockouts/", views.lockouts, name="lockouts"),
    path("", include("gpus.urls")),
    path("workspaces/", include("workspaces.urls")),
]

handler500 = "brickadmin.views.server_error"
