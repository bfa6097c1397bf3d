"""A webhook receiver on 127.0.0.1 for the tests: it keeps every post it gets and answers by
its path, as a team's receiver would, and ``verified`` checks a post as docs/webhooks.md tells a
receiver to (the signature over the timestamp and the body, the timestamp recent).

- ``/ok/…``: 200;
- ``/redirect/…``: 302 to ``/target/…`` (a receiver that must never be reached by following it);
- ``/flaky/<n>/…``: 500 to the first ``n`` posts to that path, then 200;
- ``/down/…``: 500 always;
- ``/slow/…``: 200 once ``gate`` is set (at most 10 s later).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self) -> None:
        self.posts: list[Post] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", 0))
                post = Post(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                with receiver.lock:
                    receiver.posts.append(post)
                    seen = sum(p.path == self.path for p in receiver.posts)
                if self.path.startswith("/slow/"):
                    receiver.gate.wait(timeout=10)
                self.send_response(receiver.status(self.path, seen))
                if self.path.startswith("/redirect/"):
                    self.send_header("Location", self.path.replace("/redirect/", "/target/", 1))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def status(path: str, seen: int) -> int:
        if path.startswith("/redirect/"):
            return 302
        if path.startswith("/down/"):
            return 500
        if path.startswith("/flaky/"):
            failures = int(path.split("/")[2])
            return 500 if seen <= failures else 200
        return 200

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, kind: str = "ok", host: str = "127.0.0.1") -> str:
        """A new address of this receiver (a path no other test uses)."""
        return f"http://{host}:{self.port}/{kind}/{uuid.uuid4().hex}"

    def to(self, url: str) -> list[Post]:
        path = "/" + url.split("/", 3)[3]
        with self.lock:
            return [p for p in self.posts if p.path == path]

    def everything(self) -> bytes:
        with self.lock:
            return b"\n".join(p.body + json.dumps(p.headers).encode() for p in self.posts)


def verified(post: Post, secret: str, *, within: int = 300) -> dict[str, Any]:
    """The post's JSON, once its signature and timestamp are checked as a receiver does."""
    timestamp = post.headers["x-koruweb-timestamp"]
    assert abs(time.time() - int(timestamp)) <= within, "an old (replayed) post"
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + post.body, hashlib.sha256)
    assert hmac.compare_digest(post.headers["x-koruweb-signature"], f"sha256={mac.hexdigest()}")
    assert post.headers["content-type"] == "application/json"
    found: dict[str, Any] = json.loads(post.body)
    return found


def running() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
