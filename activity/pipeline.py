"""A runner's session on the server: its hello, its frames in batches, its heartbeat, its leaving.

The agent socket (``consumers.AgentConsumer``) only relays: it authenticates the token, hands
every text it receives to ``RunnerSession.receive`` and calls ``stop`` when it closes. What the
session does with them, in order:

1. The first frame is a hello (``frames.Hello``): the chat is made or found and shown online
   (``presence.connect``), the runner is told the highest seq the server has (``Ack``) and
   gets the answers given while it was away (``answers.pending``).
2. Every later frame is validated and queued. One drain at a time takes all that is queued as
   a batch: ingested in one transaction, acknowledged, then announced; whatever arrived
   meanwhile is the next batch — one transaction and one push however many frames.
3. A heartbeat keeps the chat's runner "seen" while the socket is up.

Close codes: ``frames.CLOSE_*``, each with what the runner does on it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any, Protocol

from channels.db import database_sync_to_async
from pydantic import ValidationError

from activity import answers, broadcast, groups, presence, watchdog
from activity.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_LARGE,
    MAX_FRAME_BYTES,
    Ack,
    Error,
    Hello,
    NumberedFrame,
    runner_frame,
    seq_of,
)
from activity.ingest import ingest
from activity.work import FrameError

log = logging.getLogger(__name__)


class Socket(Protocol):
    """What a session needs of the runner's socket (its channel name tells a chat's sockets
    apart: only the latest decides whether the runner is online)."""

    channel_name: str

    async def send_text(self, text: str) -> None: ...

    async def close(self, code: int | None = None, reason: str | None = None) -> None: ...

    async def join(self, group: str) -> None: ...

    async def leave(self, group: str) -> None: ...


def explain(error: ValidationError) -> str:
    """A validation error in one line, for the runner."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "frame"
    return f"invalid frame: {where}: {first['msg']}"


class RunnerSession:
    def __init__(self, workspace_id: uuid.UUID, token_id: int, socket: Socket) -> None:
        self.workspace_id = workspace_id
        self.token_group = groups.token(token_id)
        self.socket = socket
        self.chat_id: uuid.UUID | None = None
        self.pending: list[NumberedFrame | tuple[int, str]] = []
        self.drainer: asyncio.Task[None] | None = None
        self.heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.socket.join(self.token_group)  # a revoked token closes this socket
        watchdog.ensure_running()

    async def receive(self, text: str | None) -> None:
        if text is None or len(text) > MAX_FRAME_BYTES:
            await self.socket.close(code=CLOSE_TOO_LARGE, reason="frames are JSON text under 1 MiB")
            return
        try:
            raw = json.loads(text)
        except ValueError:
            await self.say(Error(seq=None, error="a frame is one JSON object"))
            return
        if self.chat_id is None:
            await self.hello(raw)
            return
        try:
            frame: NumberedFrame | tuple[int, str] = runner_frame.validate_python(raw)
        except ValidationError as error:
            seq = seq_of(raw)
            if seq is None:
                await self.say(Error(seq=None, error=explain(error)))
                return
            frame = (seq, explain(error))
        self.pending.append(frame)
        if self.drainer is None:
            self.drainer = asyncio.get_running_loop().create_task(self.drain())

    async def hello(self, raw: Any) -> None:
        try:
            hello = Hello.model_validate(raw)
        except ValidationError as error:
            await self.say(Error(seq=None, error=explain(error)))
            await self.socket.close(code=CLOSE_PROTOCOL, reason="the first frame is a hello")
            return
        try:
            change, last_seq = await database_sync_to_async(presence.connect)(
                self.workspace_id, hello.chat_id, self.channel, hello.acked
            )
        except presence.Refused as refused:
            await self.socket.close(code=CLOSE_FORBIDDEN, reason=str(refused))
            return
        self.chat_id = hello.chat_id
        self.heartbeat = asyncio.get_running_loop().create_task(self.beat(hello.chat_id))
        await self.socket.join(groups.runner(hello.chat_id))
        await self.say(Ack(seq=last_seq))  # what the server has; the runner resends the rest
        await broadcast.announce(change)
        waiting, change = await database_sync_to_async(answers.pending)(hello.chat_id)
        for answer in waiting:  # given while this runner was away
            await self.socket.send_text(answer.model_dump_json())
        await broadcast.announce(change)

    async def drain(self) -> None:
        """Apply what has arrived, in batches, one at a time and in order."""
        assert self.chat_id is not None
        try:
            while self.pending:
                result = await database_sync_to_async(ingest)(self.chat_id, self.next_batch())
                for seq, problem in result.errors:
                    await self.say(Error(seq=seq, error=problem))
                await self.say(Ack(seq=result.acked))
                await broadcast.announce(result.change)
        except FrameError as error:
            await self.say(Error(seq=None, error=str(error)))
            await self.socket.close(
                code=CLOSE_PROTOCOL, reason="frames were lost; reconnect and resend"
            )
        except Exception:
            log.exception("ingesting frames for chat %s failed", self.chat_id)
            await self.socket.close(
                code=CLOSE_SERVER_ERROR, reason="server error; reconnect and resend"
            )
        finally:
            self.drainer = None

    def next_batch(self) -> list[NumberedFrame | tuple[int, str]]:
        """Everything that has arrived (bench/onepush.py takes one frame at a time instead)."""
        batch, self.pending = self.pending, []
        return batch

    async def beat(self, chat_id: uuid.UUID) -> None:
        """Say the runner is here, so a chat whose server died does not look live forever."""
        while True:
            await asyncio.sleep(presence.HEARTBEAT_SECONDS)
            await database_sync_to_async(presence.alive)(chat_id, self.channel)

    async def stop(self) -> None:
        """The socket closed: the chat shows its runner gone (unless a newer socket has it)."""
        await self.socket.leave(self.token_group)
        if self.chat_id is None:
            return
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        await self.socket.leave(groups.runner(self.chat_id))
        change = await database_sync_to_async(presence.disconnect)(self.chat_id, self.channel)
        if change is not None:
            await broadcast.announce(change)

    async def say(self, frame: Ack | Error) -> None:
        await self.socket.send_text(frame.model_dump_json())

    @property
    def channel(self) -> str:
        return self.socket.channel_name
