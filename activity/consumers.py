"""WebSocket consumers: thin relays between sockets and the data path.

``AgentConsumer`` (``/ws/agent/``) takes a runner's frames, hands them to ``ingest`` in batches,
acknowledges them after commit and announces the change. ``ViewerConsumer``
(``/ws/chats/<id>/``) sends a browser what changed since the version it shows, then every push.

Close codes: 4400 a protocol error (no hello, frames lost), 4401 no or bad credentials, 4403 not
allowed, 1009 a frame over the size limit, 1011 a server error (the runner resends).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string
from django.utils import timezone
from pydantic import ValidationError

from activity import access, answers, broadcast, presence, reads, watchdog
from activity.answers import runner_group
from activity.frames import (
    MAX_FRAME_BYTES,
    Ack,
    Error,
    Hello,
    NumberedFrame,
    runner_frame,
    seq_of,
)
from activity.ingest import ingest
from activity.models import AgentToken
from activity.work import FrameError

log = logging.getLogger(__name__)


def _bearer(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


def _authenticate(token: str) -> AgentToken | None:
    found = AgentToken.find(token) if token else None
    if found is not None:
        AgentToken.objects.filter(pk=found.pk).update(last_used_at=timezone.now())
    return found


def _explain(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "frame"
    return f"invalid frame: {where}: {first['msg']}"


class Relay(AsyncWebsocketConsumer):
    """Skips Channels' per-message ``close_old_connections`` hop (PERF.md): it waits for the
    one shared database thread, so frames would queue behind ingest and never batch. These
    consumers reach the database only through ``database_sync_to_async``, which does its own.
    """

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, message["type"].replace(".", "_"), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)


class AgentConsumer(Relay):
    workspace_id: uuid.UUID | None = None
    chat_id: uuid.UUID | None = None

    async def connect(self) -> None:
        await self.accept()  # accept, then close with a code: never an endless retry loop
        token = await database_sync_to_async(_authenticate)(_bearer(self.scope))
        if token is None:
            await self.close(code=4401, reason="a valid agent token is required")
            return
        self.workspace_id = token.workspace_id
        self.token_group = presence.token_group(token.pk)
        await self.channel_layer.group_add(self.token_group, self.channel_name)
        self.pending: list[NumberedFrame | tuple[int, str]] = []
        self.drainer: asyncio.Task[None] | None = None
        watchdog.ensure_running()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.workspace_id is None:
            return
        if text_data is None or len(text_data) > MAX_FRAME_BYTES:
            await self.close(code=1009, reason="frames are JSON text under 1 MiB")
            return
        try:
            raw = json.loads(text_data)
        except ValueError:
            await self.send_frame(Error(seq=None, error="a frame is one JSON object"))
            return
        if self.chat_id is None:
            await self.hello(raw)
            return
        try:
            frame: NumberedFrame | tuple[int, str] = runner_frame.validate_python(raw)
        except ValidationError as error:
            seq = seq_of(raw)
            if seq is None:
                await self.send_frame(Error(seq=None, error=_explain(error)))
                return
            frame = (seq, _explain(error))
        self.pending.append(frame)
        if self.drainer is None:
            self.drainer = asyncio.get_running_loop().create_task(self.drain())

    async def hello(self, raw: Any) -> None:
        try:
            hello = Hello.model_validate(raw)
        except ValidationError as error:
            await self.send_frame(Error(seq=None, error=_explain(error)))
            await self.close(code=4400, reason="the first frame is a hello")
            return
        assert self.workspace_id is not None
        try:
            change, last_seq = await database_sync_to_async(presence.connect)(
                self.workspace_id, hello.chat_id, self.channel_name, hello.acked
            )
        except presence.Refused as refused:
            await self.close(code=4403, reason=str(refused))
            return
        self.chat_id = hello.chat_id
        self.heartbeat = asyncio.get_running_loop().create_task(self.beat(hello.chat_id))
        await self.channel_layer.group_add(runner_group(hello.chat_id), self.channel_name)
        await self.send_frame(Ack(seq=last_seq))  # what the server has; the runner resends the rest
        await broadcast.changed(change.chat_id, change.since, change.version)
        # Answers given while this runner was away.
        waiting, since, version = await database_sync_to_async(answers.pending)(hello.chat_id)
        for answer in waiting:
            await self.send(text_data=answer.model_dump_json())
        if version > since:
            await broadcast.changed(hello.chat_id, since, version)
            await broadcast.inbox_changed(self.workspace_id)

    async def drain(self) -> None:
        """Apply what has arrived, in batches, one at a time and in order.

        A batch is written, acknowledged and pushed before the next: whatever arrives
        meanwhile is the next batch, one transaction and one push however many frames.
        """
        assert self.chat_id is not None
        try:
            while self.pending:
                batch = self.next_batch()
                result = await database_sync_to_async(ingest)(self.chat_id, batch)
                for seq, problem in result.errors:
                    await self.send_frame(Error(seq=seq, error=problem))
                await self.send_frame(Ack(seq=result.acked))
                await broadcast.changed(self.chat_id, result.since, result.version)
                if result.prompts_changed and self.workspace_id is not None:
                    await broadcast.inbox_changed(self.workspace_id)
        except FrameError as error:
            await self.send_frame(Error(seq=None, error=str(error)))
            await self.close(code=4400, reason="frames were lost; reconnect and resend")
        except Exception:
            log.exception("ingesting frames for chat %s failed", self.chat_id)
            await self.close(code=1011, reason="server error; reconnect and resend")
        finally:
            self.drainer = None

    def next_batch(self) -> list[NumberedFrame | tuple[int, str]]:
        batch, self.pending = self.pending, []
        return batch

    async def send_frame(self, frame: Ack | Error) -> None:
        await self.send(text_data=frame.model_dump_json())

    async def runner_answer(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])

    async def beat(self, chat_id: uuid.UUID) -> None:
        """Say the runner is here, so a chat whose server died does not look live forever."""
        while True:
            await asyncio.sleep(presence.HEARTBEAT_SECONDS)
            await database_sync_to_async(presence.alive)(chat_id, self.channel_name)

    async def token_revoked(self, event: dict[str, Any]) -> None:
        await self.close(code=4401, reason="the agent token was revoked")

    async def disconnect(self, code: int) -> None:
        if self.workspace_id is not None:
            await self.channel_layer.group_discard(self.token_group, self.channel_name)
        if self.chat_id is None:
            return
        self.heartbeat.cancel()
        await self.channel_layer.group_discard(runner_group(self.chat_id), self.channel_name)
        change = await database_sync_to_async(presence.disconnect)(self.chat_id, self.channel_name)
        if change is not None:
            await broadcast.changed(change.chat_id, change.since, change.version)


class ViewerConsumer(Relay):
    chat_id: uuid.UUID | None = None
    held: list[str] | None = None  # pushes that came while a catch-up was being rendered

    async def connect(self) -> None:
        await self.accept()
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401, reason="log in to watch this chat")
            return
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        if not await database_sync_to_async(access.can_view)(user, chat_id):
            await self.close(code=4403, reason="you cannot see this chat")
            return
        self.chat_id = chat_id
        await broadcast.join(chat_id, self)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page says which version it shows; it gets exactly what changed since."""
        if self.chat_id is None:
            return
        try:
            since = json.loads(text_data or "")["since"]
        except (ValueError, KeyError, TypeError):
            return  # not a resync request: nothing else is taken from a browser here
        if not isinstance(since, int) or isinstance(since, bool) or since < 0:
            return
        self.held = []  # pushes wait until the catch-up is out, so the page sees them in order
        try:
            html, version = await database_sync_to_async(broadcast.render_changes)(
                self.chat_id, since
            )
            await self.send(text_data=broadcast.push_text(since, max(version, since), html))
        finally:
            held, self.held = self.held, None
            for text in held:
                await self.send(text_data=text)

    async def deliver(self, text: str) -> None:
        """A push, handed on by this chat's room in this process."""
        if self.held is not None:
            self.held.append(text)
        else:
            await self.send(text_data=text)

    async def disconnect(self, code: int) -> None:
        if self.chat_id is not None:
            await broadcast.leave(self.chat_id, self)


