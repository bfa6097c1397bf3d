"""Render once, push to every viewer of a chat; coalesce bursts.

Group ``chat-<chat id>`` receives ``{"type": "chat.push", "text": <JSON>}`` where the JSON is
``{"from": S, "to": T, "content": <HTML fragments>}``: the out-of-band fragments bring a page that
shows version S to version T. A page that shows anything but S asks for a resync instead.

What a push says, and how a change too big for one push is cut into parts, is
``pushes.py``; a change in parts travels as one group message, its first part in ``"text"`` and
the rest in ``"more"``.

The group's members are rooms, not sockets: a process's viewers of a chat share one ``Room``,
whose channel receives each push once and hands it to every viewer there in turn. A push then
crosses the channel layer once per process, not once per viewer (bench/README.md).

While it has viewers, a room joins the chat's group again on every heartbeat
(``WATCHING_HEARTBEAT_SECONDS``, ``Room.beat``): a restarted Redis has forgotten the membership,
and the room's receive may go on without an error all the same, as one blocking receive serves
every channel of a process and only the coroutine waiting in it is told. It also hands its
viewers the chat's version from the database as a push that changes nothing,
``{"from": V, "to": V, "content": ""}``: a page at V ignores it, a page behind asks for what it
missed. So a page behind the database catches up within two heartbeats even when a push was
lost without a disconnect (a beat after a push came skips the version: the pushes tell it).
The room hands on one message at a time: that beacon reaches a page between two pushes, never
amid the parts of one.

Every writer returns a ``ChatChange`` (``chats.change``) and the layer that committed it calls
``announce(change)`` (or ``announce_sync`` from synchronous code): the chat's viewers get the
push and, when prompts opened or closed, the inboxes of its workspace are told (and the runs
lists, when their line of the chat changed: ``needs.py``). Nothing else
pushes. Each change is pushed after its commit, at once. The
agent socket takes the frames that arrived while a batch was written and pushed as its next
batch (``consumers.AgentConsumer.drain``), so under load one push carries many updates, each
row once in its latest state, and no push waits on a timer (bench/README.md). A push is sent
once this process's viewers have the one before: pushes never queue up behind a slow fan-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import uuid
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from activity.core import groups
from activity.live import faults
from activity.live.work import ChatChange
from activity.models import Chat
from activity.push import inbox as needs
from activity.push import pushes, watching
from activity.wire.frames import CLOSE_UNAVAILABLE

log = logging.getLogger(__name__)


# Inboxes: every socket of a user who may answer in a workspace joins ``groups.inbox``
# (superusers ``groups.INBOX_ALL``) and is told when a prompt there opens, is answered or closes;
# each inbox then renders what its own user may answer (``pushes.render_inbox``). Those
# messages, and the runs list's, are ``needs.py``'s (``needs.announce``).


_PROCESS = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
_push_ids = itertools.count(1)
HAND_ON_WAIT = 1.0  # seconds a push waits at most for this process's viewers to have the last


class Viewer(Protocol):
    async def deliver(self, text: str) -> None: ...

    async def close(self, code: int | None = None, reason: str | None = None) -> None: ...


class Room:
    """This process's viewers of one chat, behind one member of the chat's group."""

    def __init__(self, chat_id: uuid.UUID) -> None:
        self.chat_id = chat_id
        self.viewers: set[Viewer] = set()
        self.channel = ""
        self.ready = asyncio.Event()  # the channel has joined the group
        self.task: asyncio.Task[None] | None = None
        # Its heartbeat, ended with it (docs/gotchas.md#tasks-outlive-their-socket).
        self.beating: asyncio.Task[None] | None = None
        self.handing = asyncio.Lock()  # one message to the viewers at a time, parts and all
        self.heard = False  # a push came through the group since the last heartbeat
        self.expected = ""  # the push this process sent last, until it is handed on
        self.handed = asyncio.Event()
        self.handed.set()
        self.sending = asyncio.Lock()  # one push of this chat goes out from here at a time
        self.closed = False

    async def open(self) -> None:
        layer = get_channel_layer()
        self.channel = await layer.new_channel()
        await layer.group_add(groups.chat(self.chat_id), self.channel)
        loop = asyncio.get_running_loop()
        self.task = loop.create_task(self.run())
        self.beating = loop.create_task(self.beat())
        self.ready.set()

    async def run(self) -> None:
        layer = get_channel_layer()
        while not self.closed:
            try:
                event = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as fault:
                # Redis went away: whatever was sent meanwhile may be lost, and a restarted
                # Redis has forgotten the group. The viewers reconnect and catch up, in a new
                # room that joins the group again.
                log.warning("the room of chat %s lost the channel layer: %r", self.chat_id, fault)
                await self.disband()
                return
            if event.get("type") == "chat.push":
                self.heard = True
                await self.hand_on(event["text"], *event.get("more", ()))
                if event.get("push") == self.expected:
                    self.handed.set()
            elif event.get("type") == "chat.watching":  # who watches: no version (watching.py)
                await self.hand_on(json.dumps({"watching": event["html"]}))

    async def beat(self) -> None:
        """Every heartbeat while the room is open: join the chat's group again (a restarted
        Redis forgot the room; this also renews the membership's ``group_expiry``) and tell the
        viewers the chat's version, as a push that changes nothing: a page at that version
        ignores it, a page behind it asks for what it missed (live.js). Not after a beat in
        which a push came: a page that missed one before it saw the gap, and the version read
        while a push is on its way would send its pages for a catch-up they do not need. A beat
        that fails is logged and the next one tries again; the room's close ends this task."""
        layer = get_channel_layer()
        while not self.closed:
            await asyncio.sleep(watching.heartbeat())
            try:
                await layer.group_add(groups.chat(self.chat_id), self.channel)
                if self.heard:
                    self.heard = False
                    continue
                version = await database_sync_to_async(version_of)(self.chat_id)
            except Exception as fault:  # Redis or the database away: the next beat
                log.warning("the room of chat %s missed a heartbeat: %r", self.chat_id, fault)
                continue
            if version is not None:  # None: the chat was deleted
                await self.hand_on(pushes.push_text(version, version, ""))

    async def hand_on(self, *texts: str) -> None:
        async with self.handing:  # a heartbeat waits until every part of a push is handed on
            for viewer in list(self.viewers):
                try:
                    for text in texts:  # a change's parts, in order
                        await viewer.deliver(text)
                except Exception as fault:  # its socket is gone: it leaves, never slows a push
                    log.warning("a viewer of chat %s is gone, dropped: %r", self.chat_id, fault)
                    self.viewers.discard(viewer)
            if not self.viewers:
                await self.close()

    async def disband(self) -> None:
        """Close every viewer's socket (``CLOSE_UNAVAILABLE``: its page reconnects and asks
        what it missed) and this room; the next viewer to join opens a new one."""
        viewers, self.viewers = list(self.viewers), set()
        await self.close()
        for viewer in viewers:
            with contextlib.suppress(Exception):
                await viewer.close(code=CLOSE_UNAVAILABLE, reason="the server is reconnecting")

    async def send(self, message: dict[str, Any]) -> None:
        """Send a push to the chat's group once this room has handed on the last one sent
        from here (``HAND_ON_WAIT`` at most: a viewer stuck elsewhere holds no one up)."""
        async with self.sending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.handed.wait(), HAND_ON_WAIT)
            self.expected = f"{_PROCESS}:{next(_push_ids)}"
            self.handed.clear()
            try:
                await get_channel_layer().group_send(
                    groups.chat(self.chat_id), {**message, "push": self.expected}
                )
            except BaseException:
                self.handed.set()  # it never left: the next push need not wait for it
                raise

    async def close(self) -> None:
        """Leave the chat's group and stop receiving; a viewer waiting to join gives up."""
        if _rooms.get(self.chat_id) is self:
            del _rooms[self.chat_id]  # a viewer joining from now on opens a new room
        self.closed = True
        self.handed.set()  # a push waiting on this room goes out at once
        self.ready.set()
        for task in (self.task, self.beating):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        if self.channel:
            try:
                await get_channel_layer().group_discard(groups.chat(self.chat_id), self.channel)
            except Exception as fault:  # Redis away: the membership expires on its own
                log.warning(
                    "the room of chat %s could not leave its group: %r", self.chat_id, fault
                )


