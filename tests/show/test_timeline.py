"""A turn's timeline and its times (activity/show/timeline.py, activity/show/timing.py): a time
axis with labels, lanes per kind, zoom in the URL, readable at 10,000 calls; a call's running
time apart from its wait for a person, in rows, turns and the timeline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from activity.models import Chat, InferenceAttempt, ToolActivity
from activity.review import reads
from activity.show import contrast, timeline, timeline_reads, timing
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
    waits = timeline_reads.waits_of(attempt)
    span = (window.get("lo"), window.get("hi"))
    return timeline.build(attempt, None, waits, now=attempt.started_at + 10**9, window=span)


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
    # One call in fifty failed: slots show a thin failed part, none is drawn all failed.
    edit = lanes["edit"]
    assert edit.failed == 100 and edit.failed_share == "4%"
    assert not [m for m in edit.marks if m.css == "failed"]
    parts = [m for m in edit.marks if m.partly_failed]
    assert parts and all(m.failed_height <= 1 for m in parts)
    assert re.fullmatch(r"1 of \d\d calls failed, from .+ to .+ \(zoom in\)", parts[0].title)
    assert lanes["read"].failed == 0 and not [m for m in lanes["read"].marks if m.failed]


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


def slot(calls: int, failed: int) -> timeline.Mark:
    return timeline.Mark(0, 5, "density-2", "", "", calls, failed)


def test_a_slot_is_drawn_failed_in_proportion_to_its_failed_calls():
    none, one, half, most, every = slot(40, 0), slot(40, 1), slot(40, 20), slot(40, 39), slot(4, 4)
    assert not none.partly_failed and none.height == timeline.HEIGHT
    # 1 in 40: a thin failed part at the slot's foot, a seam, and the rest as the calls that ran.
    assert one.partly_failed and one.failed_height == timeline.MIN_FAILED
    assert one.failed_y + one.failed_height == timeline.TOP + timeline.HEIGHT
    assert one.height + timeline.SEAM + one.failed_height == timeline.HEIGHT
    assert half.failed_height == timeline.HEIGHT / 2
    assert timeline.MIN_FAILED <= most.height < half.height  # the rest never vanishes
    assert not every.partly_failed and every.height == timeline.HEIGHT  # drawn whole, as failed


def built_at(chat: Chat, failed: set[int], total: int) -> timeline.Timeline:
    """The first ``total`` calls of ``chat`` as the timeline reads them, ``failed`` failed."""
    attempt = InferenceAttempt.objects.get(chat=chat)
    ids = list(attempt.tool_activities.order_by("position").values_list("id", flat=True))
    ToolActivity.objects.filter(id__in=ids[total:]).delete()
    for n, pk in enumerate(ids[:total]):
        status = "failed" if n in failed else "completed"
        ToolActivity.objects.filter(pk=pk).update(status=status)
    return timeline.build(attempt, None, {}, now=attempt.started_at + 10**9)


def test_slot_shares_and_their_words_count_the_failed_calls_of_each_slot(acme):
    chat = long_run(acme, 300, fail_every=0, step_ms=100)  # slots of 250 ms: 2 or 3 calls each
    attempt = InferenceAttempt.objects.get(chat=chat)
    ToolActivity.objects.filter(attempt=attempt).update(agent_kind="read")  # one lane
    line = built_at(chat, {150, 270, 271, 272}, 300)  # 270-272 are a slot; 150 shares one
    (lane,) = line.lanes
    assert line.slot_ms == 30_000 // timeline.SLOTS == 250 and lane.bucketed
    assert lane.count == 300 and lane.failed == 4 and lane.failed_share == "1%"
    marks = lane.marks
    assert sum(m.failed for m in marks) == 4
    (every,) = [m for m in marks if m.css == "failed"]
    assert every.title == "3 of 3 calls failed, from 27 s to 27.25 s (zoom in)"
    (partly,) = [m for m in marks if m.partly_failed]
    assert partly.css.startswith("density-") and partly.failed == 1 and partly.calls > 1
    assert partly.title.startswith(f"1 of {partly.calls} calls failed, from 15 s to 15.25 s")
    clean = [m for m in marks if not m.failed]
    assert clean and all(", none failed, from " in m.title for m in clean)


def test_shares_read_as_a_person_says_them():
    assert timeline.share_words(0, 40) == "0%"
    assert timeline.share_words(1, 40) == "3%"
    assert timeline.share_words(286, 2_000) == "14%"
    assert timeline.share_words(1, 500) == "under 1%"
    assert timeline.share_words(499, 500) == "over 99%"
    assert timeline.share_words(40, 40) == "100%"


def test_the_turn_page_says_what_share_of_each_lane_failed(acme, as_approver):
    chat = long_run(acme, 10_000, fail_every=40)  # every 40th: the search lane's every 10th
    page = as_approver.get(f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/").content.decode()
    figure = page[page.index('<figure class="timeline"') : page.index("</figure>")]
    assert 'aria-label="search: 2,500 calls, 250 failed (10%), counted in slots of' in figure
    assert '<span class="tl-failed">10% failed</span>' in figure
    assert 'aria-label="read: 2,500 calls, counted in slots of' in figure
    assert '<rect class="run failed part"' in figure and '<rect class="run failed"' not in figure
    assert "red at the bottom of a slot: the share of its calls that failed" in figure


SHEETS = ("static/koruweb/page/koruweb.css", "static/koruweb/review/long.css")
DENSITIES = (0.45, 0.65, 0.82, 1.0)  # long.css: a slot's fill-opacity, quiet to busiest


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_slots_failed_part_stands_out_from_the_plot_and_from_the_calls_that_ran(scheme):
    sheets = (Path(settings.BASE_DIR, sheet).read_text() for sheet in SHEETS)
    colours = contrast.properties(*sheets)[scheme]
    bad, plot = colours["bad"], colours["bg"]
    assert contrast.ratio(bad, plot) >= contrast.AA_LARGE  # WCAG 1.4.11, on the plot
    for opacity in DENSITIES:  # a plain difference in hue; the seam sets them apart in shape
        assert contrast.difference(contrast.mix(colours["ok"], opacity, plot), bad) >= 40
    assert contrast.ratio(bad, colours["surface"]) >= contrast.AA_TEXT  # "10% failed"
