"""What an agent changed in its run's git working tree: the runner's ``changes`` frames
(docs/protocol.md#the-whole-change), applied under the chat's lock by ingest.

At the end of each turn the runner diffs the tree against its snapshots (taken with a temporary
index: ``activity/runner/snapshots.py``): since the turn started, and since the run started. The
frame is masked and cleaned at the boundary like every frame that carries what an agent did;
here each diff is bounded again (``DIFF_CHARS``) and kept in the turn's ``TurnDiff`` (the whole
run's only in the latest: an earlier one is dropped). The turn's
head says how many files and lines it changed, the run's head the whole change so far — both
pushed like any change of them. A run outside git says so once (``Chat.changes_note``).
"""

from __future__ import annotations

from typing import Any

from activity.core.contract import bound
from activity.live.work import FrameError, Work
from activity.models import InferenceAttempt, TurnDiff
from activity.wire.frames import Change, Changes

DIFF_CHARS = 1_000_000  # a diff as kept; the runner's frames are under 1 MiB already
NOTE_CHARS = 500


def apply(work: Work, frame: Changes) -> None:
    chat = work.chat
    if frame.outside is not None or frame.attempt_id is None:
        note = bound(frame.outside or "the runner took no snapshot of its directory", NOTE_CHARS)
        chat.changes_note = note or ""
        work.touch_meta("changes_note")
        return
    attempt = turn(work, frame)
    kept = {
        **parts("turn", frame.turn),
        **parts("run", frame.run),
        "chat": chat,
        "skipped": frame.skipped,
        "at": frame.at,
    }
    TurnDiff.objects.update_or_create(attempt=attempt, defaults=kept)
    # Only the latest turn's diff of the whole run is ever shown: the earlier ones go.
    earlier = TurnDiff.objects.filter(chat=chat, at__lte=frame.at).exclude(attempt=attempt)
    earlier.exclude(run_diff="", run_files=[]).update(run_diff="", run_files=[])
    attempt.changed = summary(frame.turn)
    work.touch(attempt, "changed")
    chat.changed, chat.changes_note = summary(frame.run), ""
    chat.changes_base = frame.base or chat.changes_base
    work.touch_meta("changed", "changes_note", "changes_base")


def turn(work: Work, frame: Changes) -> InferenceAttempt:
    """The turn the frame is about: the chat's current one, or an earlier one of it."""
    assert frame.attempt_id is not None
    current = work.chat.current_attempt
    if current is not None and current.pk == frame.attempt_id:
        return current
    found = InferenceAttempt.objects.filter(pk=frame.attempt_id, chat=work.chat).first()
    if found is None:
        raise FrameError(f"changes for turn {frame.attempt_id}, which this chat does not have")
    return found


def parts(name: str, change: Change | None) -> dict[str, Any]:
    change = change or Change()
    return {
        f"{name}_diff": bound(change.diff, DIFF_CHARS) or "",
        f"{name}_files": [file.model_dump() for file in change.files],
        f"{name}_more_files": change.more_files,
        f"{name}_cut_bytes": change.cut_bytes,
    }


def summary(change: Change | None) -> dict[str, int]:
    """Files, lines added, lines removed (a binary file counts as a file, with no lines)."""
    change = change or Change()
    return {
        "files": len(change.files) + change.more_files,
        "added": sum(file.added or 0 for file in change.files),
        "removed": sum(file.removed or 0 for file in change.files),
    }
