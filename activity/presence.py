"""Runner presence: whether a chat's runner is connected, and what happens when it is gone.

A chat shows its runner online while the runner's socket is up. When the socket goes, the chat
shows it offline; if the runner does not come back within ``RUNNER_GRACE_SECONDS``, its running
turn is ended (stop reason ``runner_lost``) and its open prompts are closed, so nothing shows
"live" forever and the inbox never offers a prompt nobody can answer.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity.contract import Limits
from activity.ingest import finish_turn
from activity.models import Chat
from activity.work import Work, write

RUNNER_LOST = "runner_lost"
HEARTBEAT_SECONDS = 15


class Refused(Exception):
    """The runner may not use this chat."""


@dataclass(frozen=True)
class Change:
    chat_id: uuid.UUID
    since: int
    version: int
    workspace_id: uuid.UUID
    prompts_changed: bool = False


def token_group(token_id: int) -> str:
    """The sockets of the runners that use one agent token: told when it is revoked."""
    return f"token-{token_id}"


async def token_revoked(token_id: int) -> None:
    await get_channel_layer().group_send(token_group(token_id), {"type": "token.revoked"})


def connect(
    workspace_id: uuid.UUID, chat_id: uuid.UUID, channel: str, acked: int = 0
) -> tuple[Change, int]:
    """A runner said hello: make or find its chat, show it online. Returns the change and the
    highest frame seq the chat has applied."""
    with transaction.atomic():
        chat = Chat.objects.select_for_update().filter(pk=chat_id).first()
        if chat is None and acked > 0:
            raise Refused("this chat was deleted on the server")
        if chat is None:
            chat = Chat.objects.create(pk=chat_id, workspace_id=workspace_id)
        if chat.workspace_id != workspace_id:
            raise Refused("this chat belongs to another workspace")
        work = Work(chat=chat, limits=Limits.from_settings())
        since = chat.version
        chat.runner_connected, chat.runner_left_at, chat.runner_channel = True, None, channel
        chat.runner_seen_at = timezone.now()
        work.touch_meta("runner_connected", "runner_left_at", "runner_channel", "runner_seen_at")
        write(work, since)
        return Change(chat.pk, since, chat.version, chat.workspace_id), chat.last_seq


def alive(chat_id: uuid.UUID, channel: str) -> None:
    """The runner's socket is still up (its heartbeat)."""
    Chat.objects.filter(pk=chat_id, runner_channel=channel).update(runner_seen_at=timezone.now())


def disconnect(chat_id: uuid.UUID, channel: str, left_at: datetime | None = None) -> Change | None:
    """A runner's socket closed. Only the latest socket of a chat decides its presence."""
    with transaction.atomic():
        chat = Chat.objects.select_for_update().filter(pk=chat_id).first()
        if chat is None or chat.runner_channel != channel or not chat.runner_connected:
            return None
        work = Work(chat=chat, limits=Limits.from_settings())
        since = chat.version
        chat.runner_connected, chat.runner_left_at = False, left_at or timezone.now()
        work.touch_meta("runner_connected", "runner_left_at")
        write(work, since)
        return Change(chat.pk, since, chat.version, chat.workspace_id)


def sweep(now: float | None = None) -> list[Change]:
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
    return changes + [change for pk in stale if (change := abandon(pk, int(now * 1000)))]


def grace_silence() -> float:
    """How long a connected runner may say nothing before it counts as gone (a dead server)."""
    return max(settings.RUNNER_GRACE_SECONDS, 3 * HEARTBEAT_SECONDS)


def abandon(chat_id: uuid.UUID, at: int) -> Change | None:
    with transaction.atomic():
        chat = (
            Chat.objects.select_for_update(of=("self",))
            .select_related("current_attempt")
            .get(pk=chat_id)
        )
        attempt = chat.current_attempt
        if chat.runner_connected or attempt is None or attempt.ended_at is not None:
            return None  # it came back, or the turn ended meanwhile
        work = Work(chat=chat, limits=Limits.from_settings())
        since = chat.version
        attempt.ended_at, attempt.stop_reason = at, RUNNER_LOST
        work.touch(attempt, "ended_at", "stop_reason")
        finish_turn(work, attempt, RUNNER_LOST, at)
        write(work, since)
        return Change(chat.pk, since, chat.version, chat.workspace_id, work.prompts_changed)
