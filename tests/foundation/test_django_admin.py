"""Django's admin (/django-admin/) is useful to the console's admins (staff
users without model permissions): the audit records are listed, searchable and filterable,
and nothing can be added, changed or deleted there. (Users and groups stay Django's own:
only superusers manage accounts.)"""

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from brickadmin.admin import AuditAdmin
from gpus.models import ProcedureRun, StepRun
from gpus.procedures import service
from gpus.tasks import execute_run
from workspaces import approvals
from workspaces.models import Decision

NOTHING = "permission to view or edit anything"


@pytest.fixture
def records(twin, admin_user, alice):
    ws = approvals.approve(
        approvals.create_request(alice, name="team-alpha", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    approvals.reject(
        approvals.create_request(alice, name="team-beta", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "No budget",
    )
    run = service.start_run("C", "", {"replicas": 2}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    Client().post("/login/", {"username": "mallory", "password": "wrong-password"})  # one failed sign-in
    return {"workspace": ws, "run": run}


def test_console_admin_sees_the_audit_records(records, admin_client, admin_user):
    assert not admin_user.is_superuser and not admin_user.user_permissions.exists()
    page = admin_client.get("/django-admin/").content.decode()
    assert NOTHING not in page
    for name in ("Decisions", "Procedure runs", "Step runs", "Access attempts", "Access failures", "Access logs"):
        assert f">{name}<" in page, name


def test_every_record_lists_and_searches(records, admin_client):
    audited = [m for m, a in admin.site._registry.items() if isinstance(a, AuditAdmin)]
    assert {m._meta.model_name for m in audited} >= {
        "decision",
        "procedurerun",
        "steprun",
        "accessattempt",
        "accessfailurelog",
        "accesslog",
    }
    for model in audited:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for query in ("", "?q=team-alpha", "?q=1"):
            assert admin_client.get(url + query).status_code == 200, (url, query)


def test_search_and_filters_narrow_the_lists(records, admin_client):
    decisions = "/django-admin/workspaces/decision/"
    page = admin_client.get(decisions + "?q=team-alpha").content.decode()
    assert "team-alpha" in page and "team-beta" not in page
    page = admin_client.get(decisions + "?action__exact=reject").content.decode()
    assert "team-beta" in page and "team-alpha" not in page
    run = records["run"]
    page = admin_client.get(f"/django-admin/gpus/steprun/?q={run.pk}").content.decode()
    assert f"{StepRun.objects.filter(run=run).count()} step runs" in page
    page = admin_client.get("/django-admin/gpus/procedurerun/?status__exact=succeeded").content.decode()
    assert f"/django-admin/gpus/procedurerun/{run.pk}/change/" in page
    page = admin_client.get("/django-admin/axes/accessfailurelog/?q=mallory").content.decode()
    assert "mallory" in page and "1 access failure" in page
    page = admin_client.get("/django-admin/axes/accessattempt/?q=nobody-by-that-name").content.decode()
    assert "0 access attempts" in page


@pytest.mark.parametrize("superuser", [False, True])
def test_no_row_can_be_added_changed_or_deleted(records, admin_client, admin_user, superuser):
    admin_user.is_superuser = superuser
    admin_user.save()
    decision = Decision.objects.filter(subject="team-alpha").first()
    run = records["run"]
    for app, model, pk in (
        ("workspaces", "decision", decision.pk),
        ("gpus", "procedurerun", run.pk),
        ("workspaces", "workspacerequest", records["workspace"].pk),
        ("workspaces", "jobsettings", None),
        ("axes", "accessattempt", None),
    ):
        base = f"/django-admin/{app}/{model}/"
        assert admin_client.get(base + "add/").status_code == 403, model
        if pk is None:
            continue
        view = admin_client.get(f"{base}{pk}/change/")
        assert view.status_code == 200 and 'name="_save"' not in view.content.decode(), model  # a view, no form
        assert admin_client.post(f"{base}{pk}/change/", {"subject": "x"}).status_code == 403, model
        assert admin_client.get(f"{base}{pk}/delete/").status_code == 403, model
        assert admin_client.post(f"{base}{pk}/delete/", {"post": "yes"}).status_code == 403, model
    page = admin_client.get("/django-admin/workspaces/decision/").content.decode()
    assert 'name="action"' not in page  # no bulk actions (no "delete selected")
    assert Decision.objects.filter(pk=decision.pk, subject="team-alpha").exists()
    assert ProcedureRun.objects.filter(pk=run.pk, status="succeeded").exists()


def test_users_cannot_open_it(records, alice_client):
    assert alice_client.get("/django-admin/").status_code == 302
    assert alice_client.get("/django-admin/workspaces/decision/").status_code == 302


def test_the_job_settings_are_named_once(records, admin_client):
    page = admin_client.get("/django-admin/").content.decode()
    assert ">Job settings<" in page and "settingss" not in page
