"""Driving a run from the web (issue 16): a person's messages, cancels and mode switches.

What the runner says (``frames.SessionInfo``) is kept on the chat: whether it takes anything
from the web (``--allow-web``), the modes the web may choose, the agent's modes and commands,
whether it stays. A person's message is a ``WebPrompt``, delivered like an answer:

1. Posted, it is ``sent`` at once when the runner is connected and nothing runs; otherwise it
   is ``queued`` (shown as queued, editable and removable).
2. A ``sent`` message goes to the runner's group (``groups.runner``) as a ``prompt`` frame
   (``orders.WebPromptFrame``) and is kept until its turn starts: every hello sends it again
   (``on_hello``); the runner starts a message's turn once however often it gets it.
3. The turn that runs it (``TurnStarted.web_prompt_id``) makes it ``started`` and records who
   sent the turn. When a turn ends, or the runner refuses a message, the oldest queued message
   becomes ``sent``: the pipeline sends what is ``sent`` after such a batch (``MAY_SEND``).
4. A message is its author's (issue 25): only its author edits it, so the turn that runs it
   names who wrote what it ran; its author or an admin of the workspace (or a superuser) may
   remove it, and the queue then says who did. A run holds at most ``DRIVE_QUEUE_PER_RUN``
   messages waiting (queued or sent), at most ``DRIVE_QUEUE_PER_PERSON`` of them one person's:
   a message past either is refused with the limit, so the queue a page draws stays bounded.
5. A message goes to the agent as the person typed it, so it is kept as typed only while it
   may still go (queued or sent: editable, resent on every hello). Once it can no longer go —
   its turn started, the runner refused it, a person removed it — the stored text is masked
   (``secrets.mask``, issue 22), like the turn's prompt the runner reported (``boundary.py``).

A cancel (``orders.WebCancel``) and a mode switch (``orders.WebMode``) go to a connected runner
at once and are not kept: a runner that is away cannot act on them. The runner's refusal of one
(``WebRefused``) is shown on the page (``Chat.web_note``). Every change here touches the chat's
header, so the page's drive region (rendered with it) is pushed to every viewer. A message is
saved at once, inside the chat's transaction, so later frames of the same batch see it.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Count, Q
from django.utils import timezone

from activity.core import groups
from activity.core import masking as secrets
from activity.core.contract import bound
from activity.core.refusals import Refusal
from activity.live import changes, chats
from activity.live.work import ChatChange, Work
from activity.models import Chat, InferenceAttempt, WebPrompt, WebPromptStatus
from activity.wire.frames import (
    WEB_PROMPT_CHARS,
    Changes,
    NumberedFrame,
    SessionInfo,
    TurnEnded,
    TurnStarted,
    WebRefused,
)
from activity.wire.orders import WebCancel, WebMode, WebPromptFrame

Status = WebPromptStatus
# A batch with one of these may have made a queued message ``sent``: the pipeline sends them.
MAY_SEND = (TurnEnded, SessionInfo, WebRefused)
ONLY_REPORTS = "This run only reports: start it with --allow-web to prompt it from here."


@dataclass(frozen=True)
class Done:
    change: ChatChange  # what the request changed, for every viewer
    said: str  # what the person who asked reads
    frames: list[str] = field(default_factory=list)  # for the runner, in order


# What the runner says (ingest, under the chat's lock).


def apply(work: Work, frame: NumberedFrame) -> None:
    """The runner's frames about the run, not a turn: what it lets the web do, what it
    refused, what the agent changed in the run's git working tree (``changes.py``)."""
    if isinstance(frame, SessionInfo):
        session_info(work, frame)
    elif isinstance(frame, WebRefused):
        refused(work, frame)
    elif isinstance(frame, Changes):
        changes.apply(work, frame)


