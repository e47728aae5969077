from django.urls import path

from .views import health, inventory, manifest, pictures, runs, wizards
from .views.readiness import dra_readiness_page

urlpatterns = [
    path("", inventory.dashboard, name="dashboard"),
    path("dashboard/models/", inventory.dashboard_models, name="dashboard_models"),
    path("nodes/", inventory.node_list, name="node_list"),
    path("nodes/<str:name>/", inventory.node_detail, name="node_detail"),
    path("availability/", inventory.availability, name="availability"),
    path("help/", inventory.help_page, name="help"),
    path("evidence/", inventory.evidence, name="evidence"),
    path("dra-readiness/", dra_readiness_page, name="dra_readiness"),
    path("procedures/", wizards.procedure_index, name="procedure_index"),
    path("procedures/<str:code>/", wizards.wizard_pick, name="wizard_pick"),
    path("procedures/<str:code>/plan/", wizards.wizard_plan, name="wizard_plan"),
    path("procedures/<str:code>/start/", wizards.wizard_start, name="wizard_start"),
    path("fixes/<str:code>/", wizards.fix_plan, name="fix_plan"),
    path("fixes/<str:code>/start/", wizards.fix_start, name="fix_start"),
    path("runs/", runs.run_list, name="run_list"),
    path("runs/<int:pk>/", runs.run_detail, name="run_detail"),
    path("runs/<int:pk>/progress/", runs.run_progress, name="run_progress"),
    path("runs/<int:pk>/stream/", runs.run_stream, name="run_stream"),
    path("runs/<int:pk>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/resume/", runs.run_resume, name="run_resume"),
    path("runs/<int:pk>/restore/", runs.run_restore, name="run_restore"),
    path("runs/<int:pk>/checklist/", runs.run_confirm_checklist, name="run_confirm_checklist"),
    path("runs/<int:pk>/audit.json", runs.run_audit_json, name="run_audit_json"),
    path("runs/<int:pk>/audit.csv", runs.run_audit_csv, name="run_audit_csv"),
    path("manifest/", manifest.manifest_view, name="manifest"),
    path("manifest/save/", manifest.manifest_save, name="manifest_save"),
    path("manifest/apply/", manifest.manifest_apply, name="manifest_apply"),
    path("health/", health.health, name="health"),
    path("charts/utilisation/<str:scope>/", pictures.utilisation, name="utilisation_chart"),
]
