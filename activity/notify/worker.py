"""Each server process's notifier: every ``NOTIFY_POLL_MS`` it makes the notices that are due
and sends those it claims (``queue``), each push in a thread of its own (a push service may
take seconds), a few at a time. Started by the first socket of the process, a runner's or a
page's (prompts come from runners, mentions from pages); in team mode every process runs one,
and the claims send each notice once."""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from django.conf import settings

from activity.models import Notice
from activity.notify import hookqueue, mailwork, queue, send

log = logging.getLogger(__name__)
AT_ONCE = 8  # pushes in flight from one process
_task: asyncio.Task[None] | None = None


def ensure_running() -> None:
    global _task
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _task = loop.create_task(run())


async def run() -> None:
    while True:
        await asyncio.sleep(settings.NOTIFY_POLL_MS / 1000)
        try:
            await tick()
        except Exception:
            log.exception("sending notifications failed; the next poll tries again")


async def tick() -> None:
    await mailwork.tick()  # email, off the request and ingest paths too (docs/email.md)
    await database_sync_to_async(queue.owe)()
    while notices := await database_sync_to_async(queue.take)():
        for first in range(0, len(notices), AT_ONCE):
            await asyncio.gather(*(deliver(n) for n in notices[first : first + AT_ONCE]))
    await hookqueue.tick()  # the workspaces' webhooks (docs/webhooks.md)


async def deliver(notice: Notice) -> None:
    sent = await asyncio.to_thread(send.send, notice.device, notice.payload)
    if not sent.ok:
        log.warning("a notification to device %s failed: %s", notice.device_id, sent.error)
    await database_sync_to_async(queue.done)(notice, sent)
