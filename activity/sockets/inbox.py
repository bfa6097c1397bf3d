"""The sockets that tell a person what waits for them, on top of ``browsers.Browser``.

``InboxConsumer`` (``/ws/inbox/``) re-renders a person's open prompts when one opens or closes.
``NeedsConsumer`` (``/ws/needs/``, every page) passes on what waits for a person and, on the
runs list, each run's line. Both join their groups again on every heartbeat (``GroupMember``),
and when their person's memberships change move to the groups of the workspaces they have now
and send their page what it shows again (``access_changed``, ``revoke.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from activity.core import groups
from activity.people import access
from activity.push import inbox as needs
from activity.push import pushes
from activity.sockets.browsers import Browser
from activity.wire.frames import CLOSE_UNAUTHORIZED

log = logging.getLogger(__name__)


class GroupMember(Browser):
    """A socket that is in channel-layer groups for as long as it is open (the inbox and needs
    sockets). A restarted Redis forgets every membership, and the socket's receive may go on
    without an error all the same (one blocking receive serves every channel of a process, and
    only the coroutine waiting in it is told). So on every heartbeat
    (``WATCHING_HEARTBEAT_SECONDS``) it joins its groups again, which also renews their
    ``group_expiry``, and, on Redis, sends its page what it needs to be right again
    (``resync``): what was said while no group reached it is not missed for longer than a
    heartbeat. The in-memory layer never forgets a group: nothing is sent again there. A beat
    that fails is logged and the next one tries again. The beats are the process's
    (``beats.py``, through ``Browser.renew``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups_joined: list[str] = []

    async def join(self, names: list[str]) -> None:
        for name in names:
            await self.channel_layer.group_add(name, self.channel_name)
        self.groups_joined = [*self.groups_joined, *names]

    async def renew(self) -> None:
        await super().renew()
        if self.revoked:
            return
        try:
            for name in self.groups_joined:
                await self.channel_layer.group_add(name, self.channel_name)
            if settings.REDIS_URL:
                await self.resync()
        except Exception as fault:  # Redis or the database away: the next beat
            log.warning("a %s missed a heartbeat: %r", type(self).__name__, fault)

    async def regroup(self, before: list[str], after: list[str]) -> None:
        """Move from the groups ``before`` to the groups ``after`` (its person's access
        changed); the others it is in stay as they are."""
        for name in set(before) - set(after):
            await self.channel_layer.group_discard(name, self.channel_name)
        for name in after:
            await self.channel_layer.group_add(name, self.channel_name)
        kept = [name for name in self.groups_joined if name not in before]
        self.groups_joined = [*kept, *after]

    async def resync(self) -> None:
        """Send the page what brings it back to the truth after its groups were forgotten."""

    async def let_go(self) -> None:
        joined, self.groups_joined = self.groups_joined, []
        for name in joined:
            await self.channel_layer.group_discard(name, self.channel_name)
        await super().let_go()


def inbox_groups(workspaces: list[uuid.UUID] | None) -> list[str]:
    """The groups that hear of the prompts in these workspaces (None: in all of them)."""
    return [groups.INBOX_ALL] if workspaces is None else list(map(groups.inbox, workspaces))


def runs_groups(workspaces: list[uuid.UUID] | None) -> list[str]:
    """The groups that hear of the runs of these workspaces (None: of all of them)."""
    return [groups.RUNS_ALL] if workspaces is None else list(map(groups.runs, workspaces))


class InboxConsumer(GroupMember):
    """``/ws/inbox/``: a user's open prompts, re-rendered for them when one opens or closes,
    and on a heartbeat in team mode when the list is no longer what the page was sent last."""

    rendering: asyncio.Task[None] | None = None
    again = False  # something changed while a render was in flight: one more follows
    shown = b""  # a digest of the list the page was sent last

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answering: list[str] = []  # the groups of the workspaces where its person answers

    async def connect(self) -> None:
        await self.accept()
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHORIZED, reason="log in to see your inbox")
            return
        if not await self.guarded():
            return
        workspaces = await database_sync_to_async(access.answering_workspaces)(user)
        self.answering = inbox_groups(workspaces)
        await self.join(self.answering)
        # What opened or closed between the page's render and joining the groups (or while a
        # reconnecting socket was away) was announced to nobody: start from a fresh list.
        await self.inbox_changed({})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """An inbox takes nothing from the browser: whatever it sends is never even parsed."""

    async def access_changed(self, event: dict[str, Any]) -> None:
        """Its person may answer in other workspaces now: hear of theirs, and list again."""
        if self.revoked:
            return
        user = self.scope["user"]
        after = inbox_groups(await database_sync_to_async(access.answering_workspaces)(user))
        await self.regroup(self.answering, after)
        self.answering = after
        await self.inbox_changed({})

    async def inbox_changed(self, event: dict[str, Any]) -> None:
        if self.revoked:
            return
        if self.rendering is not None:
            self.again = True  # one render follows whatever is in flight
            return
        self.rendering = asyncio.get_running_loop().create_task(self.refresh())

    async def resync(self) -> None:
        """The list as it is now, unless the page has it already (one read, one render)."""
        if self.rendering is not None:
            self.again = True
            return
        self.rendering = asyncio.get_running_loop().create_task(self.refresh())
        await self.rendering  # a render that fails is the beat's to log

    async def refresh(self) -> None:
        """Send the list as it is now, unless it is what the page was sent last."""
        try:
            while True:
                self.again = False
                html = await database_sync_to_async(pushes.render_inbox)(self.scope["user"])
                digest = hashlib.blake2b(html.encode(), digest_size=16).digest()
                if digest != self.shown:
                    text = json.dumps({"content": html})
                    if len(text) > settings.PUSH_MAX_BYTES:  # too big to push: the page fetches it
                        text = json.dumps({"reload": True})
                    await self.send(text_data=text)
                    self.shown = digest
                if not self.again:
                    return
        finally:
            self.rendering = None

    async def let_go(self) -> None:
        """A render in flight ends with the socket (docs/gotchas.md#tasks-outlive-their-socket)."""
        if self.rendering is not None:
            self.rendering.cancel()
        await super().let_go()


