"""The load: one agent socket sending a runner's frames, N viewer sockets keeping a screen.

Both run in the benchmark's process (never the server's), on one ``perf_counter`` clock, so an
update's latency is the time from the agent sending it to the first push a viewer receives that
shows that row at that update or a later one. Each update writes its ``seq`` into the tool
call's title (``c17 #1234``); a viewer reads it back from the pushed ``<tr id="tool-…">``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Origin
from websockets.uri import parse_uri

from tests import frames

TR = re.compile(r'<tr id="tool-([^"]+)"(.*?)</tr>', re.S)
LABEL = re.compile(r"<summary[^>]*>(?:<bdi>)?(c\d+) #(\d+)(?:</bdi>)?</summary>")  # id, aria, <bdi>
OOB = ' hx-swap-oob="outerMorph"'
OUTPUT = "collected 12 items; tests/test_parser.py::test_case PASSED [{0:3d}%] in {1:.2f}s"

# No compression (Daphne does not negotiate it; the baseline must not pay for it either), no
# proxy from the environment, room for a burst in the client's queue.
OPTIONS: dict[str, Any] = {
    "compression": None,
    "proxy": None,
    "max_queue": 4096,
    "max_size": 16 * 1024 * 1024,
    "ping_interval": None,
    "open_timeout": 30,
}


class Workload:
    """Tool calls as an agent makes them: ``concurrent`` calls open at a time, updated in turn,
    each ``updates`` times (a ``tool_call``, then ``tool_call_update``s, the last completing it).
    Every frame is a ~300-byte ``session/update`` whose title carries its seq."""

    def __init__(self, concurrent: int = 4, updates: int = 10) -> None:
        self.updates = updates
        self.slots: list[tuple[str, int] | None] = [None] * concurrent
        self.turn = 0
        self.calls = 0

    def frame(self, seq: int) -> tuple[dict[str, Any], str]:
        slot = self.turn % len(self.slots)
        self.turn += 1
        current = self.slots[slot]
        if current is None:
            self.calls += 1
            name = f"c{self.calls}"
            self.slots[slot] = (name, 1)
            command = {"command": f"pytest -q tests/test_parser.py -k case_{self.calls}"}
            return frames.tool_call(
                seq, name, f"{name} #{seq}", kind="execute", status="pending", rawInput=command
            ), name
        name, done = current
        last = done + 1 >= self.updates
        self.slots[slot] = None if last else (name, done + 1)
        text = OUTPUT.format(done * 100 // self.updates, seq / 1000)
        return frames.tool_update(
            seq,
            name,
            title=f"{name} #{seq}",
            status="completed" if last else "in_progress",
            content=[{"type": "content", "content": {"type": "text", "text": text}}],
        ), name


class Agent:
    """A runner's socket: hello, then numbered frames with at most ``window`` unacknowledged."""

    def __init__(self, ws: ClientConnection, window: int) -> None:
        self.ws = ws
        self.window = window
        self.seq = 0
        self.acked = 0
        self.errors: list[dict[str, Any]] = []
        self.progress = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, url: str, chat_id: uuid.UUID, token: str | None, window: int = 256
    ) -> Agent:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        ws = await connect(url, additional_headers=headers, **OPTIONS)
        agent = cls(ws, window)
        await ws.send(json.dumps(frames.hello(chat_id)))
        first = json.loads(await ws.recv())
        assert first == {"type": "ack", "seq": 0}, first
        agent.reader = asyncio.get_running_loop().create_task(agent.read())
        return agent

    async def read(self) -> None:
        async for text in self.ws:
            frame = json.loads(text)
            if frame.get("type") == "error":
                self.errors.append(frame)
            if frame.get("type") in ("ack", "error") and isinstance(frame.get("seq"), int):
                self.acked = max(self.acked, frame["seq"])
                self.progress.set()

    async def send(self, frame: dict[str, Any]) -> float:
        """Send a numbered frame once the window allows; returns when it went out."""
        while frame["seq"] - self.acked > self.window:
            self.progress.clear()
            await self.progress.wait()
        text = json.dumps(frame)
        sent = time.perf_counter()
        await self.ws.send(text)
        self.seq = frame["seq"]
        return sent

    async def settle(self, within: float = 30) -> None:
        deadline = time.perf_counter() + within
        while self.acked < self.seq and time.perf_counter() < deadline:
            self.progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.progress.wait(), 0.5)
        assert self.acked >= self.seq, f"frames up to {self.seq} sent, {self.acked} acked"

    async def close(self) -> None:
        await self.ws.close()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)