def session_info(work: Work, frame: SessionInfo) -> None:
    chat = work.chat
    allowed = chat.allow_web
    chat.allow_web, chat.runner_stays = frame.allow_web, frame.stays
    chat.web_modes = list(frame.web_modes)
    chat.modes = [mode.model_dump() for mode in frame.modes]
    chat.commands = [command.model_dump() for command in frame.commands]
    chat.mode = frame.mode or chat.mode
    work.touch_meta("allow_web", "runner_stays", "web_modes", "modes", "commands", "mode")
    if frame.session_id:  # an older runner says nothing of its session: what was said stays
        chat.agent_session_id = frame.session_id
        chat.agent_resumes, chat.agent_closes = frame.resumable, frame.closable
        work.touch_meta("agent_session_id", "agent_resumes", "agent_closes")
    attempt = chat.current_attempt
    if allowed != chat.allow_web and attempt is not None and attempt.ended_at is None:
        work.touch(attempt, "version")  # its Cancel button comes or goes
    promote(work)


def turn_started(work: Work, frame: TurnStarted, attempt: InferenceAttempt) -> None:
    """The turn of a web message started: the message is done, the turn says who sent it."""
    if frame.web_prompt_id is None:
        return
    prompt = WebPrompt.objects.filter(pk=frame.web_prompt_id, chat=work.chat).first()
    if prompt is None or prompt.status == Status.STARTED:
        return  # not ours, or started already: the first turn keeps it
    prompt.status, prompt.attempt, prompt.started_at = Status.STARTED, attempt, timezone.now()
    prompt.text = secrets.mask(prompt.text)
    prompt.save(update_fields=["status", "attempt", "started_at", "text"])
    attempt.sent_by_id = prompt.author_id
    work.touch(attempt, "sent_by")
    show(work)


def turn_ended(work: Work) -> None:
    promote(work)


def refused(work: Work, frame: WebRefused) -> None:
    chat = work.chat
    prompt = WebPrompt.objects.filter(pk=frame.id, chat=chat).first()
    if prompt is not None:
        if prompt.status in (Status.QUEUED, Status.SENT):
            prompt.status, prompt.refused_reason = Status.REFUSED, frame.reason
            prompt.text = secrets.mask(prompt.text)  # it will not go again
            prompt.save(update_fields=["status", "refused_reason", "text"])
            show(work)
            promote(work)
        return
    attempt = chat.current_attempt
    if attempt is not None and frame.id == cancel_id(attempt.pk) and attempt.ended_at is None:
        attempt.cancelled_by, attempt.cancel_asked_at = None, None  # it was not cancelled
        work.touch(attempt, "cancelled_by", "cancel_asked_at")
    chat.web_note = bound(f"The runner refused the web's last request: {frame.reason}", 600) or ""
    work.touch_meta("web_note")


def promote(work: Work) -> list[WebPrompt]:
    """Make the oldest queued message ``sent`` when the runner can take it now: connected,
    nothing running, no message on its way, the run not stopped (it waits for a resume)."""
    chat = work.chat
    if not chat.allow_web or not chat.runner_connected or running(chat.current_attempt):
        return []
    if chat.stopped_at is not None:
        return []
    waiting = WebPrompt.objects.filter(chat=chat, status__in=(Status.QUEUED, Status.SENT))
    oldest = waiting.select_related("author").order_by("created_at").first()
    if oldest is None or oldest.status == Status.SENT:
        return []
    oldest.status, oldest.sent_at = Status.SENT, timezone.now()
    oldest.save(update_fields=["status", "sent_at"])
    show(work)
    return [oldest]


def running(attempt: InferenceAttempt | None) -> bool:
    """A turn runs: one the runner started and has not ended (not the turn that holds what the
    agent did before any prompt, which ends only when the first turn starts)."""

    return attempt is not None and attempt.ended_at is None and not attempt.before_any_prompt


def show(work: Work) -> None:
    """The drive region changed: it is rendered with the chat's header, so touch that."""
    work.chat.updated_at = timezone.now()
    work.touch_meta("updated_at")


