"""Where a chat webhook may post: the worker sends a user-chosen URL from inside the cluster,
so an address is checked before it is saved and again before each post (the name may resolve
elsewhere by then), and redirects are never followed.

On-prem chat servers (Mattermost) usually live on private addresses, so those are allowed by
default. Never allowed unless the host is named in ``BRICK_WEBHOOK_ALLOWED_HOSTS``: loopback
(the product's own pods and sidecars), link-local (cloud metadata at 169.254.169.254),
unspecified and multicast addresses. When the setting names hosts, only those hosts."""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from django.utils.translation import gettext as _

Resolver = Callable[[str], list[str]]


def resolve(host: str) -> list[str]:
    """Every address the name resolves to (IPv4 and IPv6), as text."""
    return sorted({info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)})


def _never_reached(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id is not part of the address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast


def refusal(url: str, allowed_hosts: Iterable[str], resolver: Resolver = resolve) -> str:
    """Why the worker would not post to ``url`` ("" when it would)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return _("Only an http or https address.")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        return _("The address has no host.")
    if parts.username or parts.password:
        return _("The address must not carry a user name or password.")
    allowed = {h.strip().rstrip(".").lower() for h in allowed_hosts if h.strip()}
    if allowed and host not in allowed:
        return _("Webhooks may only go to: %(hosts)s.") % {"hosts": ", ".join(sorted(allowed))}
    if allowed:
        return ""
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:  # a name, not an address
        addresses = []
    try:
        addresses = addresses or resolver(host)
    except (OSError, UnicodeError):
        return _("The host %(host)s could not be found.") % {"host": host}
    if not addresses:
        return _("The host %(host)s could not be found.") % {"host": host}
    if any(_never_reached(a) for a in addresses):
        return _("%(host)s is a loopback, link-local or otherwise internal-only address; ask an admin to allow it.") % {
            "host": host
        }
    return ""


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could point the post somewhere the address check never saw."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


opener = urllib.request.build_opener(NoRedirects)
