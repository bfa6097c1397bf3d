"""Ingest: apply a batch of the runner's frames to the database.

1. Lock the chat row (every write to a chat happens under it: batches never interleave); skip
   frames already applied (``seq`` ≤ ``chat.last_seq``): a resend after a reconnect is safe.
2. Apply each frame to an in-memory working set through the pure merge. A frame that cannot be
   applied raises ``FrameError`` before it changes anything; it is skipped and reported (and,
   like every frame, acknowledged). A message from the agent that is skipped is counted on its
   turn: the page shows "N messages from the agent could not be read" and the last reason.
3. Write what changed once (``chats.change``): in bulk, under one new chat version.
4. The caller announces the change after commit (``broadcast.announce``) and acknowledges.

A frame alone is applied or refused. What only the database refuses (on PostgreSQL a NUL
character, a string longer than its column, an integer out of range) fails the batch's
transaction; the batch is then applied again one frame at a time, each in its own transaction,
and the one frame the database refuses is refused like any other. A batch that fails for the
server's own reason (the database is away: ``OperationalError``, ``InterfaceError``) raises:
nothing is acknowledged, and the runner resends it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError

from activity.core import prompts
from activity.core.contract import ChoiceIntent, ToolApproval, bound
from activity.core.masking import mask_junction
from activity.core.merge import (
    Event,
    MergeContext,
    event_call_id,
    intent_approval,
    merge,
)
from activity.core.render import render_block
from activity.live import chats, drive, usage
from activity.live.calls import apply, close, finish_turn, set_state
from activity.live.notes import NOTE_CHARS, UNDERSTOOD, add_note, count_unreadable, not_understood
from activity.live.turns import before_any_prompt, end_turn, start_turn
from activity.live.work import ChatChange, FrameError, Work
from activity.models import Chat, Prompt, PromptKind, ToolActivity
from activity.wire.acp import (
    ConfigOptionUpdate,
    CreateElicitation,
    CurrentModeUpdate,
    MessageChunk,
    Plan,
    PlanRemoved,
    RequestPermission,
    SessionInfoUpdate,
    SessionNotification,
    ToolCallContentChunk,
    ToolCallFields,
    UnknownUpdate,
    UsageUpdate,
    ValidationError,
    parse_agent_message,
)
from activity.wire.frames import (
    REQUEST_KEY_CHARS,
    Acp,
    NumberedFrame,
    PromptOutcome,
    Refused,
    TurnEnded,
    TurnStarted,
    acp_parts,
    request_key,
)

log = logging.getLogger(__name__)

PLAN_ENTRIES = 100
# The server's own failures: the batch is not the cause, so it is resent rather than refused.
SERVER_FAULTS = (OperationalError, InterfaceError)
# What a database (or its driver) raises on a value it cannot store: the frame is the cause.
REFUSALS = (DatabaseError, OverflowError, UnicodeError)

Item = NumberedFrame | tuple[int, str]  # a frame, or (seq, error) for one refused already


@dataclass
class Result:
    acked: int  # the highest seq now committed: everything up to it is applied or skipped
    errors: list[tuple[int, str]]  # (seq, what was wrong) for each skipped frame
    change: ChatChange  # what the batch did to the chat, for its viewers and inboxes


def ingest(chat_id: uuid.UUID, frames: list[Item]) -> Result:
    """Apply a batch of frames (or ``(seq, error)`` for frames that failed validation).

    Raises ``FrameError`` when frames were lost (a seq was skipped), ``Chat.DoesNotExist``
    when the chat was deleted, and the database's ``SERVER_FAULTS`` when it is away; then
    nothing of the batch is acknowledged.
    """
    try:
        return _ingest(chat_id, frames)
    except (FrameError, Chat.DoesNotExist, *SERVER_FAULTS):
        raise
    except Exception as failure:
        if len(frames) == 1:
            return _refuse(chat_id, frames[0], failure)
        log.warning("a batch of chat %s failed (%s): applying it frame by frame", chat_id, failure)
        return _one_by_one(chat_id, frames)


def _ingest(chat_id: uuid.UUID, frames: list[Item]) -> Result:
    errors: list[tuple[int, str]] = []
    with chats.change(chat_id, related=("current_attempt__reply",)) as work:
        chat = work.chat
        _preload_rows(work, frames)
        for item in frames:
            seq = item[0] if isinstance(item, tuple) else item.seq
            if seq <= chat.last_seq:
                continue  # already applied: a resend
            if seq != chat.last_seq + 1:
                raise FrameError(f"frame {seq} arrived after {chat.last_seq}: frames were lost")
            try:
                if isinstance(item, tuple):
                    raise FrameError(item[1])
                apply_frame(work, item)
            except FrameError as error:
                errors.append((seq, str(error)))
                if _from_agent(item):
                    count_unreadable(work, str(error))
            chat.last_seq = seq
    return Result(acked=work.chat.last_seq, errors=errors, change=work.done)


def _from_agent(item: Item) -> bool:
    return isinstance(item, Acp) or (isinstance(item, Refused) and item.from_agent)


def _one_by_one(chat_id: uuid.UUID, frames: list[Item]) -> Result:
    """Each frame in its own transaction: only a frame the database refuses is refused."""
    results = []
    for item in frames:
        try:
            results.append(_ingest(chat_id, [item]))
        except (FrameError, Chat.DoesNotExist, *SERVER_FAULTS):
            raise  # what was committed stays; the runner resends the rest, the server skips it
        except Exception as failure:
            results.append(_refuse(chat_id, item, failure))
    first, last = results[0].change, results[-1].change
    change = ChatChange(
        chat_id,
        first.workspace_id,
        first.since,
        last.version,
        prompts_changed=any(r.change.prompts_changed for r in results),
        listed=any(r.change.listed for r in results),
    )
    errors = [error for result in results for error in result.errors]
    return Result(acked=results[-1].acked, errors=errors, change=change)


def _refuse(chat_id: uuid.UUID, item: Item, failure: Exception) -> Result:
    """Skip one frame that failed alone: the chat moves past it, its turn counts it."""
    seq = item[0] if isinstance(item, tuple) else item.seq
    first_line = (str(failure).strip().splitlines() or [""])[0]
    problem = f"the server could not store it ({type(failure).__name__}: {first_line})"
    problem = bound(problem, NOTE_CHARS) or ""
    if isinstance(failure, REFUSALS):
        log.warning("frame %s of chat %s was refused: %s", seq, chat_id, problem)
    else:  # not the database: a bug, but one frame still never stalls a chat
        log.error("frame %s of chat %s failed", seq, chat_id, exc_info=failure)
    with chats.change(chat_id, related=("current_attempt__reply",)) as work:
        chat = work.chat
        if seq > chat.last_seq:
            if seq != chat.last_seq + 1:
                raise FrameError(f"frame {seq} arrived after {chat.last_seq}: frames were lost")
            if _from_agent(item):
                count_unreadable(work, problem)
            chat.last_seq = seq
    return Result(acked=work.chat.last_seq, errors=[(seq, problem)], change=work.done)


def _preload_rows(work: Work, frames: list[Item]) -> None:
    """Load every row the batch names in one query."""
    ids = set()
    for item in frames:
        if isinstance(item, Acp):
            params, update = acp_parts(item.message)
            for source in (update, params, params.get("toolCall")):
                call_id = source.get("toolCallId") if isinstance(source, dict) else None
                if isinstance(call_id, str):
                    ids.add(call_id)
    if ids:
        for row in ToolActivity.objects.filter(chat=work.chat, tool_call_id__in=ids):
            work.rows[row.tool_call_id] = row
        work.absent = ids - work.rows.keys()


def apply_frame(work: Work, frame: NumberedFrame) -> None:
    match frame:
        case TurnStarted():
            start_turn(work, frame)
        case Acp():
            apply_acp(work, frame)
        case PromptOutcome():
            close_prompt(work, frame)
        case TurnEnded():
            end_turn(work, frame)
        case _:  # what the run lets the web do, what it refused, what it changed (git)
            drive.apply(work, frame)


def apply_acp(work: Work, frame: Acp) -> None:
    try:
        envelope, message = parse_agent_message(frame.message)
    except ValidationError as error:
        raise FrameError(_describe(error)) from None
    except TypeError:  # e.g. a sessionUpdate that is a list or an object: no update type
        raise FrameError("invalid ACP message: a field that names a type is no string") from None
    match message:
        case SessionNotification():
            apply_update(work, message, frame.at, frame.cut_bytes)
        case RequestPermission():
            open_prompt(work, envelope.id, message, frame.at)
        case CreateElicitation():
            open_prompt(work, envelope.id, message, frame.at)
        case _ if envelope.method == "session/cancel" and work.chat.current_attempt:
            # The runner asked the agent to stop: unfinished calls are cancelled at once.
            finish_turn(work, work.attempt(), "cancelled", frame.at)
        case _ if envelope.method is not None and envelope.method not in UNDERSTOOD:
            not_understood(work, envelope.method, asked=envelope.id is not None)
    # Responses change nothing a page shows.


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"invalid ACP message: {where}: {first['msg']} ({error.error_count()} problem(s))"


def apply_update(work: Work, note: SessionNotification, at: int, cut_bytes: int = 0) -> None:
    update = note.update
    chat = work.chat
    match update:
        case ToolCallFields() | ToolCallContentChunk():
            merge_call(work, update, at, cut_bytes)
        case MessageChunk():
            append_chunk(work, update)
        case Plan():
            attempt = work.attempt()
            attempt.plan = [
                {"content": bound(e.content, 512), "priority": e.priority, "status": e.status}
                for e in update.entries[:PLAN_ENTRIES]
            ]
            work.touch(attempt, "plan")
        case PlanRemoved():
            attempt = work.attempt()
            attempt.plan = []
            work.touch(attempt, "plan")
        case UsageUpdate():  # the run's and the turn's latest reading
            usage.record(work, update.model_dump(mode="json", exclude={"session_update"}))
        case CurrentModeUpdate():
            chat.mode = bound(update.current_mode_id, 100) or ""
            work.touch_meta("mode")
        case ConfigOptionUpdate():
            for option in update.config_options:  # the select of the session's mode, if any
                current = option.get("currentValue")
                if (option.get("category") == "mode" or option.get("id") == "mode") and isinstance(
                    current, str
                ):
                    chat.mode = bound(current, 100) or ""
                    work.touch_meta("mode")
        case SessionInfoUpdate() if update.title and not chat.title:
            chat.title = bound(update.title, 512) or ""
            work.touch_meta("title")
        case UnknownUpdate():
            kind = update.session_update
            add_note(work, f"The agent sent an update koruweb does not know: “{kind}”.")
    # Other known update types are tolerated and change nothing shown.


def merge_call(work: Work, event: Event, at: int, cut_bytes: int = 0) -> ToolActivity:
    """Upsert the row of the call an event names, through the pure merge."""
    call_id = event_call_id(event)
    assert call_id is not None
    row = work.row(call_id)
    if row is not None:
        ctx = MergeContext(at=at, limits=work.limits, cut_bytes=cut_bytes)
        apply(work, row, event, ctx)
        return row
    attempt = work.chat.current_attempt or before_any_prompt(work, at)
    reply = work.reply(attempt)
    ctx = MergeContext(
        at=at, reply_bytes=reply.markdown_bytes, limits=work.limits, cut_bytes=cut_bytes
    )
    state = merge(None, event, ctx)
    chat = work.chat
    chat.tool_count += 1
    work.touch(chat, "tool_count")
    row = ToolActivity(
        chat=chat, attempt=attempt, assistant_message=reply, position=chat.tool_count
    )
    set_state(row, state)
    work.add(row)
    work.rows[call_id] = row
    work.absent.discard(call_id)
    return row


def append_chunk(work: Work, chunk: MessageChunk) -> None:
    if chunk.session_update == "user_message_chunk":
        return  # the prompt arrives with turn_started
    reply = work.reply(work.attempt())
    text = render_block(chunk.content)
    limit = settings.REPLY_MAX_CHARS
    if chunk.session_update == "agent_thought_chunk":
        thoughts, text = mask_junction(reply.thoughts, text)  # a secret split across chunks
        reply.thoughts = (thoughts + text)[:limit]
        work.touch(reply, "thoughts")
        return
    if chunk.message_id and reply.agent_message_id and chunk.message_id != reply.agent_message_id:
        text = "\n\n" + text  # a new message in the same turn starts a new paragraph
    if chunk.message_id:
        reply.agent_message_id = chunk.message_id[:200]
    # Each chunk was masked alone at the boundary; a secret split across two is masked here,
    # byte for byte, so the offsets of the calls already placed in the reply stay true.
    markdown, text = mask_junction(reply.markdown, text)
    reply.markdown = bound(markdown + text, limit) or ""
    work.touch(reply, "markdown", "agent_message_id")


def open_prompt(
    work: Work,
    request_id: str | int | None,
    request: RequestPermission | CreateElicitation,
    at: int,
) -> None:
    if request_id is None:
        raise FrameError("a request without a JSON-RPC id cannot be answered")
    key = request_key(request_id)
    if len(key) > REQUEST_KEY_CHARS:
        raise FrameError(f"a request id is at most {REQUEST_KEY_CHARS - 2} characters long")
    if work.prompt(key) is not None:
        raise FrameError(f"request {request_id} is already known in this chat")
    attempt = work.attempt()
    row = merge_call(work, request, at) if event_call_id(request) else None
    if isinstance(request, RequestPermission):
        kind, asked = PromptKind.PERMISSION, prompts.summary(request, None, work.limits)
        offered: dict[str, Any] = {
            "choices": [c.model_dump(mode="json") for c in prompts.choices(request.options)]
        }
    else:
        kind, asked = PromptKind.QUESTION, bound(request.message, work.limits.short_chars)
        questions = prompts.questions(request)
        offered = {
            "questions": [q.model_dump(mode="json") for q in questions],
            "secret": any(q.secret for q in questions),
        }
    prompt = Prompt(
        chat=work.chat,
        attempt=attempt,
        tool=row,
        request_id=key,
        kind=kind,
        # A row keeps what was asked (agent_summary); only a prompt about no row keeps it here.
        summary="" if row else asked or "",
        opened_at=at,
        **offered,
    )
    work.add(prompt)
    work.prompts[key] = prompt
    if row is None:
        work.touch(attempt, "version")  # a standalone prompt shows in its turn's head


def outcome_approval(prompt: Prompt, outcome: dict[str, Any]) -> ToolApproval:
    """What the agent was told, as the row's approval."""
    if "action" in outcome:
        action = outcome["action"]
        if not isinstance(action, str):  # a list or a number is no action
            raise FrameError("an outcome's action is 'accept', 'decline' or 'cancel'")
        actions = {"accept": ToolApproval.APPROVED, "decline": ToolApproval.DENIED}
        return actions.get(action, ToolApproval.CANCELLED)
    if outcome.get("outcome") == "selected":
        chosen = [c for c in prompt.choices if c.get("id") == outcome.get("optionId")]
        if not chosen:
            raise FrameError(f"option {outcome.get('optionId')!r} was not offered")
        return intent_approval(ChoiceIntent(chosen[0]["intent"]))
    if outcome.get("outcome") == "cancelled":
        return ToolApproval.CANCELLED
    raise FrameError("an outcome is {'outcome': 'selected'|'cancelled'} or {'action': …}")


def close_prompt(work: Work, frame: PromptOutcome) -> None:
    prompt = work.prompt(request_key(frame.request_id))
    if prompt is None:
        raise FrameError(f"no request {frame.request_id!r} in this chat")
    if not prompt.is_open:
        return
    close(work, prompt, outcome_approval(prompt, frame.outcome), frame.at)
