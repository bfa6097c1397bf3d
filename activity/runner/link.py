"""The runner's one WebSocket to the server: hello, resend, acknowledgements, answers, and
the web's prompts, cancels and mode switches (handed to ``on_web``).

It reconnects with exponential backoff and jitter for as long as the runner runs; every hello
carries the chat's secret, so the server gives the chat to this runner only. After each
(re)connect the server says what it has (an ``ack``) and everything after that is resent.

A server that refuses the runner (its token, its chat, or its ``frames.PROTOCOL_VERSION``:
``FATAL_CODES``) stops it at once, saying the server's reason: exit code 2, no retry.
A server whose database or Redis is away closes with ``CLOSE_UNAVAILABLE``: the runner
reconnects with backoff and resends, for as long as it takes. A server that limits it (too many
new chats a minute for its token, too many sockets open: ``CLOSE_RATE``) is waited for: one
line says so, and the runner says hello again after the wait the reason names (``RetryLater``),
never less than its backoff. A server that refuses a frame
closes the socket (``frames.CLOSE_PROTOCOL``,
``CLOSE_TOO_LARGE``, ``CLOSE_SERVER_ERROR``, or a server's own 1009 "too big" or 1011). On "too
large" the runner first cuts the largest frame it sent to half its size; otherwise, or when
nothing is left to cut, that is a strike against the oldest unacknowledged frame. ``REFUSALS``
strikes in a row against the same frame stop the runner (``Refused``, exit code 7) rather than
resend it forever; a refused connection does not reset the backoff, so the server has time to
come back before the last strike.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import CloseCode

from activity.runner.outbox import Outbox
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_RATE,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_LARGE,
    CLOSE_UNAUTHORIZED,
    CLOSE_UPGRADE,
    PROTOCOL_VERSION,
    Hello,
    retry_after,
)
from activity.wire.orders import (
    Ack,
    Answer,
    Error,
    WebCancel,
    WebMode,
    WebPromptFrame,
    WebStop,
    server_frame,
)

FATAL_CODES = {
    CLOSE_UNAUTHORIZED: "the server refused the agent token",
    CLOSE_FORBIDDEN: "this chat is not yours",
    # The reason names the runner to install (frames.upgrade_reason).
    CLOSE_UPGRADE: f"the server does not speak this runner's protocol {PROTOCOL_VERSION}",
}
# The closes that say the server refused what it got. A connection that drops with no close
# code (a restart, the network) is no refusal: it never stops the runner.
TOO_BIG = {CLOSE_TOO_LARGE, CloseCode.MESSAGE_TOO_BIG}
REFUSING = {CLOSE_PROTOCOL, CLOSE_SERVER_ERROR, CloseCode.INTERNAL_ERROR, *TOO_BIG}
REFUSALS = 3  # connections in a row refused on the same frame before the runner stops
BACKOFF_SECONDS = 0.25  # the first delay before a reconnect; it doubles up to BACKOFF_MAX
BACKOFF_MAX = 10.0
WebFrame = WebPromptFrame | WebCancel | WebMode | WebStop
TOKEN_VARIABLE = "KORUWEB_TOKEN"  # the token, when not on the command line (where ps shows it)


class Fatal(Exception):
    """The server will never accept this runner: stop and say why."""


class Refused(Exception):
    """The server refuses the same frame every time it gets it: stop rather than loop."""


class RetryLater(Exception):
    """Raised by a ``closed`` callback: reconnect, but not for ``seconds`` (a rate limit)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


def say(text: str) -> None:
    print(f"koruweb: {text}", file=sys.stderr, flush=True)


async def stay_connected(
    url: str,
    token: str,
    session: Callable[[ClientConnection], Awaitable[None]],
    closed: Callable[[int | None, str], int | None],
    connected_once: asyncio.Event,
    fatal: type[Exception],
    max_size: int | None = 2**20,  # websockets' own limit; None takes frames of any size
) -> NoReturn:
    """Connect to ``url`` with ``token`` and run ``session`` on the socket, and again after
    every loss, with exponential backoff and jitter, until cancelled: the runner's socket
    (``Link``) and an agent host's (``host.Host``) reconnect alike.

    ``closed`` hears each close the server sent (its code, None without one, and reason): it
    raises to stop, raises ``RetryLater`` to wait at least that long before the next attempt,
    or returns how many failed attempts to back off from (a refused frame: as if it never
    connected), or None. A server that refuses the socket itself (an HTTP
    status) raises ``fatal``. Once ``connected_once`` is set, a connection that fails to open
    is said once per loss."""
    attempt = 0
    while True:
        later = 0.0  # what the server asked the next attempt to wait (RetryLater)
        try:
            async with connect(
                url,
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=max_size,
                open_timeout=10,
                ping_interval=20,
            ) as socket:
                attempt = 0
                await session(socket)
        except ConnectionClosed as lost:
            code = lost.rcvd.code if lost.rcvd else None
            try:
                backed_off = closed(code, lost.rcvd.reason if lost.rcvd else "")
            except RetryLater as asked:
                backed_off, later = None, asked.seconds
            attempt = attempt if backed_off is None else backed_off
        except InvalidStatus as refused:
            status = refused.response.status_code
            raise fatal(f"the server refused the socket: HTTP {status}") from None
        except (OSError, InvalidHandshake, TimeoutError) as error:
            if connected_once.is_set() and attempt == 0:
                say(f"lost the server ({error}); reconnecting")
        attempt += 1
        delay = min(BACKOFF_SECONDS * 2 ** min(attempt, 6), BACKOFF_MAX)
        await asyncio.sleep(max(delay * random.uniform(0.7, 1.3), later))


