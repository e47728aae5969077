from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("dashboard/models/", views.dashboard_models, name="dashboard_models"),
    path("nodes/", views.node_list, name="node_list"),
    path("nodes/<str:name>/", views.node_detail, name="node_detail"),
    path("availability/", views.availability, name="availability"),
    path("help/", views.help_page, name="help"),
    path("evidence/", views.evidence, name="evidence"),
]

# Conversion wizards, runs, the managed manifest, health (gpus/wizard_views.py).
from . import wizard_views as wz  # noqa: E402

urlpatterns += [
    path("procedures/", wz.procedure_index, name="procedure_index"),
    path("procedures/<str:code>/", wz.wizard_pick, name="wizard_pick"),
    path("procedures/<str:code>/plan/", wz.wizard_plan, name="wizard_plan"),
    path("procedures/<str:code>/start/", wz.wizard_start, name="wizard_start"),
    path("runs/", wz.run_list, name="run_list"),
    path("runs/<int:pk>/", wz.run_detail, name="run_detail"),
    path("runs/<int:pk>/progress/", wz.run_progress, name="run_progress"),
    path("runs/<int:pk>/cancel/", wz.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/resume/", wz.run_resume, name="run_resume"),
    path("runs/<int:pk>/checklist/", wz.run_confirm_checklist, name="run_confirm_checklist"),
    path("runs/<int:pk>/audit.json", wz.run_audit_json, name="run_audit_json"),
    path("runs/<int:pk>/audit.csv", wz.run_audit_csv, name="run_audit_csv"),
    path("manifest/", wz.manifest_view, name="manifest"),
    path("manifest/save/", wz.manifest_save, name="manifest_save"),
    path("manifest/apply/", wz.manifest_apply, name="manifest_apply"),
    path("health/", wz.health, name="health"),
]
