"""Shared fixtures. Users follow healthchecks' habit: alice and bob are users,
charlie is another user who must never see their things; root is a cluster admin."""

import os
import socket

import pytest
from django.conf import global_settings

from tests import scenario_copies

IN_CI = bool(os.environ.get("CI"))


def require_service(available: bool, what: str):
    """Skip locally when a service is absent; fail in CI (nothing may be skipped there)."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI but is not available")
    pytest.skip(f"{what} is not available")


@pytest.fixture(autouse=True)
def fast_password_hashing(request, settings):
    """Passwords hashed with a fast hasher first, as Django's testing docs advise: the default
    PBKDF2 takes about 0.4 s of CPU per user created or login checked, most of some tests'
    time. Hashes of the default hashers still verify. Left as configured for the lab tests,
    whose other processes (the web process in the lab) check passwords this one stored."""
    if request.node.get_closest_marker("lab") is None:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]


@pytest.fixture(autouse=True)
def english():
    """Each test starts in English, whatever language an earlier test's request (a Korean
    user's, say) left active in this process: messages are asserted in English unless a test
    asks for another language."""
    from django.utils import translation

    with translation.override("en"):
        yield


@pytest.fixture
def load_scenario(db):
    """Load a scenario into the twin and return its gateway: load_scenario("seed-example")."""
    return scenario_copies.load  # loaded once per process, copied into each test's twin


@pytest.fixture
def twin(load_scenario):
    return load_scenario("seed-example")


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("root", password="pw-root-123", is_staff=True)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def charlie(django_user_model):
    return django_user_model.objects.create_user("charlie", password="pw-charlie-123")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium():
    """One Debian Chromium per test process (per xdist worker), driven by Playwright (never a
    downloaded browser): launching it is the slow part of a browser test."""
    require_service(os.path.exists(CHROMIUM), "Chromium (/usr/bin/chromium)")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def browser(chromium):
    """The process's Chromium; each test's pages and contexts are its own: whatever a test
    opened (cookies, storage, pages) is closed when it ends, so the next test starts bare."""
    yield chromium
    for ctx in list(chromium.contexts):
        ctx.close()


def browser_login(browser, live_server, username, password):
    """A new page logged in through the real login form."""
    page = browser.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page


@pytest.fixture
def unreachable(settings, tmp_path):
    """A real-cluster configuration whose API server does not exist: any API call fails.
    Returns the port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: gone, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: abc}}}}]
contexts: [{{name: c, context: {{cluster: gone, user: u}}}}]
current-context: c
""")
    settings.BRICK_CLUSTER = "kube"
    settings.BRICK_KUBECONFIG = str(kubeconfig)
    return port
