"""A turn's timeline: when each call was proposed, waited for a person, ran and ended, on a
time axis with labels, one lane per kind of call, readable at 10,000 calls.

Where a lane has more calls than can be told apart at the page's width, its calls are counted
into time slots instead (``SLOTS`` across the window, counted by the database:
``timeline_reads.counted``), each slot drawn as one mark whose shade
says how busy it was; the calls of a slot that failed are a red part at its foot, as tall as their
share of the slot's calls (one failure in forty is a thin line, a slot whose every call failed is
all red), set apart from the rest by a seam so that it reads without colour too. A slot links to
the window zoomed on it, and its title and each lane's name say the counts in words.

Zoom is a window of the turn in the query string (``?from=&to=``, milliseconds from the turn's
start), so a zoomed timeline is a link, works without JavaScript, and
static/koruweb/review/timeline.js adds dragging across the plot to zoom.

Positions are in the plot's own units (``WIDTH`` across); the axis's ticks fall on round times
and the window is widened to whole ticks, so tick labels sit at even steps across the plot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse

from activity.core.contract import ToolApproval, ToolStatus
from activity.models import InferenceAttempt
from activity.show import timeline_reads
from activity.show.timeline_reads import Call
from activity.show.timing import Window, millis

WIDTH = 1000
SLOTS = 120  # slots across the window when a lane is bucketed (~9 px each at 1440 px)
MAX_MARKS = 250  # a lane with more calls in the window than this is bucketed
MIN_MARK = 1.5  # the narrowest mark, in plot units: an instant call stays visible
TOP, HEIGHT = 2.0, 6.0  # where a mark starts and how tall it is, in plot units (10 high)
SEAM = 0.5  # between a slot's failed part and the rest, so the two read apart without colour
MIN_FAILED = 1.0  # the thinnest failed part: one failure in a busy slot stays visible
SECOND, MINUTE, HOUR = 1000, 60_000, 3_600_000
STEPS = (
    [
        s * unit
        for unit, steps in (
            (1, (1, 2, 5, 10, 20, 50, 100, 200, 500)),
            (SECOND, (1, 2, 5, 10, 15, 30)),
        )
        for s in steps
    ]
    + [m * MINUTE for m in (1, 2, 5, 10, 15, 30)]
    + [h * HOUR for h in (1, 2, 3, 6, 12, 24)]
)
MAX_TICKS = 8
WAITING_LANE = "waiting for a person"


def share_words(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a person reads a share: ``10%``, ``under 1%``, ``over 99%``."""
    if not part or not whole:
        return "0%"
    percent = 100 * part / whole
    if percent < 1:
        return "under 1%"
    if part < whole and percent > 99:
        return "over 99%"
    return f"{int(percent + 0.5)}%"


@dataclass
class Mark:
    x: float
    width: float
    css: str  # ran, failed, cancelled, running, proposed, waiting, density-N
    title: str
    href: str = ""
    calls: int = 0  # a slot's calls (a bucketed lane); 0 for one call's own mark
    failed: int = 0  # how many of the slot's calls failed

    @property
    def partly_failed(self) -> bool:
        """Some of the slot's calls failed, not all: it is drawn in two parts."""
        return 0 < self.failed < self.calls

    @property
    def failed_height(self) -> float:
        """The failed part's height: its share of the slot's calls, never thinner than
        ``MIN_FAILED`` nor so tall that the rest vanishes."""
        if not self.partly_failed:
            return 0.0
        share = HEIGHT * self.failed / self.calls
        return round(min(max(share, MIN_FAILED), HEIGHT - SEAM - MIN_FAILED), 2)

    @property
    def failed_y(self) -> float:
        return round(TOP + HEIGHT - self.failed_height, 2)

    @property
    def height(self) -> float:
        """The mark's own height: above the seam when part of the slot failed."""
        return round(HEIGHT - self.failed_height - SEAM, 2) if self.partly_failed else HEIGHT


@dataclass
class Lane:
    name: str
    count: int
    marks: list[Mark] = field(default_factory=list)
    waits: list[Mark] = field(default_factory=list)  # hatched: waiting for a person
    bucketed: bool = False
    failed: int = 0  # calls of the lane in the window that failed

    @property
    def failed_share(self) -> str:
        return share_words(self.failed, self.count)


