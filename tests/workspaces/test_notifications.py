"""Notifications: a decision reaches its requester, a run's end the admin who started it, a
fix the Workspace's owner; in the product always, by email through a real SMTP server started
here on loopback (aiosmtpd) and by webhook to a real HTTP receiver (http.server), each by the
recipient's choice and in their language. A send that fails is retried, then left failed for
admins to see; the action it tells of stands."""

import json
import socket
import threading
from email import message_from_bytes
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from brickadmin.accounts.models import Delivery, Notification, Preference
from brickadmin.cluster.scenarios import gpu_pod
from gpus.models import ProcedureRun
from gpus.procedures import engine, service
from workspaces import approvals
from workspaces.models import WorkspaceRequest

from .conftest import text

pytestmark = pytest.mark.django_db


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mailbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content, policy=email_policy)))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp(settings):
    from aiosmtpd.controller import Controller

    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    yield box
    controller.stop()


def start_receiver():
    """An HTTP server on loopback that keeps every JSON body posted to it and answers
    ``status`` (200 unless a test says otherwise), with ``location`` when it is set."""
    got = {"bodies": [], "status": 200, "location": ""}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's name for it
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got["bodies"].append((self.headers.get("Content-Type"), json.loads(body)))
            self.send_response(got["status"])
            if got["location"]:
                self.send_header("Location", got["location"])
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    got["url"] = f"http://127.0.0.1:{server.server_address[1]}/hooks/brick"
    return server, got


@pytest.fixture
def receiver(settings):
    """A chat server on loopback, which the site's admin allowed webhooks to reach (loopback
    is refused unless allowed by name)."""
    settings.BRICK_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    server, got = start_receiver()
    yield got
    server.shutdown()
    server.server_close()


def choose(user, **prefs):
    Preference.objects.update_or_create(user=user, defaults=prefs)


def test_an_approval_reaches_the_requester_in_korean_in_the_product_by_email_and_webhook(
    twin, alice, admin_user, smtp, receiver, worker_inline, login, django_capture_on_commit_callbacks
):
    alice.email = "alice@example.test"
    alice.save()
    page = login(alice).post(
        reverse("profile"),
        {"time_zone": "", "language": "ko", "email_notifications": "on", "webhook_url": receiver["url"]},
    )
    assert page.status_code == 302
    req = approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    with django_capture_on_commit_callbacks(execute=True):
        approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)

    ((rcpt, mail),) = smtp.messages
    assert rcpt == ["alice@example.test"] and mail["Subject"] == "Workspace team-a 승인됨"
    assert "root 님이 Workspace team-a를 승인했습니다" in mail.get_content()
    ((ctype, hook),) = receiver["bodies"]
    assert ctype == "application/json" and hook["text"].startswith("*Workspace team-a 승인됨*")
    assert set(Delivery.objects.values_list("channel", "status", "attempts")) == {
        ("email", "sent", 1),
        ("webhook", "sent", 1),
    }
    client = login(alice)
    home = client.get(reverse("workspace_list")).content.decode()
    assert 'data-testid="unread-count">1<' in home
    listed = text(client.get(reverse("notifications")).content)
    assert "Workspace team-a 승인됨" in listed
    assert 'data-testid="unread-count"' not in client.get(reverse("workspace_list")).content.decode()


def test_a_rejection_says_why_in_english_and_only_in_the_product_when_the_user_chose_so(
    twin, alice, bob, admin_user, smtp, worker_inline, login, django_capture_on_commit_callbacks
):
    alice.email = "alice@example.test"
    alice.save()
    choose(alice, email_notifications=False)
    req = approvals.create_request(alice, name="team-b", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    with django_capture_on_commit_callbacks(execute=True):
        approvals.reject(req.pk, admin_user, "No A100 left this quarter")
    assert smtp.messages == [] and not Delivery.objects.exists()
    note = Notification.objects.get(recipient=alice)
    assert (note.subject, note.body) == (
        "Workspace team-b rejected",
        "root rejected your Workspace request team-b: No A100 left this quarter",
    )
    # each sees only their own
    assert "team-b" not in text(login(bob).get(reverse("notifications")).content)


def test_a_failed_send_is_retried_then_shown_to_admins_and_the_approval_stands(
    twin, alice, admin_user, receiver, worker_inline, settings, login, admin_client, django_capture_on_commit_callbacks
):
    alice.email = "alice@example.test"
    alice.save()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2  # nobody listens
    receiver["status"] = 500
    choose(alice, webhook_url=receiver["url"])
    req = approvals.create_request(alice, name="team-c", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
    with django_capture_on_commit_callbacks(execute=True):
        approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)

    assert WorkspaceRequest.objects.get(pk=req.pk).status == "approved"
    assert len(receiver["bodies"]) == 3  # the first attempt and two retries
    failed = {d.channel: d for d in Delivery.objects.all()}
    assert {c: (d.status, d.attempts) for c, d in failed.items()} == {"email": ("failed", 3), "webhook": ("failed", 3)}
    assert "ConnectionRefusedError" in failed["email"].last_error and "500" in failed["webhook"].last_error
    page = admin_client.get(reverse("notification_deliveries")).content.decode()
    assert page.count('data-status="failed"') == 2 and "Workspace team-c approved" in page
    assert login(alice).get(reverse("notification_deliveries")).status_code == 403
    assert "Workspace team-c approved" in text(login(alice).get(reverse("notifications")).content)


def test_a_fix_run_tells_the_owner_and_its_end_the_admin_who_started_it(
    load_scenario, alice, admin_user, smtp, worker_inline, monkeypatch, django_capture_on_commit_callbacks
):
    for name, value in (
        ("BRICK_PROCEDURE_RETRY_BACKOFF", "0.01"),
        ("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0"),
        ("BRICK_PROCEDURE_STEP_PAUSE", "0"),
    ):
        monkeypatch.setenv(name, value)
    demo = load_scenario("demo")
    admin_user.email = "root@example.test"
    admin_user.save()
    alice.email = "alice@example.test"
    alice.save()
    choose(alice, language="ko")
    WorkspaceRequest.objects.create(
        name="ws-vision",
        requester=alice,
        requester_name="alice",
        gpu=8,
        cpu=64,
        memory_gib=256,
        storage_gib=1024,
        status="approved",
        gpu_resource="nvidia.com/gpu",
        gpu_type="exclusive",
    )
    pod = gpu_pod("ws-vision", "detector-retry", "gpu-a100-01", "nvidia.com/gpu", 1, phase="Failed")
    pod["status"].update(reason="UnexpectedAdmissionError", message="Allocate failed")
    demo._create(pod)
    run = service.start_run(
        "F",
        "gpu-a100-01",
        {"pod_namespace": "ws-vision", "pod_name": "detector-retry"},
        actor=admin_user,
        dispatch=False,
    )
    with django_capture_on_commit_callbacks(execute=True):
        engine.execute(run.pk, demo)
    assert ProcedureRun.objects.get(pk=run.pk).status == "succeeded"
    mails = {rcpt[0]: mail for rcpt, mail in smtp.messages}
    assert set(mails) == {"alice@example.test", "root@example.test"}
    assert mails["alice@example.test"]["Subject"].strip() == "관리자가 ws-vision/detector-retry에 조치했습니다"
    assert mails["root@example.test"]["Subject"].startswith(f"Run #{run.pk} Succeeded")
    owner_note = Notification.objects.get(recipient=alice)
    assert owner_note.kind == "fix-done" and "Allocate failed" in owner_note.body
