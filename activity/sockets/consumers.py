"""WebSocket consumers: thin relays between sockets and the data path. ``Relay`` is what every
socket of koruweb's is; here, the sockets a token opens:

``AgentConsumer`` (``/ws/agent/``) relays a runner's socket to its session (``pipeline.py``:
hello, batches, acknowledgements, heartbeat; its close codes). ``HostConsumer`` (``/ws/host/``)
relays an agent host's socket to its ``hosts.HostSession``. The browsers' sockets are
``browsers.py``'s (a chat page's) and ``inbox.py``'s (the inbox and needs sockets).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import uuid
from typing import Any, ClassVar, Protocol

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from activity.live import faults
from activity.live.hosts import HostSession
from activity.models import AgentToken
from activity.models.accounts import TokenKind
from activity.notify import worker as notify
from activity.push import broadcast
from activity.sockets import beats, watchdog
from activity.sockets.floods import Slot, say_once, token_slot, too_many_sockets
from activity.sockets.pipeline import RunnerSession
from activity.wire.frames import CLOSE_PROTOCOL, CLOSE_RATE, CLOSE_UNAUTHORIZED, CLOSE_UNAVAILABLE

log = logging.getLogger(__name__)
# What a channel layer raises when Redis is away (the in-memory layer raises none of these),
# and the database when it is: the socket closes to reconnect (activity/live/faults.py).
LAYER_FAULTS = faults.EXPECTED


def header(scope: dict[str, Any], name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == name), "")


class Relay(AsyncWebsocketConsumer):
    """Skips Channels' per-message ``close_old_connections`` hop
    (docs/gotchas.md#channels-hops-to-a-thread-per-message): it waits for the one shared
    database thread, so frames would queue behind ingest and never batch. These consumers
    reach the database only through ``database_sync_to_async``, which does its own.

    A consumer whose channel layer or database fails (Redis or PostgreSQL away) closes its
    socket with ``CLOSE_UNAVAILABLE`` — the other side reconnects, and nothing it sent was
    refused — and what ``disconnect`` would have undone is undone all the same
    (docs/gotchas.md#tasks-outlive-their-socket).
    """

    disconnected = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except LAYER_FAULTS as fault:
            log.warning("a socket lost Redis or the database, closing it: %r", fault)
            with contextlib.suppress(Exception):
                await self.close(code=CLOSE_UNAVAILABLE, reason="the server is reconnecting")
        finally:
            if not self.disconnected:
                with contextlib.suppress(Exception):
                    await self.disconnect(CLOSE_UNAVAILABLE)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        self.disconnected = True
        await super().websocket_disconnect(message)

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, message["type"].replace(".", "_"), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)


class Session(Protocol):
    """What a token's socket relays to: ``pipeline.RunnerSession`` or ``hosts.HostSession``."""

    async def start(self) -> None: ...

    async def receive(self, text: str | None) -> None: ...

    async def stop(self) -> None: ...

    def end_tasks(self) -> None: ...


class TokenRelay[S: Session](Relay):
    """A socket a token of ``kind`` opens, relayed to the session it makes (``new_session``); it
    is also what the session sends through and the groups it joins. The session's heartbeat
    ends with the consumer, even with one that dies without ``disconnect`` (an exception in
    its loop): a dead runner or host never looks connected
    (docs/gotchas.md#tasks-outlive-their-socket).

    Each socket takes a slot of its token's (``floods.token_slot``: past ``SOCKETS_PER_TOKEN``,
    or ``HOST_SOCKETS_PER_TOKEN``, it closes with ``CLOSE_RATE``) and must say its hello within
    ``HELLO_TIMEOUT_SECONDS``: a timer task, cancelled by the first frame (the hello, or what
    closes the socket as no hello) or the socket's end, closes a silent one with
    ``CLOSE_PROTOCOL``."""

    kind: ClassVar[TokenKind]
    session: S | None = None
    slot: Slot | None = None
    waiting: asyncio.Task[None] | None = None  # the hello's deadline
    late = False  # no hello came in time: the socket is closing, nothing more is taken

    @abc.abstractmethod
    def new_session(self, workspace_id: uuid.UUID, token_id: int) -> S:
        """The session this socket relays to (each kind of token has its own)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.session is not None:
                self.session.end_tasks()
            self.end_waiting()
            beats.discard(self)

    async def connect(self) -> None:
        await self.accept()  # accept, then close with a code: never an endless retry loop
        authorization = header(self.scope, b"authorization")
        token = await database_sync_to_async(AgentToken.authenticate)(authorization, self.kind)
        if token is None:
            reason = f"a valid {self.kind.value} token is required"
            await self.close(code=CLOSE_UNAUTHORIZED, reason=reason)
            return
        slot = token_slot(self.kind.value, token.pk)
        if not await slot.take():
            reason = too_many_sockets(slot, f"{self.kind.value} token")
            await self.close(code=CLOSE_RATE, reason=reason)
            return
        self.slot = slot
        beats.add(self)  # its slot is renewed on the process's heartbeat
        self.session = self.new_session(token.workspace_id, token.pk)
        await self.session.start()
        self.waiting = asyncio.get_running_loop().create_task(self.wait_for_hello(slot.whose))

    async def wait_for_hello(self, whose: str) -> None:
        timeout = float(settings.HELLO_TIMEOUT_SECONDS)
        await asyncio.sleep(timeout)
        self.late, self.waiting = True, None
        say_once("silent", whose, "closed a socket of %s that said no hello in time", whose)
        await self.close(code=CLOSE_PROTOCOL, reason=f"no hello within {timeout:g} s")

    def end_waiting(self) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and waiting is not asyncio.current_task():
            waiting.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.late:
            return
        self.end_waiting()  # the hello came (or what came closes the socket as no hello)
        if self.session is not None:
            await self.session.receive(text_data)

    async def renew(self) -> None:
        if self.slot is not None:
            await self.slot.renew()

    async def token_revoked(self, event: dict[str, Any]) -> None:
        await self.close(code=CLOSE_UNAUTHORIZED, reason=f"the {self.kind.value} token was revoked")

    async def disconnect(self, code: int) -> None:
        self.end_waiting()
        if self.session is not None:
            await self.session.stop()
        beats.discard(self)
        slot, self.slot = self.slot, None
        if slot is not None:
            await slot.free()

    async def send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)

    async def leave(self, group: str) -> None:
        await self.channel_layer.group_discard(group, self.channel_name)


class AgentConsumer(TokenRelay[RunnerSession]):
    """``/ws/agent/``: a runner's socket, relayed to its ``pipeline.RunnerSession``."""

    kind = TokenKind.AGENT

    def new_session(self, workspace_id: uuid.UUID, token_id: int) -> RunnerSession:
        notify.ensure_running()  # its prompts are pushed to the people who may answer them
        return RunnerSession(workspace_id, token_id, self)

    async def runner_answer(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])


class HostConsumer(TokenRelay[HostSession]):
    """``/ws/host/``: an agent host's socket (a host token only), relayed to its
    ``hosts.HostSession``."""

    kind = TokenKind.HOST

    def new_session(self, workspace_id: uuid.UUID, token_id: int) -> HostSession:
        watchdog.ensure_running()  # its runs' tokens are swept (run_tokens.sweep)
        return HostSession(workspace_id, token_id, self, broadcast.announce)

    async def host_ask(self, event: dict[str, Any]) -> None:
        if self.session is not None:
            await self.session.ask(event)
