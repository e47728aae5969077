"""The permission matrix over EVERY URL the project routes (the resolver is walked, so
URLs other apps add later are covered too):
- anonymous visitors are sent to a login page, for GET and POST alike;
- users get 403 on admin pages and cannot approve or reject anything;
- charlie never sees alice's Workspaces or Jobs (404 on hers, absent from every page);
- POSTs without a CSRF token are refused.
"""

import re
import uuid

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from workspaces import jobs as ws_jobs
from workspaces.models import ResourceLimit, WorkspaceJob, WorkspaceRequest

from .conftest import objects

pytestmark = pytest.mark.django_db

PUBLIC = {"login"}  # reachable without an account (the login form itself)
# The two legs of single sign-on come before any account (tests/sso); with it off, as here: 404.
SSO_LEGS = {"oidc_authentication_init", "oidc_authentication_callback"}
# Admin-only views, by URL name, with the method that exercises them.
ADMIN_GET = {
    "node_list",
    "node_detail",
    "approval_queue",
    "job_queue",
    "all_workspaces",
    "workspace_settings",
    "workspace_audit",
    "cluster_workspaces",
    "showback",
    "lockouts",
}
ADMIN_POST = {
    "approve_request",
    "approve_requests",
    "reject_request",
    "approve_job",
    "reject_job",
    "limit_save",
    "limit_delete",
    "workspace_settings",
    "workspace_adopt",
    "lockout_unlock",
}
OWNED = {"workspace_detail", "job_detail"}  # objects of one user: 404 for anyone else
SECRET_WS, SECRET_IMAGE = "alice-secret-ws", "registry.example/alice-secret-image"


def walk(patterns, prefix="", namespace=None):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern), p.namespace or namespace)
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.name, namespace, p.callback


def concrete(route, values):
    """A URL for a route: <conv:name> filled from ``values`` or a sample of its converter."""
    if route.startswith("^") or "(?P<" in route:
        return None  # regex routes (django-admin internals): covered through the admin index

    def fill(m):
        conv, name = m.group(1) or "str", m.group(2)
        if name in values:
            return str(values[name])
        return {"int": "1", "uuid": str(uuid.uuid4()), "slug": "x", "path": "x"}.get(conv, "dev-a1-ws04")

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)


@pytest.fixture
def world(approved, alice, admin_user, make_request):
    """Alice owns an approved Workspace with a Job, and a pending request; a limit exists."""
    ws = approved(alice, SECRET_WS)
    job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image=SECRET_IMAGE, command="", gpu=1)
    ws_jobs.approve_job(job.pk, admin_user)
    pending_job = ws_jobs.create_job(alice, ws, node="dev-a1-ws04", image=SECRET_IMAGE, command="", gpu=1)
    pending = make_request(alice, "alice-pending-ws")
    limit = ResourceLimit.objects.create(user=alice, gpu=1, cpu=1, memory_gib=1, storage_gib=1)
    return {"ws": ws, "job": job, "pending_job": pending_job, "pending": pending, "limit": limit}


def all_urls(world):
    ids = {
        "workspace_detail": world["ws"].pk,
        "job_detail": world["job"].pk,
        "approve_request": world["pending"].pk,
        "reject_request": world["pending"].pk,
        "approve_job": world["pending_job"].pk,
        "reject_job": world["pending_job"].pk,
        "limit_delete": world["limit"].pk,
    }
    out = []
    for route, name, ns, _callback in walk(get_resolver().url_patterns):
        values = {"pk": ids[name]} if name in ids else {}
        url = concrete(route, values)
        if url:
            out.append((url, name, ns))
    return out


def is_login_redirect(r):
    return r.status_code == 302 and re.match(r"^/(django-admin/)?login/\?next=", r["Location"])


def test_the_matrix_covers_every_url(world):
    names = {name for _url, name, _ns in all_urls(world)}
    assert {"approval_queue", "approve_request", "job_create", "dashboard", "node_list"} <= names
    assert len(all_urls(world)) >= 25


