"""Where a user's chat webhook may post: the worker posts from inside the cluster, so an
address on loopback or link-local (the metadata service) is refused next to the field and
again before each post, an admin's allow-list narrows it to named hosts, and a redirect is
never followed."""

import pytest
from django.urls import reverse

from brickadmin.accounts import webhooks
from brickadmin.accounts.models import Delivery, Preference
from workspaces import approvals

from .test_notifications import start_receiver


def resolver(table):
    def _resolve(host):
        if host not in table:
            raise OSError("Name or service not known")
        return table[host]

    return _resolve


NAMES = resolver(
    {
        "chat.example.internal": ["10.20.0.5"],
        "hooks.slack.com": ["54.1.2.3", "2600:1f18::1"],
        "localhost": ["127.0.0.1", "::1"],
        "metadata.internal": ["169.254.169.254"],
        "sneaky.example": ["10.0.0.9", "127.0.0.1"],
        "mapped.example": ["::ffff:127.0.0.1"],
    }
)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T000/B000/XXX",
        "https://chat.example.internal/hooks/abc",  # on-prem Mattermost on a private address
        "http://10.1.2.3:8065/hooks/abc",
        "https://[2600:1f18::1]/hooks",
    ],
)
def test_public_and_private_chat_servers_are_accepted(url):
    assert webhooks.refusal(url, [], NAMES) == ""


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8000/admin", "internal-only"),
        ("http://localhost/", "internal-only"),
        ("http://[::1]/", "internal-only"),
        ("http://169.254.169.254/latest/meta-data/", "internal-only"),
        ("http://metadata.internal/", "internal-only"),
        ("http://0.0.0.0:6379/", "internal-only"),
        ("http://224.0.0.1/", "internal-only"),
        ("http://sneaky.example/", "internal-only"),  # one of its addresses is loopback
        ("http://mapped.example/", "internal-only"),  # IPv4-mapped loopback
        ("http://nowhere.example/", "could not be found"),
        ("ftp://chat.example.internal/", "Only an http or https address"),
        ("https://user:pw@chat.example.internal/", "user name or password"),
        ("https:///hooks", "no host"),
    ],
)
def test_internal_only_and_unreachable_addresses_are_refused_with_the_reason(url, reason):
    assert reason in webhooks.refusal(url, [], NAMES)


def test_an_allow_list_admits_only_the_hosts_it_names_even_loopback():
    allowed = ["chat.example.internal", "127.0.0.1"]
    assert webhooks.refusal("https://chat.example.internal/hooks/x", allowed, NAMES) == ""
    assert webhooks.refusal("http://127.0.0.1:9000/x", allowed, NAMES) == ""
    assert webhooks.refusal("https://CHAT.example.internal./x", allowed, NAMES) == ""
    refused = webhooks.refusal("https://hooks.slack.com/services/x", allowed, NAMES)
    assert refused == "Webhooks may only go to: 127.0.0.1, chat.example.internal."


@pytest.mark.django_db
def test_the_profile_says_why_next_to_the_field_and_keeps_the_rest(alice, login, settings):
    settings.BRICK_WEBHOOK_ALLOWED_HOSTS = []
    Preference.objects.create(user=alice, language="ko")
    page = login(alice).post(
        reverse("profile"),
        {"time_zone": "", "language": "en", "email_notifications": "on", "webhook_url": "http://169.254.169.254/x"},
    )
    assert page.status_code == 400
    assert "internal-only address" in page.context["form"].errors["webhook_url"][0]
    assert Preference.objects.get(user=alice).language == "ko"  # nothing half-saved


@pytest.mark.django_db
def test_an_address_refused_since_it_was_saved_is_not_posted_to_and_fails_at_once(
    twin, alice, admin_user, settings, worker_inline, django_capture_on_commit_callbacks
):
    server, got = start_receiver()
    try:
        Preference.objects.create(user=alice, webhook_url=got["url"])  # saved while loopback was allowed
        settings.BRICK_WEBHOOK_ALLOWED_HOSTS = []
        req = approvals.create_request(alice, name="team-w", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
        with django_capture_on_commit_callbacks(execute=True):
            approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    finally:
        server.shutdown()
        server.server_close()
    assert got["bodies"] == []
    d = Delivery.objects.get(channel="webhook")
    assert (d.status, d.attempts) == ("failed", 1) and "internal-only" in d.last_error


@pytest.mark.django_db
def test_a_redirect_is_not_followed(
    twin, alice, admin_user, settings, worker_inline, django_capture_on_commit_callbacks
):
    settings.BRICK_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    first, got = start_receiver()
    elsewhere, other = start_receiver()
    try:
        got["status"], got["location"] = 307, other["url"]
        Preference.objects.create(user=alice, webhook_url=got["url"])
        req = approvals.create_request(alice, name="team-r", gpu=1, cpu=2, memory_gib=8, storage_gib=20)
        with django_capture_on_commit_callbacks(execute=True):
            approvals.approve(req.pk, admin_user, "nvidia.com/gpu.shared", overcommit=True)
    finally:
        for s in (first, elsewhere):
            s.shutdown()
            s.server_close()
    assert len(got["bodies"]) == 3 and other["bodies"] == []
    assert Delivery.objects.get(channel="webhook").status == "failed"