class Socket(asyncio.Protocol):
    """A client WebSocket on websockets' Sans-I/O protocol, straight on an asyncio transport.

    Many viewers in one process must cost little per message, or the load generator, not the
    server, is what a run measures: this skips the per-message futures and queue of
    ``websockets.asyncio`` and hands each text message to ``on_message`` as it is parsed.
    """

    def __init__(self, url: str, headers: dict[str, str], origin: str | None) -> None:
        self.protocol = ClientProtocol(
            parse_uri(url), origin=Origin(origin) if origin else None, max_size=None
        )
        self.request = self.protocol.connect()
        for name, value in headers.items():
            self.request.headers[name] = value
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.on_message: Callable[[str, float], None] = lambda text, now: None
        self.parts: list[bytes] = []
        self.inbox: list[tuple[float, bytes]] = []

    @classmethod
    async def open(cls, url: str, headers: dict[str, str], origin: str | None) -> Socket:
        uri = parse_uri(url)
        loop = asyncio.get_running_loop()
        _, socket = await loop.create_connection(
            lambda: cls(url, headers, origin), uri.host, uri.port
        )
        await asyncio.wait_for(socket.opened, 30)
        return socket

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.protocol.send_request(self.request)
        self.flush()

    def data_received(self, data: bytes) -> None:
        # Only note when the bytes came: every socket that is ready in this turn of the loop is
        # stamped before any is parsed, so one viewer's parsing never delays another's clock.
        self.inbox.append((time.perf_counter(), data))
        if len(self.inbox) == 1:
            asyncio.get_running_loop().call_soon(self.process)

    def process(self) -> None:
        inbox, self.inbox = self.inbox, []
        for now, data in inbox:
            self.protocol.receive_data(data)
            for event in self.protocol.events_received():
                if isinstance(event, Response):
                    if self.protocol.handshake_exc is not None:
                        self.opened.set_exception(self.protocol.handshake_exc)
                    else:
                        self.opened.set_result(None)
                elif isinstance(event, Frame) and event.opcode in (Opcode.TEXT, Opcode.CONT):
                    self.parts.append(bytes(event.data))
                    if event.fin:
                        text = b"".join(self.parts).decode()
                        self.parts = []
                        self.on_message(text, now)
        self.flush()

    def send(self, text: str) -> None:
        self.protocol.send_text(text.encode())
        self.flush()

    def flush(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        for data in self.protocol.data_to_send():
            if data:
                self.transport.write(data)
            elif self.transport.can_write_eof():
                self.transport.write_eof()

    def connection_lost(self, exc: Exception | None) -> None:
        self.process()
        self.protocol.receive_eof()
        if not self.opened.done():
            self.opened.set_exception(exc or ConnectionError("closed during the handshake"))
        if not self.closed.done():
            self.closed.set_result(None)

    async def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(Exception):
                self.protocol.send_close()
                self.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), 2)
            self.transport.close()


def fetch(request: urllib.request.Request) -> str:
    with urllib.request.urlopen(request, timeout=60) as answer:
        return str(answer.read().decode())


@dataclass
class Viewer:
    """A page's socket: asks for what changed since the version it shows, applies each push
    that starts where it stands, and asks again on a gap (``static/koruweb/live/live.js``)."""

    socket: Socket
    shown: int = 0
    asked: bool = False
    rows: dict[str, str] = field(default_factory=dict)  # <tr> id → its latest HTML
    best: dict[str, int] = field(default_factory=dict)  # call → the newest seq shown
    seen: list[tuple[float, str, int]] = field(default_factory=list)  # (when, call, seq)
    pushes: int = 0
    resyncs: int = 0
    received: int = 0
    received_bytes: int = 0  # of every push's text, as sent, and of every page fetched
    reloads: int = 0  # times the server told it to fetch its page (a catch-up past a page)
    page: str = ""  # the page's URL (koruweb), fetched when the server says "reload"
    cookie: str | None = None
    synced: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def open(
        cls, url: str, cookie: str | None = None, origin: str | None = None, since: int = 0
    ) -> Viewer:
        socket = await Socket.open(url, {"Cookie": cookie} if cookie else {}, origin)
        page = url.replace("ws://", "http://").replace("/ws/chats/", "/chats/")
        viewer = cls(socket, shown=since, page=page if "/ws/chats/" in url else "", cookie=cookie)
        socket.on_message = viewer.receive
        viewer.ask()
        return viewer

    def ask(self) -> None:
        self.asked = True
        self.socket.send(json.dumps({"since": self.shown}))

    def receive(self, text: str, now: float) -> None:
        self.received += 1
        self.received_bytes += len(text.encode())
        push = json.loads(text)
        if push.get("reload") and push["from"] == self.shown and self.page:
            self.reloads += 1
            asyncio.get_running_loop().create_task(self.reload())
            return
        if push["to"] < self.shown or (push["to"] == self.shown and self.synced.is_set()):
            return  # nothing new for this screen
        if push["from"] != self.shown:
            if not self.asked:  # a gap: a push was missed
                self.resyncs += 1
                self.ask()
            return
        self.apply(push["content"], now)
        self.shown = push["to"]
        self.asked = False
        self.pushes += 1
        self.synced.set()

    async def reload(self) -> None:
        """As a page does (``static/koruweb/live/live.js``): fetch the page, show its rows at
        its version, and ask for what changed since."""
        asked = urllib.request.Request(self.page, headers={"Cookie": self.cookie or ""})
        html = await asyncio.to_thread(fetch, asked)
        live = re.search(r'<[^>]*\bid="live"[^>]*>', html)
        version = re.search(r'data-version="(\d+)"', live.group(0)) if live else None
        assert version is not None, f"no version on {self.page}"
        self.received_bytes += len(html.encode())
        self.rows = {}
        self.apply(html, time.perf_counter())
        self.shown = int(version.group(1))
        self.ask()

    def apply(self, content: str, now: float) -> None:
        for match in TR.finditer(content):
            row = match.group(0).replace(OOB, "", 1)
            self.rows[match.group(1)] = row
            label = LABEL.search(match.group(2))
            if label is None:
                continue
            call, seq = label.group(1), int(label.group(2))
            if seq > self.best.get(call, 0):
                self.best[call] = seq
                self.seen.append((now, call, seq))

    async def close(self) -> None:
        await self.socket.close()
