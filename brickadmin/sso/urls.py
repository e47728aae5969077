from django.urls import path

from . import views

# The names are mozilla-django-oidc's (the backend reverses the callback's by that name).
urlpatterns = [
    path("authenticate/", views.ProviderLoginView.as_view(), name="oidc_authentication_init"),
    path("callback/", views.ProviderCallbackView.as_view(), name="oidc_authentication_callback"),
]
