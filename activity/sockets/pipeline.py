"""A runner's session on the server: its hello, its frames in batches, its heartbeat, its leaving.

The agent socket (``consumers.AgentConsumer``) only relays: it authenticates the token, hands
every text it receives to ``RunnerSession.receive`` and calls ``stop`` when it closes. What the
session does with them, in order:

1. The first frame is a hello (``frames.Hello``). One of another protocol than
   ``frames.PROTOCOL_VERSION``, or of none, closes with ``CLOSE_UPGRADE`` and a reason that names
   the runner to install. With the runner's secret, the chat is made or found and shown online
   (``presence.claim``; a wrong or missing secret, or a run token's hello for another chat than
   its run's, closes with ``CLOSE_FORBIDDEN`` and changes nothing; a hello that would make a
   chat past the token's ``AGENT_NEW_CHATS_PER_MINUTE`` closes with ``CLOSE_RATE``,
   ``floods.py``); this socket becomes the
   only one in the chat's runner group (answers go only to the runner that proved the chat is
   its own); the runner is told the highest seq the server
   has (``Ack``) and gets the answers given while it was away (``answers.pending``) and the
   web's messages not yet started (``drive.on_hello``). A hello that resumes the chat
   (``Hello.resume``) is taken only while no runner of the chat is connected, and gives the chat
   its new secret (``presence.take_over``).
2. Every later frame is parsed and cleaned (``boundary.load``), validated and queued; a frame
   that fails is refused (an ``Error`` that acknowledges its seq, when it names a usable one),
   alone. One drain at a time takes all that is queued as a batch: ingested in one
   transaction, acknowledged, then announced; whatever arrived meanwhile is the next batch —
   one transaction and one push however many frames.
3. A heartbeat keeps the chat's runner "seen" while the socket is up (every
   ``RUNNER_HEARTBEAT_SECONDS``; a write that fails is retried within a second, so one database
   error never makes a connected runner look gone), and renews the socket's groups (which a
   restarted Redis forgets). The process holds the socket (``presence.hold``) from its hello
   until it closes: its own sweep never counts it silent, and if another process's sweep did
   (this one was stalled), the heartbeat shows the runner connected again, reopens the turn
   that sweep ended, and sends the web's messages that may go now (``presence.alive``).
4. When the database is away (or frames were lost), nothing more is acknowledged: the socket
   closes (``CLOSE_UNAVAILABLE``, ``CLOSE_PROTOCOL``) and the runner reconnects and resends
   everything after the last ack; what arrives after that decision is ignored.

Close codes: ``frames.CLOSE_*``, each with what the runner does on it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from pydantic import ValidationError

from activity.core import groups
from activity.live import answers, boundary, drive, presence
from activity.live.ingest import SERVER_FAULTS, ingest
from activity.live.work import FrameError
from activity.models import Chat
from activity.push import broadcast
from activity.sockets import floods, watchdog
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_RATE,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_LARGE,
    CLOSE_UNAVAILABLE,
    CLOSE_UPGRADE,
    MAX_FRAME_BYTES,
    Hello,
    NumberedFrame,
    Refused,
    other_protocol,
    runner_frame,
    seq_of,
    upgrade_reason,
)
from activity.wire.orders import Ack, Error

log = logging.getLogger(__name__)
UNAVAILABLE = "the server's database is away; reconnect and resend"
INLINE_CHARS = 8_192  # a frame up to this long is parsed and masked on the event loop


class Socket(Protocol):
    """What a session needs of the runner's socket (its channel name tells a chat's sockets
    apart: only the latest decides whether the runner is online)."""

    channel_name: str

    async def send_text(self, text: str) -> None: ...

    async def close(self, code: int | None = None, reason: str | None = None) -> None: ...

    async def join(self, group: str) -> None: ...

    async def leave(self, group: str) -> None: ...


async def parse(text: str) -> Any:
    """``boundary.load(text)``, off the event loop when the frame is long: masking is linear
    (docs/secrets.md) but a frame near ``MAX_FRAME_BYTES`` still takes a while, and every socket
    and page of this process waits while the loop does. A short frame is parsed in place, which
    costs less than the hop to a thread. The thread is not the database's (views and ingest
    share that one), so a slow frame delays only its own runner: it waits here, in order."""
    if len(text) <= INLINE_CHARS:
        return boundary.load(text)
    return await asyncio.to_thread(boundary.load, text)


def explain(error: ValidationError) -> str:
    """A validation error in one line, for the runner."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "frame"
    return f"invalid frame: {where}: {first['msg']}"


