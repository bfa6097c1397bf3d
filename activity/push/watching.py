"""Who is watching a chat: the people whose pages of it are open now, in every process.

Each open viewer socket (``sockets/browsers.ViewerConsumer``) is an entry — chat, user, socket id,
expiry — in the ``watching`` cache: Redis when ``REDIS_URL`` is set (a sorted set per chat, its
members ``<user id>:<socket id>`` scored by when they expire), so every process sees every
entry; otherwise this process's memory (the embedded mode has one process). The process's
heartbeat renews it every ``WATCHING_HEARTBEAT_SECONDS`` while its socket is open
(activity/sockets/beats.py); the socket's close removes it; an entry nobody
renews (its process was killed) is gone ``EXPIRY_BEATS`` heartbeats later. A person is listed
once, however many tabs they have open.

When the set of people watching a chat changes — a page opens, a person's last tab closes, an
entry expires — every viewer of the chat is told: ``{"type": "chat.watching", "html": …}`` to
the chat's group, which each process's room hands on as ``{"watching": "<html>"}``
(``broadcast.Room.run``). Watchers are not in the database, so that message carries no version:
the page morphs its ``#watching`` region and leaves its version chain alone
(``static/koruweb/live/live.js``). Only a page that asked for the list (``?watching=1`` on its
socket's URL) is sent it; every other client of the socket (bench/, a test's bare socket) sees
what it always saw. Each process looks at its open chats' sets again on its heartbeat, so an
expiry is announced too; several processes announcing one change is harmless, and a list made
stale by a race between two processes is put right at the next heartbeat.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache
from django.template.loader import render_to_string
from redis.exceptions import RedisError

from activity.core import groups
from activity.people import limits

log = logging.getLogger(__name__)
CACHE = "watching"
EXPIRY_BEATS = 2.5  # an entry outlives one late renewal, not two
SHOWN_MAX = 50  # people named on a page; the rest are counted
LIST = '{"watching": '  # how every list sent to a page starts (``text``)
LOOKING = "looking"  # the prefix of the sets of pages visible and focused (``Watch.look_at``)
FAULTS = (RedisError, OSError)  # the store is away: the list is shown without it, or late


def heartbeat() -> float:
    return float(settings.WATCHING_HEARTBEAT_SECONDS)


def expiry() -> float:
    """Seconds an entry lasts without being renewed."""
    return EXPIRY_BEATS * heartbeat()


# --- where the entries are kept ----------------------------------------------------------------


class Store(Protocol):
    """Entries with an expiry, in sets named by a chat id (or, for ``activity/sockets/floods.py``,
    by whose sockets they are): ``put`` returns how many live entries its set has now."""

    cache: Any  # the process's one instance of the ``watching`` cache (``limits.shared``)

    def put(self, chat_id: object, member: str, expires: float) -> int: ...

    def remove(self, chat_id: object, member: str) -> None: ...

    def members[K](self, chat_ids: list[K], now: float) -> dict[K, list[str]]:
        """The live entries of each chat, for any number of chats in one round trip."""
        ...


class RedisStore:
    """A sorted set per chat, scored by expiry. A write is one transaction (drop what expired,
    add or renew, keep the set as long as its newest entry); a read is one pipeline."""

    def __init__(self, cache: RedisCache, prefix: str = CACHE) -> None:
        self.cache = cache
        self.prefix = prefix

    def client(self) -> Any:
        return self.cache._cache.get_client(write=True)  # the alias's pool and options

    def key(self, chat_id: object) -> str:
        return self.cache.make_key(f"{self.prefix}:{chat_id}")

    def put(self, chat_id: object, member: str, expires: float) -> int:
        key, now = self.key(chat_id), time.time()
        pipe = self.client().pipeline(transaction=True)
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zadd(key, {member: expires})
        pipe.expire(key, math.ceil(max(expires - now, expiry())) + 1)  # outlives every entry
        pipe.zcard(key)
        return int(pipe.execute()[-1])

    def remove(self, chat_id: object, member: str) -> None:
        self.client().zrem(self.key(chat_id), member)

    def members[K](self, chat_ids: list[K], now: float) -> dict[K, list[str]]:
        if not chat_ids:
            return {}
        pipe = self.client().pipeline(transaction=False)
        for chat_id in chat_ids:
            pipe.zrangebyscore(self.key(chat_id), f"({now}", "+inf")
        found = pipe.execute()
        return {
            chat_id: [m.decode() for m in entries]
            for chat_id, entries in zip(chat_ids, found, strict=True)
        }


class CacheStore:
    """Any other cache — locmem, one process's memory: a dict per chat (entry → expiry), read,
    changed and written back under this process's lock."""

    lock = threading.Lock()

    def __init__(self, cache: BaseCache, prefix: str = CACHE) -> None:
        self.cache = cache
        self.prefix = prefix

    def key(self, chat_id: object) -> str:
        return f"{self.prefix}:{chat_id}"

    def change(self, chat_id: object, member: str, expires: float | None) -> int:
        """Add, renew or (``expires`` None) remove an entry; how many live ones are left."""
        key, now = self.key(chat_id), time.time()
        with self.lock:
            entries = {m: e for m, e in (self.cache.get(key) or {}).items() if e > now}
            if expires is None:
                entries.pop(member, None)
            else:
                entries[member] = expires
            if entries:
                self.cache.set(key, entries, math.ceil(max(*entries.values(), now) - now) + 1)
            else:
                self.cache.delete(key)
            return len(entries)

    def put(self, chat_id: object, member: str, expires: float) -> int:
        return self.change(chat_id, member, expires)

    def remove(self, chat_id: object, member: str) -> None:
        self.change(chat_id, member, None)

    def members[K](self, chat_ids: list[K], now: float) -> dict[K, list[str]]:
        found = self.cache.get_many([self.key(c) for c in chat_ids])
        entries = {c: found.get(self.key(c)) or {} for c in chat_ids}
        return {c: [m for m, e in entries[c].items() if e > now] for c in chat_ids}


