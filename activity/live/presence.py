"""Runner presence: whether a chat's runner is connected, and what happens when it is gone.

A chat shows its runner online while the runner's socket is up. When the socket goes, the chat
shows it offline; if the runner does not come back within ``RUNNER_GRACE_SECONDS``, its running
turn is ended (stop reason ``runner_lost``) and its open prompts are closed, so nothing shows
"live" forever and the inbox never offers a prompt nobody can answer.

Whether the socket is up is decided by the process that holds it (issue 23): it knows its open
runner sockets (``hold``, ``release``), and its sweep never counts one of them silent — their
close says they are gone (``disconnect``), however long the process itself was stalled (a long
write, a frozen event loop, a paused machine). Only a socket no process here holds is counted
gone by its silence: one on a process that died without closing it. Such a guess can be wrong
(that process was only stalled), so a heartbeat from the socket (``alive``) or a new hello
(``claim``) shows the runner connected again whatever a sweep decided, and reopens the turn a
sweep ended while the runner was still in it (``turns.reopen``).

A chat belongs to its runner: the hello that makes it stores the hash of the runner's secret,
and only a hello with that secret gets it later (``claim``) — from any socket, on any server
process, even while an older socket of the runner still looks connected (a runner that fails
over is never locked out; the older socket loses the chat's answers). A wrong or missing secret
changes nothing. A chat made before runners had a secret (no hash) is refused to every hello:
its runner, older than the secret, cannot prove it owns it, and a runner never reuses a chat
id, so nobody who says hello for it with a secret can be its runner.

A runner that resumes a chat (``frames.Hello.resume``: ``koruweb agent --resume``, or a host's
Resume) proves it with the chat's secret too, and only while no runner of the chat is connected;
its hello gives the chat the new secret, so the runner that had the chat is refused if it ever
comes back. A turn that runner left running is ended (``runner_lost``): nobody will end it.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from activity.core import groups
from activity.live import chats, drive
from activity.live.calls import finish_turn
from activity.live.turns import RUNNER_LOST, RUNNER_REPLACED, reopen
from activity.live.work import ChatChange, Work
from activity.models import AgentToken, Chat

# The channels of the runner sockets this process holds open (its event loop adds and removes
# them; a sweep is given a copy, ``held()``).
_held: set[str] = set()


class Refused(Exception):
    """The runner may not use this chat."""


async def token_revoked(token_id: int) -> None:
    await get_channel_layer().group_send(groups.token(token_id), {"type": "token.revoked"})


def digest(secret: str) -> str:
    """What a chat keeps of its runner's secret (a random 256-bit one: sha256 is enough)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def owns(chat: Chat, secret: str | None) -> bool:
    """Whether a hello with ``secret`` is from the chat's runner (None: made in-process)."""
    if secret is None:
        return not chat.runner_secret_hash
    stored = chat.runner_secret_hash
    return bool(stored) and hmac.compare_digest(stored, digest(secret))


@dataclass(frozen=True)
class Claimed:
    change: ChatChange
    last_seq: int  # the highest frame seq the chat has applied
    replaced: str  # the channel of the runner's older socket, which loses the chat ("": none)


def claim(
    workspace_id: uuid.UUID,
    chat_id: uuid.UUID,
    channel: str,
    acked: int,
    secret: str,
    token_id: int | None = None,
    resume: str | None = None,
) -> Claimed:
    """A runner said hello with its secret: make or find its chat, show it online on this
    socket. Raises ``Refused``, having changed nothing, unless the secret is the chat's and
    the runner's token (``token_id``) may have this chat: a run token a host was given is good
    for its run's chat alone (``AgentToken.chat_id``), never another nor a new one.

    ``resume``: the runner takes the chat up again (see the module), with this secret from now
    on; it never makes a chat."""
    found = AgentToken.objects.filter(pk=token_id) if token_id is not None else None
    token = found.values("chat_id", "name").first() if found is not None else None
    if token is not None and token["chat_id"] is not None and token["chat_id"] != chat_id:
        raise Refused("this run's token is good for its own run's chat only")
    if resume is None:
        return _connect(workspace_id, chat_id, channel, acked, secret)
    via = "" if token is None or token["chat_id"] is not None else f"token {token['name']}"
    return _connect(workspace_id, chat_id, channel, acked, secret, Resuming(resume, via))


@dataclass(frozen=True)
class Resuming:
    secret: str  # the chat's secret from now on
    via: str  # what the page says it was resumed with ("": a host's run, the person said so)


