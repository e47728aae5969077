"""The approval queue as admins use it with many requests: what each requester already
holds, a failing card kept in view, folded cards on a full page, and several requests
approved with one confirmation (each through the approval service, each audited, a failure
of one reported beside it without undoing the others)."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from brickadmin.cluster import PermanentClusterError
from brickadmin.cluster.twin import TwinGateway
from workspaces.models import Decision, WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db
SHARED = "nvidia.com/gpu.shared"


def card(html: str, name: str) -> str:
    return re.search(rf'<article class="card request" data-testid="request-{name}".*?</article>', html, re.S).group(0)


def test_the_queue_shows_what_the_requester_already_holds(twin, alice, bob, admin_client, make_request):
    make_request(bob, "bob-more")
    make_request(bob, "bob-even-more")
    make_request(alice, "alice-first")
    html = admin_client.get(reverse("approval_queue")).content.decode()
    bob_card = text(card(html, "bob-more"))
    assert "bob already holds: ws-shared 1 × nvidia.com/gpu.shared" in bob_card  # the seed's namespace of bob
    assert "1 other request waiting" in bob_card
    assert "alice already holds: ws-exclusive 1 × nvidia.com/gpu" in text(card(html, "alice-first"))


def test_a_refused_approval_keeps_its_card_in_view_with_the_reason(
    twin, alice, bob, admin_client, make_request, monkeypatch
):
    for i in range(5):
        make_request(bob, f"other-{i}")
    req = make_request(alice, "team-fail")
    html = admin_client.get(reverse("approval_queue")).content.decode()
    # the form comes back at its own card
    assert f'action="/workspaces/approvals/{req.pk}/approve/#req-{req.pk}"' in card(html, "team-fail")

    def refuse(self, *a, **kw):
        raise PermanentClusterError("namespaces is forbidden", status=403)

    monkeypatch.setattr(TwinGateway, "create_namespace", refuse)
    r = admin_client.post(
        reverse("approve_request", args=[req.pk]), {f"r{req.pk}-resource": SHARED, f"r{req.pk}-overcommit": "on"}
    )
    assert r.status_code == 400
    failing = card(r.content.decode(), "team-fail")
    assert '<details class="decide" open>' in failing  # unfolded, though the page folds the others
    assert "namespaces is forbidden" in text(failing)
    assert '<details class="decide" open>' not in card(r.content.decode(), "other-0")
    req.refresh_from_db()
    assert req.status == WorkspaceRequest.Status.PENDING


def test_a_full_page_folds_its_cards_and_pages_at_25(twin, bob, admin_client, make_request):
    for i in range(27):
        make_request(bob, f"many-{i:02d}")
    html = admin_client.get(reverse("approval_queue")).content.decode()
    cards = re.findall(r'<article class="card request"', html)
    assert len(cards) == 25
    assert html.count('<details class="decide">') == 25  # folded: the forms one click away
    assert "many-25" in admin_client.get(reverse("approval_queue") + "?page=2").content.decode()


def bulk(client, *pairs):
    """Post the queue's "approve several" form: (field, value) pairs, a field repeated as a list."""
    data: dict[str, list[str]] = {}
    for key, value in pairs:
        data.setdefault(key, []).append(value)
    return client.post(reverse("approve_requests"), data)