def store(prefix: str = CACHE) -> Store:
    """The store of the ``watching`` cache; ``prefix`` names its sets apart from others kept
    there the same way (the sockets' slots, ``activity/sockets/floods.py``)."""
    cache = limits.shared(CACHE)
    return RedisStore(cache, prefix) if isinstance(cache, RedisCache) else CacheStore(cache, prefix)


def entry(user_id: int, socket_id: str) -> str:
    return f"{user_id}:{socket_id}"


def people_in(entries: Iterable[str]) -> frozenset[int]:
    """The users of some entries, each once."""
    return frozenset(int(e.split(":", 1)[0]) for e in entries)


# --- what pages show ---------------------------------------------------------------------------


def looking(chat_id: uuid.UUID) -> frozenset[int]:
    """The people with a page of the chat visible and focused now, in any process."""
    try:
        found = store(LOOKING).members([chat_id], time.time())
    except FAULTS as fault:
        log.warning("reading who looks at chat %s failed: %r", chat_id, fault)
        return frozenset()
    return people_in(found[chat_id])


def name(user: Any) -> str:
    return str(user.get_full_name() or user.get_username())


def ordered(users: Iterable[Any]) -> list[Any]:
    return sorted(users, key=lambda u: (name(u).casefold(), u.pk))


def people(user_ids: Iterable[int]) -> list[Any]:
    ids = set(user_ids)
    return ordered(get_user_model().objects.filter(pk__in=ids)) if ids else []


def watchers(chat_id: uuid.UUID) -> list[Any]:
    """The people watching a chat now: one user per person, ordered by name."""
    return people(people_in(store().members([chat_id], time.time())[chat_id]))


