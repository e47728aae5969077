"""A real OpenID provider on loopback for the single sign-on tests: panva's oidc-provider
(tests/sso/provider/server.mjs, installed by bin/setup-oidc-provider into a cache outside the
checkout), started on a free port with brickadmin registered as its client; and the settings
that turn single sign-on on against it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from brickadmin.sso import discovery
from tests.conftest import require_service

REPO = Path(__file__).resolve().parents[2]
CLIENT_ID = "brickadmin"
CLIENT_SECRET = "test-client-secret-0123456789"  # noqa: S105 (a test provider's)
ADMIN_GROUP = "brick-admins"
PROVIDER_NAME = "Test IdP"

# The provider's users: login name -> password, subject, groups. The subject differs from the
# name on purpose (the console must key on it), and the email is never the identity.
USERS = {
    "ada": {
        "password": "ada-at-the-idp",
        "sub": "u-0001-ada",
        "email": "ada@example.org",
        "groups": [ADMIN_GROUP, "ml-team"],
    },
    "bert": {"password": "bert-at-the-idp", "sub": "u-0002-bert", "email": "bert@example.org", "groups": ["ml-team"]},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def enable_sso(settings, issuer: str) -> None:
    """The settings BRICK_OIDC_* give, read at request time by brickadmin.sso."""
    settings.BRICK_OIDC_ISSUER = issuer
    settings.BRICK_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.BRICK_OIDC_ADMIN_GROUP = ADMIN_GROUP
    settings.BRICK_OIDC_PROVIDER_NAME = PROVIDER_NAME
    settings.BRICK_OIDC_GROUPS_CLAIM = "groups"
    if "brickadmin.sso.backend.ProviderBackend" not in settings.AUTHENTICATION_BACKENDS:
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "brickadmin.sso.backend.ProviderBackend"]


@dataclass
class Provider:
    issuer: str
    users_file: Path
    log_file: Path
    process: subprocess.Popen

    def stop(self) -> None:
        """The provider goes down (its port then refuses connections)."""
        self.process.terminate()
        self.process.wait(5)

    def set_groups(self, login: str, groups: list[str]) -> None:
        """Change a user's groups at the provider (read again at the next sign-in)."""
        users = json.loads(self.users_file.read_text())
        users[login]["groups"] = groups
        self.users_file.write_text(json.dumps(users))


def provider_dir() -> str:
    """bin/setup-oidc-provider's directory (installs on first use); skip locally, fail in CI."""
    have_node = bool(shutil.which("node") and shutil.which("npm"))
    require_service(have_node, "Node.js and npm (for the test OpenID provider)")
    out = subprocess.run([str(REPO / "bin" / "setup-oidc-provider")], capture_output=True, text=True, timeout=300)
    require_service(out.returncode == 0, f"the test OpenID provider (bin/setup-oidc-provider: {out.stderr.strip()})")
    return out.stdout.strip()


@pytest.fixture
def oidc_provider(live_server, settings, tmp_path):
    """The provider running on 127.0.0.1 (the console runs on localhost: other cookies),
    brickadmin registered with the live server's callback and post-logout URIs; SSO on."""
    directory = provider_dir()
    users_file = tmp_path / "users.json"
    users_file.write_text(json.dumps(USERS))
    config = tmp_path / "provider.json"
    log_file = tmp_path / "provider.log"
    proc = None
    try:
        # A loaded 2-core machine (load 20+ in CI) once took over a minute: Node first says it
        # listens, then the discovery document must answer; a slow first answer is waited for,
        # not abandoned after a second and asked again. A provider that has not said it listens
        # after a minute is stopped and started again on a fresh port (in two full CI runs one
        # start of the hundreds sat silent for three minutes), within three minutes in all.
        deadline = time.monotonic() + 180
        last, hung = "no answer yet", []
        while True:
            if proc is None:
                port = free_port()
                issuer = f"http://127.0.0.1:{port}"
                config.write_text(json.dumps(provider_config(issuer, port, users_file, live_server.url)))
                with open(log_file, "w") as log:
                    proc = subprocess.Popen(
                        ["node", f"{directory}/server.mjs", str(config)], stdout=log, stderr=subprocess.STDOUT
                    )
                started = time.monotonic()
            if "listening" in log_file.read_text():
                try:
                    answer = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=15)
                    if answer.ok:
                        break
                    last = f"HTTP {answer.status_code}"
                except requests.RequestException as exc:
                    last = repr(exc)
            elif proc.poll() is None and time.monotonic() - started > 60 and time.monotonic() < deadline - 30:
                hung.append(log_file.read_text())
                stop_provider(proc)
                proc = None
                continue
            if proc.poll() is not None or time.monotonic() > deadline:
                alive = "still running" if proc.poll() is None else f"exited {proc.returncode}"
                earlier = "".join(f"\nan earlier start, silent for a minute:\n{h}" for h in hung)
                pytest.fail(
                    f"the test OpenID provider did not start ({alive}; {last}):\n{log_file.read_text()}{earlier}"
                )
            time.sleep(0.1)
        enable_sso(settings, issuer)
        yield Provider(issuer, users_file, log_file, proc)
    finally:
        if proc is not None:
            stop_provider(proc)
        discovery.forget()


def stop_provider(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def provider_config(issuer: str, port: int, users_file: Path, console_url: str) -> dict:
    """The provider's CONFIG (tests/sso/provider/server.mjs), brickadmin its one client."""
    return {
        "issuer": issuer,
        "port": port,
        "users_file": str(users_file),
        "clients": [
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{console_url}/oidc/callback/"],
                "post_logout_redirect_uris": [f"{console_url}/login/"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }
        ],
    }
