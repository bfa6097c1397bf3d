"""What a call's status and a turn's end say to a person, and how they look.

Every page that shows a status or an end (a call's row, a turn's head, the turn as it
happened, the runs list, the inbox) asks here, so a call or a turn reads the same everywhere.
The stored values (``ToolActivity.status``/``approval``/``error_code``, a turn's
``stop_reason``) and the JSON export keep the contract's codes: only what the pages say
changes.

A ``Shown`` is the words a person reads ("Failed · exit 3", "Cancelled by bob") and a tone,
the CSS class of a badge (``.badge.is-failed``) that gives each kind of outcome its own glyph
and outline as well as its colour (koruweb.css, "Statuses"), so no two are told apart by colour
alone.

The words, by what happened:

- a call: *Waiting for you* (its prompt is open; *Waiting for an answer* where the person
  may not answer it), *Starting* (the agent announced it and has
  not started it), *Running* (started, approved, or a read the agent never asks about: ACP's
  ``pending`` read is already under way), *Succeeded*, *Failed* (with the command's exit code
  when the agent reported one), *Rejected* / *Declined* (a person turned it down), *Cancelled*,
  *Agent crashed*, *Not run* (its prompt closed unanswered as the turn ended); a person's
  decision beside it: *Allowed*, *Answered* (a question is answered, never "approved"),
  *Not answered*;
- a turn: *Running*, *Finished*, *Cancelled by <person>*, *Agent crashed*, *Agent error*,
  *Runner lost*, *Stopped: token limit*, *Stopped: request limit*, *Refused*, and an unknown
  reason as *Ended: <reason>*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from activity.core.contract import ToolApproval, ToolErrorCode, ToolStatus
from activity.core.exits import EXIT_READ, exit_message

if TYPE_CHECKING:
    from activity.models import Chat, InferenceAttempt, Prompt, ToolActivity


@dataclass(frozen=True)
class Shown:
    """A status as a person reads it: ``words``, the badge's ``tone`` (a CSS class), and a
    sentence that says more (the badge's tooltip).

    ``elsewhere`` is what a person who may not answer reads instead of ``words`` ("Waiting for
    an answer" beside "Waiting for you"). A badge is rendered once for every viewer (pushes
    are), so it carries both and the page shows one (koruweb.css, ``data-can-answer``)."""

    words: str
    tone: str
    title: str = ""
    elsewhere: str = ""

    def said(self, can_answer: bool = True) -> str:
        """The words the badge shows on a page where this person may, or may not, answer."""
        return self.words if can_answer or not self.elsewhere else self.elsewhere


# The tones: one look each (koruweb.css, "Statuses").
SUCCEEDED = "is-succeeded"
FAILED = "is-failed"
CANCELLED = "is-cancelled"
REJECTED = "is-rejected"
CRASHED = "is-crashed"
LOST = "is-lost"
LIMIT = "is-limit"
REFUSED = "is-refused"
WAITING = "is-waiting"
RUNNING = "is-running"
STARTING = "is-starting"
ENDED = "is-ended"  # an end koruweb has no word for: shown with its own name, neutral

TONES = (
    SUCCEEDED,
    FAILED,
    CANCELLED,
    REJECTED,
    CRASHED,
    LOST,
    LIMIT,
    REFUSED,
    WAITING,
    RUNNING,
    STARTING,
    ENDED,
)


def exit_code(row: ToolActivity) -> int | None:
    """The exit code a row's command reported (kept in its error_message), if any."""
    found = EXIT_READ.match(row.error_message or "")
    return int(found.group(1)) if found else None


# --- a call ------------------------------------------------------------------------------


def _prompt_kind(row: ToolActivity) -> str | None:
    """The kind of the row's latest prompt when the page loaded it (reads.with_prompts)."""
    prompt: Prompt | None = getattr(row, "prompt", None)
    return prompt.kind if prompt is not None else None


def call_status(row: ToolActivity) -> Shown:
    """What a call's status cell says: never "Proposed", never a bare code."""
    status, approval, error = row.status, row.approval, row.error_code
    question = _prompt_kind(row) == "question"
    turned_down = Shown(
        "Declined" if question else "Rejected",
        REJECTED,
        "A person declined to answer the agent's question."
        if question
        else "A person rejected it: the agent was told not to run it.",
    )
    if error == ToolErrorCode.PERMISSION_DENIED or (
        approval == ToolApproval.DENIED and status != ToolStatus.COMPLETED
    ):
        return turned_down
    if status == ToolStatus.COMPLETED:
        return Shown("Succeeded", SUCCEEDED, "The agent reported that it succeeded.")
    if status == ToolStatus.FAILED:
        if error == ToolErrorCode.AGENT_EXITED:
            return Shown("Agent crashed", CRASHED, "The agent process exited before it ended.")
        if error == ToolErrorCode.CANCELLED:
            return Shown("Cancelled", CANCELLED, "The turn was cancelled before it ended.")
        code = exit_code(row)
        if code is not None:
            return Shown(f"Failed · exit {code}", FAILED, exit_message(code))
        return Shown("Failed", FAILED, "The agent reported that it failed.")
    if status == ToolStatus.CANCELLED:
        return Shown("Cancelled", CANCELLED, "The turn was cancelled before it ended.")
    if approval == ToolApproval.PENDING:
        return waiting_for_you(question)
    if status == ToolStatus.RUNNING or row.started_at is not None or row.read_only:
        return Shown("Running", RUNNING, "The agent is running it.")
    if approval == ToolApproval.CANCELLED:
        return Shown("Not run", CANCELLED, "Its prompt closed unanswered when the turn ended.")
    return Shown("Starting", STARTING, "The agent announced it and has not started it yet.")


def waiting_for_you(question: bool) -> Shown:
    """A call, or an inbox item, whose prompt waits for a person's answer: "Waiting for you"
    where this person may answer it, "Waiting for an answer" where they may not."""
    what = "an answer to its question" if question else "a person's permission"
    return Shown(
        "Waiting for you", WAITING, f"The agent waits for {what}.", "Waiting for an answer"
    )


def call_decision(row: ToolActivity) -> Shown | None:
    """A person's decision beside the status, when it says something the status does not."""
    question = _prompt_kind(row) == "question"
    match row.approval:
        case ToolApproval.APPROVED:
            if question:
                return Shown("Answered", SUCCEEDED, "A person answered the agent's question.")
            return Shown("Allowed", SUCCEEDED, "A person allowed it.")
        case ToolApproval.DENIED if row.status == ToolStatus.COMPLETED:
            return Shown("Rejected", REJECTED, "A person rejected it; the agent ran it anyway.")
        case ToolApproval.CANCELLED if row.status != ToolStatus.PROPOSED:
            return Shown("Not answered", CANCELLED, "Its prompt closed before anyone answered.")
    return None  # pending, denied and not-run are the status's own words


def count_words(status: str, count: int) -> Shown:
    """The runs list's "3 succeeded": a run's calls counted by status."""
    words = {
        ToolStatus.PROPOSED: ("not started", STARTING),
        ToolStatus.RUNNING: ("running", RUNNING),
        ToolStatus.COMPLETED: ("succeeded", SUCCEEDED),
        ToolStatus.FAILED: ("failed", FAILED),
        ToolStatus.CANCELLED: ("cancelled", CANCELLED),
    }
    word, tone = words.get(status, (status, ENDED))  # type: ignore[call-overload]
    calls = "call" if count == 1 else "calls"
    return Shown(f"{count} {word}", tone, f"{count} {calls} {word}")


# --- a turn ------------------------------------------------------------------------------

STOP_REASONS: dict[str, Shown] = {
    "end_turn": Shown("Finished", SUCCEEDED, "The agent finished the turn."),
    "max_tokens": Shown(
        "Stopped: token limit", LIMIT, "The agent stopped: it reached its token limit."
    ),
    "max_turn_requests": Shown(
        "Stopped: request limit",
        LIMIT,
        "The agent stopped: it reached the most model requests a turn may make.",
    ),
    "refusal": Shown("Refused", REFUSED, "The agent refused to go on."),
    "agent_exited": Shown("Agent crashed", CRASHED, "The agent process exited during the turn."),
    "agent_error": Shown(
        "Agent error", FAILED, "The agent ended the turn with an error (see its note)."
    ),
    "runner_lost": Shown(
        "Runner lost",
        LOST,
        "The runner went away and did not come back: what the agent did after is unknown.",
    ),
    "runner_replaced": Shown(
        "Runner lost",
        LOST,
        "The runner went away during this turn and the run was resumed by another: what the "
        "agent did after is unknown.",
    ),
}


def turn_status(attempt: InferenceAttempt, cancelled_by: str | None = None) -> Shown:
    """How a turn stands or ended. ``cancelled_by`` names who cancelled it from the web."""
    if attempt.ended_at is None:
        return Shown("Running", RUNNING, "The agent is working on this turn.")
    reason = attempt.stop_reason
    if reason == "cancelled":
        if cancelled_by:
            return Shown(
                f"Cancelled by {cancelled_by}", CANCELLED, f"{cancelled_by} cancelled the turn."
            )
        return Shown("Cancelled", CANCELLED, "The turn was cancelled.")
    if reason in STOP_REASONS:
        return STOP_REASONS[reason]
    if not reason:
        return Shown("Ended", ENDED, "The turn ended.")
    return Shown(f"Ended: {reason}", ENDED, f"The agent ended the turn: {reason}.")


def canceller(attempt: InferenceAttempt, chat: Chat | None = None) -> str | None:
    """Who asked from the web to cancel a turn ("a former member" once they are gone)."""
    if attempt.cancelled_by_id is None and attempt.cancel_asked_at is None:
        return None
    people = (chat if chat is not None else attempt.chat).web_people
    return people.get(attempt.cancelled_by_id or 0, "a former member")


def run_status(chat: Chat) -> Shown:
    """A run in the runs list: how its latest turn stands."""
    turn = chat.current_attempt
    if turn is None:
        return Shown("No turn yet", ENDED, "The runner has not started a turn.")
    who = canceller(turn, chat) if turn.stop_reason == "cancelled" else None
    return turn_status(turn, who)
