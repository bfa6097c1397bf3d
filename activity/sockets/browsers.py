"""The browsers' sockets: ``Browser`` (any socket a page opens, closed as soon as its person's
session or access ends: ``revoke.py``) and ``ViewerConsumer`` (``/ws/chats/<id>/``: sends the
page what changed since the version it shows, then every push; hears whether the page is
looked at). The inbox and needs sockets are ``inbox.py``'s; the runner's and the host's,
``consumers.py``'s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from channels.db import database_sync_to_async

from activity.core import groups
from activity.notify import worker as notify
from activity.people import access
from activity.push import broadcast, pushes, watching
from activity.sockets import beats, revoke
from activity.sockets.consumers import Relay
from activity.sockets.floods import Slot, person_slot, too_many_sockets
from activity.wire.frames import CLOSE_FORBIDDEN, CLOSE_GONE, CLOSE_RATE, CLOSE_UNAUTHORIZED

ASKED_MAX_CHARS = 200  # a page's resync request, {"since": N}, is a few dozen characters


def said(text: str | None, key: str) -> object:
    """What a page's message says under ``key`` (None for anything else). Parsed safely: a long
    message is not parsed at all, so no nesting can exhaust the stack."""
    if not text or len(text) > ASKED_MAX_CHARS:
        return None
    try:
        value: object = json.loads(text)[key]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None
    return value


def since_asked(text: str | None) -> int | None:
    """The version a page's message says it shows (``{"since": N}``), or None."""
    since = said(text, "since")
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        return None
    return since


def looking_said(text: str | None) -> bool | None:
    """Whether a page says it is visible and focused (``{"looking": true}``), or None."""
    looking = said(text, "looking")
    return looking if isinstance(looking, bool) else None


class Browser(Relay):
    """A browser's socket — a chat page's, the inbox's, every page's needs socket — open only
    while the session and the access it was opened with last (``revoke.py``). It joins the
    groups that revoke it (``guard``) before it checks its access, so a change made meanwhile
    is heard. Revoked, it sends nothing more, lets go of everything (``let_go``: leaves its
    groups and lists) and closes with the code that tells its page why.

    Each takes a slot of its person's first (``floods.person_slot``): past
    ``SOCKETS_PER_PERSON`` open at once it closes with ``CLOSE_RATE``; its slot is freed as it
    lets go."""

    guard: revoke.Guard | None = None
    slot: Slot | None = None
    revoked = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            beats.discard(self)

    async def guarded(self, *more: str) -> bool:
        """Take a slot of its person's, then join the groups that revoke it. False when its
        person has too many sockets open: closed, it does nothing more."""
        user_id = self.scope["user"].pk
        slot = person_slot(user_id)
        if not await slot.take():
            self.revoked = True  # sends nothing more
            await self.close(code=CLOSE_RATE, reason=too_many_sockets(slot, "person"))
            return False
        self.slot = slot
        key = revoke.session_key(self.scope)
        self.guard = revoke.Guard(self, key, user_id, *more)
        await self.guard.start()
        beats.add(self)
        notify.ensure_running()  # a comment's mention is told even where no runner is connected
        return True

    async def renew(self) -> None:
        """One heartbeat's renewals (``beats.py``): its slot, its groups and its session's
        check."""
        if self.slot is not None:
            await self.slot.renew()
        if self.guard is not None:
            await self.guard.renew()

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        if not self.revoked:
            await super().send(text_data, bytes_data, close)

    async def revoke(self, code: int, reason: str) -> None:
        if self.revoked:
            return
        self.revoked = True
        try:
            await self.let_go()
        finally:  # closed even when the channel layer failed to let go
            await self.close(code=code, reason=reason)

    async def let_go(self) -> None:
        beats.discard(self)
        guard, self.guard = self.guard, None
        if guard is not None:
            await guard.stop()
        slot, self.slot = self.slot, None
        if slot is not None:
            await slot.free()

    async def session_ended(self, event: dict[str, Any]) -> None:
        await self.revoke(CLOSE_UNAUTHORIZED, revoke.SIGNED_OUT)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """One of its person's memberships changed: each kind looks at its access again."""

    async def disconnect(self, code: int) -> None:
        await self.let_go()


class ViewerConsumer(Browser):
    chat_id: uuid.UUID | None = None
    workspace_id: uuid.UUID | None = None  # the chat's
    held: list[str] | None = None  # pushes that came while a catch-up was being rendered
    watch: watching.Watch | None = None  # this page among the chat's watchers

    async def connect(self) -> None:
        await self.accept()
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHORIZED, reason="log in to watch this chat")
            return
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        if not await self.guarded(groups.viewers(chat_id)):
            return
        workspace_id = await database_sync_to_async(workspace_seen)(user, chat_id)
        if workspace_id is None:
            await self.revoke(CLOSE_FORBIDDEN, "you cannot see this chat")
            return
        self.chat_id, self.workspace_id = chat_id, workspace_id
        await broadcast.join(chat_id, self)
        self.watch = watching.Watch(chat_id, user.pk, self, watching.asked(self.scope))
        await self.watch.start()

    async def renew(self) -> None:
        await super().renew()
        if self.watch is not None:
            await self.watch.renew()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page says which version it shows; it gets exactly what changed since, in as
        many pushes as ``PUSH_MAX_BYTES`` makes it, or, past a page's calls, the word to fetch
        its regions (``pushes.render_push``). Or it says whether it is visible and focused."""
        looking = looking_said(text_data)
        if looking is not None and self.watch is not None:
            await self.watch.look_at(looking)  # nobody looking at it is buzzed about this chat
            return
        since = since_asked(text_data)
        if self.chat_id is None or since is None:
            return  # not a resync request: nothing else is taken from a browser here
        self.held = []  # pushes wait until the catch-up is out, so the page sees them in order
        try:
            catch_up = database_sync_to_async(pushes.render_push)
            texts = await catch_up(self.chat_id, since, catch_up=True)
            for text in texts:
                await self.send(text_data=text)
        finally:
            held, self.held = self.held, None
            for text in held:
                await self.send(text_data=text)

    async def deliver(self, text: str) -> None:
        """A push, handed on by this chat's room in this process (the watchers' list only if
        the page asked for it)."""
        if watching.unwanted(self.watch, text):
            return
        if self.held is not None:
            self.held.append(text)
        else:
            await self.send(text_data=text)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """A membership of this person changed: if it is in this chat's workspace (or says
        none), one check of whether they may still see the chat; closed if not."""
        if self.chat_id is None or event.get("workspace") not in (None, str(self.workspace_id)):
            return
        user = self.scope["user"]
        if not await database_sync_to_async(access.can_view)(user, self.chat_id):
            await self.revoke(CLOSE_FORBIDDEN, revoke.REMOVED)

    async def chat_deleted(self, event: dict[str, Any]) -> None:
        await self.revoke(CLOSE_GONE, revoke.DELETED)

    async def let_go(self) -> None:
        """Out of the chat's room (no push reaches it) and off its watchers, at once: the other
        pages are told it left (``watching.Watch.stop``)."""
        chat_id, self.chat_id = self.chat_id, None
        if chat_id is not None:
            await broadcast.leave(chat_id, self)
        watch, self.watch = self.watch, None
        if watch is not None:
            await watch.stop()
        await super().let_go()


def workspace_seen(user: access.User, chat_id: uuid.UUID) -> uuid.UUID | None:
    """The workspace of a chat this user may see; None if they may not (or it is gone)."""
    found = access.visible_chats(user).filter(pk=chat_id)
    return found.values_list("workspace_id", flat=True).first()
