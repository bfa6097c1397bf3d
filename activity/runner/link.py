"""The runner's one WebSocket to the server: hello, resend, acknowledgements, answers.

It reconnects with exponential backoff and jitter for as long as the runner runs; after each
(re)connect the server says what it has (an ``ack``) and everything after that is resent.
"""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from activity.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_UNAUTHORIZED,
    Ack,
    Answer,
    Error,
    Hello,
    server_frame,
)
from activity.runner.outbox import Outbox

FATAL_CODES = {
    CLOSE_UNAUTHORIZED: "the server refused the agent token",
    CLOSE_FORBIDDEN: "this chat is not yours",
}


class Fatal(Exception):
    """The server will never accept this runner: stop and say why."""


def say(text: str) -> None:
    print(f"koruweb: {text}", file=sys.stderr, flush=True)


class Link:
    def __init__(
        self,
        server: str,
        token: str,
        chat_id: uuid.UUID,
        outbox: Outbox,
        on_answer: Callable[[str | int, dict[str, Any]], None],
    ) -> None:
        self.url = server.rstrip("/") + "/ws/agent/"
        self.token = token
        self.chat_id = chat_id
        self.outbox = outbox
        self.on_answer = on_answer
        self.connected = asyncio.Event()
        self.ever_connected = asyncio.Event()

    async def run(self) -> None:
        """Stay connected until cancelled; raises ``Fatal`` when the server refuses us."""
        attempt = 0
        while True:
            try:
                async with connect(
                    self.url,
                    additional_headers={"Authorization": f"Bearer {self.token}"},
                    max_size=None,
                    open_timeout=10,
                    ping_interval=20,
                ) as socket:
                    attempt = 0
                    await self.session(socket)
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd else None
                if code in FATAL_CODES:
                    reason = closed.rcvd.reason if closed.rcvd else ""
                    raise Fatal(
                        f"{FATAL_CODES[code]}: {reason}" if reason else FATAL_CODES[code]
                    ) from None
                if self.ever_connected.is_set():
                    say(f"lost the server ({code or 'no close code'}); reconnecting")
            except InvalidStatus as refused:
                status = refused.response.status_code
                raise Fatal(f"the server refused the socket: HTTP {status}") from None
            except (OSError, InvalidHandshake, TimeoutError) as error:
                if self.ever_connected.is_set() and attempt == 0:
                    say(f"lost the server ({error}); reconnecting")
            finally:
                self.connected.clear()
            attempt += 1
            delay = min(0.25 * 2 ** min(attempt, 6), 10.0)
            await asyncio.sleep(delay * random.uniform(0.7, 1.3))

    async def session(self, socket: ClientConnection) -> None:
        await socket.send(Hello(chat_id=self.chat_id, acked=self.outbox.acked).model_dump_json())
        text = await socket.recv()
        try:
            first = server_frame.validate_json(text)
        except ValidationError:
            raise Fatal(f"the server did not answer the hello: {text!r:.200}") from None
        if not isinstance(first, Ack):
            said = first.error if isinstance(first, Error) else first
            raise Fatal(f"the server did not accept the hello: {said}")
        self.outbox.ack(first.seq)
        self.connected.set()
        self.ever_connected.set()
        sender = asyncio.create_task(self.send_frames(socket))
        try:
            async for text in socket:
                self.receive(text)
        finally:
            sender.cancel()

    async def send_frames(self, socket: ClientConnection) -> None:
        sent = self.outbox.acked
        while True:
            self.outbox.changed.clear()
            for seq, text in self.outbox.after(sent):
                await socket.send(text)
                sent = seq
            await self.outbox.changed.wait()

    def receive(self, text: str | bytes) -> None:
        try:
            frame = server_frame.validate_json(text)
        except ValidationError as error:
            say(f"the server sent a frame the runner does not know, ignored: {error.errors()[0]}")
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
