"""Where a webhook may post: its address checked when an admin saves it and again before every
attempt, against the addresses its host resolves to now (docs/webhooks.md#the-address-rules).

``check`` resolves the host once and refuses the URL if *any* address is loopback, link-local,
private, shared (100.64/10), unspecified, multicast, reserved or otherwise not global, unless
``WEBHOOKS_ALLOW_PRIVATE`` is on; a cloud metadata address is refused even then. Plain ``http``
goes only to an allowed private address, or anywhere with ``WEBHOOKS_ALLOW_HTTP``. The sender
connects to the one address checked (``Target.ip``), never resolving the name again, so a name
that answers differently the second time (DNS rebinding) reaches nothing unchecked.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud instance metadata services: never a webhook's target, whatever the settings allow.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean …
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure's wire server
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # an IPv4 address inside an IPv6 one


class Refused(ValueError):
    """A URL a webhook may not post to; its message says why, for the admin and the log."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``ip``) and what to say there (``host``, ``path``)."""

    scheme: str
    host: str  # as the URL spells it: the Host header and, for https, the certificate's name
    port: int
    path: str  # with its query
    ip: str


def parse(url: str) -> tuple[str, str, int, str]:
    """The scheme, host, port and path of a URL a webhook may have: http(s), no credentials."""
    if any(c.isspace() or not c.isprintable() for c in url.strip()):
        raise Refused("A webhook's URL has no spaces or control characters: encode them.")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise Refused("This is not a URL a webhook can post to.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise Refused("A webhook's URL starts with https:// (or http://).")
    if parts.username is not None or parts.password is not None:
        raise Refused("Put no user name or password in a webhook's URL: it is signed instead.")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise Refused("A webhook's URL needs a host name.")
    path = parts.path or "/"
    return (
        scheme,
        host,
        port or (443 if scheme == "https" else 80),
        (f"{path}?{parts.query}" if parts.query else path),
    )


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to now (an IP literal is itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise Refused(f"The host {host} cannot be resolved.") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in found]
    if not addresses:
        raise Refused(f"The host {host} cannot be resolved.")
    return list(dict.fromkeys(addresses))


def _unwrapped(ip: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, NAT64), else itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def kind(ip: Address) -> str | None:
    """What makes an address one a webhook may not reach by default; None for a public one."""
    ip = _unwrapped(ip)
    if ip in METADATA:
        return "a cloud metadata address"
    for word, yes in (
        ("a loopback address", ip.is_loopback),
        ("a link-local address", ip.is_link_local),
        ("an unspecified address", ip.is_unspecified),
        ("a multicast address", ip.is_multicast),
        ("a private address", ip.is_private),
        ("a reserved address", ip.is_reserved),
        ("not a public address", not ip.is_global),
    ):
        if yes:
            return word
    return None


def check(url: str) -> Target:
    """``url`` checked against the rules now: what to connect to. Raises ``Refused``."""
    scheme, host, port, path = parse(url)
    addresses = resolve(host, port)
    public = False
    for ip in addresses:
        what = kind(ip)
        if what is None:
            public = True
        elif what == "a cloud metadata address" or not settings.WEBHOOKS_ALLOW_PRIVATE:
            raise Refused(
                f"{host} is {ip}, {what}: webhooks may not post there"
                + ("." if what == "a cloud metadata address" else " (WEBHOOKS_ALLOW_PRIVATE).")
            )
    if scheme == "http" and public and not settings.WEBHOOKS_ALLOW_HTTP:
        raise Refused(
            f"{host} is a public address: use https:// (plain http only to an internal host)."
        )
    return Target(scheme, host, port, path, str(addresses[0]))


def shown(url: str) -> str:
    """A webhook's URL as its page shows it: the path may hold a token (a Slack webhook's
    does), so only the scheme, host and port, and the path's first characters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "…"
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}{path[:8]}{'…' if len(path) > 8 or parts.query else ''}"