def render_inbox(user: Any) -> str:
    prompts = reads.inbox(access.answerable_chats(user))
    return render_to_string("activity/inbox.html#inbox-list", {"prompts": prompts, "oob": True})


class InboxConsumer(Relay):
    """``/ws/inbox/``: a user's open prompts, re-rendered for them when one opens or closes."""

    groups_joined: list[str]

    async def connect(self) -> None:
        await self.accept()
        self.groups_joined = []
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=4401, reason="log in to see your inbox")
            return
        workspaces = await database_sync_to_async(access.answering_workspaces)(user)
        names = (
            [broadcast.INBOX_ALL]
            if workspaces is None
            else list(map(broadcast.inbox_group, workspaces))
        )
        for name in names:
            await self.channel_layer.group_add(name, self.channel_name)
        self.groups_joined = names
        self.rendering: asyncio.Task[None] | None = None
        self.again = False
        # What opened or closed between the page's render and joining the groups (or while a
        # reconnecting socket was away) was announced to nobody: start from a fresh list.
        await self.inbox_changed({})

    async def inbox_changed(self, event: dict[str, Any]) -> None:
        if self.rendering is not None:
            self.again = True  # one render follows whatever is in flight
            return
        self.rendering = asyncio.get_running_loop().create_task(self.refresh())

    async def refresh(self) -> None:
        try:
            while True:
                self.again = False
                html = await database_sync_to_async(render_inbox)(self.scope["user"])
                await self.send(text_data=json.dumps({"content": html}))
                if not self.again:
                    return
        finally:
            self.rendering = None

    async def disconnect(self, code: int) -> None:
        for name in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(name, self.channel_name)
