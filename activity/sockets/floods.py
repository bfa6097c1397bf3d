"""What one person or token may open on the live path, and how fast (issue 25, point 7).

- **Sockets at once.** Every browser socket (a chat page's, the inbox's, the needs socket)
  takes a slot of its person's, at most ``SOCKETS_PER_PERSON`` in all; every ``/ws/agent/``
  socket one of its agent token's (``SOCKETS_PER_TOKEN``), every ``/ws/host/`` socket one of
  its host token's (``HOST_SOCKETS_PER_TOKEN``). A socket past the limit is accepted and closed
  at once with ``CLOSE_RATE``. A slot is an entry with an expiry in the ``watching`` cache, kept
  as ``activity/push/watching.py`` keeps a chat's watchers (``watching.store``: a sorted set in
  Redis that every process shares, this process's memory without it), renewed on the process's
  heartbeat every ``WATCHING_HEARTBEAT_SECONDS`` (``beats.py``) and removed when the socket
  closes; a process
  that died leaves entries nobody renews, gone ``watching.EXPIRY_BEATS`` heartbeats later.
- **New chats a minute.** A runner's hello that would make a chat counts against its agent
  token: past ``AGENT_NEW_CHATS_PER_MINUTE`` within the minute that began with the first, it is
  closed with ``CLOSE_RATE`` and a reason that says when the minute ends (the runner waits that
  long, then says hello again). A hello for a chat that exists — a reconnect, a resend — is never
  counted. The count is ``activity/people/limits.py``'s, in the cache every process shares.
- **The hello's deadline** (``HELLO_TIMEOUT_SECONDS``) is the token sockets' own
  (``consumers.TokenRelay``): one timer task per socket, cancelled by its first frame or its end.

A flood of refusals is logged once per minute per person or token (``say_once``), not once per
refusal.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from django.conf import settings

from activity.models import Chat
from activity.people import limits
from activity.push import watching
from activity.wire.frames import rate_reason

log = logging.getLogger(__name__)
SLOTS = "sockets"  # the prefix of the slots' sets in the ``watching`` cache
MINUTE = 60  # seconds: the window of AGENT_NEW_CHATS_PER_MINUTE, and of logging a flood once


def say_once(kind: str, who: str, message: str, *args: object) -> None:
    """Log ``message`` at WARNING unless a line of this ``kind`` about ``who`` was logged within
    the minute, by any process (the ``login_throttle`` cache): a flood is one line a minute."""
    try:
        first = limits.shared().add(limits.key(f"said:{kind}", who), 1, timeout=MINUTE)
    except Exception:  # the cache is away: say it all the same
        first = True
    if first:
        log.warning(message, *args)


# --- sockets at once ----------------------------------------------------------------------------


class Slot:
    """One socket's place among the sockets of ``whose`` (a person, a token): ``take`` it once
    the socket is authenticated, ``renew`` it on the process's heartbeat (``beats.py``, from
    its socket), ``free`` it when the socket closes."""

    def __init__(self, whose: str, limit: int) -> None:
        self.whose = whose
        self.limit = limit
        self.entry = uuid.uuid4().hex

    def put(self) -> int:
        expires = time.time() + watching.expiry()
        return watching.store(SLOTS).put(self.whose, self.entry, expires)

    async def take(self) -> bool:
        """Take a slot: False, keeping none, when it is one past the limit. With the store away
        the socket is let in (logged): the limit guards memory, never the service."""
        try:
            taken = await asyncio.to_thread(self.put)
        except watching.FAULTS as fault:
            log.warning("counting the sockets of %s failed: %r", self.whose, fault)
            taken = 0
        if taken > self.limit:
            await self.free()
            return False
        return True

    async def renew(self) -> None:
        try:
            await asyncio.to_thread(self.put)
        except watching.FAULTS as fault:  # written again at the next heartbeat
            log.warning("renewing a socket of %s failed: %r", self.whose, fault)

    async def free(self) -> None:
        try:
            await asyncio.to_thread(watching.store(SLOTS).remove, self.whose, self.entry)
        except watching.FAULTS as fault:  # it expires instead
            log.warning("freeing a socket of %s failed: %r", self.whose, fault)


def person_slot(user_id: int) -> Slot:
    return Slot(f"person:{user_id}", settings.SOCKETS_PER_PERSON)


def token_slot(kind: str, token_id: int) -> Slot:
    """An agent token's (``kind`` "agent") or a host token's ("host") socket."""
    limit = settings.HOST_SOCKETS_PER_TOKEN if kind == "host" else settings.SOCKETS_PER_TOKEN
    return Slot(f"{kind}-token:{token_id}", limit)


def too_many_sockets(slot: Slot, whose: str) -> str:
    """Log the refusal (once a minute for ``slot``'s owner); the reason to close with."""
    say_once(
        "sockets", slot.whose, "refused a socket: %s has %d open already", slot.whose, slot.limit
    )
    return rate_reason(f"at most {slot.limit} sockets open at once per {whose}")


# --- new chats a minute -------------------------------------------------------------------------


def new_chat_wait(token_id: int, chat_id: uuid.UUID, acked: int) -> float | None:
    """A hello from agent token ``token_id``: None if it may go on, else the seconds until the
    token may make a new chat again (the refusal is logged, once a minute per token). Only a
    hello that would make its chat counts: ``acked`` 0 for a chat that is not there."""
    if acked != 0 or Chat.objects.filter(pk=chat_id).exists():
        return None  # a reconnect or a resend: never limited
    key = limits.key("new-chats", str(token_id))
    began = f"{key}:began"
    counted = limits.count(key, MINUTE)
    cache = limits.shared()
    if counted == 1:
        cache.set(began, time.time(), timeout=MINUTE)
    if counted <= settings.AGENT_NEW_CHATS_PER_MINUTE:
        return None
    since = cache.get(began)
    wait = MINUTE - (time.time() - since) if isinstance(since, float) else float(MINUTE)
    say_once(
        "new-chats",
        str(token_id),
        "refused new chats of agent token %s: over %d a minute (more refusals this minute "
        "are not logged)",
        token_id,
        settings.AGENT_NEW_CHATS_PER_MINUTE,
    )
    return max(wait, 0.0)


def too_many_chats(wait: float) -> str:
    limit = settings.AGENT_NEW_CHATS_PER_MINUTE
    return rate_reason(f"at most {limit} new chats a minute per agent token", wait)
