"""What a turn's timeline is drawn from (activity/show/timeline.py): each call's kind, status and
times, and each wait for a person, read as plain values in one query each."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from activity.models import InferenceAttempt, Prompt
from activity.show.timing import Window


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


def calls_of(attempt: InferenceAttempt, where: Q | None = None) -> list[Call]:
    """Every call of the turn as the timeline needs it: one query of plain values."""
    rows = attempt.tool_activities.filter(where or Q()).order_by("position")
    fields = (
        "id",
        "agent_kind",
        "tool_name",
        "status",
        "approval",
        "proposed_at",
        "started_at",
        "completed_at",
        "agent_label",
    )
    return [
        Call(str(i), k or t or "other", s, a, p, st, c, label or t)
        for i, k, t, s, a, p, st, c, label in rows.values_list(*fields)
    ]


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
