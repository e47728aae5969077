from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("dashboard/models/", views.dashboard_models, name="dashboard_models"),
    path("nodes/", views.node_list, name="node_list"),
    path("nodes/<str:name>/", views.node_detail, name="node_detail"),
    path("availability/", views.availability, name="availability"),
    path("help/", views.help_page, name="help"),
]
