"""Property: no value posted to any form of the project gives an HTTP 500.

Hypothesis generates each field's value: text with unicode digits ("²", "٣"), numbers far
beyond any integer column, brackets nested a thousand deep, NUL and other control characters,
empty and very long strings. Every POST form of gpus/urls.py, workspaces/urls.py and
brickadmin/urls.py is posted, as the user it is meant for and as the other one (a refusal is
fine, a crash is not); every page that only reads gets generated searches, sorts, pages and
exports. A URL added to those files without being listed here (or as GET-only) fails the
test, so a new form cannot be left out. bin/test runs it on PostgreSQL, which refuses a NUL in
text where SQLite stores it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import get_resolver, reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpus.models import ProcedureRun
from gpus.procedures import registry, service
from workspaces import approvals, jobs
from workspaces.models import JobSettings, ReclaimAsk, ResourceLimit

pytestmark = pytest.mark.django_db

UNICODE_DIGITS = "²³¹٣൬۵０𝟙⁹₇"
values = st.one_of(
    st.text(max_size=40),
    st.one_of(  # digits to str.isdigit() but not to int(), and mixed with ASCII digits
        st.text(alphabet=UNICODE_DIGITS, min_size=1, max_size=4),
        st.text(alphabet=UNICODE_DIGITS + "0123456789-+. ", min_size=1, max_size=40),
    ),
    st.one_of(  # beyond any integer column
        st.integers(min_value=-(10**40), max_value=10**40).map(str),
        st.integers(min_value=10**18, max_value=10**40).map(str),
    ),
    st.sampled_from(
        ["[" * 1000, "[" * 1500, "{a: " * 1000, "- " * 500 + "x", "[" * 60 + "]" * 60, "a:\n" + "  b: [\n" * 400]
    ),  # nested deeper than the parser's stack
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "-1",
            "1",
            "2",
            "on",
            "true",
            "\x00",
            "None",
            "nvidia.com/gpu",
            "dev-a1-ws04",
            "busybox",
            "a" + "_" * 44 + "!",
            "9" * 30,
        ]
    ),
    st.sampled_from([301, 2001, 4001, 20_000]).map(lambda n: "x" * n),  # longer than the fields allow
    st.text(alphabet="\x00\x01\x07\x08\x0b\x0c\x1b\x1f\x7f\t\n\r a1-", min_size=1, max_size=12),  # control characters
    st.sampled_from(["csv", "a\x00", "\x00csv", "-name", "name"]),  # exports and sorts
)


def fields(*names):
    """Every field with a generated value, some of them left out."""
    return st.tuples(
        st.fixed_dictionaries({n: values for n in names}), st.sets(st.sampled_from(names or ("",)), max_size=2)
    ).map(lambda t: {k: v for k, v in t[0].items() if k not in t[1]})


# url name -> (the user it is for, how to build its URL and fields from the fixture's objects)
FORMS = {
    "login": ("anonymous", lambda o: (reverse("login"), fields("username", "password", "next"))),
    "logout": ("alice", lambda o: (reverse("logout"), fields("next"))),
    "set_language": ("alice", lambda o: (reverse("set_language"), fields("language", "next"))),
    "workspace_request": (
        "alice",
        lambda o: (reverse("workspace_request"), fields("name", "gpu", "cpu", "memory_gib", "storage_gib", "purpose")),
    ),
    "job_create": ("alice", lambda o: (reverse("job_create"), fields("workspace", "node", "image", "command", "gpu"))),
    "approve_request": (
        "admin",
        lambda o: (
            reverse("approve_request", args=[o["pending"].pk]),
            fields(f"r{o['pending'].pk}-resource", f"r{o['pending'].pk}-overcommit", "page"),
        ),
    ),
    "approve_requests": (
        "admin",
        lambda o: (
            reverse("approve_requests"),
            fields(
                "pick", "choose", "confirmed", "edit", f"r{o['pending'].pk}-resource", f"r{o['pending'].pk}-overcommit"
            ),
        ),
    ),
    "reject_request": (
        "admin",
        lambda o: (reverse("reject_request", args=[o["pending"].pk]), fields(f"r{o['pending'].pk}-reason", "page")),
    ),
    "approve_job": ("admin", lambda o: (reverse("approve_job", args=[o["job"].pk]), fields("page"))),
    "reject_job": (
        "admin",
        lambda o: (reverse("reject_job", args=[o["job"].pk]), fields(f"j{o['job'].pk}-reason", "page")),
    ),
    "workspace_settings": (
        "admin",
        lambda o: (reverse("workspace_settings"), fields("approval_required", "access_text")),
    ),
    "limit_save": (
        "admin",
        lambda o: (reverse("limit_save"), fields("user", "group", "gpu", "cpu", "memory_gib", "storage_gib")),
    ),
    "limit_delete": ("admin", lambda o: (reverse("limit_delete", args=[o["limit"].pk]), fields("next"))),
    "wizard_start": ("admin", lambda o: (reverse("wizard_start", args=[o["code"]]), fields("node", *o["params"]))),
    "fix_start": ("admin", lambda o: (reverse("fix_start", args=[o["code"]]), fields("node", *o["params"]))),
    "run_cancel": ("admin", lambda o: (reverse("run_cancel", args=[o["run"].pk]), fields("next"))),
    "run_resume": ("admin", lambda o: (reverse("run_resume", args=[o["run"].pk]), fields("next"))),
    "run_confirm_checklist": (
        "admin",
        lambda o: (reverse("run_confirm_checklist", args=[o["run"].pk]), fields("checklist_confirmed")),
    ),
    "run_restore": ("admin", lambda o: (reverse("run_restore", args=[o["run"].pk]), fields("next"))),
    "job_cancel": ("alice", lambda o: (reverse("job_cancel", args=[o["job"].pk]), fields("next"))),
    "manifest_save": ("admin", lambda o: (reverse("manifest_save"), fields("content", "note"))),
    "manifest_apply": ("admin", lambda o: (reverse("manifest_apply"), fields("next"))),
    "profile": (
        "alice",
        lambda o: (reverse("profile"), fields("time_zone", "language", "email_notifications", "webhook_url")),
    ),
    "notifications": ("alice", lambda o: (reverse("notifications"), fields("page"))),
    "lockout_unlock": ("admin", lambda o: (reverse("lockout_unlock"), fields("username", "address"))),
    "workspace_adopt": ("admin", lambda o: (reverse("workspace_adopt", args=["team-a"]), fields("owner", "note"))),
    "workspace_withdraw": ("alice", lambda o: (reverse("workspace_withdraw", args=[o["pending"].pk]), fields("next"))),
    "workspace_quota": (
        "admin",
        lambda o: (reverse("workspace_quota", args=["team-a"]), fields("gpu", "reason", "undo_of", "reclaim_of")),
    ),
    "reclaim_ask": ("admin", lambda o: (reverse("reclaim_ask", args=["team-a"]), fields("days", "message"))),
    "reclaim_keep": (
        "alice",
        lambda o: (reverse("reclaim_keep", args=[o["ws"].pk, o["ask"].pk]), fields("until", "reason")),
    ),
    "reclaim_release": (
        "alice",
        lambda o: (reverse("reclaim_release", args=[o["ws"].pk, o["ask"].pk]), fields("amount")),
    ),
}
# Pages that only read (GET); their query strings are fuzzed too.
GET_FORMS = {
    "wizard_plan": lambda o: (reverse("wizard_plan", args=[o["code"]]), fields("node", *o["params"])),
    "fix_plan": lambda o: (reverse("fix_plan", args=[o["code"]]), fields("node", *o["params"])),
    "run_list": lambda o: (reverse("run_list"), fields("procedure", "status", "node", "actor", "page")),
    "manifest": lambda o: (reverse("manifest"), fields("v")),
    "all_workspaces": lambda o: (reverse("all_workspaces"), fields("status", "page")),
    "approval_queue": lambda o: (reverse("approval_queue"), fields("page")),
    "workspace_audit": lambda o: (reverse("workspace_audit"), fields("page")),
    "job_create_get": lambda o: (reverse("job_create"), fields("workspace", "node")),
    "wizard_pick": lambda o: (reverse("wizard_pick", args=[o["code"]]), fields("node")),
    "cluster_workspaces": lambda o: (reverse("cluster_workspaces"), fields("q", "sort", "page", "format")),
    "cluster_workspace": lambda o: (reverse("cluster_workspace", args=["team-a"]), fields("range")),
    "showback": lambda o: (reverse("showback"), fields("month", "q", "sort", "page", "format")),
    "utilisation_chart": lambda o: (reverse("utilisation_chart", args=["workspace"]), fields("of", "range")),
    "notification_deliveries": lambda o: (reverse("notification_deliveries"), fields("page")),
}
GET_ONLY = {
    "dashboard",
    "dashboard_models",
    "node_list",
    "node_detail",
    "availability",
    "help",
    "evidence",
    "procedure_index",
    "run_detail",
    "run_progress",
    "run_stream",
    "run_audit_json",
    "run_audit_csv",
    "health",
    "dra_readiness",
    "workspace_list",
    "workspace_detail",
    "job_list",
    "job_detail",
    "job_queue",
    "lockouts",
    "oidc_authentication_init",
    "oidc_authentication_callback",
}  # single sign-on: GET only (tests/sso)


# The URL arguments of the read-only pages that take some (from the fixture's objects); a page
# added with arguments fails test_every_read_only_page_gets_generated_queries until listed here.
GET_ONLY_ARGS = {
    "node_detail": lambda o: ["dev-a1-ws04"],
    "run_detail": lambda o: [o["run"].pk],
    "run_progress": lambda o: [o["run"].pk],
    "run_stream": lambda o: [o["run"].pk],
    "run_audit_json": lambda o: [o["run"].pk],
    "run_audit_csv": lambda o: [o["run"].pk],
    "workspace_detail": lambda o: [o["pending"].pk],
    "job_detail": lambda o: [o["job"].pk],
}
PAGE_QUERY = ("q", "sort", "page", "format", "status", "node")  # what lists and pages read


def _url_names(resolver, prefix=""):
    for p in resolver.url_patterns:
        if hasattr(p, "url_patterns"):
            if "admin" in str(p.pattern):  # Django's own admin site
                continue
            yield from _url_names(p, prefix)
        elif p.name:
            yield p.name


def test_every_url_is_fuzzed_or_read_only():
    names = set(_url_names(get_resolver()))
    unknown = names - set(FORMS) - set(GET_FORMS) - GET_ONLY
    assert not unknown, f"list these URLs in FORMS (they take a POST) or GET_ONLY: {sorted(unknown)}"


@pytest.fixture
def objects(twin, admin_user, alice, django_user_model):
    """A pending and an approved Workspace of alice, a Job awaiting approval, a limit, a run."""
    pending = approvals.create_request(alice, name="team-p", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    ws = approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    approvals.approve(ws.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    settings_row = JobSettings.load()
    settings_row.approval_required = True
    settings_row.save()
    job = jobs.create_job(alice, ws, node="dev-a1-ws04", image="busybox", command="true", gpu=1)
    limit = ResourceLimit.objects.create(user=alice, gpu=1, cpu=1, memory_gib=1, storage_gib=1)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    ask = ReclaimAsk.objects.create(
        namespace="team-a",
        workspace=ws,
        resource="nvidia.com/gpu.shared",
        quota_at_ask=1,
        asked_by_name="root",
        deadline=timezone.now() + timedelta(days=7),
    )
    assert ProcedureRun.objects.filter(pk=run.pk).exists()
    clients = {"anonymous": Client()}
    for who, user in (("admin", admin_user), ("alice", alice)):
        clients[who] = Client()
        clients[who].force_login(user)
    return {
        "pending": pending,
        "ws": ws,
        "ask": ask,
        "job": job,
        "limit": limit,
        "run": run,
        "clients": clients,
        "code": "A",
        "params": [],
    }


def _fixes():
    """The procedures a health finding offers as "Fix"."""
    return [p for p in registry.all_procedures() if p.fixes and not p.listed]


def _check(resp, url, data):
    assert resp.status_code < 500, f"{resp.status_code} for {url} with {data!r}"


FUZZ = settings(
    max_examples=50,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


# 50 generated posts for each of the forms (and 25 queries for each page below): bin/test runs
# them, bin/test --quick leaves them out
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORMS))
@FUZZ
@given(data=st.data())
def test_no_post_gives_a_500(objects, name, data):
    who, build = FORMS[name]
    if name == "login" and data.draw(st.integers(0, 4)):  # each login hashes a password: fewer of them
        return
    # The user the form is for most of the time; the others too (they must be refused cleanly).
    client = objects["clients"][data.draw(st.sampled_from([who] * 6 + ["admin", "alice", "anonymous"]))]
    if name in ("wizard_start", "fix_start"):
        procs = registry.all_procedures() if name == "wizard_start" else _fixes()
        proc = data.draw(st.sampled_from(procs))
        objects = {**objects, "code": proc.code, "params": [p.name for p in proc.params]}
    url, strategy = build(objects)
    payload = data.draw(strategy)
    _check(client.post(url, payload), url, payload)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GET_FORMS))
@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_no_query_gives_a_500(objects, name, data):
    if name in ("wizard_plan", "wizard_pick", "fix_plan"):
        proc = data.draw(st.sampled_from(_fixes() if name == "fix_plan" else registry.all_procedures()))
        objects = {**objects, "code": proc.code, "params": [p.name for p in proc.params]}
    url, strategy = GET_FORMS[name](objects)
    payload = data.draw(strategy)
    client = objects["clients"][data.draw(st.sampled_from(["admin", "admin", "alice"]))]
    _check(client.get(url, payload), url, payload)


def _read_only_url(name, objects):
    args = GET_ONLY_ARGS[name](objects) if name in GET_ONLY_ARGS else []
    return reverse(name, args=args)


def test_every_read_only_page_gets_generated_queries(objects):
    for name in sorted(GET_ONLY):
        assert _read_only_url(name, objects), f"list the URL arguments of {name} in GET_ONLY_ARGS"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GET_ONLY))
@settings(FUZZ, max_examples=15)
@given(data=st.data())
def test_no_query_of_a_read_only_page_gives_a_500(objects, name, data):
    url = _read_only_url(name, objects)
    payload = data.draw(fields(*PAGE_QUERY))
    client = objects["clients"][data.draw(st.sampled_from(["admin", "admin", "alice"]))]
    _check(client.get(url, payload), url, payload)


def test_the_fuzz_runs_on_postgresql_in_ci():
    """SQLite stores a NUL that PostgreSQL refuses: the property is about production's database."""
    import os

    from django.db import connection

    if not os.environ.get("CI") and connection.vendor != "postgresql":
        pytest.skip("run through bin/test, which starts PostgreSQL")
    assert connection.vendor == "postgresql"