def connect(
    workspace_id: uuid.UUID, chat_id: uuid.UUID, channel: str, acked: int = 0
) -> tuple[ChatChange, int]:
    """A chat made in-process as a hello without a secret would make it (test fixtures): only
    such a chat, one with no secret, is found again this way."""
    claimed = _connect(workspace_id, chat_id, channel, acked, None)
    return claimed.change, claimed.last_seq


def _connect(
    workspace_id: uuid.UUID,
    chat_id: uuid.UUID,
    channel: str,
    acked: int,
    secret: str | None,
    resuming: Resuming | None = None,
) -> Claimed:
    with transaction.atomic():
        if acked == 0 and resuming is None:  # a new runner's first hello makes its chat
            Chat.objects.get_or_create(
                pk=chat_id,
                defaults={
                    "workspace_id": workspace_id,
                    "runner_secret_hash": "" if secret is None else digest(secret),
                },
            )
        try:  # Refused raised inside writes nothing
            with chats.change(chat_id, related=("current_attempt",)) as work:
                chat = work.chat
                if chat.workspace_id != workspace_id:
                    raise Refused("this chat belongs to another workspace")
                resumes = resuming is not None and not owns(chat, resuming.secret)
                if not owns(chat, secret) and not (resuming and owns(chat, resuming.secret)):
                    raise Refused("this chat belongs to another runner (its secret differs)")
                replaced = chat.runner_channel if chat.runner_channel != channel else ""
                if resumes:
                    assert resuming is not None
                    take_over(work, resuming)
                chat.runner_channel, chat.runner_seen_at = channel, timezone.now()
                work.touch_meta("runner_channel", "runner_seen_at")
                back(work)
        except Chat.DoesNotExist:
            raise Refused("this chat was deleted on the server") from None
    return Claimed(work.done, work.chat.last_seq, replaced)


def take_over(work: Work, resuming: Resuming) -> None:
    """A runner resumes the chat: only once its runner is gone. The chat takes the new secret
    and says who resumed it; the turn the runner that left was in ends lost for good
    (``RUNNER_REPLACED``: no later hello or heartbeat reopens it)."""
    chat = work.chat
    if chat.runner_connected:
        raise Refused("the run's runner is still connected: resume it once that runner is gone")
    chat.runner_secret_hash = digest(resuming.secret)
    work.touch_meta("runner_secret_hash")
    if resuming.via:  # a host's Resume said who and when already (live/resume.py)
        chat.resumed_at, chat.resumed_by, chat.resumed_via = timezone.now(), None, resuming.via
        work.touch_meta("resumed_at", "resumed_by", "resumed_via")
    chat.stopped_at, chat.stopped_by = None, None
    work.touch_meta("stopped_at", "stopped_by")
    attempt = chat.current_attempt
    if attempt is not None and attempt.ended_at is None:
        at = int(time.time() * 1000)
        attempt.ended_at, attempt.stop_reason = at, RUNNER_REPLACED
        work.touch(attempt, "ended_at", "stop_reason")
        finish_turn(work, attempt, RUNNER_REPLACED, at)
    elif attempt is not None and attempt.stop_reason == RUNNER_LOST:  # ended by a sweep
        attempt.stop_reason = RUNNER_REPLACED  # and never reopened now
        work.touch(attempt, "stop_reason")


def holds(chat_id: uuid.UUID, channel: str) -> bool:
    """Whether this socket is still the one that has the chat (no newer one claimed it)."""
    return Chat.objects.filter(pk=chat_id, runner_channel=channel).exists()


def hold(channel: str) -> None:
    """This process holds the runner socket ``channel`` open (its hello was accepted)."""
    _held.add(channel)


def release(channel: str) -> None:
    """The socket closed, or its consumer ended: its silence counts again."""
    _held.discard(channel)


def held() -> frozenset[str]:
    """The runner sockets this process holds, now (taken on the event loop, for a sweep)."""
    return frozenset(_held)


@dataclass(frozen=True)
class Beat:
    holds: bool  # this socket still has the chat (False: a newer socket has it, or none)
    change: ChatChange | None = None  # shown gone meanwhile, it is connected again: announce
    messages: tuple[str, ...] = ()  # the web's messages that go to the runner now


