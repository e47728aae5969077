"""Bad input for every form field, including markup and SQL-looking text: refused with a
message beside the field, echoed back escaped, and harmless to the database."""

import pytest
from django.utils.html import escape

from workspaces import jobs as ws_jobs
from workspaces.models import Decision, ResourceLimit, WorkspaceJob, WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db

MARKUP = '<script>alert("x")</script>'
IMG = "<img src=x onerror=alert(1)>"
SQL = "x'); DROP TABLE workspaces_workspacerequest; --"
SQL2 = "1 OR 1=1"
NASTY = [MARKUP, IMG, SQL, SQL2, "\u202eevil", "a\x00b", "ws\nname", "  ", "../../etc/passwd", "𝓊𝓃𝒾𝒸𝑜𝒹𝑒"]


def assert_escaped(body: bytes, value: str, echoed: bool = True):
    html = body.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    if echoed and "<" in value:
        assert escape(value.strip()) in html  # echoed back, escaped


def request_data(**kw):
    data = {"name": "team-a", "gpu": 1, "cpu": 2, "memory_gib": 8, "storage_gib": 20}
    data.update(kw)
    return data


@pytest.mark.parametrize("value", NASTY)
def test_workspace_name(twin, alice_client, value):
    r = alice_client.post("/workspaces/new/", request_data(name=value))
    assert r.status_code == 400
    assert 'id="err-name"' in r.content.decode()
    assert_escaped(r.content, value)
    assert WorkspaceRequest.objects.count() == 0  # the table is there and empty


@pytest.mark.parametrize("field", ["gpu", "cpu", "memory_gib", "storage_gib"])
@pytest.mark.parametrize(
    "value", ["-1", "abc", "1.5", "1e3", "", MARKUP, SQL, SQL2, "99999999999999999999999", " 0x10"]
)
def test_amounts(twin, alice_client, field, value):
    r = alice_client.post("/workspaces/new/", request_data(**{field: value}))
    assert r.status_code == 400
    assert f'id="err-{field}"' in r.content.decode()
    assert_escaped(r.content, value)
    assert WorkspaceRequest.objects.count() == 0


@pytest.mark.parametrize("value", [MARKUP, SQL, IMG])
def test_reject_reason_is_stored_verbatim_and_shown_escaped(twin, alice, login, admin_user, make_request, value):
    req = make_request(alice, "team-a")
    admin = login(admin_user)
    admin.post(f"/workspaces/approvals/{req.pk}/reject/", {f"r{req.pk}-reason": value})
    req.refresh_from_db()
    assert req.rejection_reason == value.strip()
    for client, url in (
        (login(alice), "/workspaces/"),
        (login(alice), f"/workspaces/{req.pk}/"),
        (admin, "/workspaces/audit/"),
        (admin, "/workspaces/all/"),
    ):
        r = client.get(url)
        assert escape(value) in r.content.decode(), url
        assert_escaped(r.content, value)


@pytest.mark.parametrize("value", ["", "x" * 2001])
def test_reject_reason_missing_or_too_long(twin, alice, admin_client, make_request, value):
    req = make_request(alice, "team-a")
    r = admin_client.post(f"/workspaces/approvals/{req.pk}/reject/", {f"r{req.pk}-reason": value})
    assert r.status_code == 400
    req.refresh_from_db()
    assert req.status == "pending" and not Decision.objects.exists()


@pytest.mark.parametrize("value", [MARKUP, SQL, "nvidia.com/gpu.shared; rm -rf /", "limits.nvidia.com/gpu", "", "0"])
def test_approve_resource(twin, alice, admin_client, make_request, value):
    req = make_request(alice, "team-a")
    r = admin_client.post(f"/workspaces/approvals/{req.pk}/approve/", {f"r{req.pk}-resource": value})
    assert r.status_code == 400
    assert "Select a valid choice" in text(r.content) or "Choose Exclusive" in text(r.content)
    assert_escaped(r.content, value, echoed=False)
    req.refresh_from_db()
    assert req.status == "pending"


def test_approve_on_an_unknown_request_is_404(twin, admin_client):
    assert admin_client.post("/workspaces/approvals/999/approve/", {}).status_code == 404
    assert admin_client.post("/workspaces/approvals/999/reject/", {}).status_code == 404


