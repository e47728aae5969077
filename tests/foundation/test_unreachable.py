"""The product pointed at an API server that does not answer: a banner on every page, no crash."""

import pytest
from django.urls import reverse


@pytest.mark.parametrize(
    "name,args",
    [
        ("dashboard", []),
        ("dashboard_models", []),
        ("availability", []),
        ("node_list", []),
        ("node_detail", ["dev-a1-ws04"]),
        ("help", []),
    ],
)
def test_every_page_shows_the_banner_and_does_not_crash(admin_client, unreachable, name, args):
    resp = admin_client.get(reverse(name, args=args))
    assert resp.status_code in (200, 503)
    html = resp.content.decode()
    assert "The cluster cannot be reached." in html
    assert f"127.0.0.1:{unreachable}" in html