class NeedsConsumer(GroupMember):
    """``/ws/needs/``: what waits for this person, on every page (``needs.py``): their counts
    first, then each workspace's as it changes (only where they may answer); on a runs page,
    once it says which runs it shows, those lines now and every member's run as it changes.
    On a heartbeat in team mode it is sent its counts again (``resync``), never the lines."""

    runs_joined = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answering: list[str] = []  # the groups of the workspaces where its person answers
        self.listing: list[str] = []  # … and of those whose runs they see (on a runs page)
        self.runs_shown: list[uuid.UUID] = []  # the runs its page said it shows, last

    async def connect(self) -> None:
        await self.accept()
        user = self.scope["user"]
        if not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHORIZED, reason="log in to see what waits for you")
            return
        if not await self.guarded():
            return
        workspaces = await database_sync_to_async(access.answering_workspaces)(user)
        self.answering = inbox_groups(workspaces)
        await self.join([*self.answering, groups.person(user.pk)])
        # Counted after joining: nothing that changes from here on is missed.
        await self.send(text_data=await database_sync_to_async(needs.snapshot)(user))

    async def resync(self) -> None:
        """The counts as they are now, which needs.js takes as the truth (three reads)."""
        await self.send(text_data=await database_sync_to_async(needs.snapshot)(self.scope["user"]))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """A runs page says which runs it shows; it gets their lines as they are now."""
        ids = needs.asked_runs(text_data)
        user = self.scope["user"]
        if ids is None or not user.is_authenticated or self.revoked:
            return
        self.runs_shown = ids
        if not self.runs_joined:
            self.runs_joined = True
            workspaces = await database_sync_to_async(needs.member_workspaces)(user)
            self.listing = runs_groups(workspaces)
            await self.join(self.listing)
        for text in await database_sync_to_async(needs.catch_up)(user, ids):
            await self.send(text_data=text)

    async def access_changed(self, event: dict[str, Any]) -> None:
        """Its person's memberships changed: it moves to the groups of the workspaces they have
        now and sends its page their counts, the lines it shows (a run they may no longer see
        is ``gone``) and, if they are no longer a member of the workspace the change was in,
        ``{"left": {"workspace", "name"}}`` (needs.js says so)."""
        if self.revoked:
            return
        seen = await database_sync_to_async(looked_again)(
            self.scope["user"], event, self.runs_shown if self.runs_joined else None
        )
        await self.regroup(self.answering, seen.answering)
        self.answering = seen.answering
        if self.runs_joined:
            await self.regroup(self.listing, seen.listing)
            self.listing = seen.listing
        for text in seen.texts:
            await self.send(text_data=text)

    async def inbox_changed(self, event: dict[str, Any]) -> None:
        if event.get("needs"):
            await self.send(text_data=event["needs"])

    async def runs_changed(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])

    async def mentions_changed(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])


@dataclass(frozen=True)
class Seen:
    """What a needs socket is to hear and say once its person's access changed."""

    answering: list[str]  # the inbox groups of the workspaces where they answer now
    listing: list[str]  # the runs groups of the workspaces whose runs they see now
    texts: list[str]  # what its page is sent, in order


def looked_again(user: Any, event: dict[str, Any], runs: list[uuid.UUID] | None) -> Seen:
    """One look at a person's access after a change of their memberships; ``runs``: the lines
    their runs page shows (None: not a runs page)."""
    members = needs.member_workspaces(user)
    texts = [needs.snapshot(user)]
    if runs is not None:
        texts += needs.catch_up(user, runs)
    left = members is not None and event.get("removed") is True
    if left and event.get("workspace") not in {str(w) for w in members or []}:
        name = str(event.get("name", ""))
        texts.append(json.dumps({"left": {"workspace": event.get("workspace"), "name": name}}))
    answering = inbox_groups(access.answering_workspaces(user))
    return Seen(answering, runs_groups(members), texts)
