"""A background task in each server process with a runner's or a host's socket: ends the turns
of runners gone too long, and revokes the run tokens of runs that ended without a word
(``run_tokens.sweep``: stuck *starting*, or their runner gone past the grace).

It counts silent only the runner sockets this process does not hold (``presence.sweep``): its
own are open as long as they are, however long the process itself was stalled (issue 23)."""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from django.conf import settings

from activity.live import faults, presence, run_tokens
from activity.push import broadcast

log = logging.getLogger(__name__)
_task: asyncio.Task[None] | None = None


def ensure_running() -> None:
    global _task
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _task = loop.create_task(watch())


async def watch() -> None:
    interval = max(0.5, min(settings.RUNNER_GRACE_SECONDS / 2, 10.0))
    while True:
        await asyncio.sleep(interval)
        try:
            held = presence.held()  # the runner sockets this process holds: never "silent"
            for change in await database_sync_to_async(presence.sweep)(held=held):
                await broadcast.announce(change)
            await run_tokens.close_sockets(await database_sync_to_async(run_tokens.sweep)())
        except Exception:
            faults.report(log, "sweeping for runners that are gone failed")