_rooms: dict[uuid.UUID, Room] = {}


def version_of(chat_id: uuid.UUID) -> int | None:
    """The chat's version now, or None if it is gone: one read by primary key."""
    return Chat.objects.filter(pk=chat_id).values_list("version", flat=True).first()


async def join(chat_id: uuid.UUID, viewer: Viewer) -> None:
    """Add a viewer to its chat's room here; every push to the chat reaches it from now on."""
    room = _rooms.get(chat_id)
    if room is None:
        room = _rooms[chat_id] = Room(chat_id)
        room.viewers.add(viewer)
        try:
            await room.open()
        except BaseException:  # the channel layer is away: no room is left half open
            await room.disband()
            raise
        return
    room.viewers.add(viewer)
    await room.ready.wait()
    if room.closed:  # it could not open, or lost the channel layer meanwhile
        room.viewers.discard(viewer)
        raise ConnectionError("the channel layer is away")
    # Joining again refreshes the membership, which a group keeps for group_expiry only.
    await get_channel_layer().group_add(groups.chat(chat_id), room.channel)


async def leave(chat_id: uuid.UUID, viewer: Viewer) -> None:
    room = _rooms.get(chat_id)
    if room is None:
        return
    room.viewers.discard(viewer)
    if not room.viewers:
        await room.close()


