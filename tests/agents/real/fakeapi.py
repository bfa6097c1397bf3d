"""One fake model API for every real agent in the tests: scripted, offline, started once.

A real agent (claude-agent-acp, codex-acp, gemini-cli) is pointed at this server instead of its
vendor's API. The first part of the URL path picks the vendor's dialect (``/anthropic/…``,
``/openai/…``, ``/gemini/…``; each lives in its own module beside this one) and the test picks
the model's behaviour: it registers a *script* — the steps the model takes — and puts the
script's tag in its prompt. The vendor module finds the tag in the conversation it is sent,
counts the model turns that followed it, and answers with the next step in the vendor's own
streaming format. Requests that carry no tag (titles, summaries, checks the agents make on the
side) get a short plain answer. Every request is recorded, so a test can read what the agent
sent back to the model (a tool's result, a refusal).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Call:
    """The model asks for one tool call: the agent's own tool name and arguments."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Say:
    """The model answers in text and ends its turn."""

    text: str


@dataclass(frozen=True)
class Stall:
    """The model's stream starts and then says nothing for ``seconds`` (a slow model)."""

    seconds: float


Step = Call | Say | Stall


@dataclass
class Script:
    tag: str
    steps: list[Step]

    def step(self, index: int) -> Step:
        """The step after ``index`` model turns; past the end, the model says it is done."""
        return self.steps[index] if index < len(self.steps) else Say("Done.")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or None

    @property
    def text(self) -> str:
        return json.dumps(self.body)


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    chunks: Iterable[bytes] = ()  # written and flushed one at a time (server-sent events)

    @classmethod
    def json(cls, body: Any, status: int = 200) -> Reply:
        return cls(status=status, chunks=[json.dumps(body).encode()])

    @classmethod
    def events(cls, chunks: Iterable[bytes]) -> Reply:
        return cls(headers={"Content-Type": "text/event-stream"}, chunks=chunks)


Handler = Callable[["FakeModels", Request], Reply]


class FakeModels:
    """The fake model API on a free port of 127.0.0.1, serving every vendor's dialect."""

    def __init__(self, vendors: dict[str, Handler]) -> None:
        self.vendors = vendors
        self.scripts: dict[str, Script] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeModels:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, *steps: Step) -> str:
        """Register what the model does; put the returned tag in the prompt."""
        tag = f"[script {uuid.uuid4().hex[:12]}]"
        with self.lock:
            self.scripts[tag] = Script(tag, list(steps))
        return tag

    def find(self, text: str) -> Script | None:
        """The script whose tag ``text`` holds, if any."""
        start = text.find("[script ")
        while start != -1:
            script = self.scripts.get(text[start : start + 21])
            if script is not None:
                return script
            start = text.find("[script ", start + 1)
        return None

    def sent(self, tag: str) -> list[Request]:
        """The requests whose conversation holds ``tag``, oldest first."""
        with self.lock:
            return [r for r in self.requests if tag in r.text]

    def handle(self, request: Request) -> Reply:
        with self.lock:
            self.requests.append(request)
        vendor, _, rest = request.path.lstrip("/").partition("/")
        handler = self.vendors.get(vendor)
        if handler is None:
            return Reply.json({"error": f"no vendor {vendor!r}"}, status=404)
        return handler(self, Request(request.method, "/" + rest, *_tail(request)))


def _tail(request: Request) -> tuple[dict[str, list[str]], dict[str, str], Any]:
    return request.query, request.headers, request.body


def _handler_for(fake: FakeModels) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_GET(self) -> None:
            self.serve(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            self.serve(body)

        def serve(self, body: Any) -> None:
            parts = urlsplit(self.path)
            request = Request(
                self.command,
                parts.path,
                parse_qs(parts.query),
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
            try:
                reply = fake.handle(request)
            except Exception as error:  # a bug in a fake must show, not hang the agent
                reply = Reply.json({"error": {"message": f"fake model failed: {error!r}"}}, 500)
            self.close_connection = True
            try:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in _chunks(reply.chunks):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent hung up (a cancelled turn): nothing to tell it

    return Handler


def _chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        if chunk:
            yield chunk


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()
