"""Access revoked at once: a browser's sockets never outlive its person's access (issue 22).

A socket's access is checked when it connects. Every later loss of it reaches the sockets opened
with it on channel-layer groups (``groups.py``), so in every process of team mode too, with no
database check per push:

- logging out (Django's ``user_logged_out``, from any logout view) tells
  ``groups.session(digest(session key))``: each socket of that session closes at once with
  ``CLOSE_UNAUTHORIZED`` (its page says "Signed out");
- a membership made, changed or removed — on the workspace page, in the admin, by an invite,
  or with its workspace or user deleted — tells ``groups.access(user id)``: each socket of that
  person checks its access once (``browsers.Browser.access_changed``); a chat page that may no
  longer see its chat closes with ``CLOSE_FORBIDDEN``, an inbox or needs socket moves to the
  groups of the workspaces its person has now and sends its page what it shows again;
- a chat deleted — by its admin, ``prune_runs``, the admin, its workspace deleted — tells
  ``groups.viewers(chat id)``: its pages close with ``CLOSE_GONE``.

A session that ends without a logout — it expired, was flushed, its user was made inactive or
changed password — is found on each socket's heartbeat (``Guard.renew``): one look at the
session store every ``WATCHING_HEARTBEAT_SECONDS``, as Django looks at it for a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils.crypto import salted_hmac

from activity.core import groups
from activity.models import Chat, Membership, Workspace
from activity.sockets import signin
from activity.wire.frames import CLOSE_UNAUTHORIZED

log = logging.getLogger(__name__)

# The close reasons, for clients other than the pages (which go by the code, frames.py).
SIGNED_OUT = "signed out"
REMOVED = "no longer a member of this run's workspace"
DELETED = "this run was deleted"


def digest(session_key: str) -> str:
    """What a group name carries of a session key: a keyed hash, so the key itself is never
    in the channel layer (Redis) nor in a log of it."""
    return salted_hmac("koruweb.revoke.session", session_key, algorithm="sha256").hexdigest()


def session_key(scope: dict[str, Any]) -> str:
    """The key of the session a browser's socket was opened with ("" if it had none:
    ``signin.SignedIn`` put it there)."""
    return str(scope.get("session_key") or "")


# --- telling the sockets ----------------------------------------------------------------------


def tell(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` from synchronous code. The change it tells of is made, so
    a channel layer that is away is logged, not raised: its sockets lost that layer too, and
    check their access again when they reconnect."""
    send = async_to_sync(get_channel_layer().group_send)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            send(group, message)
            return
        # A thread that runs an event loop cannot wait on another from inside it (code that is
        # async-unsafe on purpose, as the browser tests' ORM beside Playwright): one thread more.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(send, group, message).result()
    except Exception:
        log.exception("telling %s of %s failed", group, message["type"])


def after_commit(group: str, message: dict[str, Any]) -> None:
    """``tell`` once the change is committed (at once outside a transaction): a socket told
    earlier would look at the database before the change is there."""
    transaction.on_commit(functools.partial(tell, group, message))


@receiver(user_logged_out)
def logged_out(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """Sent before Django flushes the session, so its key is still known here."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        tell(groups.session(digest(key)), {"type": "session.ended"})


def workspace_name(membership: Membership) -> str:
    """Its workspace's name, for the page of a person who just left it (read now: a deleted
    workspace's memberships go before it, and it is gone once the deletion is committed)."""
    if Membership.workspace.is_cached(membership):
        return membership.workspace.name
    found = Workspace.objects.filter(pk=membership.workspace_id).values_list("name", flat=True)
    return found.first() or "a workspace"


def access_changed(membership: Membership, removed: bool) -> None:
    message = {
        "type": "access.changed",
        "workspace": str(membership.workspace_id),
        "name": workspace_name(membership),
        "removed": removed,
    }
    after_commit(groups.access(membership.user_id), message)


@receiver(post_save, sender=Membership)
def membership_saved(sender: Any, instance: Membership, **kwargs: Any) -> None:
    access_changed(instance, removed=False)  # a new member, or a role changed


@receiver(post_delete, sender=Membership)
def membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    access_changed(instance, removed=True)


@receiver(post_delete, sender=Chat)
def chat_deleted(sender: Any, instance: Chat, **kwargs: Any) -> None:
    after_commit(groups.viewers(instance.pk), {"type": "chat.deleted"})


# --- each socket's heartbeat --------------------------------------------------------------------


def signed_in(key: str, user_id: int) -> bool:
    """Whether session ``key`` still signs ``user_id`` in, as Django decides it for a request:
    the session is in the store and unexpired, its user exists, is active, and has the password
    the session was made with."""
    user = signin.person(key)
    return bool(user.is_authenticated and user.pk == user_id)


class Guarded(Protocol):
    channel_layer: Any
    channel_name: str

    async def revoke(self, code: int, reason: str) -> None: ...


class Guard:
    """What revokes one browser socket: it is in its session's and its person's groups (and
    any others it names) from ``start`` to ``stop``; on every heartbeat (``renew``, from the
    process's heartbeat: ``beats.py``) it joins them again (a restarted Redis forgot them) and
    looks at its session."""

    def __init__(self, socket: Guarded, key: str, user_id: int, *more: str) -> None:
        self.socket = socket
        self.key = key
        self.user_id = user_id
        self.names = [groups.session(digest(key)), groups.access(user_id), *more]

    async def start(self) -> None:
        for name in self.names:
            await self.socket.channel_layer.group_add(name, self.socket.channel_name)

    async def renew(self) -> None:
        try:
            for name in self.names:
                await self.socket.channel_layer.group_add(name, self.socket.channel_name)
            alive = await database_sync_to_async(signed_in)(self.key, self.user_id)
        except Exception as fault:  # Redis or the database away: the next beat
            log.warning("a browser socket missed a heartbeat: %r", fault)
            return
        if not alive:
            await self.socket.revoke(CLOSE_UNAUTHORIZED, SIGNED_OUT)

    async def stop(self) -> None:
        for name in self.names:
            with contextlib.suppress(Exception):  # Redis away: the membership expires
                await self.socket.channel_layer.group_discard(name, self.socket.channel_name)
