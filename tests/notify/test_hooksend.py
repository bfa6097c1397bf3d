"""One post over https (activity/notify/hooksend.py), to a receiver on 127.0.0.1 whose certificate
names ``hooks.acme.test`` (made here, from a certificate authority of the test's own): the
connection goes to the address checked, says the URL's host in SNI and the ``Host`` header, and
the certificate is checked against that name."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from activity.notify import hooksend
from tests.notify.hookreceiver import Post, verified

pytestmark = pytest.mark.once  # no database: run once, not again on PostgreSQL

NAME = "hooks.acme.test"


def certificate(tmp: Path, names: list[str]) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for ``names``: (the CA's file, the cert, its key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "koruweb test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = (tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem")
    files[0].write_bytes(ca.public_bytes(pem))
    files[1].write_bytes(leaf.public_bytes(pem))
    files[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


class Tls:
    """An https receiver: it keeps each post and the name its client asked for (SNI)."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.posts: list[Post] = []
        self.names: list[str | None] = []
        tls = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                tls.posts.append(Post(self.path, headers, self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.sni_callback = lambda sock, name, ctx: self.names.append(name)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


@pytest.fixture
def resolving(monkeypatch: Any) -> None:
    real = socket.getaddrinfo

    def fake(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in (NAME, "other.acme.test"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.fixture
def receiver(tmp_path: Path, monkeypatch: Any, settings: Any) -> Iterator[Tls]:
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    settings.WEBHOOK_TIMEOUT_SECONDS = 5
    ca, cert, key = certificate(tmp_path, [NAME])
    monkeypatch.setattr(hooksend, "tls", lambda: ssl.create_default_context(cafile=str(ca)))
    tls = Tls(cert, key)
    yield tls
    tls.server.shutdown()
    tls.server.server_close()


def outgoing(url: str) -> hooksend.Outgoing:
    payload = {"event": "ping", "id": "ping:1", "text": "hello"}
    return hooksend.Outgoing(7, url, "kwh_the-secret", "json", "ping", payload)


def test_https_goes_to_the_checked_address_with_the_urls_name_for_sni_and_the_certificate(
    receiver, resolving
):
    sent = hooksend.send(outgoing(f"https://{NAME}:{receiver.port}/in?team=1"))
    assert sent.ok and sent.status == 204, sent
    (post,) = receiver.posts
    assert post.path == "/in?team=1" and post.headers["host"] == f"{NAME}:{receiver.port}"
    assert receiver.names == [NAME]
    assert verified(post, "kwh_the-secret") == {"event": "ping", "id": "ping:1", "text": "hello"}
    assert post.headers["x-koruweb-delivery"] == "7" and post.headers["x-koruweb-event"] == "ping"


def test_a_certificate_for_another_name_is_refused(receiver, resolving):
    sent = hooksend.send(outgoing(f"https://other.acme.test:{receiver.port}/in"))
    assert not sent.ok and sent.status is None and not sent.final
    assert "CERTIFICATE_VERIFY_FAILED" in sent.error or "certificate" in sent.error.lower()
    assert receiver.posts == []


def test_an_address_refused_is_final_and_nothing_connects(receiver, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    sent = hooksend.send(outgoing(f"https://127.0.0.1:{receiver.port}/in"))
    assert not sent.ok and sent.final and "a loopback address" in sent.error
    assert receiver.posts == [] and receiver.names == []
