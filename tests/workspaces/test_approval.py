"""The approval queue: choices with their numbers, approval through the
gateway (all or nothing), overcommit, rejection, the audit record."""

import re

import pytest

from brickadmin.audit import AppendOnlyViolation
from brickadmin.cluster import ClusterUnreachable, PermanentClusterError, TransientClusterError
from brickadmin.cluster.snapshot import take_snapshot
from brickadmin.cluster.twin import TwinGateway
from gpus.numbers.ledger import compute
from workspaces import approvals as ws_approvals
from workspaces.models import Decision, WorkspaceRequest

from .conftest import objects, text

pytestmark = pytest.mark.django_db
QUEUE = "/workspaces/approvals/"


def approve_post(client, req, resource="nvidia.com/gpu.shared", overcommit=False):
    data = {f"r{req.pk}-resource": resource}
    if overcommit:
        data[f"r{req.pk}-overcommit"] = "on"
    return client.post(f"/workspaces/approvals/{req.pk}/approve/", data)


def test_queue_lists_pending_oldest_first_with_requester_amounts_and_waiting(
    twin, alice, bob, admin_client, make_request, admin_user
):
    first = make_request(bob, "older", gpu=2, cpu=4, memory_gib=16, storage_gib=50)
    make_request(alice, "newer")
    done = make_request(alice, "decided")
    ws_approvals.reject(done.pk, admin_user, "no")
    WorkspaceRequest.objects.filter(pk=first.pk).update(created_at=first.created_at.replace(year=2020))
    page = text(admin_client.get(QUEUE).content)
    assert page.index("older") < page.index("newer")
    assert "decided" not in page
    assert "older by bob" in page and "2 GPU · 4 CPU · 16 GiB memory · 50 GiB storage" in page
    assert re.search(r"older by bob waiting \d+ d", page)


def test_queue_shows_each_choice_with_total_allocated_available_after_and_physical(
    twin, alice, admin_client, make_request
):
    make_request(alice, "team-a", gpu=1)
    page = text(admin_client.get(QUEUE).content)
    # seed-example scenario: exclusive 1 total / 1 allocated; shared 2 / 1 at replicas 2
    # approving leaves exclusive 1 short: never a negative Available, admins are told by how much
    assert "Exclusive nvidia.com/gpu 1 1 0 none available; over-allocated by 1 1 physical GPU, whole" in page
    assert (
        "Shared (time-slicing) nvidia.com/gpu.shared Each pod may request at most one shared GPU "
        "(failRequestsGreaterThanOne); no memory isolation. 2 1 1 0 1 shared = 0.5 physical GPU (replicas 2)"
    ) in page


def test_two_shared_at_replicas_two_is_one_physical(twin, alice):
    ledger = compute(take_snapshot(twin))
    shared = next(c for c in ws_approvals.gpu_choices(ledger) if c.gpu_type == "shared")
    assert shared.physical_text(2) == "2 shared = 1 physical GPU (replicas 2)"


def test_mig_profiles_are_choices(load_scenario):
    gw = load_scenario("qks")
    choices = {c.resource: c for c in ws_approvals.gpu_choices(compute(take_snapshot(gw)))}
    assert {"nvidia.com/mig-1g.24gb", "nvidia.com/mig-4g.96gb"} <= set(choices)
    assert choices["nvidia.com/mig-1g.24gb"].total == 4
    assert "MIG instance" in choices["nvidia.com/mig-1g.24gb"].physical_text(1)


def test_queue_is_paginated(twin, alice, admin_client, make_request, settings):
    for i in range(settings.PAGE_SIZE + 2):
        make_request(alice, f"ws-{i:03d}")
    first, second = admin_client.get(QUEUE), admin_client.get(QUEUE + "?page=2")
    assert "ws-000" in text(first.content) and f"ws-{settings.PAGE_SIZE:03d}" not in text(first.content)
    assert f"ws-{settings.PAGE_SIZE + 1:03d}" in text(second.content) and "ws-000" not in text(second.content)
    assert f"Page 1 of 2 ({settings.PAGE_SIZE + 2} in all)" in text(first.content)


def test_every_new_workspace_namespace_enforces_baseline_pod_security_by_default(
    twin, alice, admin_client, make_request
):
    req = make_request(alice, "team-psa", gpu=1)
    assert approve_post(admin_client, req).status_code == 302
    assert objects(twin, "Namespace")["team-psa"]["metadata"]["labels"] == {
        "brick.cloud/workspace": "true",
        "brick.cloud/owner": "alice",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "baseline",
    }


