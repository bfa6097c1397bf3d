"""One way to change a chat: lock it, collect the changes, write them under one new version.

Every writer of a chat — ingest, answers, presence, comments, the watchdog — does::

    with chats.change(chat_id) as work:
        ...  # load, make and touch objects through ``work``
    announce(work.done)

``change`` takes the chat's row lock in a transaction, hands out the ``Work`` (the working set,
``work.py``) and, when the block ends without an error, writes what it changed once under one
new chat version and leaves the result in ``work.done``: a ``ChatChange`` that says which chat
moved from which version to which, and whether prompts opened or closed (so the inboxes
change too). The layer that committed announces it (``broadcast.announce``); a block that
raises writes nothing.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.conf import settings
from django.db import transaction

from activity.core.contract import Limits
from activity.live.work import ChatChange, Work, write
from activity.models import Chat

__all__ = ["ChatChange", "change"]


@contextlib.contextmanager
def change(chat_id: uuid.UUID, *, related: tuple[str, ...] = ()) -> Iterator[Work]:
    """Lock the chat and collect one write to it (``related``: relations to load with it).

    Raises ``Chat.DoesNotExist`` for a chat that is not there.
    """
    with transaction.atomic():
        query = Chat.objects.select_for_update(of=("self",))  # PostgreSQL locks no outer join
        chat = (query.select_related(*related) if related else query).get(pk=chat_id)
        work = Work(
            chat=chat, limits=Limits(settings.AGENT_CONTENT_CHARS, settings.AGENT_SHORT_CHARS)
        )
        since, last_seq = chat.version, chat.last_seq
        yield work
        if work.changed or chat.last_seq != last_seq:
            write(work, since)
        work.result = ChatChange(
            chat.pk,
            chat.workspace_id,
            since,
            chat.version,
            work.prompts_changed,
            work.listed,
            tuple(work.mentioned),
        )
