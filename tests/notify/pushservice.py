"""A push service on 127.0.0.1 for the tests: it takes what ``pywebpush`` sends, keeps it, and
answers 201 — or 410 for an endpoint under ``/gone/`` (a subscription its browser dropped).
``Subscription`` is a browser's side: its keys, and the payload of a push decrypted with them
(RFC 8291, aes128gcm), as a browser would."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Subscription:
    """A browser's subscription: its endpoint at the service and its keys."""

    endpoint: str
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    secret: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        point = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64(point)

    @property
    def auth(self) -> str:
        return b64(self.secret)

    def read(self, push: Received) -> dict[str, Any]:
        """The payload as the browser decrypts it."""
        assert push.headers["content-encoding"] == "aes128gcm"
        plain = http_ece.decrypt(
            push.body, private_key=self.key, auth_secret=self.secret, version="aes128gcm"
        )
        found: dict[str, Any] = json.loads(plain)
        return found


def vapid_claims(push: Received, public_key: str) -> dict[str, Any]:
    """The claims of the push's VAPID token, once its signature is checked against the
    server's public key (and the key it names is that one)."""
    scheme, _, rest = push.headers["authorization"].partition(" ")
    assert scheme == "vapid"
    parts = dict(p.strip().split("=", 1) for p in rest.split(","))
    assert parts["k"] == public_key, (parts, public_key)
    head, body, signature = parts["t"].split(".")
    raw = unb64(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:]))
    server = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(public_key))
    server.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    assert json.loads(unb64(head)) == {"typ": "JWT", "alg": "ES256"}
    claims: dict[str, Any] = json.loads(unb64(body))
    return claims


class PushService:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                got = Received(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                with service.lock:
                    service.received.append(got)
                self.send_response(410 if self.path.startswith("/gone/") else 201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def subscription(self, path: str = "/push/") -> Subscription:
        return Subscription(f"{self.origin}{path}{os.urandom(8).hex()}")

    def to(self, subscription: Subscription) -> list[Received]:
        with self.lock:
            return [r for r in self.received if subscription.endpoint.endswith(r.path)]


def running() -> Iterator[PushService]:
    service = PushService()
    service.thread.start()
    try:
        yield service
    finally:
        service.server.shutdown()
        service.server.server_close()
