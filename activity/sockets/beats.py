"""One heartbeat per process for every open socket.

Every ``WATCHING_HEARTBEAT_SECONDS`` an open socket renews what would otherwise expire or go
stale: its slot among its person's or token's sockets (``floods.Slot``), its groups and its
session's check (``revoke.Guard``), its entry among a chat's watchers (``watching.Watch``), an
inbox's groups (``inbox.GroupMember``). A task of its own for each renewal cost an idle page
~1.3 KiB apiece (bench/README.md, "Memory per idle viewer"); here one task of the process's
event loop renews every socket registered, ``AT_ONCE`` at a time, and stops when none is left.

A socket is registered (``add``) once it has something to renew, and taken off (``discard``)
when it lets go, and in any case when its consumer ends, however it ends
(docs/gotchas.md#tasks-outlive-their-socket). A socket's renewal that fails is logged; the
others go on.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass, field
from typing import Protocol

from activity.push import watching

log = logging.getLogger(__name__)
AT_ONCE = 50  # sockets renewed concurrently: each waits on Redis or the database


class Renewing(Protocol):
    async def renew(self) -> None: ...


@dataclass(eq=False)
class Beat:
    """An event loop's registered sockets (in the order they came) and the task renewing
    them."""

    sockets: dict[Renewing, None] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


_beats: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Beat] = weakref.WeakKeyDictionary()


def add(socket: Renewing) -> None:
    loop = asyncio.get_running_loop()
    beat = _beats.get(loop)
    if beat is None:
        beat = _beats[loop] = Beat()
    beat.sockets[socket] = None
    if beat.task is None:
        beat.task = loop.create_task(run(beat))


def discard(socket: Renewing) -> None:
    """Renew ``socket`` no more. The last socket gone, the heartbeat stops."""
    try:
        beat = _beats.get(asyncio.get_running_loop())
    except RuntimeError:  # no loop runs: nothing was registered from here
        return
    if beat is None:
        return
    beat.sockets.pop(socket, None)
    if not beat.sockets and beat.task is not None and beat.task is not asyncio.current_task():
        beat.task.cancel()
        beat.task = None


async def run(beat: Beat) -> None:
    try:
        while beat.sockets:
            await asyncio.sleep(watching.heartbeat())
            sockets = list(beat.sockets)
            for first in range(0, len(sockets), AT_ONCE):
                some = sockets[first : first + AT_ONCE]
                await asyncio.gather(*(renew(beat, socket) for socket in some))
    finally:
        if beat.task is asyncio.current_task():
            beat.task = None


async def renew(beat: Beat, socket: Renewing) -> None:
    if socket not in beat.sockets:
        return  # it let go meanwhile
    try:
        await socket.renew()
    except Exception:
        log.exception("renewing a socket failed; the next heartbeat tries again")


def registered() -> list[Renewing]:
    """The sockets this event loop's heartbeat renews, in the order they came."""
    beat = _beats.get(asyncio.get_running_loop())
    return list(beat.sockets) if beat is not None else []


def beating() -> bool:
    """Whether this event loop's heartbeat task runs."""
    beat = _beats.get(asyncio.get_running_loop())
    return beat is not None and beat.task is not None and not beat.task.done()