async def changed(chat_id: uuid.UUID, since: int, version: int) -> None:
    """Push a committed change (versions ``since`` → ``version``) to the chat's viewers.

    Renders everything that changed since ``since`` and sends it once this process's viewers
    have the previous push; returns when it is sent. The agent socket writes its next batch
    only then: whatever arrived meanwhile goes out as one push, of each row's latest state.
    """
    if version <= since:
        return
    try:
        texts = await database_sync_to_async(pushes.render_push)(chat_id, since)
        message = push_message(texts)
        room = _rooms.get(chat_id)
        if room is not None and room.ready.is_set():
            await room.send(message)
        else:  # no viewer here yet (or its room still joining the group): nothing to wait for
            await get_channel_layer().group_send(groups.chat(chat_id), message)
    except Exception:  # the change is committed: its viewers resync on the next push
        faults.report(log, "pushing chat %s failed; its viewers will resync", chat_id)


def push_message(texts: list[str]) -> dict[str, Any]:
    """The group message of a push: its first part in ``text``, any others in ``more``."""
    message: dict[str, Any] = {"type": "chat.push", "text": texts[0]}
    if len(texts) > 1:
        message["more"] = texts[1:]
    return message


def changed_sync(chat_id: uuid.UUID, since: int, version: int) -> None:
    """Push a change made by synchronous code (a view, a command) at once, rendered here.

    People answer and comment at human speed, so these pushes need no coalescing; a pusher of
    the same chat that pushes next starts from an older version and its viewers resync.
    """
    if version > since:
        message = push_message(pushes.render_push(chat_id, since))
        async_to_sync(get_channel_layer().group_send)(groups.chat(chat_id), message)


async def announce(change: ChatChange) -> None:
    """Tell everyone who watches what a committed change did: the chat's viewers get the push,
    and the inboxes of its workspace are told when prompts opened, were answered or closed."""
    await changed(change.chat_id, change.since, change.version)
    await needs.announce(change)  # the inboxes, the header counts, the runs lists


def announce_sync(change: ChatChange) -> None:
    """``announce`` for synchronous code (a view, a command)."""
    changed_sync(change.chat_id, change.since, change.version)
    needs.announce_sync(change)
