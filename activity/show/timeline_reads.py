"""What a turn's timeline is drawn from (activity/show/timeline.py), read so that its cost does
not grow with the turn: the database finds the turn's extent, counts each kind's calls in the
window, and counts a busy kind's calls into time slots; only a lane of at most ``MAX_MARKS``
calls is read call by call, and each wait for a person (one row per prompt).

A call's kind is its ``agent_kind``, else its tool's name, else "other"; it ends when it
completed, else when it started, else when it was proposed (``KIND``, ``ENDED``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import BigIntegerField, Count, F, Max, Min, Q, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest, Least, NullIf

from activity.core.contract import ToolStatus
from activity.models import InferenceAttempt, Prompt, ToolActivity
from activity.show.timing import Window

KIND = Coalesce(NullIf("agent_kind", Value("")), NullIf("tool_name", Value("")), Value("other"))
ENDED = Coalesce("completed_at", "started_at", "proposed_at")
FAILED = Q(status=ToolStatus.FAILED)
INT = BigIntegerField()


@dataclass(frozen=True)
class Call:
    id: str
    kind: str
    status: str
    approval: str
    proposed: int
    started: int | None
    completed: int | None
    label: str


@dataclass(frozen=True)
class Kind:
    """A lane's calls in the window: how many, and how many of them failed."""

    name: str
    count: int
    failed: int


def calls(attempt: InferenceAttempt, where: Q | None) -> QuerySet[ToolActivity]:
    return attempt.tool_activities.filter(where or Q())


def extent(attempt: InferenceAttempt, where: Q | None) -> tuple[int | None, int | None]:
    """When the turn's first call was proposed and its last one ended (None without calls)."""
    found = calls(attempt, where).aggregate(first=Min("proposed_at"), last=Max(ENDED))
    return found["first"], found["last"]


def shown(
    attempt: InferenceAttempt, where: Q | None, begin: int, end: int, now: int
) -> QuerySet[ToolActivity]:
    """The calls alive in the window: proposed before its end, not ended before its start."""
    alive = Q(completed_at__gte=begin) | (Q(completed_at__isnull=True) if now >= begin else Q())
    return calls(attempt, where).filter(Q(proposed_at__lte=end) & alive)


def calls_of(
    attempt: InferenceAttempt,
    where: Q | None,
    window: tuple[int, int, int],
    names: list[str],
) -> dict[str, list[Call]]:
    """The calls of kinds ``names`` in the window (``begin``, ``end``, ``now``), by kind, in
    the order they were made: one query of plain values."""
    if not names:
        return {}
    rows = shown(attempt, where, *window).annotate(kind=KIND).filter(kind__in=names)
    rows = rows.order_by("position")
    fields = (
        "id",
        "kind",
        "tool_name",
        "status",
        "approval",
        "proposed_at",
        "started_at",
        "completed_at",
        "agent_label",
    )
    found: dict[str, list[Call]] = {name: [] for name in names}
    for i, k, t, s, a, p, st, c, label in rows.values_list(*fields):
        found[k].append(Call(str(i), k, s, a, p, st, c, label or t))
    return found


def counted(
    attempt: InferenceAttempt, where: Q | None, window: tuple[int, int, int], slot_ms: int
) -> tuple[list[Kind], dict[str, tuple[list[int], list[int]]]]:
    """Each kind's calls in the window (``begin``, ``end``, ``now``), the busiest first (then by
    name), and each kind's calls counted into the window's slots (a call counts in each slot it
    was alive in) with its failed ones (each in the slot where it ended). One query: the
    database gives, per kind, how many calls span each (first, last) pair of slots, and how
    many of those failed; a running sum over the slots makes the counts."""
    begin, end, now = window
    slots = -(-(end - begin) // slot_ms)
    alive_from = Greatest(F("proposed_at") - begin, Value(0), output_field=INT)
    until = Least(Coalesce("completed_at", Value(now)), Value(end), output_field=INT) - begin
    ended_in = Greatest(until - 1, alive_from, output_field=INT) / slot_ms
    rows = (
        shown(attempt, where, *window)
        .annotate(kind=KIND, last=Least(ended_in, Value(slots - 1), output_field=INT))
        .annotate(first=Least(alive_from / slot_ms, F("last"), output_field=INT))
        .order_by()
        .values("kind", "first", "last")
        .annotate(n=Count("id"), failed=Count("id", filter=FAILED))
    )
    steps: dict[str, list[int]] = {}
    totals: dict[str, int] = {}
    found: dict[str, tuple[list[int], list[int]]] = {}
    for row in rows:
        totals[row["kind"]] = totals.get(row["kind"], 0) + row["n"]
        step = steps.setdefault(row["kind"], [0] * (slots + 1))
        _, failed = found.setdefault(row["kind"], ([0] * slots, [0] * slots))
        step[row["first"]] += row["n"]
        step[row["last"] + 1] -= row["n"]
        failed[row["last"]] += row["failed"]
    kinds = []
    for name, step in steps.items():
        counts, failed = found[name]
        running = 0
        for slot in range(slots):
            running += step[slot]
            counts[slot] = running
        kinds.append(Kind(name, totals[name], sum(failed)))
    return sorted(kinds, key=lambda k: (-k.count, k.name)), found


def waits_of(attempt: InferenceAttempt) -> dict[str, Window]:
    """Each call's wait for a person (its latest prompt), and standalone prompts under ""."""
    found: dict[str, Window] = {}
    prompts = Prompt.objects.filter(attempt=attempt).order_by("opened_at")
    for tool, opened, closed, answered in prompts.values_list(
        "tool_id", "opened_at", "closed_at", "answered_at"
    ):
        end = (
            closed
            if closed is not None
            else (int(answered.timestamp() * 1000) if answered is not None else None)
        )
        found[str(tool) if tool else f"standalone-{opened}"] = (opened, end)
    return found
