"""Runner presence: whether a chat's runner is connected, and what happens when it is gone.

A chat shows its runner online while the runner's socket is up. When the socket goes, the chat
shows it offline; if the runner does not come back within ``RUNNER_GRACE_SECONDS``, its running
turn is ended (stop reason ``runner_lost``) and its open prompts are closed, so nothing shows
"live" forever and the inbox never offers a prompt nobody can answer.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity import chats, groups
from activity.calls import finish_turn
from activity.models import Chat
from activity.work import ChatChange

RUNNER_LOST = "runner_lost"
HEARTBEAT_SECONDS = 15


class Refused(Exception):
    """The runner may not use this chat."""


async def token_revoked(token_id: int) -> None:
    await get_channel_layer().group_send(groups.token(token_id), {"type": "token.revoked"})


def connect(
    workspace_id: uuid.UUID, chat_id: uuid.UUID, channel: str, acked: int = 0
) -> tuple[ChatChange, int]:
    """A runner said hello: make or find its chat, show it online. Returns the change and the
    highest frame seq the chat has applied."""
    with transaction.atomic():
        if acked == 0:  # a new runner's first hello makes its chat
            Chat.objects.get_or_create(pk=chat_id, defaults={"workspace_id": workspace_id})
        try:
            with chats.change(chat_id) as work:
                chat = work.chat
                if chat.workspace_id != workspace_id:
                    raise Refused("this chat belongs to another workspace")
                chat.runner_connected, chat.runner_left_at = True, None
                chat.runner_channel, chat.runner_seen_at = channel, timezone.now()
                work.touch_meta(
                    "runner_connected", "runner_left_at", "runner_channel", "runner_seen_at"
                )
        except Chat.DoesNotExist:
            raise Refused("this chat was deleted on the server") from None
    return work.done, work.chat.last_seq


def alive(chat_id: uuid.UUID, channel: str) -> None:
    """The runner's socket is still up (its heartbeat)."""
    Chat.objects.filter(pk=chat_id, runner_channel=channel).update(runner_seen_at=timezone.now())


def disconnect(
    chat_id: uuid.UUID, channel: str, left_at: datetime | None = None
) -> ChatChange | None:
    """A runner's socket closed. Only the latest socket of a chat decides its presence.
    None: the chat was deleted meanwhile."""
    try:
        with chats.change(chat_id) as work:
            chat = work.chat
            if chat.runner_channel == channel and chat.runner_connected:
                chat.runner_connected, chat.runner_left_at = False, left_at or timezone.now()
                work.touch_meta("runner_connected", "runner_left_at")
    except Chat.DoesNotExist:
        return None
    return work.done


def sweep(now: float | None = None) -> list[ChatChange]:
    """Mark silent runners gone; end the running turns of runners gone past the grace period."""
    now = time.time() if now is None else now
    cutoff = datetime.fromtimestamp(now, tz=UTC) - timedelta(seconds=settings.RUNNER_GRACE_SECONDS)
    silent = Chat.objects.filter(
        runner_connected=True,
        runner_seen_at__lt=datetime.fromtimestamp(now, tz=UTC) - timedelta(seconds=grace_silence()),
    ).values_list("pk", "runner_channel", "runner_seen_at")
    changes = [c for pk, channel, seen in silent if (c := disconnect(pk, channel, seen))]
    stale = Chat.objects.filter(
        runner_connected=False,
        runner_left_at__lt=cutoff,
        current_attempt__ended_at__isnull=True,
    ).values_list("pk", flat=True)
    changes += [abandon(pk, int(now * 1000)) for pk in stale]
    return [change for change in changes if change.changed]


def grace_silence() -> float:
    """How long a connected runner may say nothing before it counts as gone (a dead server)."""
    return max(settings.RUNNER_GRACE_SECONDS, 3 * HEARTBEAT_SECONDS)


def abandon(chat_id: uuid.UUID, at: int) -> ChatChange:
    """End the running turn of a runner gone past the grace period (unless it came back)."""
    with chats.change(chat_id, related=("current_attempt",)) as work:
        attempt = work.chat.current_attempt
        if not work.chat.runner_connected and attempt is not None and attempt.ended_at is None:
            attempt.ended_at, attempt.stop_reason = at, RUNNER_LOST
            work.touch(attempt, "ended_at", "stop_reason")
            finish_turn(work, attempt, RUNNER_LOST, at)
    return work.done