def counts(chat_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    """How many people watch each chat, in one round trip to the store; a chat nobody
    watches counts 0. Empty when the store is away: the runs list shows no counts then."""
    ids = list(chat_ids)
    try:
        found = store().members(ids, time.time())
    except FAULTS as fault:
        log.warning("counting who watches %d runs failed: %r", len(ids), fault)
        return {}
    return {chat_id: len(people_in(entries)) for chat_id, entries in found.items()}


@dataclass(frozen=True)
class Seen:
    """A person as the list shows them: a name and a round badge with its initial."""

    name: str
    initial: str
    hue: int  # one of the CSS classes hue-0 … hue-5, the same for a person everywhere

    @classmethod
    def of(cls, user: Any) -> Seen:
        called = name(user)
        return cls(called, called[:1].upper(), user.pk % 6)


def render(users: list[Any], oob: bool = True) -> str:
    context = {
        "watchers": [Seen.of(u) for u in users[:SHOWN_MAX]],
        "more": max(0, len(users) - SHOWN_MAX),
        "oob": oob,
    }
    return render_to_string("activity/pushed/watching.html", context)


def on_page(chat_id: uuid.UUID, user: Any) -> str:
    """The list as a chat's page is first drawn: its reader among them (their socket is about
    to open), and only them when the store is away."""
    try:
        users = watchers(chat_id)
    except FAULTS as fault:
        log.warning("reading who watches chat %s failed: %r", chat_id, fault)
        users = []
    if all(u.pk != user.pk for u in users):
        users = ordered([*users, user])
    return render(users, oob=False)


# --- one socket's entry, and this process's look at each open chat ----------------------------


class Viewer(Protocol):
    async def deliver(self, text: str) -> None: ...


def asked(scope: dict[str, Any]) -> bool:
    """Whether the page asked for the list: ``?watching=1`` on its socket's URL."""
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    return query.get("watching") == ["1"]


def text(html: str) -> str:
    """The message a page is sent: the list, outside the version chain."""
    return json.dumps({"watching": html})


def unwanted(watch: Watch | None, message: str) -> bool:
    """Whether ``message`` is a list that its socket's page did not ask for, or one from before
    the page's own entry was in (another page's look): a page never lists people without its
    own reader."""
    return message.startswith(LIST) and (watch is None or not watch.shows or not watch.entered)


@dataclass(eq=False)
class Local:
    """This process's sockets watching one chat, and the people it last saw watching it."""

    watches: set[Watch] = field(default_factory=set)
    users: frozenset[int] | None = None  # as last announced from here
    html: str = ""
    looked: float = -math.inf  # time.monotonic() of the last look
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_chats: dict[uuid.UUID, Local] = {}


async def look(chat_id: uuid.UUID, local: Local) -> None:
    """Read who watches the chat; when that is not who this process last saw, tell every
    viewer of the chat, in every process."""
    async with local.lock:  # one look at a chat at a time here: lists go out in order
        try:
            found = await asyncio.to_thread(store().members, [chat_id], time.time())
        except FAULTS as fault:
            log.warning("reading who watches chat %s failed: %r", chat_id, fault)
            return
        local.looked = time.monotonic()
        users = people_in(found[chat_id])
        if users == local.users:
            return
        try:
            html = await database_sync_to_async(lambda: render(people(users)))()
            message = {"type": "chat.watching", "html": html}
            await get_channel_layer().group_send(groups.chat(chat_id), message)
        except Exception as fault:  # the database or channel layer is away: the next look
            log.warning("telling who watches chat %s failed: %r", chat_id, fault)
            return
        local.users, local.html = users, html


class Watch:
    """One viewer socket's entry: written when the socket opens, renewed on the process's
    heartbeat (``renew``, from its socket: activity/sockets/beats.py), removed when it closes.
    ``shows``: its page asked for the list, and gets it at once."""

    def __init__(self, chat_id: uuid.UUID, user_id: int, viewer: Viewer, shows: bool) -> None:
        self.chat_id = chat_id
        self.entry = entry(user_id, uuid.uuid4().hex)
        self.viewer = viewer
        self.shows = shows
        self.entered = False  # its entry was written (or tried: the store may be away)
        self.looking = False  # its page says it is visible and focused

    async def start(self) -> None:
        await self.put()
        self.entered = True
        local = _chats.setdefault(self.chat_id, Local())
        local.watches.add(self)
        await look(self.chat_id, local)
        if self.shows and local.html:  # also when this person was watching already
            await self.viewer.deliver(text(local.html))

    async def put(self) -> None:
        expires = time.time() + expiry()
        try:
            await asyncio.to_thread(store().put, self.chat_id, self.entry, expires)
        except FAULTS as fault:  # it is written again at the next heartbeat
            log.warning("recording a watcher of chat %s failed: %r", self.chat_id, fault)

    async def renew(self) -> None:
        """Renew the entry (and its "looking" one); look at the chat again unless a socket here
        just did."""
        await self.put()
        if self.looking:
            await self.look_at(True)
        local = _chats.get(self.chat_id)
        if local is not None and time.monotonic() - local.looked >= heartbeat() / 2:
            await look(self.chat_id, local)

    async def look_at(self, looking: bool) -> None:
        """The page is visible and focused, or no longer: a person looking at the chat is not
        buzzed about it (activity/notify/queue.py). Kept as the entries are, in ``LOOKING``."""
        self.looking = looking
        try:
            if looking:
                expires = time.time() + expiry()
                await asyncio.to_thread(store(LOOKING).put, self.chat_id, self.entry, expires)
            else:
                await asyncio.to_thread(store(LOOKING).remove, self.chat_id, self.entry)
        except FAULTS as fault:  # written again at the next heartbeat, or it expires
            log.warning("recording who looks at chat %s failed: %r", self.chat_id, fault)

    async def stop(self) -> None:
        """The socket closed: its entry goes, and if that was its person's last page of the
        chat anywhere, every viewer of the chat is told."""
        if self.looking:
            await self.look_at(False)
        try:
            await asyncio.to_thread(store().remove, self.chat_id, self.entry)
        except FAULTS as fault:  # it expires instead
            log.warning("removing a watcher of chat %s failed: %r", self.chat_id, fault)
        local = _chats.get(self.chat_id)
        if local is None or self not in local.watches:
            return
        local.watches.discard(self)
        await look(self.chat_id, local)
        if not local.watches and _chats.get(self.chat_id) is local:
            del _chats[self.chat_id]