@pytest.fixture
def ws(approved, alice):
    return approved(alice, "team-a")


def job_data(ws, **kw):
    data = {"workspace": ws.pk, "node": "dev-a1-ws04", "image": "busybox:1.36", "command": "echo hi", "gpu": 1}
    data.update(kw)
    return data


@pytest.mark.parametrize(
    "field,value",
    [
        ("image", MARKUP),
        ("image", SQL),
        ("image", ""),
        ("image", "busybox; rm -rf /"),
        ("image", "Busy Box"),
        ("command", 'echo "unterminated'),
        ("command", "x" * 4001),
        ("gpu", "-1"),
        ("gpu", "0"),
        ("gpu", "abc"),
        ("gpu", MARKUP),
        ("gpu", "2"),
        ("node", MARKUP),
        ("node", SQL),
        ("node", "dev-a1-ws02"),
        ("node", ""),
        ("workspace", MARKUP),
        ("workspace", SQL2),
        ("workspace", "999"),
        ("workspace", ""),
    ],
)
def test_job_fields(ws, login, alice, field, value):
    r = login(alice).post("/workspaces/jobs/new/", job_data(ws, **{field: value}))
    assert r.status_code == 400
    assert 'class="errorlist"' in r.content.decode()
    assert_escaped(r.content, value, echoed=field not in ("workspace",))
    assert not WorkspaceJob.objects.exists()


def test_command_with_markup_is_data_not_markup_nor_a_shell(ws, login, alice, admin_user, twin):
    cmd = f"python -c 'print(1)' {MARKUP}"
    r = login(alice).post("/workspaces/jobs/new/", job_data(ws, command=cmd))
    assert r.status_code == 302
    job = WorkspaceJob.objects.get()
    ws_jobs.approve_job(job.pk, admin_user)
    container = twin._list("Job", "team-a")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-c", "print(1)", "<script>alert(x)</script>"]
    r = login(alice).get(f"/workspaces/jobs/{job.pk}/")
    assert_escaped(r.content, cmd)


@pytest.mark.parametrize(
    "field,value",
    [("gpu", "-1"), ("cpu", MARKUP), ("memory_gib", SQL), ("storage_gib", "x"), ("user", MARKUP), ("group", "999")],
)
def test_limit_fields(twin, admin_client, alice, field, value):
    data = {"user": alice.pk, "gpu": 1, "cpu": 1, "memory_gib": 1, "storage_gib": 1}
    data[field] = value
    r = admin_client.post("/workspaces/settings/limits/", data)
    assert r.status_code == 400
    assert 'class="errorlist"' in r.content.decode()
    assert_escaped(r.content, value, echoed=field not in ("user", "group"))
    assert not ResourceLimit.objects.exists()


def test_limit_needs_exactly_one_of_user_or_group(twin, admin_client):
    r = admin_client.post("/workspaces/settings/limits/", {"gpu": 1, "cpu": 1, "memory_gib": 1, "storage_gib": 1})
    assert r.status_code == 400 and "Choose either a user or a group." in text(r.content)


def test_limit_saved_and_updated(twin, admin_client, alice):
    data = {"user": alice.pk, "gpu": 1, "cpu": 1, "memory_gib": 1, "storage_gib": 1}
    assert admin_client.post("/workspaces/settings/limits/", data).status_code == 302
    data["gpu"] = 2
    assert admin_client.post("/workspaces/settings/limits/", data).status_code == 302
    assert ResourceLimit.objects.get(user=alice).gpu == 2 and ResourceLimit.objects.count() == 1
    assert Decision.objects.filter(action="limit").count() == 2


@pytest.mark.parametrize("value", [MARKUP, SQL, "-1", "abc"])
def test_query_parameters_are_harmless(twin, admin_client, value):
    for url in (
        "/workspaces/approvals/?page=",
        "/workspaces/all/?status=",
        "/workspaces/audit/?page=",
        "/workspaces/jobs/new/?workspace=",
    ):
        r = admin_client.get(url + value)
        assert r.status_code == 200, url
        assert_escaped(r.content, "")