def prompt_frame(prompt: WebPrompt) -> str:
    by = prompt.author.get_username()[:150] if prompt.author else ""
    return WebPromptFrame(id=prompt.pk, text=prompt.text, by=by).model_dump_json()


def sent(chat_id: uuid.UUID) -> list[str]:
    """The ``prompt`` frames of the messages on their way to the runner (after a batch that
    may have sent one: ``MAY_SEND``). A runner starts each once, however often it gets it."""
    on_the_way = WebPrompt.objects.filter(chat_id=chat_id, status=Status.SENT, chat__allow_web=True)
    return [prompt_frame(p) for p in on_the_way.select_related("author").order_by("created_at")]


def on_hello(chat_id: uuid.UUID) -> tuple[list[str], ChatChange]:
    """What a runner that says hello must get: the messages sent but not started, again; or
    else the next queued one, if nothing runs."""
    with chats.change(chat_id, related=("current_attempt",)) as work:
        on_the_way = sent(chat_id) if work.chat.allow_web else []
        if not on_the_way:
            on_the_way = [prompt_frame(p) for p in promote(work)]
    return on_the_way, work.done


def cancel_id(attempt_id: uuid.UUID) -> uuid.UUID:
    """The id of the web's cancel of a turn (a version-4 UUID, as the frame requires), the
    same every time: a refusal that names it is about that turn's cancel."""
    digest = bytearray(hashlib.sha256(b"cancel:" + attempt_id.bytes).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(digest))


# What a person asks from the page (views, under the chat's lock).


def clean(text: str) -> str:
    if not text.strip():
        raise Refusal("Write a message first.", 400)
    if len(text) > WEB_PROMPT_CHARS:
        raise Refusal(f"A message is at most {WEB_PROMPT_CHARS:,} characters long.", 400)
    return text


def allowing(chat: Chat) -> None:
    if not chat.allow_web:
        raise Refusal(ONLY_REPORTS)


def within_limits(chat: Chat, user: User) -> None:
    """Refuse a message past the run's queue or the person's share of it (one query, under the
    chat's lock, so two posts at once cannot both take the last place)."""
    waiting = WebPrompt.objects.filter(chat=chat, status__in=WebPrompt.WAITING).aggregate(
        run=Count("pk"), mine=Count("pk", filter=Q(author=user))
    )
    run, person = settings.DRIVE_QUEUE_PER_RUN, settings.DRIVE_QUEUE_PER_PERSON
    if waiting["run"] >= run:
        raise Refusal(
            f"This run already has {run:,} messages waiting, the most it holds: wait until the "
            "agent has taken some."
        )
    if waiting["mine"] >= person:
        raise Refusal(
            f"You already have {person:,} message{'s' if person != 1 else ''} waiting in this "
            "run, the most one person may: wait until the agent has taken one, or remove one."
        )


def send(chat_id: uuid.UUID, user: User, text: str) -> Done:
    """A person's message to the agent: sent now, or queued until the runner can take it."""
    text = clean(text)
    with chats.change(chat_id, related=("current_attempt",)) as work:
        chat = work.chat
        allowing(chat)
        if not chat.takes_prompts:
            raise Refusal("This run's runner has left: it takes no more messages.")
        within_limits(chat, user)
        WebPrompt.objects.create(chat=chat, author=user, text=text)
        promoted = promote(work)
        show(work)
    if promoted:
        return Done(work.done, "Sent.", [prompt_frame(p) for p in promoted])
    return Done(work.done, "Queued: it goes to the agent when it is free.")


def message(work: Work, prompt_id: uuid.UUID) -> WebPrompt:
    prompt = WebPrompt.objects.filter(pk=prompt_id, chat=work.chat).select_related("author").first()
    if prompt is None:
        raise Refusal("There is no such message in this run.", 404)
    return prompt


