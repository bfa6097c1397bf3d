"""A turn's timeline and its times (activity/show/timeline.py, activity/show/timing.py): a time
axis with labels, lanes per kind, zoom in the URL, readable at 10,000 calls; a call's running
time apart from its wait for a person, in rows, turns and the timeline."""

from __future__ import annotations

import re

import pytest

from activity.models import Chat, InferenceAttempt, ToolActivity
from activity.review import reads
from activity.show import timeline, timing
from tests.long_runs import long_run

pytestmark = pytest.mark.django_db


def test_tick_labels_fall_on_round_times():
    assert [timeline.offset_words(ms) for ms in (0, 500, 1_500, 30_000, 90_000, 4_500_000)] == [
        "0",
        "500 ms",
        "1.5 s",
        "30 s",
        "1 min 30 s",
        "1 h 15 min",
    ]
    assert timeline.axis(7_000) == 1_000
    assert timeline.axis(10_000 * 1_000) == 30 * 60_000  # 2 h 47 min: a tick each half hour


def built(chat: Chat, **window: int) -> timeline.Timeline:
    attempt = InferenceAttempt.objects.get(chat=chat)
    calls, waits = timeline.calls_of(attempt), timeline.waits_of(attempt)
    span = (window.get("lo"), window.get("hi"))
    return timeline.build(attempt, calls, waits, now=attempt.started_at + 10**9, window=span)


def test_ten_thousand_calls_are_counted_into_slots_under_a_labelled_axis(acme):
    line = built(long_run(acme, 10_000))
    assert line.calls == 10_000 and line.bucketed
    assert [t.label for t in line.ticks] == [
        "0",
        "30 min",
        "1 h",
        "1 h 30 min",
        "2 h",
        "2 h 30 min",
        "3 h",
    ]
    assert line.ticks[-1].x == timeline.WIDTH
    lanes = {lane.name: lane for lane in line.lanes}
    assert lanes["waiting for a person"].count == 1
    for kind in ("read", "edit", "execute", "search"):
        assert lanes[kind].count == 2_500 and lanes[kind].bucketed
        assert 0 < len(lanes[kind].marks) <= timeline.SLOTS
        marks = lanes[kind].marks
        assert all(m.width >= timeline.MIN_MARK and m.href.startswith("?from=") for m in marks)
    failed = [m for m in lanes["edit"].marks if m.css == "failed"]
    assert failed and "failed" in failed[0].title  # a slot with a failure shows it


def test_zooming_in_draws_each_call_and_links_it(acme):
    chat = long_run(acme, 10_000)
    line = built(chat, lo=60_000, hi=120_000)
    assert line.zoomed and line.calls == 61
    assert not line.bucketed
    assert [t.label for t in line.ticks][:2] == ["1 min", "1 min 10 s"]
    read = next(lane for lane in line.lanes if lane.name == "read")
    assert all(m.href.startswith("/tools/") for m in read.marks)
    assert "Zoom out" in [z.label for z in line.zooms]


def test_a_call_that_waited_for_a_person_says_its_running_time_apart(acme):
    chat = long_run(acme, 3)
    row = reads.with_prompts([ToolActivity.objects.get(chat=chat, tool_call_id="call-0")])[0]
    said = timing.call(row)
    assert said.waited_ms == 20_000 - 1 and said.ran_ms == 500
    turn = timing.turn(InferenceAttempt.objects.get(chat=chat))
    assert turn.waited_ms == 20_000 - 1 and turn.ran_ms == 21_000 - turn.waited_ms
    line = built(chat)
    waits = next(lane for lane in line.lanes if lane.name == "waiting for a person")
    assert waits.waits[0].title == "waited 20.0 s for a person, from 1 ms"


def test_the_turn_page_draws_the_timeline_its_times_and_usage(acme, as_approver):
    chat = long_run(acme, 10_000, cost=0.42)
    page = as_approver.get(f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/").content.decode()
    figure = page[page.index('<figure class="timeline"') : page.index("</figure>")]
    assert '<span class="tick"><span>1 h 30 min</span></span>' in figure
    assert len(re.findall(r'<rect class="run density-\d|<rect class="run failed', figure)) > 100
    assert '<time datetime="2025-12-29T09:20:00Z"' in page  # the turn's start, for times.js
    assert '<span class="ran">ran 500 ms</span> · <span class="waited">waited 20.0 s' in page
    assert "12.3k / 200k tokens · 6% · $0.42" in page
    assert "10,000 calls" in page and '<span class="ran">ran 2 h 46 min</span>' in page
    zoomed = as_approver.get(
        f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/?from=0&to=60000&kind=read"
    ).content.decode()
    assert 'aria-label="read: 16 calls"' in zoomed
