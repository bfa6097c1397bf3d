"""A turn's start and end as the runner reports them (and the turn of calls before any).

A turn the server ended ``runner_lost`` (``presence.abandon``: its runner gone past the grace
period) was only the server's guess: the runner never said it ended. When the runner turns out
to be there after all (its socket's heartbeat, a new hello: ``presence``), the turn is reopened
(``reopen``); and a ``turn_ended`` for such a turn ends it as the runner says, like any other.
"""

from __future__ import annotations

from activity.core.contract import bound
from activity.live import drive, usage
from activity.live.calls import finish_turn, unfinish_turn
from activity.live.notes import add_note
from activity.live.work import FrameError, Work
from activity.models import InferenceAttempt, Message
from activity.wire.frames import TurnEnded, TurnStarted

RUNNER_LOST = "runner_lost"  # the stop reason of a turn whose runner is gone past the grace
# A turn whose runner another runner replaced (a resume, presence.take_over): lost for good,
# never reopened, whatever socket of the chat says hello later.
RUNNER_REPLACED = "runner_replaced"


def before_any_prompt(work: Work, at: int) -> InferenceAttempt:
    """A call the agent reports before any turn started (an orphan update is shown, not
    dropped: docs/architecture.md#merge-rules) goes in a turn of its own, ended when the first
    real turn starts."""
    chat = work.chat
    attempt = InferenceAttempt(chat=chat, prompt=InferenceAttempt.BEFORE_ANY_PROMPT, started_at=at)
    work.add(attempt, Message(chat=chat, attempt=attempt))
    chat.current_attempt = attempt
    work.touch_meta("current_attempt")
    return attempt


def start_turn(work: Work, frame: TurnStarted) -> None:
    chat = work.chat
    early = chat.current_attempt
    if early is not None and early.before_any_prompt and early.ended_at is None:
        early.ended_at, early.stop_reason = frame.at, "end_turn"
        work.touch(early, "ended_at", "stop_reason")
    if InferenceAttempt.objects.filter(pk=frame.attempt_id).exists():
        raise FrameError(f"turn {frame.attempt_id} already exists")
    if Message.objects.filter(pk=frame.message_id).exists():
        raise FrameError(f"message {frame.message_id} already exists")
    attempt = InferenceAttempt(
        id=frame.attempt_id,
        chat=chat,
        prompt=bound(frame.prompt, work.limits.content_chars) or "",
        started_at=frame.at,
        meter=usage.opening(chat),
    )
    reply = Message(id=frame.message_id, chat=chat, attempt=attempt)
    work.add(attempt, reply)
    chat.current_attempt = attempt
    work.touch_meta("current_attempt")
    if frame.title and not chat.title:  # a run is named by its first prompt (or --title)
        chat.title = bound(frame.title, 512) or ""
        work.touch_meta("title")
    if frame.agent_name:
        chat.agent_name = bound(frame.agent_name, 200) or ""
        chat.agent_version = bound(frame.agent_version, 100) or ""
        work.touch_meta("agent_name", "agent_version")
    if frame.mode and frame.mode != chat.mode:
        chat.mode = frame.mode
        work.touch_meta("mode")
    if frame.web_prompt_id is not None:  # a person's message from the web
        drive.turn_started(work, frame, attempt)


def end_turn(work: Work, frame: TurnEnded) -> None:
    attempt = work.chat.current_attempt
    if attempt is None or attempt.pk != frame.attempt_id:
        attempt = InferenceAttempt.objects.filter(pk=frame.attempt_id, chat=work.chat).first()
    if attempt is None:
        raise FrameError(f"no turn {frame.attempt_id} in this chat")
    if attempt.ended_at is not None and attempt.stop_reason != RUNNER_LOST:
        return  # the runner's own end came already
    attempt.ended_at, attempt.stop_reason = frame.at, frame.stop_reason
    attempt.usage = frame.usage
    work.touch(attempt, "ended_at", "stop_reason", "usage")
    if frame.error:
        add_note(work, f"The agent ended the turn with an error: {frame.error}")
    finish_turn(work, attempt, frame.stop_reason, frame.at)
    drive.turn_ended(work)  # the next queued message from the web goes


def reopen(work: Work) -> None:
    """The runner of the chat is there (its socket is open): if the server ended its current
    turn ``runner_lost``, the runner is still in it — it never sent the turn's end, or that end
    is on its way and ends the turn again, as the runner says. The turn runs again, with the
    prompts the loss closed open again (``calls.unfinish_turn``), so the web's queued messages
    wait for its real end (``drive.running``)."""
    attempt = work.chat.current_attempt
    if attempt is None or attempt.ended_at is None or attempt.stop_reason != RUNNER_LOST:
        return
    lost_at = attempt.ended_at
    attempt.ended_at, attempt.stop_reason = None, ""
    work.touch(attempt, "ended_at", "stop_reason")
    unfinish_turn(work, attempt, lost_at)