def test_several_requests_approved_with_one_confirmation_each_audited_a_failure_reported(
    twin, alice, bob, admin_client, make_request
):
    a = make_request(alice, "bulk-a", gpu=1)
    b = make_request(bob, "bulk-b", gpu=1)
    clash = make_request(bob, "ws-shared", gpu=1)  # the namespace exists: Kubernetes refuses it
    keep = make_request(bob, "bulk-not-ticked", gpu=1)
    picks = [("pick", str(r.pk)) for r in (a, b, clash)]

    chooser = bulk(admin_client, *picks)
    assert chooser.status_code == 200
    assert set(re.findall(r'data-testid="request-([a-z-]+)"', chooser.content.decode())) == {
        "bulk-a",
        "bulk-b",
        "ws-shared",
    }

    choices = [(f"r{r.pk}-resource", SHARED) for r in (a, b, clash)] + [
        (f"r{r.pk}-overcommit", "on") for r in (a, b, clash)
    ]
    confirm = bulk(admin_client, *picks, ("choose", "1"), *choices)
    assert confirm.status_code == 200
    listed = re.search(r'data-testid="to-approve".*?</ol>', confirm.content.decode(), re.S).group(0)
    for r in (a, b, clash):
        assert f"Approve Workspace {r.name} for {r.requester_name} with 1 × {SHARED}" in text(listed)
    assert WorkspaceRequest.objects.filter(status=WorkspaceRequest.Status.APPROVED).count() == 0  # not yet

    done = bulk(admin_client, *picks, ("choose", "1"), *choices, ("confirmed", "yes"))
    assert done.status_code == 200
    statuses = dict(WorkspaceRequest.objects.values_list("name", "status"))
    assert statuses["bulk-a"] == statuses["bulk-b"] == "approved"
    assert statuses["ws-shared"] == "pending" and statuses["bulk-not-ticked"] == "pending"
    assert set(Decision.objects.filter(action=Decision.Action.APPROVE).values_list("subject", flat=True)) == {
        "bulk-a",
        "bulk-b",
    }
    assert Decision.objects.filter(action=Decision.Action.APPROVE_FAILED, subject="ws-shared").exists()
    failed = re.search(r'data-testid="result-ws-shared".*?</li>', done.content.decode(), re.S).group(0)
    assert "Not approved" in text(failed) and "Kubernetes refused" in text(failed)
    keep.refresh_from_db()
    assert keep.status == "pending"


def test_several_without_a_gpu_type_each_are_not_confirmed(twin, alice, bob, admin_client, make_request):
    a = make_request(alice, "bulk-a", gpu=1)
    b = make_request(bob, "bulk-b", gpu=1)
    r = bulk(admin_client, ("pick", str(a.pk)), ("pick", str(b.pk)), ("choose", "1"), (f"r{a.pk}-resource", SHARED))
    assert r.status_code == 400
    html = r.content.decode()
    assert 'data-testid="to-approve"' not in html
    assert "Choose Exclusive, Shared or a MIG profile." in text(html)
    # even posted as confirmed, nothing is approved while a choice is missing
    bulk(
        admin_client,
        ("pick", str(a.pk)),
        ("pick", str(b.pk)),
        ("choose", "1"),
        (f"r{a.pk}-resource", SHARED),
        ("confirmed", "yes"),
    )
    assert not WorkspaceRequest.objects.filter(status="approved").exists()


def test_approving_several_is_for_admins_and_needs_the_csrf_token(twin, alice, alice_client, make_request, admin_user):
    a = make_request(alice, "bulk-a", gpu=0)
    data = {"pick": [str(a.pk)], "choose": "1", "confirmed": "yes"}
    assert alice_client.post(reverse("approve_requests"), data).status_code in (302, 403)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.post(reverse("approve_requests"), data).status_code == 403
    a.refresh_from_db()
    assert a.status == "pending"


def as_admin_sees(available: int) -> str:
    return str(available) if available >= 0 else f"none available; over-allocated by {-available}"


def test_the_queue_shows_the_figures_of_the_cluster_as_it_is(twin, alice, bob, admin_client, make_request):
    """Each card's GPU types (total, allocated, after approving, physical equivalent by the
    time-slicing nodes' replicas) and holdings, read from the stored view, are the figures
    of the cluster itself (its ledger computed from a fresh read)."""
    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.numbers.ledger import compute
    from workspaces import approvals as ws_approvals

    make_request(bob, "bob-more", gpu=2)
    make_request(alice, "alice-first", gpu=3)
    html = admin_client.get(reverse("approval_queue")).content.decode()
    choices = ws_approvals.gpu_choices(compute(take_snapshot(TwinGateway())))
    assert any(c.gpu_type == "shared" and c.replicas for c in choices)  # the seed time-slices some GPUs
    for name, gpu in (("bob-more", 2), ("alice-first", 3)):
        rows = re.findall(r"<tr class=[^>]*>.*?</tr>", card(html, name), re.S)
        shown = {re.search(r'name="r\d+-resource" value="([^"]+)"', r).group(1): r for r in rows}
        assert sorted(shown) == sorted(c.resource for c in choices)
        for c in choices:
            cells = [text(td) for td in re.findall(r"<td[^>]*>.*?</td>", shown[c.resource], re.S)]
            assert cells[2:] == [
                str(c.total),
                str(c.allocated),
                as_admin_sees(c.available),
                as_admin_sees(c.leaves(gpu)),
                c.physical_text(gpu),
            ]
    assert "bob already holds: ws-shared 1 × nvidia.com/gpu.shared" in text(card(html, "bob-more"))