def test_anonymous_is_sent_to_login_everywhere(world):
    anon = Client()
    for url, name, ns in all_urls(world):
        if name in PUBLIC and ns is None:
            assert anon.get(url).status_code == 200, url
            continue
        if name in SSO_LEGS:
            assert anon.get(url).status_code == 404 and anon.post(url).status_code in (404, 405), url
            continue
        if ns == "admin" and name in (
            "login",
            "logout",
            "password_change",
            "password_change_done",
            "javascript-catalog",
        ):
            continue  # django-admin's own auth pages
        for method in (anon.get, anon.post):
            r = method(url)
            assert is_login_redirect(r), (url, method.__name__, r.status_code)
    assert WorkspaceRequest.objects.get(pk=world["pending"].pk).status == "pending"


def test_users_get_403_on_admin_pages_and_cannot_decide(world, alice, charlie, login, twin):
    for user in (alice, charlie):
        client = login(user)
        for url, name, ns in all_urls(world):
            if ns is not None:
                continue
            if name in ADMIN_GET:
                assert client.get(url).status_code == 403, (user, url)
            if name in ADMIN_POST:
                assert (
                    client.post(
                        url,
                        {
                            f"r{world['pending'].pk}-resource": "nvidia.com/gpu.shared",
                            f"r{world['pending'].pk}-reason": "x",
                            f"j{world['pending_job'].pk}-reason": "x",
                            "approval_required": "",
                            "user": user.pk,
                            "gpu": 9,
                            "cpu": 9,
                            "memory_gib": 9,
                            "storage_gib": 9,
                        },
                    ).status_code
                    == 403
                ), (user, url)
    # nothing was decided or changed
    assert WorkspaceRequest.objects.get(pk=world["pending"].pk).status == "pending"
    assert "alice-pending-ws" not in objects(twin, "Namespace")
    assert WorkspaceJob.objects.get(pk=world["pending_job"].pk).status == "pending"
    assert ResourceLimit.objects.get(user=alice).gpu == 1 and ResourceLimit.objects.count() == 1
    # the django-admin site is closed to non-staff users too
    assert login(alice).get("/django-admin/").status_code == 302


def test_charlie_never_sees_alices_workspaces_or_jobs(world, charlie, alice, login):
    charlie_c, alice_c = login(charlie), login(alice)
    for url, name, ns in all_urls(world):
        if ns is not None:
            continue
        r = charlie_c.get(url)
        assert r.status_code < 500, url
        if name in OWNED:
            assert r.status_code == 404, url
            assert alice_c.get(url).status_code == 200, url
        body = r.content.decode()
        for secret in (SECRET_WS, "alice-pending-ws", SECRET_IMAGE, world["job"].k8s_name):
            assert secret not in body, (url, secret)
    # and not by guessing ids either
    for pk in range(1, 6):
        assert charlie_c.get(f"/workspaces/{pk}/").status_code == 404
        assert charlie_c.get(f"/workspaces/jobs/{pk}/").status_code == 404


def test_admin_pages_render_for_admins(world, admin_user, login):
    admin = login(admin_user)
    for url, name, ns in all_urls(world):
        if ns is not None or name in ("logout",):
            continue
        r = admin.get(url)
        assert r.status_code in (200, 302, 404, 405), (url, r.status_code)
        if name in ADMIN_GET:
            assert r.status_code == 200, url


def test_posts_need_a_csrf_token(world, admin_user):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    pk = world["pending"].pk
    r = strict.post(f"/workspaces/approvals/{pk}/approve/", {f"r{pk}-resource": "nvidia.com/gpu.shared"})
    assert r.status_code == 403
    r = strict.post(f"/workspaces/approvals/{pk}/reject/", {f"r{pk}-reason": "x"})
    assert r.status_code == 403
    assert WorkspaceRequest.objects.get(pk=pk).status == "pending"


def test_actions_refuse_get(world, admin_user, login):
    admin = login(admin_user)
    pk = world["pending"].pk
    for url in (
        f"/workspaces/approvals/{pk}/approve/",
        f"/workspaces/approvals/{pk}/reject/",
        f"/workspaces/approvals/jobs/{world['pending_job'].pk}/approve/",
        f"/workspaces/settings/limits/{world['limit'].pk}/delete/",
    ):
        assert admin.get(url).status_code == 405
    assert WorkspaceRequest.objects.get(pk=pk).status == "pending"