@dataclass
class Tick:
    label: str
    x: float


@dataclass
class Zoom:
    label: str
    query: str
    current: bool = False


@dataclass
class Timeline:
    begin: int  # epoch ms of the window's left edge
    end: int
    turn_start: int
    lanes: list[Lane]
    ticks: list[Tick]
    zooms: list[Zoom]
    zoomed: bool
    calls: int  # calls in the window
    step: int  # ms between ticks
    slot_ms: int  # a slot's length when a lane is bucketed

    @property
    def bucketed(self) -> bool:
        return any(lane.bucketed for lane in self.lanes)


def offset_words(ms: int) -> str:
    """A tick's label: its time from the turn's start (``0``, ``500 ms``, ``30 s``, ``2 min``,
    ``1 min 30 s``, ``1 h 15 min``)."""
    if ms == 0:
        return "0"
    if ms < SECOND:
        return f"{ms} ms"
    if ms < MINUTE:
        seconds = ms / SECOND
        return f"{seconds:g} s"
    if ms < HOUR:
        minutes, rest = divmod(ms, MINUTE)
        return f"{minutes} min" + (f" {rest // SECOND} s" if rest else "")
    hours, rest = divmod(ms, HOUR)
    return f"{hours} h" + (f" {rest // MINUTE} min" if rest else "")


