"""The socket of a page open on a share link (``/ws/shared/<token>/``; activity/review/shares.py,
docs/architecture.md#share-links): live like a member's chat page, with none of the team's own.

It joins the chat's room like a member's page (``broadcast.join``) and hears the same pushes,
but never hands one on as it is: a push is drawn for members (names, comments, forms). For each
change it renders the change again with ``shared`` set, from the version the push starts at,
once per process and change (``_drawn``: the room hands a push to its viewers one at a time, so
the next page of the link finds it drawn). Heartbeats' versions and reloads go on unchanged;
who is watching never reaches it, and it is not counted among the watchers.

It takes a slot of its link's (``SHARE_SOCKETS_PER_LINK`` open at once, ``CLOSE_RATE`` past
it). It closes with ``CLOSE_GONE`` when the link is revoked (``groups.share``), when it expires
(a timer), or when the run is deleted (``groups.viewers``); every heartbeat looks at the link
in the database again, so a revocation whose message was lost (Redis restarted) still ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections import OrderedDict
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from activity.core import groups
from activity.models import ShareLink
from activity.push import broadcast, pushes
from activity.review import shares
from activity.sockets import beats, revoke
from activity.sockets.browsers import since_asked
from activity.sockets.consumers import Relay
from activity.sockets.floods import Slot, too_many_sockets
from activity.wire.frames import CLOSE_GONE, CLOSE_RATE, CLOSE_UNAVAILABLE

log = logging.getLogger(__name__)
# The head of a push as ``pushes.push_text`` and ``split`` write it (json.dumps, keys in order).
HEAD = re.compile(r'\{"from": (\d+), "to": (\d+)(?:, "part": (\d+))?')
BEACON_END = '"content": ""}'
DRAWN = 4  # changes kept drawn for a link's next page in this process
_drawn: OrderedDict[tuple[uuid.UUID, int, int], list[str]] = OrderedDict()


async def drawn(chat_id: uuid.UUID, since: int, to: int) -> list[str]:
    """The change ``since`` → ``to`` (or later) as a link's pages draw it, rendered once here."""
    key = (chat_id, since, to)
    texts = _drawn.get(key)
    if texts is None:
        render = database_sync_to_async(pushes.render_push)
        texts = await render(chat_id, since, shared=True)
        _drawn[key] = texts
        while len(_drawn) > DRAWN:
            _drawn.popitem(last=False)
    return texts


def link_state(link_id: int) -> str:
    """Why link ``link_id`` opens nothing now ("" while it is live)."""
    link = ShareLink.objects.filter(pk=link_id).only("revoked_at", "expires_at").first()
    if link is None:
        return revoke.DELETED
    if link.revoked_at is not None:
        return shares.REVOKED
    return "" if link.expires_at > timezone.now() else shares.EXPIRED


