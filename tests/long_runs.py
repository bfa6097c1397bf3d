"""Long runs for the tests of activity/review/filters.py, timeline.py and timing.py: a turn of many
calls made through the runner's frames, one batch (tests/factories.py)."""

from __future__ import annotations

import uuid
from typing import Any

from activity.models import Chat, Workspace
from tests import frames
from tests.factories import run

KINDS = ("read", "edit", "execute", "search")
SECOND = 1000


def at(frame: dict[str, Any], when: int) -> dict[str, Any]:
    return {**frame, "at": frames.T0 + when}


def long_run(
    workspace: Workspace,
    calls: int,
    *,
    fail_every: int = 50,
    step_ms: int = SECOND,
    prompt: str = "Make the whole suite pass",
    ended: bool = True,
    waiting: bool = False,
    cost: float | None = None,
) -> Chat:
    """A chat whose one turn made ``calls`` calls, one every ``step_ms``: kinds in turn (read,
    edit, execute, search), every ``fail_every``-th failed, every 7th running a pytest. The
    first call waited 20 s for a person (allowed); with ``waiting`` a last call asks and waits
    (the turn does not end); with ``cost`` the agent reports 12,345 of 200,000 tokens and it."""
    attempt = uuid.uuid4()
    raw = [at(frames.turn_started(1, attempt, uuid.uuid4(), prompt=prompt, title=prompt), 0)]
    seq = 1
    step_ms = max(step_ms, 1)
    for n in range(calls):
        kind = KINDS[n % len(KINDS)]
        title = f"Run pytest tests/test_{n}.py" if n % 7 == 0 else f"{kind.title()} file_{n}.py"
        failed = fail_every and n % fail_every == fail_every - 1
        start, end = n * step_ms, n * step_ms + step_ms // 2
        seq += 1
        raw.append(at(frames.tool_call(seq, f"call-{n}", title, kind=kind), start))
        if n == 0:  # it asked; a person allowed it 20 s later, then it ran
            raw.append(at(frames.permission(seq + 1, 1, "call-0", title), start + 1))
            raw.append(at(frames.outcome(seq + 2, 1, "allow-once"), start + 20 * SECOND))
            seq, end = seq + 2, end + 20 * SECOND
        seq += 1
        done = frames.tool_update(seq, f"call-{n}", status="failed" if failed else "completed")
        raw.append(at(done, end))
    last = max(calls * step_ms, 21 * SECOND)
    if cost is not None:
        seq += 1
        reading = {"sessionUpdate": "usage_update", "used": 12_345, "size": 200_000}
        reading["cost"] = {"amount": cost, "currency": "USD"}
        raw.append(at(frames.update(seq, reading), last))
    if waiting:
        seq += 1
        raw.append(at(frames.tool_call(seq, "asking", "Run rm -rf build", kind="execute"), last))
        seq += 1
        raw.append(at(frames.permission(seq, 2, "asking", "Run rm -rf build"), last + 1))
        ended = False
    if ended:
        seq += 1
        raw.append(at(frames.turn_ended(seq, attempt), last))
    return run(workspace, *raw)