class RunnerSession:
    def __init__(self, workspace_id: uuid.UUID, token_id: int, socket: Socket) -> None:
        self.workspace_id = workspace_id
        self.token_id = token_id  # a run token's hello is for its run's chat alone (claim)
        self.token_group = groups.token(token_id)
        self.socket = socket
        self.chat_id: uuid.UUID | None = None
        self.closing = False  # the socket is being closed: nothing more is applied or acked
        self.pending: list[NumberedFrame | tuple[int, str]] = []
        self.drainer: asyncio.Task[None] | None = None
        self.heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.socket.join(self.token_group)  # a revoked token closes this socket
        watchdog.ensure_running()

    async def receive(self, text: str | None) -> None:
        if self.closing:
            return  # the runner resends it after reconnecting
        if text is None or len(text) > MAX_FRAME_BYTES:
            await self.close(CLOSE_TOO_LARGE, "frames are JSON text under 1 MiB")
            return
        try:
            raw = await parse(text)
        except boundary.Unreadable as unreadable:
            if self.chat_id is None or unreadable.seq is None:
                await self.say(Error(seq=None, error=str(unreadable)))
                if self.chat_id is None:
                    await self.close(CLOSE_PROTOCOL, "the first frame is a hello")
                return
            self.queue(Refused(unreadable.seq, str(unreadable), from_agent=unreadable.from_agent))
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
            frame = Refused(seq, explain(error), from_agent=raw.get("type") == "acp")
        self.queue(frame)

    def queue(self, frame: NumberedFrame | tuple[int, str]) -> None:
        self.pending.append(frame)
        if self.drainer is None:
            self.drainer = asyncio.get_running_loop().create_task(self.drain())

    async def hello(self, raw: Any) -> None:
        if other_protocol(raw, "hello"):  # read before the rest, whose shape may differ
            await self.close(CLOSE_UPGRADE, upgrade_reason())
            return
        try:
            hello = Hello.model_validate(raw)
        except ValidationError as error:
            await self.say(Error(seq=None, error=explain(error)))
            await self.close(CLOSE_PROTOCOL, "the first frame is a hello")
            return
        if hello.secret is None:  # a runner older than secrets, or not a runner at all
            await self.close(CLOSE_FORBIDDEN, "a hello must carry the runner's secret")
            return
        try:
            wait = await database_sync_to_async(floods.new_chat_wait)(
                self.token_id, hello.chat_id, hello.acked
            )
            if wait is not None:  # a new chat past the token's rate: the runner waits, retries
                await self.close(CLOSE_RATE, floods.too_many_chats(wait))
                return
            claimed = await database_sync_to_async(presence.claim)(
                self.workspace_id,
                hello.chat_id,
                self.channel,
                hello.acked,
                hello.secret,
                self.token_id,
                hello.resume,
            )
        except presence.Refused as refused:
            # Said in a frame first: Daphne sends no close frame's reason
            # (docs/gotchas.md#daphne-drops-close-reasons), and the runner prints this one.
            await self.say(Error(seq=None, error=str(refused)))
            await self.close(CLOSE_FORBIDDEN, str(refused))
            return
        except SERVER_FAULTS as fault:
            log.warning("a runner's hello for chat %s failed: %s", hello.chat_id, fault)
            await self.close(CLOSE_UNAVAILABLE, UNAVAILABLE)
            return
        self.chat_id = hello.chat_id
        presence.hold(self.channel)  # released when the socket ends (end_tasks)
        self.heartbeat = asyncio.get_running_loop().create_task(self.beat(hello.chat_id))
        if not await self.take_answers(hello.chat_id, claimed.replaced):
            return
        await self.say(Ack(seq=claimed.last_seq))  # what the server has; the runner resends
        try:
            await broadcast.announce(claimed.change)
            waiting, change = await database_sync_to_async(answers.pending)(hello.chat_id)
            for answer in waiting:  # given while this runner was away
                await self.socket.send_text(answer.model_dump_json())
            await broadcast.announce(change)
            messages, change = await database_sync_to_async(drive.on_hello)(hello.chat_id)
            for text in messages:  # the web's messages not yet started, or the next queued
                await self.socket.send_text(text)
            await broadcast.announce(change)
        except SERVER_FAULTS as fault:  # its answers wait for the next connection
            log.warning("a runner's hello for chat %s failed: %s", hello.chat_id, fault)
            await self.close(CLOSE_UNAVAILABLE, UNAVAILABLE)

    async def take_answers(self, chat_id: uuid.UUID, replaced: str) -> bool:
        """Make this socket the only one that gets the chat's answers: the runner's older
        socket leaves the group, on whatever process it is. A newer socket that claimed the
        chat before this one joined could not remove it, so this one checks, and gives way
        (the runner, if it is still on it, reconnects and claims the chat again)."""
        group = groups.runner(chat_id)
        if replaced:
            await get_channel_layer().group_discard(group, replaced)
        await self.socket.join(group)
        try:
            holds: bool = await database_sync_to_async(presence.holds)(chat_id, self.channel)
        except SERVER_FAULTS as fault:
            log.warning("a runner's hello for chat %s failed: %s", chat_id, fault)
            holds = False
        if not holds:
            await self.socket.leave(group)
            await self.close(CLOSE_PROTOCOL, "another connection of this runner has the chat")
        return holds

    async def drain(self) -> None:
        """Apply what has arrived, in batches, one at a time and in order."""
        assert self.chat_id is not None
        try:
            while self.pending and not self.closing:
                batch = self.next_batch()
                result = await database_sync_to_async(ingest)(self.chat_id, batch)
                for seq, problem in result.errors:
                    await self.say(Error(seq=seq, error=problem))
                await self.say(Ack(seq=result.acked))
                await broadcast.announce(result.change)
                if any(isinstance(frame, drive.MAY_SEND) for frame in batch):
                    for text in await database_sync_to_async(drive.sent)(self.chat_id):
                        await self.socket.send_text(text)  # the next message from the web
        except FrameError as error:
            await self.say(Error(seq=None, error=str(error)))
            await self.close(CLOSE_PROTOCOL, "frames were lost; reconnect and resend")
        except Chat.DoesNotExist:  # deleted while its runner was connected: the runner stops
            await self.close(CLOSE_FORBIDDEN, "this chat was deleted on the server")
        except SERVER_FAULTS as fault:  # the database is away: the runner resends the batch
            log.warning("ingesting frames for chat %s failed: %s", self.chat_id, fault)
            await self.close(CLOSE_UNAVAILABLE, UNAVAILABLE)
        except Exception:
            log.exception("ingesting frames for chat %s failed", self.chat_id)
            await self.close(CLOSE_SERVER_ERROR, "server error; reconnect and resend")
        finally:
            self.drainer = None

    def next_batch(self) -> list[NumberedFrame | tuple[int, str]]:
        """Everything that has arrived (bench/onepush.py takes one frame at a time instead)."""
        batch, self.pending = self.pending, []
        return batch

    async def beat(self, chat_id: uuid.UUID) -> None:
        """Say the runner is here, so a chat whose server died does not look live forever;
        renew the socket's groups, which a restarted Redis has forgotten. Whatever fails is
        tried again within a second (``presence.sweep`` counts a runner gone only after three
        heartbeats of silence), and nothing but the socket's end stops it."""
        interval = settings.RUNNER_HEARTBEAT_SECONDS
        failing = False
        while True:
            await asyncio.sleep(min(1.0, interval) if failing else interval)
            try:
                beat = await database_sync_to_async(presence.alive)(chat_id, self.channel)
                await self.socket.join(self.token_group)
                if beat.holds:  # a socket that lost the chat to a newer one gets no answers
                    await self.socket.join(groups.runner(chat_id))
                for text in beat.messages:  # shown gone by a sweep, it is back: what may go
                    await self.socket.send_text(text)
                if beat.change is not None:
                    await broadcast.announce(beat.change)
            except Exception as fault:
                if not failing:
                    log.warning("the heartbeat of chat %s failed, retrying: %r", chat_id, fault)
                failing = True
            else:
                if failing:
                    log.warning("the heartbeat of chat %s works again", chat_id)
                failing = False

    async def stop(self) -> None:
        """The socket closed: the chat shows its runner gone (unless a newer socket has it). A
        drain in flight finishes its batch; no batch starts after (``closing``): a runner that
        resumes the chat once this one is shown gone numbers its frames after the chat's last."""
        self.closing = True
        self.end_tasks()
        await self.socket.leave(self.token_group)
        if self.chat_id is None:
            return
        await self.socket.leave(groups.runner(self.chat_id))
        try:
            change = await database_sync_to_async(presence.disconnect)(self.chat_id, self.channel)
            if change is not None:
                await broadcast.announce(change)
        except SERVER_FAULTS as fault:  # its silence tells the watchdog instead (presence.sweep)
            log.warning(
                "the runner of chat %s left while the database was away: %s", self.chat_id, fault
            )

    def end_tasks(self) -> None:
        """Stop the heartbeat: it never outlives the socket
        (docs/gotchas.md#tasks-outlive-their-socket). A drain in flight finishes on its own,
        so what it commits is still announced."""
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        presence.release(self.channel)  # its silence counts again (presence.sweep)

    async def say(self, frame: Ack | Error) -> None:
        await self.socket.send_text(frame.model_dump_json())

    async def close(self, code: int, reason: str) -> None:
        """Close the socket; whatever is queued or still arrives is dropped, not acknowledged."""
        self.closing = True
        self.pending = []
        await self.socket.close(code=code, reason=reason)

    @property
    def channel(self) -> str:
        return self.socket.channel_name