def alive(chat_id: uuid.UUID, channel: str) -> Beat:
    """The runner's socket is still up (its heartbeat): one UPDATE while the chat shows it
    connected. A chat that a sweep showed gone meanwhile (another process counted this one's
    silence while it was stalled) shows it connected again, its lost turn reopened; when no
    turn runs, the next queued message from the web goes, as on a hello (``drive.on_hello``)."""
    connection.ensure_connection()  # a wait for a connection must not date the beat before it
    seen = timezone.now()
    shown = Chat.objects.filter(pk=chat_id, runner_channel=channel, runner_connected=True)
    if shown.update(runner_seen_at=seen):
        return Beat(holds=True)
    try:
        with chats.change(chat_id, related=("current_attempt",)) as work:
            chat = work.chat
            holds = chat.runner_channel == channel
            if holds:
                chat.runner_seen_at = timezone.now()
                work.touch_meta("runner_seen_at")
                back(work)
                drive.promote(work)  # with the chat shown back, in one write
    except Chat.DoesNotExist:
        return Beat(holds=False)
    if not holds:
        return Beat(holds=False)
    return Beat(holds=True, change=work.done, messages=tuple(drive.sent(chat_id)))


def back(work: Work) -> None:
    """The chat's runner is here, on the socket the chat names: connected, and in the turn the
    server ended while it was away (if it did; never one a resume ended, ``take_over``)."""
    chat = work.chat
    if not chat.runner_connected:
        chat.runner_connected, chat.runner_left_at = True, None
        work.touch_meta("runner_connected", "runner_left_at")
    reopen(work)


def disconnect(chat_id: uuid.UUID, channel: str) -> ChatChange | None:
    """A runner's socket closed. Only the latest socket of a chat decides its presence.
    None: the chat was deleted meanwhile."""
    try:
        with chats.change(chat_id) as work:
            chat = work.chat
            if chat.runner_channel == channel and chat.runner_connected:
                chat.runner_connected, chat.runner_left_at = False, timezone.now()
                work.touch_meta("runner_connected", "runner_left_at")
    except Chat.DoesNotExist:
        return None
    return work.done


def sweep(now: float | None = None, held: Collection[str] = frozenset()) -> list[ChatChange]:
    """Mark silent runners gone; end the running turns of runners gone past the grace period.

    ``held``: the runner sockets this process holds open (``held()``). Those are never counted
    silent, nor their turns ended: a stalled process only looks silent, and their close (or
    their heartbeat) says what they are. A socket held by no process here counts by its
    silence: that process may have died without closing it."""
    now = time.time() if now is None else now
    cutoff = datetime.fromtimestamp(now, tz=UTC) - timedelta(seconds=settings.RUNNER_GRACE_SECONDS)
    silent = Chat.objects.filter(
        runner_connected=True,
        runner_seen_at__lt=datetime.fromtimestamp(now, tz=UTC) - timedelta(seconds=grace_silence()),
    ).values_list("pk", "runner_channel", "runner_seen_at")
    changes = [
        c
        for pk, channel, seen in silent
        if channel not in held and (c := fell_silent(pk, channel, seen))
    ]
    stale = Chat.objects.filter(
        runner_connected=False,
        runner_left_at__lt=cutoff,
        current_attempt__ended_at__isnull=True,
    ).values_list("pk", "runner_channel")
    changes += [abandon(pk, int(now * 1000)) for pk, channel in stale if channel not in held]
    return [change for change in changes if change.changed]


def fell_silent(chat_id: uuid.UUID, channel: str, seen: datetime | None) -> ChatChange | None:
    """A sweep found the runner silent since ``seen``: gone since then, unless its heartbeat
    came meanwhile (the sweep read it before taking the chat's lock). None: deleted."""
    try:
        with chats.change(chat_id) as work:
            chat = work.chat
            unchanged = chat.runner_channel == channel and chat.runner_seen_at == seen
            if unchanged and chat.runner_connected:
                chat.runner_connected, chat.runner_left_at = False, seen
                work.touch_meta("runner_connected", "runner_left_at")
    except Chat.DoesNotExist:
        return None
    return work.done


def grace_silence() -> float:
    """How long a connected runner may say nothing before it counts as gone (a dead server)."""
    return max(settings.RUNNER_GRACE_SECONDS, 3 * settings.RUNNER_HEARTBEAT_SECONDS)


def abandon(chat_id: uuid.UUID, at: int) -> ChatChange:
    """End the running turn of a runner gone past the grace period (unless it came back)."""
    with chats.change(chat_id, related=("current_attempt",)) as work:
        attempt = work.chat.current_attempt
        if not work.chat.runner_connected and attempt is not None and attempt.ended_at is None:
            attempt.ended_at, attempt.stop_reason = at, RUNNER_LOST
            work.touch(attempt, "ended_at", "stop_reason")
            finish_turn(work, attempt, RUNNER_LOST, at)
    return work.done
