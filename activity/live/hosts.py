"""Agent hosts on the server: a host's socket session.

A host (``koruweb host``, ``runner/host.py``) connects to ``/ws/host/`` with a host token
(``consumers.HostConsumer``, which only relays to a ``HostSession``). Its first frame is a
``host_hello`` (one of another ``frames.PROTOCOL_VERSION``, or of none, closes with
``CLOSE_UPGRADE`` and the runner to install): the ``AgentHost`` of its token and name is made
or updated (its agents, roots and ``max_runs``) and shown online on this socket; the host is
told ``welcome``. Another host process of the same name online in the workspace is refused
(``CLOSE_FORBIDDEN``); the runs the server counts as running on it that its hello does not
list ended while it was away (``reconcile``). A heartbeat keeps it "seen" while the socket is
up and ends with it (docs/gotchas.md#tasks-outlive-their-socket); a host silent for three
heartbeats counts as offline (``AgentHost.is_online``).

The session relays the host's ``listing`` replies to the page that asked, and its ``started``
and ``exited`` update the run. What the web asks of a host (a listing, a start) is
activity/live/host_asks.py; when a run's token is revoked, activity/live/run_tokens.py.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from pydantic import ValidationError

from activity.core import groups
from activity.live import boundary, chats
from activity.live.run_tokens import close_sockets, revoke_run_token, revoke_tokens
from activity.live.work import ChatChange
from activity.models import Chat
from activity.models.accounts import (
    RUNNING,
    AgentHost,
    HostRun,
    HostRunStatus,
)
from activity.wire.frames import (
    CLOSE_FORBIDDEN,
    CLOSE_PROTOCOL,
    CLOSE_TOO_LARGE,
    CLOSE_UPGRADE,
    MAX_FRAME_BYTES,
    other_protocol,
    upgrade_reason,
)
from activity.wire.hostframes import (
    Exited,
    HostHello,
    Listing,
    Started,
    Welcome,
    host_frame,
)

log = logging.getLogger(__name__)
ASKED_MAX = 100  # listings a session waits for at once; the oldest is forgotten past it
CHAT_URL = re.compile(r"/chats/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/")
Status = HostRunStatus


class Duplicate(Exception):
    """Another host process of the same name is online in the workspace."""


class Socket(Protocol):
    channel_name: str

    async def send_text(self, text: str) -> None: ...

    async def close(self, code: int | None = None, reason: str | None = None) -> None: ...

    async def join(self, group: str) -> None: ...

    async def leave(self, group: str) -> None: ...


class HostSession:
    def __init__(
        self,
        workspace_id: uuid.UUID,
        token_id: int,
        socket: Socket,
        announce: Callable[[ChatChange], Awaitable[None]],
    ) -> None:
        self.workspace_id = workspace_id
        self.token_id = token_id
        self.socket = socket
        self.announce = announce  # broadcast.announce: a run's end changes its page
        self.host_id: uuid.UUID | None = None
        self.asked: dict[str, str] = {}  # a list frame's id → the reply channel of its page
        self.heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.socket.join(groups.token(self.token_id))  # a revoked token closes us

    async def receive(self, text: str | None) -> None:
        if text is None or len(text) > MAX_FRAME_BYTES:
            await self.socket.close(code=CLOSE_TOO_LARGE, reason="frames are JSON under 1 MiB")
            return
        try:
            raw = boundary.load(text)
            if self.host_id is None:
                if other_protocol(raw, "host_hello"):  # a host of another release
                    await self.socket.close(code=CLOSE_UPGRADE, reason=upgrade_reason())
                    return
                await self.hello(HostHello.model_validate(raw))
                return
            frame = host_frame.validate_python(raw)
        except (boundary.Unreadable, ValidationError) as error:
            said = str(error).splitlines()[0][:300]
            if self.host_id is None:
                await self.socket.close(code=CLOSE_PROTOCOL, reason="the first frame is a hello")
            log.warning("a host sent a frame the server cannot use: %s", said)
            return
        match frame:
            case Listing():
                reply = self.asked.pop(str(frame.id), None)
                if reply is not None:
                    listing = {"type": "host.listing", "listing": frame.model_dump(mode="json")}
                    await get_channel_layer().send(reply, listing)
            case Started():
                change = await database_sync_to_async(started)(self.host_id, frame)
                if change is not None:
                    await self.announce(change)
            case Exited():
                change = await database_sync_to_async(exited)(self.host_id, frame)
                if change is not None:
                    await self.announce(change)

    async def hello(self, hello: HostHello) -> None:
        try:
            host, revoked = await database_sync_to_async(connect)(
                self.workspace_id, self.token_id, hello, self.socket.channel_name
            )
        except Duplicate as duplicate:
            await self.socket.close(code=CLOSE_FORBIDDEN, reason=str(duplicate)[:123])
            return
        await close_sockets(revoked)
        self.host_id = host.pk
        self.heartbeat = asyncio.get_running_loop().create_task(self.beat(host.pk))
        page = reverse("workspace", args=[host.workspace.slug])
        await self.socket.send_text(Welcome(page=page).model_dump_json())

    async def ask(self, event: dict[str, Any]) -> None:
        """A page's request for the host (``host.ask``): sent on; a listing's reply channel
        is kept until the host answers."""
        reply = event.get("reply")
        if reply:
            self.asked[event["id"]] = reply
            while len(self.asked) > ASKED_MAX:
                self.asked.pop(next(iter(self.asked)))
        await self.socket.send_text(event["text"])

    async def beat(self, host_id: uuid.UUID) -> None:
        """The host is here while its socket is; a failed write is tried again within a
        second. Nothing but the socket's end stops it."""
        interval = settings.RUNNER_HEARTBEAT_SECONDS
        failing = False
        while True:
            await asyncio.sleep(min(1.0, interval) if failing else interval)
            try:
                await database_sync_to_async(alive)(host_id, self.socket.channel_name)
                await self.socket.join(groups.token(self.token_id))
                failing = False
            except Exception as fault:
                if not failing:
                    log.warning("the heartbeat of host %s failed, retrying: %r", host_id, fault)
                failing = True

    def end_tasks(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.cancel()

    async def stop(self) -> None:
        self.end_tasks()
        await self.socket.leave(groups.token(self.token_id))
        if self.host_id is not None:
            try:
                await database_sync_to_async(left)(self.host_id, self.socket.channel_name)
            except Exception as fault:  # its silence says it instead (host_silence)
                log.warning("host %s left while the database was away: %r", self.host_id, fault)


# --- the database side of a session ---------------------------------------------------------


def connect(
    workspace_id: uuid.UUID, token_id: int, hello: HostHello, channel: str
) -> tuple[AgentHost, list[int]]:
    """The host of this hello, online on ``channel``, and the run tokens revoked because its
    hello no longer lists their runs; raises ``Duplicate``, having changed nothing, while
    another host process of the same name is online in the workspace."""
    with transaction.atomic():
        others = AgentHost.objects.select_for_update().filter(
            workspace_id=workspace_id, name=hello.name
        )
        for other in others:
            same = other.token_id == token_id and bool(hello.instance)
            if other.is_online and not (same and other.instance == hello.instance):
                raise Duplicate(
                    f"a host named {hello.name[:40]} is online in this workspace already; "
                    "stop it, or give this one another --name"
                )
        host, _ = AgentHost.objects.update_or_create(
            token_id=token_id,
            name=hello.name,
            defaults={
                "workspace_id": workspace_id,
                "agents": [agent.model_dump() for agent in hello.agents],
                "roots": list(hello.roots),
                "online": True,
                "channel": channel,
                "instance": hello.instance or "",
                "max_runs": hello.max_runs,
                "seen_at": timezone.now(),
            },
        )
        revoked = reconcile(host, hello.runs)
    return AgentHost.objects.select_related("workspace").get(pk=host.pk), revoked


def reconcile(host: AgentHost, running: list[uuid.UUID] | None) -> list[int]:
    """The host says which of its runs it runs now (``running``; None: a host that does not
    say): the others the server counts as running ended while it was away. Their tokens are
    revoked: their ids."""
    if running is None:
        return []
    gone = list(host.runs.filter(status__in=RUNNING).exclude(pk__in=running))
    for run in gone:
        if run.status == Status.STARTING:
            run.status, run.error = Status.FAILED, "the host no longer runs it (was it restarted?)"
        else:
            run.status = Status.EXITED
        run.save(update_fields=["status", "error"])
    return revoke_tokens([run.token_id for run in gone if run.token_id is not None])


def alive(host_id: uuid.UUID, channel: str) -> None:
    AgentHost.objects.filter(pk=host_id, channel=channel).update(seen_at=timezone.now())


def left(host_id: uuid.UUID, channel: str) -> None:
    """Only the host's latest socket decides whether it is online."""
    AgentHost.objects.filter(pk=host_id, channel=channel).update(online=False)


def started(host_id: uuid.UUID | None, frame: Started) -> ChatChange | None:
    """The host's word on its run: its page, which must be the run's own chat (a host names
    only chats it started), or why it did not start. Anything else fails the run. The run's
    page draws its controls again (Stop, once it runs)."""
    found = CHAT_URL.search(frame.chat_url or "")
    with transaction.atomic():
        run = HostRun.objects.select_for_update().filter(pk=frame.id, host_id=host_id).first()
        if run is None or run.status != Status.STARTING:
            return None
        if frame.error is not None or found is None:
            run.status = Status.FAILED
            run.error = frame.error or "the runner printed no run page"
            revoke_run_token(run)
        elif run.chat_id is not None and uuid.UUID(found.group(1)) != run.chat_id:
            run.status, run.error = Status.FAILED, "the host reported a page that is not this run's"
            revoke_run_token(run)
        else:
            run.status, run.chat_id = Status.STARTED, uuid.UUID(found.group(1))
        run.save(update_fields=["status", "chat_id", "error"])
    return redraw(run)


def exited(host_id: uuid.UUID | None, frame: Exited) -> ChatChange | None:
    """The runner ended: the run's page may now offer Resume (its controls are drawn again)."""
    with transaction.atomic():
        run = HostRun.objects.select_for_update().filter(pk=frame.id, host_id=host_id).first()
        if run is None:
            return None
        if run.status == Status.STARTING:
            run.status = Status.FAILED
            run.error = f"the runner exited with code {frame.code} before its run started"
        elif run.status == Status.STARTED:
            run.status = Status.EXITED
        run.code = frame.code
        run.save(update_fields=["status", "error", "code"])
        revoke_run_token(run)
    return redraw(run)


def redraw(run: HostRun) -> ChatChange | None:
    """The run's page draws its head again: what its host says of its runner changes what it
    offers (Stop while it runs, Resume once it ended)."""
    if run.chat_id is None:
        return None
    try:
        with chats.change(run.chat_id) as work:
            work.touch_meta("runner_connected")
    except Chat.DoesNotExist:
        return None
    return work.done