def test_a_site_that_asks_for_restricted_gets_it_on_every_new_workspace_namespace(
    twin, alice, admin_client, make_request, settings
):
    settings.BRICK_WORKSPACE_POD_SECURITY = "restricted"
    req = make_request(alice, "team-strict", gpu=1)
    assert approve_post(admin_client, req).status_code == 302
    labels = objects(twin, "Namespace")["team-strict"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_approve_shared_creates_namespace_quotas_and_priority_class(
    twin, alice, admin_user, admin_client, make_request
):
    req = make_request(alice, "team-a", gpu=1, cpu=4, memory_gib=16, storage_gib=50)
    r = approve_post(admin_client, req)
    assert r.status_code == 302
    ns = objects(twin, "Namespace")["team-a"]
    assert ns["metadata"]["labels"] == {
        "brick.cloud/workspace": "true",
        "brick.cloud/owner": "alice",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "baseline",
    }
    quotas = objects(twin, "ResourceQuota", "team-a")
    compute_q = quotas["workspace-compute"]["spec"]
    assert compute_q["hard"] == {"requests.nvidia.com/gpu.shared": "1", "requests.cpu": "4", "requests.memory": "16Gi"}
    assert compute_q["scopeSelector"] == {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["brick-job-priority"]}]
    }
    assert quotas["workspace-storage"]["spec"]["hard"] == {"requests.storage": "50Gi"}
    lr = objects(twin, "LimitRange", "team-a")["workspace-defaults"]
    assert lr["spec"]["limits"][0]["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}
    pcs = objects(twin, "PriorityClass")
    assert pcs["brick-user-priority"]["value"] > 0
    req.refresh_from_db()
    assert (req.status, req.gpu_type, req.gpu_resource, req.decided_by, req.overcommit) == (
        "approved",
        "shared",
        "nvidia.com/gpu.shared",
        admin_user,
        False,
    )
    d = Decision.objects.get(workspace=req)
    assert (d.action, d.actor, d.actor_name, d.gpu_resource, d.amount, d.available_before, d.overcommit) == (
        "approve",
        admin_user,
        "root",
        "nvidia.com/gpu.shared",
        1,
        1,
        False,
    )
    assert "No pending Workspace requests." in text(admin_client.get(QUEUE).content)


def test_user_sees_the_assigned_type_and_resource(twin, alice, login, admin_client, make_request):
    alice_client = login(alice)
    req = make_request(alice, "team-a")
    approve_post(admin_client, req)
    page = text(alice_client.get("/workspaces/").content)
    assert "team-a Approved 1 2 8 GiB 20 GiB Shared (time-slicing) nvidia.com/gpu.shared" in page
    detail = text(alice_client.get(f"/workspaces/{req.pk}/").content)
    assert "nvidia.com/gpu.shared" in detail and "each pod may request at most one shared GPU" in detail


def test_approving_more_than_available_needs_the_overcommit_box(twin, alice, admin_client, admin_user, make_request):
    req = make_request(alice, "team-a", gpu=1)
    r = approve_post(admin_client, req, "nvidia.com/gpu")  # exclusive: 0 available
    assert r.status_code == 400
    assert "tick overcommit" in text(r.content)
    assert "team-a" not in objects(twin, "Namespace")
    req.refresh_from_db()
    assert req.status == "pending"
    with pytest.raises(ws_approvals.WorkspaceError, match="overcommit"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu")  # the service refuses too
    r = approve_post(admin_client, req, "nvidia.com/gpu", overcommit=True)
    assert r.status_code == 302
    req.refresh_from_db()
    assert (req.status, req.gpu_resource, req.overcommit) == ("approved", "nvidia.com/gpu", True)
    d = Decision.objects.get(workspace=req, action="approve")
    assert d.overcommit is True and d.available_before == 0
    assert (
        objects(twin, "ResourceQuota", "team-a")["workspace-compute"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "1"
    )


def test_overcommit_box_is_not_recorded_when_it_fits(twin, alice, admin_client, make_request):
    req = make_request(alice, "team-a", gpu=1)
    approve_post(admin_client, req, "nvidia.com/gpu.shared", overcommit=True)
    req.refresh_from_db()
    assert req.status == "approved" and req.overcommit is False


@pytest.mark.parametrize("failing", ["apply", "create_resource_quota", "create_namespace"])
def test_all_or_nothing_when_a_kubernetes_call_fails(twin, alice, admin_client, make_request, monkeypatch, failing):
    req = make_request(alice, "team-a")

    def boom(self, *a, **kw):
        raise PermanentClusterError("resourcequotas is forbidden: exceeded something", status=403)

    monkeypatch.setattr(TwinGateway, failing, boom)
    r = approve_post(admin_client, req)
    assert r.status_code == 400
    page = text(r.content)
    assert "not approved" in page and "resourcequotas is forbidden" in page and "still pending" in page
    assert "team-a" not in objects(twin, "Namespace")
    assert not objects(twin, "ResourceQuota", "team-a") and not objects(twin, "LimitRange", "team-a")
    req.refresh_from_db()
    assert req.status == "pending" and "forbidden" in req.last_error
    assert Decision.objects.get(workspace=req).action == "approve_failed"
    # The error stays visible on the queue, and the admin can retry once the cause is gone.
    assert "resourcequotas is forbidden" in text(admin_client.get(QUEUE).content)
    monkeypatch.undo()
    assert approve_post(admin_client, req).status_code == 302
    req.refresh_from_db()
    assert req.status == "approved" and req.last_error == ""


def test_transient_failure_midway_leaves_nothing(twin, alice, admin_user, make_request, monkeypatch, settings):
    settings.BRICK_APPROVAL_RETRY_SECONDS, settings.BRICK_APPROVAL_RETRY_BACKOFF = 0.2, 0.01
    req = make_request(alice, "team-a")
    monkeypatch.setattr(
        TwinGateway,
        "create_resource_quota",
        lambda self, *a, **kw: (_ for _ in ()).throw(TransientClusterError("503", status=503)),
    )
    with pytest.raises(ws_approvals.WorkspaceError):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert "team-a" not in objects(twin, "Namespace")


def flaky(monkeypatch, method, *faults):
    """The twin's ``method`` fails once per fault, in order, then answers as usual. A fault is
    (when, error): "before" the API server carried the call out (refused, 429, 503), or "after"
    (carried out, the answer lost: a timeout or a reset connection)."""
    real = getattr(TwinGateway, method)
    left = list(faults)

    def call(self, *a, **kw):
        if not left:
            return real(self, *a, **kw)
        when, error = left.pop(0)
        if when == "after":
            real(self, *a, **kw)
        raise error

    monkeypatch.setattr(TwinGateway, method, call)
    return left


@pytest.fixture
def quick_retries(settings):
    settings.BRICK_APPROVAL_RETRY_SECONDS, settings.BRICK_APPROVAL_RETRY_BACKOFF = 30, 0.01


def test_an_approval_continues_through_transient_api_failures_and_makes_everything_once(
    twin, alice, admin_client, make_request, monkeypatch, quick_retries
):
    req = make_request(alice, "team-a", gpu=1, storage_gib=50)
    timeout = TransientClusterError("POST /api/v1/namespaces: timed out", reason="Timeout")
    refused = ClusterUnreachable("connection refused")
    faults = [
        flaky(monkeypatch, "list_nodes", ("before", TransientClusterError("Too many requests", status=429))),
        flaky(monkeypatch, "create_namespace", ("before", refused), ("after", timeout)),
        flaky(
            monkeypatch,
            "create_resource_quota",
            ("after", TransientClusterError("connection reset by peer")),
            ("before", TransientClusterError("etcdserver: leader changed", status=500)),
        ),
        flaky(monkeypatch, "apply", ("before", TransientClusterError("service unavailable", status=503))),
    ]
    assert approve_post(admin_client, req).status_code == 302  # the admin pressed Approve once
    assert not any(faults)  # every fault was met
    req.refresh_from_db()
    assert req.status == "approved" and req.last_error == ""
    assert [n["metadata"]["name"] for n in twin.list_namespaces()].count("team-a") == 1
    quotas = twin.list_resource_quotas("team-a")
    assert sorted(q["metadata"]["name"] for q in quotas) == ["workspace-compute", "workspace-storage"]
    by_name = {q["metadata"]["name"]: q["spec"]["hard"] for q in quotas}
    assert by_name["workspace-compute"]["requests.nvidia.com/gpu.shared"] == "1"
    assert by_name["workspace-storage"] == {"requests.storage": "50Gi"}
    assert list(objects(twin, "LimitRange", "team-a")) == ["workspace-defaults"]
    assert Decision.objects.filter(workspace=req, action="approve").count() == 1
    assert not Decision.objects.filter(workspace=req, action="approve_failed").exists()
    retries = list(Decision.objects.filter(workspace=req, action="approve_retry").order_by("id"))
    assert len(retries) == 6
    assert "Too many requests" in retries[0].detail and "retry 1" in retries[0].detail
    assert "connection refused" in retries[1].detail and "timed out" in retries[2].detail
    # Each retry is on the Workspace's history, as a run's retried steps are on its page.
    page = text(admin_client.get("/workspaces/cluster/team-a/").content)
    assert page.count("Workspace approval retried") == 6 and "connection reset by peer" in page


def test_a_failure_after_the_quotas_were_made_keeps_them_and_makes_none_twice(
    twin, alice, admin_user, make_request, monkeypatch, quick_retries
):
    # The last write (the LimitRange) fails once, after both quotas were created: the retry
    # finds them, as this approval's own, and goes on.
    req = make_request(alice, "team-a", gpu=1, storage_gib=50)
    real = TwinGateway.apply
    failed = []

    def limit_range_fails_once(self, manifest, *a, **kw):
        if manifest["kind"] == "LimitRange" and not failed:
            failed.append(manifest["kind"])
            raise ClusterUnreachable("connection refused")
        return real(self, manifest, *a, **kw)

    monkeypatch.setattr(TwinGateway, "apply", limit_range_fails_once)
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert failed and WorkspaceRequest.objects.get(pk=req.pk).status == "approved"
    quotas = twin.list_resource_quotas("team-a")
    assert sorted(q["metadata"]["name"] for q in quotas) == ["workspace-compute", "workspace-storage"]
    assert list(objects(twin, "LimitRange", "team-a")) == ["workspace-defaults"]
    assert Decision.objects.filter(workspace=req, action="approve_retry").count() == 1
    assert Decision.objects.filter(workspace=req, action="approve").count() == 1


def test_an_approval_whose_api_server_stays_away_stops_with_the_reason_after_its_retries(
    twin, alice, admin_client, make_request, monkeypatch, settings
):
    settings.BRICK_APPROVAL_RETRY_SECONDS, settings.BRICK_APPROVAL_RETRY_BACKOFF = 0.5, 0.01
    req = make_request(alice, "team-a")
    flaky(monkeypatch, "apply", *[("before", ClusterUnreachable("connection refused"))] * 1000)
    r = approve_post(admin_client, req)
    assert r.status_code == 400 and "connection refused" in text(r.content)
    req.refresh_from_db()
    assert req.status == "pending" and "Nothing was kept; the request is still pending" in req.last_error
    assert "team-a" not in objects(twin, "Namespace")
    assert Decision.objects.filter(workspace=req, action="approve_retry").count() >= 2
    assert Decision.objects.filter(workspace=req, action="approve_failed").count() == 1
    monkeypatch.undo()  # the API server is back: Approve again makes it
    assert approve_post(admin_client, req).status_code == 302
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "approved"


def test_a_namespace_someone_else_made_during_a_retry_is_not_taken_over(
    twin, alice, admin_user, make_request, monkeypatch, quick_retries
):
    req = make_request(alice, "team-a")
    real = TwinGateway.create_namespace
    calls = []

    def refused_then_taken(self, name, labels, *a, **kw):
        calls.append(name)
        if len(calls) == 1:  # the API server was away; meanwhile bob's namespace of that name appears
            real(self, name, {"brick.cloud/workspace": "true", "brick.cloud/owner": "bob"})
            raise ClusterUnreachable("connection refused")
        return real(self, name, labels, *a, **kw)

    monkeypatch.setattr(TwinGateway, "create_namespace", refused_then_taken)
    with pytest.raises(ws_approvals.WorkspaceError, match="already exists"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert objects(twin, "Namespace")["team-a"]["metadata"]["labels"]["brick.cloud/owner"] == "bob"
    assert not objects(twin, "ResourceQuota", "team-a")
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "pending"


def test_a_namespace_made_behind_our_back_is_never_deleted(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a")
    twin.create_namespace("team-a", {"someone": "else"})
    with pytest.raises(ws_approvals.WorkspaceError, match="already exists"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert objects(twin, "Namespace")["team-a"]["metadata"]["labels"] == {"someone": "else"}


def test_an_approval_cut_short_after_the_cluster_answered_is_continued_by_the_next(
    twin, alice, admin_user, make_request
):
    # What an approval leaves when the database goes away between the cluster's answers and
    # the commit: the namespace and the storage quota in the cluster, the request still pending.
    req = make_request(alice, "team-a", gpu=1, storage_gib=50)
    twin.create_namespace("team-a", {"brick.cloud/workspace": "true", "brick.cloud/owner": "alice"})
    twin.create_resource_quota("team-a", "workspace-storage", {"requests.storage": "10Gi"})
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    req.refresh_from_db()
    assert req.status == "approved"
    quotas = objects(twin, "ResourceQuota", "team-a")
    assert quotas["workspace-compute"]["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "1"
    assert quotas["workspace-storage"]["spec"]["hard"] == {"requests.storage": "50Gi"}
    assert Decision.objects.filter(workspace=req, action="approve").count() == 1


def test_another_owners_workspace_namespace_in_the_way_is_not_continued(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a")
    twin.create_namespace("team-a", {"brick.cloud/workspace": "true", "brick.cloud/owner": "bob"})
    with pytest.raises(ws_approvals.WorkspaceError, match="already exists"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert objects(twin, "Namespace")["team-a"]["metadata"]["labels"]["brick.cloud/owner"] == "bob"
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "pending"


def test_reject_needs_a_reason_which_the_user_sees(twin, alice, login, admin_client, admin_user, make_request):
    alice_client = login(alice)
    req = make_request(alice, "team-a")
    r = admin_client.post(f"/workspaces/approvals/{req.pk}/reject/", {f"r{req.pk}-reason": "   "})
    assert r.status_code == 400
    req.refresh_from_db()
    assert req.status == "pending"
    r = admin_client.post(f"/workspaces/approvals/{req.pk}/reject/", {f"r{req.pk}-reason": "No A30 left this month"})
    assert r.status_code == 302
    req.refresh_from_db()
    assert (req.status, req.rejection_reason, req.decided_by) == ("rejected", "No A30 left this month", admin_user)
    assert "team-a Rejected 1 2 8 GiB 20 GiB No A30 left this month" in text(alice_client.get("/workspaces/").content)
    d = Decision.objects.get(workspace=req)
    assert (d.action, d.actor_name, d.detail) == ("reject", "root", "No A30 left this month")
    assert "team-a" not in objects(twin, "Namespace")


def test_a_decided_request_cannot_be_decided_again(twin, alice, admin_user, admin_client, make_request):
    req = make_request(alice, "team-a")
    ws_approvals.reject(req.pk, admin_user, "no")
    approve_post(admin_client, req)
    req.refresh_from_db()
    assert req.status == "rejected" and "team-a" not in objects(twin, "Namespace")
    with pytest.raises(ws_approvals.WorkspaceError, match="already decided"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")


def test_zero_gpu_workspace_gets_no_gpu_key(twin, alice, admin_user, make_request):
    req = make_request(alice, "cpu-only", gpu=0)
    ws_approvals.approve(req.pk, admin_user, "")
    hard = objects(twin, "ResourceQuota", "cpu-only")["workspace-compute"]["spec"]["hard"]
    assert hard == {"requests.cpu": "2", "requests.memory": "8Gi"}


def test_audit_records_are_append_only(twin, alice, admin_user, make_request, django_user_model):
    req = make_request(alice, "team-a")
    ws_approvals.reject(req.pk, admin_user, "no")
    d = Decision.objects.get()
    d.detail = "rewritten"
    with pytest.raises(AppendOnlyViolation):
        d.save()
    with pytest.raises(AppendOnlyViolation):
        d.delete()
    with pytest.raises(AppendOnlyViolation):
        Decision.objects.update(detail="x")
    with pytest.raises(AppendOnlyViolation):
        Decision.objects.all().delete()
    # The actor's name outlives the account.
    admin_user.delete()
    d = Decision.objects.get()
    assert d.actor is None and d.actor_name == "root"


# --- quota keys: only what the API server enforces can ever be produced ----------------

ENFORCED_GPU_KEY = re.compile(r"^requests\.nvidia\.com/(gpu|gpu\.shared|mig-[0-9]+g\.[0-9]+gb(\.me)?)$")


@pytest.mark.parametrize("scenario", ["seed-example", "qks", "demo"])
def test_every_choice_of_every_scenario_yields_only_enforced_keys(
    load_scenario, alice, admin_user, make_request, scenario
):
    gw = load_scenario(scenario)
    choices = ws_approvals.gpu_choices(compute(take_snapshot(gw)))
    assert choices
    for i, choice in enumerate(choices):
        req = make_request(alice, f"ws-{i}")
        ws_approvals.approve(req.pk, admin_user, choice.resource, overcommit=True)
        hard = objects(gw, "ResourceQuota", f"ws-{i}")["workspace-compute"]["spec"]["hard"]
        gpu_keys = [k for k in hard if "nvidia.com" in k]
        assert gpu_keys == ["requests." + choice.resource]
        assert all(ENFORCED_GPU_KEY.match(k) for k in gpu_keys)
        assert set(hard) - set(gpu_keys) == {"requests.cpu", "requests.memory"}


@pytest.mark.parametrize(
    "bad",
    [
        "limits.nvidia.com/gpu",
        "nvidia.com/gpu",
        "requests.nvidia.com/gpu",
        "nvidia.com/gpu.shared ",
        "cpu",
        "nvidia.com/mig-1g.5gb",
        "nvidia.com/gpux",
        "",
    ],
)
def test_the_form_cannot_yield_another_key(twin, alice, admin_client, make_request, bad):
    """Only the ledger's choices are accepted ('nvidia.com/gpu' is one, so it is exempt)."""
    req = make_request(alice, "team-a")
    r = approve_post(admin_client, req, bad if bad != "nvidia.com/gpu" else "nvidia.com/gpu ", overcommit=True)
    req.refresh_from_db()
    if req.status == "approved":  # a choice after stripping whitespace
        hard = objects(twin, "ResourceQuota", "team-a")["workspace-compute"]["spec"]["hard"]
        assert all(ENFORCED_GPU_KEY.match(k) for k in hard if "nvidia" in k)
    else:
        assert r.status_code == 400 and "team-a" not in objects(twin, "Namespace")


def test_service_refuses_a_resource_that_is_not_a_choice(twin, alice, admin_user, make_request):
    req = make_request(alice, "team-a")
    for bad in ("limits.nvidia.com/gpu", "nvidia.com/foo", "cpu"):
        with pytest.raises(ws_approvals.WorkspaceError):
            ws_approvals.approve(req.pk, admin_user, bad, overcommit=True)
    with pytest.raises(ws_approvals.WorkspaceError):
        ws_approvals.quota_hard(req, "limits.nvidia.com/gpu")
    assert "team-a" not in objects(twin, "Namespace")


def test_the_twin_refuses_unenforced_keys_like_the_api_server(twin):
    twin.create_namespace("x", {})
    for key in ("limits.nvidia.com/gpu", "nvidia.com/gpu"):
        with pytest.raises(PermanentClusterError):
            twin.create_resource_quota("x", "q", {key: "1"})
    with pytest.raises(PermanentClusterError, match="unsupported scope"):
        twin.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "q", "namespace": "x"},
                "spec": {
                    "hard": {"requests.storage": "1Gi"},
                    "scopeSelector": {
                        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["a"]}]
                    },
                },
            }
        )


def test_queue_query_count_does_not_grow_with_the_queue(twin, alice, bob, admin_client, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(n):
        WorkspaceRequest.objects.all().delete()
        WorkspaceRequest.objects.bulk_create(
            WorkspaceRequest(
                name=f"q-{i}",
                requester=(alice, bob)[i % 2],
                requester_name="x",
                gpu=1,
                cpu=1,
                memory_gib=1,
                storage_gib=1,
            )
            for i in range(n)
        )
        admin_client.get(QUEUE)
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(QUEUE + "?page=2").status_code == 200
        return len(ctx.captured_queries)

    assert count(settings.PAGE_SIZE * 2) == count(settings.PAGE_SIZE * 12)


def test_the_user_sees_the_quota_the_cluster_holds(approved, alice, login):
    ws = approved(alice, "team-a")
    page = text(login(alice).get(f"/workspaces/{ws.pk}/").content)
    assert "workspace-compute requests.nvidia.com/gpu.shared 1 0" in page
    assert "workspace-storage requests.storage 20Gi 0" in page


def test_a_request_rejected_while_being_approved_leaves_no_namespace(
    twin, alice, admin_user, make_request, monkeypatch
):
    req = make_request(alice, "team-a")
    real_apply = TwinGateway.apply

    def reject_meanwhile(self, manifest, **kw):
        WorkspaceRequest.objects.filter(pk=req.pk).update(status="rejected", rejection_reason="by another admin")
        return real_apply(self, manifest, **kw)

    monkeypatch.setattr(TwinGateway, "apply", reject_meanwhile)
    with pytest.raises(ws_approvals.WorkspaceError, match="already decided"):
        ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert "team-a" not in objects(twin, "Namespace")
    assert not Decision.objects.filter(workspace=req, action="approve").exists()


def test_an_email_username_becomes_a_valid_owner_label(twin, admin_user, make_request, django_user_model):
    eve = django_user_model.objects.create_user("eve+ml@example.com", password="x")
    req = make_request(eve, "eve-ws")
    ws_approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared")
    assert objects(twin, "Namespace")["eve-ws"]["metadata"]["labels"]["brick.cloud/owner"] == "eve_ml_example.com"
    req.refresh_from_db()
    assert req.requester_name == "eve+ml@example.com"


def test_the_twin_refuses_invalid_namespace_names_and_label_values(twin):
    for name, labels in (("Bad_Name", {}), ("ok", {"brick.cloud/owner": "a@b"}), ("ok2", {"x": "-a"})):
        with pytest.raises(PermanentClusterError, match="is invalid"):
            twin.create_namespace(name, labels)


def test_gpu_operator_time_sliced_gpus_are_not_offered_as_whole(load_scenario, alice, admin_client, make_request):
    """Qcs05 advertises its one GPU time-sliced ×5 as plain
    nvidia.com/gpu, qcs06 one whole GPU. The choice says which nodes' nvidia.com/gpu is shared,
    is not called Exclusive, and its physical equivalent uses the replicas."""
    gw = load_scenario("qks")
    choices = {c.resource: c for c in ws_approvals.gpu_choices(compute(take_snapshot(gw)))}
    gpu = choices["nvidia.com/gpu"]
    assert (gpu.gpu_type, gpu.total, gpu.shared_logical) == ("mixed", 6, 5)
    assert gpu.shared_nodes_text == "qcs05 (replicas 5: 5 of 6)"
    assert gpu.physical_text(5) == (
        "5 nvidia.com/gpu = 5 physical GPU on nodes with whole GPUs, or 1 physical GPU "
        "where it is time-sliced (qcs05 (replicas 5: 5 of 6)): a quota cannot tell them "
        "apart"
    )

    make_request(alice, "team-q", gpu=5)
    page = text(admin_client.get(QUEUE).content)
    assert "Exclusive nvidia.com/gpu" not in page
    assert "Exclusive or shared, by node nvidia.com/gpu" in page
    assert "nvidia.com/gpu is time-sliced (shared, no memory isolation) on: qcs05 (replicas 5: 5 of 6)." in page
    avail = text(admin_client.get("/availability/").content)
    assert (
        "nvidia.com/gpu Exclusive or shared, by node Time-sliced (shared, no memory isolation) on: qcs05 "
        "(replicas 5: 5)" in avail
    )
    admin_client.force_login(alice)  # the request form, as its user sees it: the same words
    form = text(admin_client.get("/workspaces/new/").content)
    assert (
        "nvidia.com/gpu Exclusive or shared, by node Time-sliced (shared, no memory isolation) on: qcs05 "
        "(replicas 5: 5)" in form
    )
    assert not re.search(r"nvidia\.com/gpu Exclusive(?! or shared)", form)  # not offered as whole GPUs


def test_only_time_sliced_plain_gpus_are_shared_with_their_replicas(load_scenario):
    gw = load_scenario("qks")
    gw.delete("v1", "Node", "qcs06")  # only the time-sliced node serves nvidia.com/gpu now
    gpu = next(c for c in ws_approvals.gpu_choices(compute(take_snapshot(gw))) if c.resource == "nvidia.com/gpu")
    assert (gpu.gpu_type, gpu.total, gpu.replicas) == ("shared", 5, [5])
    assert gpu.physical_text(5) == "5 shared = 1 physical GPU (replicas 5)"