def changeable(prompt: WebPrompt, *statuses: str) -> None:
    if prompt.status not in statuses:
        raise Refusal("This message was already sent to the agent: it can no longer change.")


def edit(chat_id: uuid.UUID, prompt_id: uuid.UUID, user: User, text: str) -> Done:
    """Its author's new text for a queued message; nobody else's (the author stays)."""
    text = clean(text)
    with chats.change(chat_id) as work:
        prompt = message(work, prompt_id)
        if prompt.author_id is None or prompt.author_id != user.pk:
            raise Refusal(
                f"This message is {prompt.author_name}'s: only its author may edit it.", 403
            )
        changeable(prompt, Status.QUEUED)
        prompt.text = text
        prompt.save(update_fields=["text"])
        show(work)
    return Done(work.done, "Saved.")


def remove(chat_id: uuid.UUID, prompt_id: uuid.UUID, user: User, manages: bool) -> Done:
    """Take back a queued (or refused) message: its author, or whoever ``manages`` the run (an
    admin of its workspace, a superuser); the queue says who removed it."""
    with chats.change(chat_id) as work:
        prompt = message(work, prompt_id)
        if not manages and (prompt.author_id is None or prompt.author_id != user.pk):
            raise Refusal(
                f"This message is {prompt.author_name}'s: only its author or an admin of this "
                "workspace may remove it.",
                403,
            )
        changeable(prompt, Status.QUEUED, Status.REFUSED)
        prompt.status, prompt.text = Status.REMOVED, secrets.mask(prompt.text)
        prompt.removed_by, prompt.removed_at = user, timezone.now()
        prompt.save(update_fields=["status", "text", "removed_by", "removed_at"])
        show(work)
    return Done(work.done, "Removed.")


def connected(chat: Chat) -> None:
    allowing(chat)
    if not chat.runner_connected:
        raise Refusal("The runner is offline: try again once it is connected.")


def cancel(chat_id: uuid.UUID, attempt_id: uuid.UUID, user: User) -> Done:
    """Ask the runner to cancel the running turn; the turn says who asked."""
    with chats.change(chat_id, related=("current_attempt",)) as work:
        chat, attempt = work.chat, work.chat.current_attempt
        connected(chat)
        if attempt is None or attempt.pk != attempt_id or attempt.ended_at is not None:
            raise Refusal("This turn is not running any more.")
        if attempt.cancelled_by_id is None:
            attempt.cancelled_by, attempt.cancel_asked_at = user, timezone.now()
            work.touch(attempt, "cancelled_by", "cancel_asked_at")
        clear_note(work)
    by = user.get_username()[:150]
    frame = WebCancel(id=cancel_id(attempt_id), attempt_id=attempt_id, by=by)
    return Done(work.done, "Cancelling…", [frame.model_dump_json()])


def switch_mode(chat_id: uuid.UUID, mode: str, user: User) -> Done:
    with chats.change(chat_id) as work:
        chat = work.chat
        allowing(chat)
        if mode not in {choice["id"] for choice in chat.web_choices}:
            raise Refusal("This run does not let the web choose that mode.", 400)
        connected(chat)
        clear_note(work)
    frame = WebMode(id=uuid.uuid4(), mode=mode, by=user.get_username()[:150])
    return Done(work.done, f"Asked the agent to switch to {mode}.", [frame.model_dump_json()])


def clear_note(work: Work) -> None:
    if work.chat.web_note:
        work.chat.web_note = ""
        work.touch_meta("web_note")


async def deliver(chat_id: uuid.UUID, texts: list[str], layer: Any = None) -> None:
    """Send frames to the chat's runner (only the socket that proved the chat is its own is in
    the group; its consumer forwards a ``runner.answer``'s text as it is); a runner that is
    away gets what is kept on its hello."""
    layer = layer or get_channel_layer()
    for text in texts:
        await layer.group_send(groups.runner(chat_id), {"type": "runner.answer", "text": text})
