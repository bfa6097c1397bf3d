"""How long a call or a turn ran, apart from how long it waited for a person.

A call that asked permission spends part of its life waiting for an answer: from its prompt's
opening to its close (both on the runner's clock, like every time on a row). That wait is not
the tool's running time, so a row says "ran 3 s · waited 22 s for a person" instead of a 25 s
duration, and a turn says how much of it was spent waiting. All times are epoch milliseconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from activity.core.contract import ToolApproval
from activity.models import InferenceAttempt, Prompt, ToolActivity

Window = tuple[int, int | None]  # a wait: opened, closed (None: still open)


@dataclass(frozen=True)
class CallTime:
    """What a row's duration cell says."""

    ran_ms: int | None  # None: still running, or it never ran
    waited_ms: int | None  # None: it never asked a person
    waiting_since: int | None = None  # epoch ms: a person is being asked now
    never_ran: bool = False  # denied, or closed unanswered


def _ms(value: Any) -> int | None:
    return int(value.timestamp() * 1000) if value is not None else None


def wait_of(prompt: Prompt | None) -> Window | None:
    """When a prompt waited for a person: from its opening to its close, or to the answer when
    the runner has not yet reported the close."""
    if prompt is None:
        return None
    end = prompt.closed_at if prompt.closed_at is not None else _ms(prompt.answered_at)
    return prompt.opened_at, end


def call(row: ToolActivity) -> CallTime:
    """The row's running time and its wait for a person (``row.prompt``: reads.with_prompts)."""
    wait = wait_of(getattr(row, "prompt", None))
    if wait is None:
        return CallTime(ran_ms=row.duration_ms, waited_ms=None)
    opened, closed = wait
    if closed is None:
        return CallTime(ran_ms=None, waited_ms=None, waiting_since=opened)
    waited = max(closed - opened, 0)
    if row.started_at is None:
        # It never became running: a call denied or left unanswered did not run; one the agent
        # completed without saying it ran (claude does) ran from the answer to its end.
        if (
            row.approval in (ToolApproval.DENIED, ToolApproval.CANCELLED)
            or row.completed_at is None
        ):
            return CallTime(ran_ms=None, waited_ms=waited, never_ran=row.completed_at is not None)
        return CallTime(
            ran_ms=max(row.completed_at - max(closed, row.proposed_at), 0), waited_ms=waited
        )
    if row.completed_at is None:
        return CallTime(ran_ms=None, waited_ms=waited)
    ran = row.completed_at - row.started_at
    ran -= _overlap((row.started_at, row.completed_at), (opened, closed))
    return CallTime(ran_ms=max(ran, 0), waited_ms=waited)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def union_ms(windows: Iterable[Window], now: int) -> int:
    """How long at least one of the windows was open (an open one lasts until ``now``)."""
    total, reach = 0, None
    for start, end in sorted((s, e if e is not None else now) for s, e in windows):
        if reach is None or start > reach:
            total += max(end - start, 0)
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


@dataclass(frozen=True)
class TurnTime:
    took_ms: int | None  # None: still running
    waited_ms: int  # for a person, however many prompts were open at once

    @property
    def ran_ms(self) -> int | None:
        return None if self.took_ms is None else max(self.took_ms - self.waited_ms, 0)


def waits(attempts: Sequence[InferenceAttempt]) -> None:
    """Load every prompt window of these turns in one query (as ``attempt.waits``)."""
    found: dict[Any, list[Window]] = defaultdict(list)
    rows = Prompt.objects.filter(attempt__in=[a.pk for a in attempts])
    for attempt_id, opened, closed, answered in rows.values_list(
        "attempt_id", "opened_at", "closed_at", "answered_at"
    ):
        found[attempt_id].append((opened, closed if closed is not None else _ms(answered)))
    for attempt in attempts:
        attempt.waits = found[attempt.pk]  # type: ignore[attr-defined]


def turn(attempt: InferenceAttempt) -> TurnTime:
    """How long an ended turn took, and how much of it waited for a person."""
    if not hasattr(attempt, "waits"):
        waits([attempt])
    windows: list[Window] = attempt.waits  # type: ignore[attr-defined]
    end = attempt.ended_at
    if end is None:
        return TurnTime(took_ms=None, waited_ms=0)
    clipped = [(s, min(e if e is not None else end, end)) for s, e in windows if s < end]
    return TurnTime(took_ms=max(end - attempt.started_at, 0), waited_ms=union_ms(clipped, end))


def millis(value: int | None) -> str:
    """A duration in milliseconds, for a person: 850 ms, 4.2 s, 3 min 5 s, 2 h 46 min."""
    if value is None or value < 0:
        return ""
    if value < 1000:
        return f"{value} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    minutes, seconds = divmod(value // 1000, 60)
    if minutes >= 60:
        return f"{minutes // 60} h {minutes % 60} min"
    return f"{minutes} min {seconds} s"