class SharedConsumer(Relay):
    link_id: int | None = None
    chat_id: uuid.UUID | None = None
    slot: Slot | None = None
    expiry: asyncio.TimerHandle | None = None
    ending: asyncio.Task[None] | None = None
    held: list[str] | None = None  # pushes that came while a catch-up was being rendered
    sent_to = 0  # the version the last push sent here brings its page to
    ended = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            beats.discard(self)
            if self.expiry is not None:
                self.expiry.cancel()

    async def connect(self) -> None:
        await self.accept()
        token = self.scope["url_route"]["kwargs"]["token"]
        link = await database_sync_to_async(shares.find)(token)
        if link is None:
            await self.end(CLOSE_GONE, "this link no longer works")
            return
        slot = Slot(f"share:{link.pk}", settings.SHARE_SOCKETS_PER_LINK)
        if not await slot.take():
            await self.end(CLOSE_RATE, too_many_sockets(slot, "link"))
            return
        self.slot, self.link_id, self.chat_id = slot, link.pk, link.chat_id
        await self.join()
        why = await database_sync_to_async(link_state)(link.pk)  # revoked while it joined
        if why:
            await self.end(CLOSE_GONE, why)
            return
        beats.add(self)
        wait = (link.expires_at - timezone.now()).total_seconds()
        self.expiry = asyncio.get_running_loop().call_later(max(wait, 0), self.expired)
        await broadcast.join(link.chat_id, self)

    async def join(self) -> None:
        layer = get_channel_layer()
        await layer.group_add(groups.share(self.link_id or 0), self.channel_name)
        await layer.group_add(groups.viewers(self.chat_id or ""), self.channel_name)

    def expired(self) -> None:
        self.ending = asyncio.get_running_loop().create_task(self.end(CLOSE_GONE, shares.EXPIRED))

    async def renew(self) -> None:
        """One heartbeat (``beats.py``): its slot, its groups, and the link looked at again."""
        if self.slot is not None:
            await self.slot.renew()
        if self.link_id is None:
            return
        await self.join()
        why = await database_sync_to_async(link_state)(self.link_id)
        if why:
            await self.end(CLOSE_GONE, why)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page says which version it shows: it gets what changed since (as a member's
        page does, ``browsers.ViewerConsumer.receive``), drawn for a link."""
        since = since_asked(text_data)
        if self.chat_id is None or since is None:
            return
        self.held = []
        try:
            catch_up = database_sync_to_async(pushes.render_push)
            for text in await catch_up(self.chat_id, since, catch_up=True, shared=True):
                await self.send(text_data=text)
        finally:
            held, self.held = self.held, None
            for text in held:
                await self.send(text_data=text)

    async def deliver(self, text: str) -> None:
        """A push to the chat's room: drawn again for a link, or handed on if it shows nothing
        of anyone's (a heartbeat's version, a reload); who watches is never handed on."""
        head = HEAD.match(text, 0, 80)
        if head is None:
            return  # who is watching: not for a link's pages
        if text.endswith(BEACON_END) or '"reload": true' in text[:120]:
            texts = [text]
        elif head.group(3) not in (None, "1"):
            return  # a later part of a change: the first part's drawing brought all of it
        else:
            start, to = int(head.group(1)), int(head.group(2))
            if self.sent_to >= to:
                return  # this page was sent that change already (a drawing reaches the latest)
            try:
                since = max(start, self.sent_to)  # from where this page stands: no gap to ask
                texts = await drawn(self.chat_id or uuid.UUID(int=0), since, to)
            except Exception as fault:  # the database away: the page reconnects and catches up
                log.warning("drawing a push for share link %s failed: %r", self.link_id, fault)
                await self.end(CLOSE_UNAVAILABLE, "the server is reconnecting")
                return
        for one in texts:
            if self.held is not None:
                self.held.append(one)
            else:
                await self.send(text_data=one)

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        if self.ended:
            return
        head = HEAD.match(text_data or "", 0, 80)
        if head is not None and not (text_data or "").endswith(BEACON_END):  # a change, not a beat
            self.sent_to = max(self.sent_to, int(head.group(2)))
        await super().send(text_data, bytes_data, close)

    async def share_ended(self, event: dict[str, Any]) -> None:
        await self.end(CLOSE_GONE, str(event.get("why") or shares.REVOKED))

    async def chat_deleted(self, event: dict[str, Any]) -> None:
        await self.end(CLOSE_GONE, revoke.DELETED)

    async def end(self, code: int, reason: str) -> None:
        """Send nothing more, let go of everything, close with ``code``."""
        if self.ended:
            return
        self.ended = True
        try:
            await self.let_go()
        finally:
            await self.close(code=code, reason=reason)

    async def let_go(self) -> None:
        beats.discard(self)
        if self.expiry is not None:
            self.expiry.cancel()
        chat_id, self.chat_id = self.chat_id, None
        link_id, self.link_id = self.link_id, None
        if chat_id is not None:
            await broadcast.leave(chat_id, self)
            layer = get_channel_layer()
            with contextlib.suppress(Exception):
                await layer.group_discard(groups.viewers(chat_id), self.channel_name)
                await layer.group_discard(groups.share(link_id or 0), self.channel_name)
        slot, self.slot = self.slot, None
        if slot is not None:
            await slot.free()

    async def disconnect(self, code: int) -> None:
        await self.let_go()
