"""Which pages may open the browsers' sockets: the exact origin the request was sent to.

Channels' ``AllowedHostsOriginValidator`` compares the host name only
(docs/gotchas.md#the-origin-check-ignores-scheme-and-port), so a page on another port of the
same host, which SameSite=Lax counts as the same site and sends the session cookie from, could
open ``/ws/chats/<id>/`` and ``/ws/inbox/`` as the logged-in user.
Here an ``Origin`` passes when its scheme, host and port equal those of the request itself (its
``Host`` header, which must be one of ``ALLOWED_HOSTS``, and its scheme), or when it is one of
``CSRF_TRUSTED_ORIGINS`` — the same rule as Django's own CSRF check of a form's ``Origin``.

Every socket is checked but the runner's (``/ws/agent/``) and the agent host's (``/ws/host/``),
which no browser opens: they carry a bearer token and no ``Origin``. A new route is therefore
checked until it is exempted here.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

Scope = dict[str, Any]
ASGIApp = Any

# Sockets that carry their own credentials (a bearer token) and no cookie a page could lend.
EXEMPT_PATHS = frozenset({"/ws/agent/", "/ws/host/"})

DEFAULT_PORTS = {"http": "80", "https": "443"}


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def scheme(scope: Scope) -> str:
    """``https`` when the socket came over TLS, to Daphne or (``SECURE_PROXY_SSL_HEADER``) to
    the proxy in front of it; ``http`` otherwise."""
    if scope.get("scheme") in {"wss", "https"}:
        return "https"
    proxy_header: tuple[str, str] | None = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header:
        name, secure_value = proxy_header
        wire_name = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        forwarded = header(scope, wire_name)
        if forwarded is not None and forwarded.split(",", 1)[0].strip() == secure_value:
            return "https"
    return "http"


def normalized(origin: str) -> tuple[str, str, str] | None:
    """``(scheme, host, port)`` of an origin, the port spelled out; ``None`` if unreadable."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return None
    return parts.scheme, parts.hostname, str(port) if port else DEFAULT_PORTS[parts.scheme]


def trusted(origin: tuple[str, str, str]) -> bool:
    """One of ``CSRF_TRUSTED_ORIGINS``, whose ``https://*.example.com`` form Django also takes."""
    scheme_, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "://*." in entry:
            wildcard = normalized(entry.replace("://*.", "://wildcard.", 1))
            if wildcard is None or (wildcard[0], wildcard[2]) != (scheme_, port):
                continue
            if is_same_domain(host, "." + wildcard[1].removeprefix("wildcard.")):
                return True
        elif normalized(entry) == origin:
            return True
    return False


def origin_allowed(scope: Scope) -> bool:
    """The socket's ``Origin`` is the request's own scheme, host and port, or a trusted one."""
    raw = header(scope, b"origin")
    origin = normalized(raw) if raw is not None else None
    if origin is None:
        return False
    if trusted(origin):
        return True
    host = header(scope, b"host")
    if not host:
        return False
    domain, _ = split_domain_port(host)
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed_hosts):
        return False
    return normalized(f"{scheme(scope)}://{host}") == origin


class OriginValidator:
    """Wraps the websocket router: a browser's socket from another origin is refused before the
    handshake (HTTP 403), so no consumer ever runs for it."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        checked = scope["type"] == "websocket" and scope.get("path") not in EXEMPT_PATHS
        if checked and not origin_allowed(scope):
            await receive()  # the websocket.connect message
            await send({"type": "websocket.close"})
            return None
        return await self.application(scope, receive, send)
