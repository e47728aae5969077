"""A Content-Security-Policy on every response that allows no inline script,
inline style or eval, and templates that need none (the browser proof, with htmx swapping under
the policy, is test_csp_browser.py)."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from brickadmin.middleware import content_security_policy

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(p for d in ("templates", "gpus", "workspaces", "brickadmin") for p in (ROOT / d).rglob("*.html"))

# What a policy without 'unsafe-inline' and 'unsafe-eval' refuses, as it would appear in a template.
REFUSED = {
    "a style attribute": re.compile(r"\sstyle=[\"']"),
    "a <style> element": re.compile(r"<style[\s>]"),
    "an inline <script>": re.compile(r"<script(?![^>]*\ssrc=)[^>]*>"),
    "an event handler attribute": re.compile(r"\son[a-z]{3,20}=[\"']"),
    "an hx-on attribute (htmx evaluates it)": re.compile(r"\shx-on[:-]"),
    "a javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
}


def policy_directives(header: str) -> dict:
    return {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}


def test_the_templates_need_no_inline_script_style_or_eval():
    assert TEMPLATES, "no templates found"
    found = [
        f"{p.relative_to(ROOT)}: {what}" for p in TEMPLATES for what, rx in REFUSED.items() if rx.search(p.read_text())
    ]
    assert found == []


@pytest.mark.django_db
def test_every_page_sends_a_policy_without_inline_or_eval(client, alice_client, twin):
    for c, url in (
        (client, reverse("login")),
        (alice_client, reverse("dashboard")),
        (alice_client, reverse("dashboard_models")),
    ):
        header = c.get(url)["Content-Security-Policy"]
        d = policy_directives(header)
        assert d["script-src"] == ["'self'"] and d["style-src"] == ["'self'"], header
        assert d["default-src"] == ["'self'"] and d["object-src"] == ["'none'"]
        assert d["frame-ancestors"] == ["'none'"] and d["form-action"] == ["'self'"]
        assert "unsafe-inline" not in header and "unsafe-eval" not in header


def test_with_single_sign_on_the_logout_may_go_on_to_the_provider(settings):
    settings.BRICK_OIDC_ENABLED = True
    settings.BRICK_OIDC_ISSUER = "https://id.example.org:8443/realms/brick"
    assert policy_directives(content_security_policy())["form-action"] == ["'self'", "https://id.example.org:8443"]