def axis(span: int) -> int:
    """The tick step for a window ``span`` ms long: the smallest round step with at most
    ``MAX_TICKS`` intervals."""
    for step in STEPS:
        if span / step <= MAX_TICKS:
            return step
    return STEPS[-1] * ((span // STEPS[-1]) // MAX_TICKS + 1)


def build(
    attempt: InferenceAttempt,
    where: Q | None,
    waits: dict[str, Window],
    now: int,
    window: tuple[int | None, int | None] = (None, None),
    query: dict[str, str] | None = None,
) -> Timeline:
    """The timeline of the turn's calls that match ``where``, in ``window`` (ms from the turn's
    start; None: its edge). A constant number of queries, whatever the turn's size
    (``timeline_reads``)."""
    start = attempt.started_at
    first_call, last_call = timeline_reads.extent(attempt, where)
    last = max(
        [attempt.ended_at or now]
        + ([last_call] if last_call is not None else [])
        + [e or now for _, e in waits.values()]
    )
    first = min([start] + ([first_call] if first_call is not None else []))
    lo = first - start if window[0] is None else max(window[0], first - start)
    hi = last - start if window[1] is None else min(window[1], last - start)
    if hi <= lo:
        lo, hi = first - start, last - start
    step = axis(max(hi - lo, 1))
    lo, hi = (lo // step) * step, -(-max(hi, lo + 1) // step) * step
    begin, end = start + lo, start + hi
    scale = WIDTH / (end - begin)

    def x(at: int) -> float:
        return round(min(max(at - begin, 0), end - begin) * scale, 2)

    def span(a: int, b: int) -> tuple[float, float]:
        left = x(a)
        return left, round(max(x(b) - left, MIN_MARK), 2)

    lanes: list[Lane] = []
    person = [w for w in waits.values() if w[0] <= end and (w[1] or now) >= begin]
    if person:
        lane = Lane(WAITING_LANE, len(person))
        merged = _merge(person, now)
        for a, b in merged:
            left, width = span(a, b)
            words = f"waited {_said(b - a)} for a person, from {offset_words(a - start)}"
            lane.waits.append(Mark(left, width, "waiting", words))
        lanes.append(lane)
    slot_ms = max((end - begin) // SLOTS, 1)
    kinds, counted = timeline_reads.counted(attempt, where, (begin, end, now), slot_ms)
    drawn = timeline_reads.calls_of(
        attempt, where, (begin, end, now), [k.name for k in kinds if k.count <= MAX_MARKS]
    )
    for kind in kinds:
        lane = Lane(kind.name, kind.count, failed=kind.failed)
        if kind.count > MAX_MARKS:
            lane.bucketed = True
            counts, failed = counted[kind.name]
            lane.marks = _buckets(counts, failed, begin, end, slot_ms, start, query or {})
        else:
            for call in drawn[kind.name]:
                _draw(lane, call, waits.get(call.id), span, start, now)
        lanes.append(lane)
    n = (end - begin) // step
    ticks = [Tick(offset_words(lo + i * step), round(i * WIDTH / n, 2)) for i in range(n + 1)]
    return Timeline(
        begin=begin,
        end=end,
        turn_start=start,
        lanes=lanes,
        ticks=ticks,
        zooms=zooms(first - start, last - start, (lo, hi), window, query or {}),
        zoomed=window != (None, None),
        calls=sum(k.count for k in kinds),
        step=step,
        slot_ms=slot_ms,
    )


def _said(ms: int) -> str:
    return millis(ms) if ms else "0 s"


def _merge(windows: Iterable[Window], now: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted((a, b if b is not None else now) for a, b in windows):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


Span = Callable[[int, int], tuple[float, float]]


def _draw(lane: Lane, call: Call, wait: Window | None, span: Span, start: int, now: int) -> None:
    href = reverse("tool", args=[call.id])
    ran_from = call.started if call.started is not None else call.proposed
    if wait is not None:
        a, b = wait[0], wait[1] if wait[1] is not None else now
        left, width = span(a, b)
        lane.waits.append(
            Mark(left, width, "waiting", f"{call.label}: waited {_said(b - a)} for a person", href)
        )
        if call.started is None:
            ran_from = b
    if call.approval in (ToolApproval.DENIED, ToolApproval.CANCELLED) and call.started is None:
        return  # it never ran
    ran_to = call.completed if call.completed is not None else now
    left, width = span(ran_from, max(ran_to, ran_from))
    status = call.status if call.status in ToolStatus.values else "running"
    words = f"{call.label} ({status}), from {offset_words(ran_from - start)}"
    if call.completed is not None:
        words += f", ran {_said(max(call.completed - ran_from, 0))}"
    lane.marks.append(Mark(left, width, status, words, href))


def _buckets(
    counts: list[int],
    failed: list[int],
    begin: int,
    end: int,
    slot_ms: int,
    start: int,
    query: dict[str, str],
) -> list[Mark]:
    """A busy lane's marks: a slot's calls (each call counts in every slot it was alive in) and
    its failed ones (counted where they ended), as ``timeline_reads.counted`` counts them."""
    busiest = max(counts, default=0) or 1
    marks = []
    width = round(WIDTH * slot_ms / (end - begin), 2)
    for slot, n in enumerate(counts):
        if not n:
            continue
        a = begin + slot * slot_ms
        shade = 1 + min(3, (4 * n - 1) // busiest)
        css = "failed" if failed[slot] == n else f"density-{shade}"
        calls_said = f"{n} call{'s' if n != 1 else ''}"
        words = (
            f"{failed[slot]} of {calls_said} failed"
            if failed[slot]
            else f"{calls_said}, none failed"
        )
        words += f", from {offset_words(a - start)} to {offset_words(a + slot_ms - start)}"
        around = (max(a - start - 5 * slot_ms, 0), a - start + 6 * slot_ms)
        href = "?" + urlencode({**query, "from": around[0], "to": around[1]})
        marks.append(
            Mark(round(slot * width, 2), width, css, words + " (zoom in)", href, n, failed[slot])
        )
    return marks


def zooms(
    first: int,
    last: int,
    shown: tuple[int, int],
    window: tuple[int | None, int | None],
    query: dict[str, str],
) -> list[Zoom]:
    """Preset windows: the whole turn, its first and last minutes, and out from here."""

    def link(lo: int | None, hi: int | None) -> str:
        extra = {} if lo is None else {"from": lo, "to": hi}
        return "?" + urlencode({**query, **extra})

    whole = window == (None, None)
    found = [Zoom("Whole turn", link(None, None), whole)]
    span = last - first
    for minutes in (1, 5, 15, 60):
        size = minutes * MINUTE
        if size * 2 > span:
            break
        found.append(
            Zoom(f"First {minutes} min", link(first, first + size), window == (first, first + size))
        )
        found.append(
            Zoom(f"Last {minutes} min", link(last - size, last), window == (last - size, last))
        )
    if not whole:
        middle, size = (shown[0] + shown[1]) // 2, shown[1] - shown[0]
        lo, hi = max(middle - size, first), min(middle + size, last)
        found.append(
            Zoom("Zoom out", link(lo, hi) if (lo, hi) != (first, last) else link(None, None))
        )
    return found
