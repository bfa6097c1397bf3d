"""Each process's mail, every ``NOTIFY_POLL_MS`` with its notifier (``worker.tick``): the
mails that are due are made (``mailowed.owe``), then those this process claims are sent, each
in a thread of its own (an SMTP server may take seconds), a few at a time, in a round the poll
waits for only so long. In team mode every
process runs it, and the claims send each mail once. docs/email.md."""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from activity.models import Mail
from activity.notify import mailowed, mailsend

log = logging.getLogger(__name__)
AT_ONCE = 4  # mails in flight from one process
# A notifier's poll waits this long for its mail round; a slower one (an SMTP server that does
# not answer) goes on alone, and Web Push is not held up behind it.
BUDGET_SECONDS = 5.0
_round: asyncio.Task[None] | None = None


async def tick() -> None:
    """Start a round of mail unless one still runs, and wait for it ``BUDGET_SECONDS`` at most."""
    global _round
    loop = asyncio.get_running_loop()
    if _round is None or _round.done() or _round.get_loop() is not loop:
        _round = loop.create_task(send_round())
    await asyncio.wait({_round}, timeout=BUDGET_SECONDS)


async def send_round() -> None:
    """Make what is due, then send what this process claims; a failure is logged and the next
    poll tries again."""
    try:
        await database_sync_to_async(mailowed.owe)()
        while mails := await database_sync_to_async(mailowed.take)():
            for first in range(0, len(mails), AT_ONCE):
                await asyncio.gather(*(deliver(m) for m in mails[first : first + AT_ONCE]))
    except Exception:
        log.exception("sending mail failed; the next poll tries again")


async def deliver(mail: Mail) -> None:
    error = await asyncio.to_thread(mailsend.send, mail)
    if error:  # the address's id, never the mail: a link in it may be a secret
        log.warning(
            "a mail (%s) to address %s failed: %s", mail.key.split(":")[0], mail.address_id, error
        )
    await database_sync_to_async(mailowed.done)(mail, error)


def send_now() -> int:
    """Make what is due and send what this process claims, here and now (``send_digests``);
    how many mails went."""
    mailowed.owe()
    went = 0
    while mails := mailowed.take():
        for mail in mails:
            error = mailsend.send(mail)
            mailowed.done(mail, error)
            went += not error
    return went
