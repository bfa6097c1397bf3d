"""One attempt to post one delivery to its webhook (docs/webhooks.md#the-signature).

The URL is checked again now (``hookaddr.check``) and the connection goes to the very address
checked, with the URL's host in the ``Host`` header and, for https, as the name the certificate
must hold (SNI). No proxy, no redirect followed (a 3xx is a failed attempt), at most
``READ_BYTES`` of the answer read, and the whole attempt cut off after twice
``WEBHOOK_TIMEOUT_SECONDS`` however slowly the receiver drips.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from activity.core.masking import mask
from activity.notify import hookaddr, hookbody

READ_BYTES = 4096  # of a receiver's answer: enough to say why it refused
USER_AGENT = "koruweb-webhooks/1"


@dataclass(frozen=True)
class Attempt:
    ok: bool
    status: int | None = None  # the receiver's HTTP status, if it answered
    error: str = ""
    final: bool = False  # not worth trying again: the address is refused


@dataclass(frozen=True)
class Outgoing:
    """What a delivery needs from its webhook, read before the thread that sends it."""

    delivery_id: int
    url: str
    secret: str
    format: str
    event: str
    payload: dict[str, Any]


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``X-Koruweb-Signature``: HMAC-SHA256 of ``{timestamp}.{body}`` with the secret."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def tls() -> ssl.SSLContext:
    """The system's certificate authorities; the certificate must name the URL's host."""
    return ssl.create_default_context()


class _Pinned(http.client.HTTPConnection):
    """Plain HTTP to the checked address, whatever the name resolves to now."""

    def __init__(self, target: hookaddr.Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.ip = target.ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self.ip, self.port), self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    """HTTPS to the checked address; the certificate checked against the URL's host."""

    def __init__(self, target: hookaddr.Target, timeout: float) -> None:
        self.tls = tls()
        super().__init__(target.host, target.port, timeout=timeout, context=self.tls)
        self.ip = target.ip

    def connect(self) -> None:
        plain = socket.create_connection((self.ip, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(plain, server_hostname=self.host)


def _said(text: str) -> str:
    return mask(text.replace("\n", " ").strip())[:200]


def send(out: Outgoing) -> Attempt:
    """Post ``out`` once; what came of it."""
    try:
        target = hookaddr.check(out.url)
    except hookaddr.Refused as refused:
        return Attempt(False, error=f"Refused: {refused}"[:300], final=True)
    body = json.dumps(hookbody.body(out.format, out.payload), ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Koruweb-Event": out.event,
        "X-Koruweb-Delivery": str(out.delivery_id),
        "X-Koruweb-Timestamp": timestamp,
        "X-Koruweb-Signature": sign(out.secret, timestamp, body),
    }
    timeout = float(settings.WEBHOOK_TIMEOUT_SECONDS)
    kind = _PinnedTLS if target.scheme == "https" else _Pinned
    connection = kind(target, timeout)
    cutoff = threading.Timer(2 * timeout, _cut, [connection])
    cutoff.start()
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read(READ_BYTES).decode("utf-8", "replace")
        status = response.status
    except (OSError, http.client.HTTPException, ValueError) as fault:
        late = not cutoff.is_alive()
        said = f"Could not post: {type(fault).__name__}: {fault}"
        return Attempt(False, error="Timed out" if late else _said(said))
    finally:
        cutoff.cancel()
        connection.close()
    if 200 <= status < 300:
        return Attempt(True, status)
    if 300 <= status < 400:
        where = _said(response.getheader("Location") or "")
        return Attempt(False, status, f"Redirect to {where or 'nowhere'}: not followed")
    return Attempt(False, status, _said(f"HTTP {status} {response.reason}: {answer}"))


def _cut(connection: http.client.HTTPConnection) -> None:
    """Stop an attempt that took too long: its socket is shut, its read fails."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
