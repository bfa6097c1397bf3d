"""Notes on a turn: what koruweb did not understand of what the agent sent, for the page."""

from __future__ import annotations

import re

from activity.core.contract import bound
from activity.live.work import Work

UNDERSTOOD = {"session/update", "session/request_permission", "elicitation/create"}
NOTES = 20  # a turn keeps this many different notes
NOTE_CHARS = 600


def not_understood(work: Work, method: str, *, asked: bool) -> None:
    """A request koruweb does not serve, or a notification it does not know, is noted on the
    turn; extension notifications (``_vendor/...``) are the agent's own business."""
    if asked:
        add_note(work, f"The agent asked for “{method}”, which koruweb does not serve (told so).")
    elif not method.startswith("_") and method != "session/cancel":
        add_note(work, f"The agent sent “{method}”, which koruweb does not understand.")


UNREADABLE = re.compile(r"(A message|[\d,]+ messages) from the agent could not be read")


def count_unreadable(work: Work, reason: str) -> None:
    """Count one more message of the agent that could not be read on the current turn: one
    note says how many, and why the last one could not."""
    attempt = work.chat.current_attempt
    if attempt is None:
        return
    notes = list(attempt.notes)
    at = next((n for n, text in enumerate(notes) if UNREADABLE.match(text)), None)
    count = 1
    if at is not None:
        counted = UNREADABLE.match(notes[at])
        assert counted is not None
        word = counted.group(1).split()[0]
        count = (1 if word == "A" else int(word.replace(",", ""))) + 1
    if count == 1:
        text = f"A message from the agent could not be read: {reason}"
    else:
        text = f"{count:,} messages from the agent could not be read; the last: {reason}"
    text = bound(text, NOTE_CHARS) or ""
    if at is not None:
        notes[at] = text
    elif len(notes) < NOTES:
        notes.append(text)
    else:
        return
    attempt.notes = notes
    work.touch(attempt, "notes")


def add_note(work: Work, text: str) -> None:
    """Tell the page's readers about the current turn (once per text, a few per turn)."""
    attempt = work.chat.current_attempt
    text = bound(text, NOTE_CHARS) or ""
    if attempt is None or text in attempt.notes or len(attempt.notes) >= NOTES:
        return
    attempt.notes = [*attempt.notes, text]
    work.touch(attempt, "notes")