class Link:
    def __init__(
        self,
        server: str,
        token: str,
        chat_id: uuid.UUID,
        outbox: Outbox,
        on_answer: Callable[[str | int, dict[str, Any]], None],
        secret: str | None = None,
        on_web: Callable[[WebFrame], None] | None = None,
        resume: str | None = None,
    ) -> None:
        self.url = server.rstrip("/") + "/ws/agent/"
        self.token = token
        self.chat_id = chat_id
        # Proves the chat is this runner's, in every hello: 256 random bits, never logged.
        self.secret = secret or secrets.token_urlsafe(32)
        # Resuming the chat: its secret from the hello that takes it on, which becomes
        # ``secret`` once the server has said yes (docs/protocol.md#resuming-a-run).
        self.resume = resume
        self.outbox = outbox
        self.on_answer = on_answer
        self.on_web = on_web
        self.connected = asyncio.Event()
        self.ever_connected = asyncio.Event()
        self.sent = 0  # the last seq sent on this connection
        self.strikes: tuple[int, int] = (0, 0)  # (seq, connections in a row that refused it)

    async def run(self) -> None:
        """Stay connected until cancelled; raises ``Fatal`` when the server refuses us, and
        ``Refused`` when it refuses one frame ``REFUSALS`` times in a row."""
        await stay_connected(
            self.url,
            self.token,
            self.session,
            self.closed,
            self.ever_connected,
            Fatal,
            max_size=None,
        )

    def closed(self, code: int | None, reason: str) -> int | None:
        """The server closed the socket: stop if it refuses us; after a refused frame, back
        off as if the runner never connected."""
        if code in FATAL_CODES:
            raise Fatal(f"{FATAL_CODES[code]}: {reason}" if reason else FATAL_CODES[code]) from None
        if code == CLOSE_RATE:  # nothing was refused: wait as long as the server asks
            wait = retry_after(reason)
            then = f"waiting {wait:g} s" if wait is not None else "backing off"
            limited = f"the server limits this runner ({code}: {reason or 'too many'})"
            say(f"{limited}; {then}, then trying again")
            raise RetryLater(wait or 0.0)
        backed_off = None
        if code in REFUSING and self.refused(code, reason):
            backed_off = self.strikes[1]
        if self.ever_connected.is_set():
            said = f"{code}: {reason}" if reason else code or "no close code"
            say(f"lost the server ({said}); reconnecting")
        return backed_off

    def refused(self, code: int, reason: str) -> bool:
        """The server closed on a frame it refused. Cut harder if it was too large; else count
        a strike against the oldest frame it has not acknowledged, and stop on the last one.
        Returns whether that frame was struck."""
        seq = self.outbox.acked + 1
        if self.sent < seq:  # none of our frames was waiting: not a frame's fault
            return False
        if code in TOO_BIG:
            shrunk = self.outbox.shrink(self.sent)
            if shrunk is not None:
                say(f"the server found frame {shrunk} too large ({code}); cut it to half")
                return False
        strikes = self.strikes[1] + 1 if self.strikes[0] == seq else 1
        self.strikes = (seq, strikes)
        if strikes >= REFUSALS:
            said = f"{code}: {reason}" if reason else str(code)
            after = self.outbox.seq - seq
            raise Refused(
                f"the server refused frame {seq} ({self.outbox.kind(seq)}) on {strikes} "
                f"connections in a row (it closed with {said}); stopping instead of resending "
                f"it forever. The frames before it are on the server; it and the {after} "
                "after it are not"
            )
        return True

    async def session(self, socket: ClientConnection) -> None:
        self.sent = self.outbox.acked  # nothing sent yet on this connection: nothing to strike
        hello = Hello(
            chat_id=self.chat_id, secret=self.secret, acked=self.outbox.acked, resume=self.resume
        )
        await socket.send(hello.model_dump_json())
        text = await socket.recv()
        try:
            first = server_frame.validate_json(text)
        except ValidationError:
            raise Fatal(f"the server did not answer the hello: {text!r:.200}") from None
        if not isinstance(first, Ack):
            said = first.error if isinstance(first, Error) else first
            raise Fatal(f"the server did not accept the hello: {said}")
        if self.resume is not None:  # the chat is ours with the new secret from now on
            self.secret, self.resume = self.resume, None
        self.outbox.start_at(first.seq)
        self.outbox.ack(first.seq)
        self.sent = self.outbox.acked
        self.connected.set()
        self.ever_connected.set()
        sender = asyncio.create_task(self.send_frames(socket))
        try:
            async for text in socket:
                self.receive(text)
        finally:
            sender.cancel()
            self.connected.clear()

    async def send_frames(self, socket: ClientConnection) -> None:
        while True:
            self.outbox.changed.clear()
            for seq, text in self.outbox.after(self.sent):
                await socket.send(text)
                self.sent = seq
            await self.outbox.changed.wait()

    def receive(self, text: str | bytes) -> None:
        try:
            frame = server_frame.validate_json(text)
        except ValidationError as error:
            said = error.errors()[0]  # where and what, never the frame
            where = ".".join(str(part) for part in said["loc"])
            say(
                f"the server sent a frame the runner does not know, ignored: {where}: {said['msg']}"
            )
            return
        match frame:
            case Ack():
                self.outbox.ack(frame.seq)
            case Error():
                if frame.seq not in self.outbox.reported:  # one line per odd message
                    say(f"the server skipped frame {frame.seq}: {frame.error}")
                if frame.seq is not None:
                    self.outbox.ack(frame.seq)
            case Answer():
                self.on_answer(frame.request_id, frame.outcome)
            case WebPromptFrame() | WebCancel() | WebMode() | WebStop():
                if self.on_web is not None:
                    self.on_web(frame)
