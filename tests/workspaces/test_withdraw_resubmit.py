"""A user withdraws a request still waiting for an admin, and asks again for a rejected one."""

from django.test import Client
from django.urls import reverse

from workspaces import approvals
from workspaces.models import Decision, WorkspaceRequest

from .conftest import text


def test_a_pending_request_is_withdrawn_by_its_requester_only(make_request, alice, bob, login, admin_user):
    req = make_request(alice, "team-w", gpu=2)
    page = login(alice).get(reverse("workspace_detail", args=[req.pk])).content.decode()
    assert 'data-confirm="Withdraw your request for Workspace team-w?' in page
    assert login(bob).post(reverse("workspace_withdraw", args=[req.pk])).status_code == 404  # not his
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(reverse("workspace_withdraw", args=[req.pk])).status_code == 403  # no CSRF token
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "pending"
    r = login(alice).post(reverse("workspace_withdraw", args=[req.pk]))
    assert r.status_code == 302
    req.refresh_from_db()
    assert req.status == "withdrawn"
    assert Decision.objects.filter(action=Decision.Action.WITHDRAW, subject="team-w", actor_name="alice").exists()
    queue = text(login(admin_user).get(reverse("approval_queue")).content)
    assert "team-w" not in queue
    # the name is free again, and the form starts from what was asked
    again = login(alice).get(reverse("workspace_request"), {"again": req.pk}).content.decode()
    assert 'value="team-w"' in again
    assert (
        approvals.create_request(alice, name="team-w", gpu=1, cpu=2, memory_gib=8, storage_gib=20).status == "pending"
    )


def test_a_rejected_request_is_asked_for_again_from_its_figures(make_request, alice, bob, login, admin_user):
    req = make_request(alice, "team-r", gpu=3, cpu=4)
    approvals.reject(req.pk, admin_user, "too many GPUs")
    page = login(alice).get(reverse("workspace_detail", args=[req.pk])).content.decode()
    assert f"?again={req.pk}" in page and 'data-testid="withdraw"' not in page
    form = login(alice).get(reverse("workspace_request"), {"again": req.pk}).content.decode()
    assert 'value="team-r"' in form and 'name="cpu" value="4"' in form
    other = login(bob).get(reverse("workspace_request"), {"again": req.pk}).content.decode()
    assert 'value="team-r"' not in other  # someone else's request gives nothing


def test_a_decided_request_cannot_be_withdrawn(make_request, alice, login, admin_user):
    req = make_request(alice, "team-x")
    approvals.reject(req.pk, admin_user, "no")
    login(alice).post(reverse("workspace_withdraw", args=[req.pk]))
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "rejected"
