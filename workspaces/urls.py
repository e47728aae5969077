from django.urls import path

from . import cluster_views, reclaim_views, showback_views, views

urlpatterns = [
    path("", views.workspace_list, name="workspace_list"),
    path("new/", views.workspace_request, name="workspace_request"),
    path("<int:pk>/", views.workspace_detail, name="workspace_detail"),
    path("<int:pk>/withdraw/", views.workspace_withdraw, name="workspace_withdraw"),
    path("<int:pk>/asks/<int:ask_pk>/keep/", reclaim_views.answer_keep, name="reclaim_keep"),
    path("<int:pk>/asks/<int:ask_pk>/release/", reclaim_views.answer_release, name="reclaim_release"),
    path("jobs/", views.job_list, name="job_list"),
    path("jobs/new/", views.job_create, name="job_create"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    # admins
    path("approvals/", views.approval_queue, name="approval_queue"),
    path("approvals/approve/", views.approve_requests, name="approve_requests"),
    path("approvals/<int:pk>/approve/", views.approve_request, name="approve_request"),
    path("approvals/<int:pk>/reject/", views.reject_request, name="reject_request"),
    path("approvals/jobs/", views.job_queue, name="job_queue"),
    path("approvals/jobs/<int:pk>/approve/", views.approve_job, name="approve_job"),
    path("approvals/jobs/<int:pk>/reject/", views.reject_job, name="reject_job"),
    path("all/", views.all_workspaces, name="all_workspaces"),
    path("cluster/", cluster_views.cluster_workspaces, name="cluster_workspaces"),
    path("showback/", showback_views.showback, name="showback"),
    path("cluster/<slug:namespace>/", cluster_views.cluster_workspace, name="cluster_workspace"),
    path("cluster/<slug:namespace>/adopt/", cluster_views.workspace_adopt, name="workspace_adopt"),
    path("cluster/<slug:namespace>/quota/", cluster_views.workspace_quota, name="workspace_quota"),
    path("cluster/<slug:namespace>/ask/", reclaim_views.ask_owner, name="reclaim_ask"),
    path("settings/", views.workspace_settings, name="workspace_settings"),
    path("settings/limits/", views.limit_save, name="limit_save"),
    path("settings/limits/<int:pk>/delete/", views.limit_delete, name="limit_delete"),
    path("audit/", views.audit_log, name="workspace_audit"),
]
