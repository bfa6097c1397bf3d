"""The database counts a busy lane into slots (activity/show/timeline_reads.py): the counts are
those of the definition — a call counts in every slot it was alive in, a failed one as failed
in the slot where it ended — and the timeline's queries do not grow with the turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activity.models import Chat, InferenceAttempt, ToolActivity
from activity.show import timeline, timeline_reads
from tests.long_runs import long_run

pytestmark = pytest.mark.django_db
CALLS = 12


@pytest.fixture
def twelve(acme: Any) -> Chat:
    return long_run(acme, CALLS, fail_every=0, step_ms=100)


def counted_by_hand(
    rows: list[tuple[str | None, int, int | None, str]], line: timeline.Timeline, now: int
) -> dict[str, tuple[list[int], list[int]]]:
    """Each kind's slots as the definition counts them, call by call."""
    begin, end, slot_ms = line.begin, line.end, line.slot_ms
    slots = -(-(end - begin) // slot_ms)
    found: dict[str, tuple[list[int], list[int]]] = {}
    for kind, proposed, completed, status in rows:
        ended = completed if completed is not None else now
        if proposed > end or ended < begin:
            continue
        counts, failed = found.setdefault(kind or "other", ([0] * slots, [0] * slots))
        a, b = max(proposed, begin), min(ended, end)
        last = min(max(b - 1 - begin, a - begin) // slot_ms, slots - 1)
        first = min(max((a - begin) // slot_ms, 0), last)
        for slot in range(first, last + 1):
            counts[slot] += 1
        if status == "failed":
            failed[last] += 1
    return found


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 5_000), st.integers(-1, 3_000), st.booleans()),
        min_size=CALLS,
        max_size=CALLS,
    ),
    window=st.one_of(st.none(), st.tuples(st.integers(0, 6_000), st.integers(0, 6_000))),
)
def test_a_busy_lane_counts_each_call_in_every_slot_it_was_alive_in(
    twelve: Chat, monkeypatch: pytest.MonkeyPatch, calls: list[Any], window: Any
):
    monkeypatch.setattr(timeline, "MAX_MARKS", 2)  # every lane of 3 calls is counted in slots
    attempt = InferenceAttempt.objects.get(chat=twelve)
    start, now = attempt.started_at, attempt.started_at + 4_000
    ids = list(attempt.tool_activities.order_by("position").values_list("id", flat=True))
    for pk, (proposed, ran, failed) in zip(ids, calls, strict=True):
        completed = start + proposed + ran if ran >= 0 else None
        status = "failed" if failed else ("completed" if completed else "in_progress")
        ToolActivity.objects.filter(pk=pk).update(
            proposed_at=start + proposed, started_at=None, completed_at=completed, status=status
        )
    line = timeline.build(attempt, None, {}, now=now, window=window or (None, None))
    rows = list(
        attempt.tool_activities.values_list("agent_kind", "proposed_at", "completed_at", "status")
    )
    expected = counted_by_hand(rows, line, now)
    lanes = {lane.name: lane for lane in line.lanes}
    assert set(lanes) == set(expected)
    for kind, (counts, failed) in expected.items():
        lane = lanes[kind]
        assert lane.failed == sum(failed)
        if lane.count > 2:
            marks = timeline._buckets(counts, failed, line.begin, line.end, line.slot_ms, start, {})
            assert lane.bucketed and lane.marks == marks
        else:  # one mark per call
            assert not lane.bucketed and len(lane.marks) == lane.count
    shown = [r for r in rows if r[1] <= line.end and (r[2] or now) >= line.begin]
    assert line.calls == len(shown) == sum(lane.count for lane in line.lanes)


def queries_of(chat: Chat) -> int:
    attempt = InferenceAttempt.objects.get(chat=chat)
    with CaptureQueriesContext(connection) as queries:
        timeline.build(attempt, None, timeline_reads.waits_of(attempt), now=attempt.started_at)
    return len(queries)


def test_the_timeline_of_a_turn_of_600_calls_reads_as_often_as_one_of_10(acme: Any):
    small, big = long_run(acme, 10), long_run(acme, 600)
    few = queries_of(small)  # the 600-call turn's lanes (150 calls each) are drawn call by call
    assert queries_of(big) == few
    ToolActivity.objects.filter(chat=big).update(agent_kind="read")  # one lane of 600: counted
    assert queries_of(big) <= few
