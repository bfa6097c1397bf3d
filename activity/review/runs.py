"""The runs list: filters, one page at a time, with each run's counts in a fixed number of
queries."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django import forms
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet

from activity.core.contract import ToolApproval, ToolErrorCode, ToolStatus
from activity.models import Chat, InferenceAttempt, Prompt, ToolActivity, Workspace
from activity.review import reviews

PAGE_SIZE = 50
FINISHED = "end_turn"
STATUSES = [
    ("", "any status"),
    ("running", "running"),
    ("finished", "finished"),
    ("cancelled", "cancelled"),
    ("stopped", "stopped otherwise"),
]


class RunFilter(forms.Form):
    # Each select names its choice in its first option; its name says it to a screen reader.
    workspace = forms.ChoiceField(
        required=False, widget=forms.Select(attrs={"aria-label": "Workspace"})
    )
    agent = forms.ChoiceField(required=False, widget=forms.Select(attrs={"aria-label": "Agent"}))
    status = forms.ChoiceField(
        required=False, choices=STATUSES, widget=forms.Select(attrs={"aria-label": "Status"})
    )
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    waiting = forms.BooleanField(required=False, label="waiting for an answer")
    failures = forms.BooleanField(required=False, label="has failures")
    denied = forms.BooleanField(required=False, label="a person denied something")
    review = forms.ChoiceField(
        required=False, choices=reviews.STATES, widget=forms.Select(attrs={"aria-label": "Review"})
    )

    def __init__(self, data: object, chats: QuerySet[Chat]) -> None:
        super().__init__(data)  # type: ignore[arg-type]
        spaces = Workspace.objects.filter(chats__in=chats).distinct().order_by("name")
        agents = chats.exclude(agent_name="").values_list("agent_name", flat=True)
        self.fields["workspace"].choices = [("", "any workspace")] + [  # type: ignore[attr-defined]
            (w.slug, w.name) for w in spaces
        ]
        self.fields["agent"].choices = [("", "any agent")] + [  # type: ignore[attr-defined]
            (name, name) for name in sorted(set(agents))
        ]

    def apply(self, chats: QuerySet[Chat]) -> QuerySet[Chat]:
        if not self.is_valid():
            return chats.none()
        f = self.cleaned_data
        if f["workspace"]:
            chats = chats.filter(workspace__slug=f["workspace"])
        if f["agent"]:
            chats = chats.filter(agent_name=f["agent"])
        chats = chats.filter(status_filter(f["status"]))
        if f["since"]:
            chats = chats.filter(created_at__date__gte=f["since"])
        if f["until"]:
            chats = chats.filter(created_at__date__lte=f["until"])
        if f["waiting"]:
            open_prompts = Prompt.objects.filter(
                chat=OuterRef("pk"), closed_at__isnull=True, answered_at__isnull=True
            )
            chats = chats.filter(Exists(open_prompts))
        if f["failures"]:
            failed = ToolActivity.objects.filter(
                chat=OuterRef("pk"), status=ToolStatus.FAILED
            ).exclude(error_code=ToolErrorCode.PERMISSION_DENIED)  # "a person denied" is its own
            chats = chats.filter(Exists(failed))
        if f["denied"]:
            denied = Prompt.objects.filter(
                chat=OuterRef("pk"), outcome=ToolApproval.DENIED, answered_by__isnull=False
            )
            chats = chats.filter(Exists(denied))
        if f["review"]:
            chats = chats.filter(**reviews.filtered(f["review"]))
        return chats


def status_filter(status: str) -> Q:
    turn = "current_attempt__"
    match status:
        case "running":
            return Q(**{f"{turn}isnull": False, f"{turn}ended_at__isnull": True})
        case "finished":
            return Q(**{f"{turn}stop_reason": FINISHED})
        case "cancelled":
            return Q(**{f"{turn}stop_reason": "cancelled"})
        case "stopped":
            return Q(**{f"{turn}ended_at__isnull": False}) & ~Q(
                **{f"{turn}stop_reason__in": [FINISHED, "cancelled"]}
            )
    return Q()


@dataclass
class Summary:
    """What the list shows of one run beside the chat itself."""

    counts: dict[str, int] = field(default_factory=dict)
    started_at: int | None = None
    ended_at: int | None = None
    watching: int = 0  # people watching it now (activity/push/watching.py)
    waiting: int = 0  # its prompts waiting for a person (activity/push/inbox.py)

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def summaries(chats: list[Chat]) -> dict[uuid.UUID, Summary]:
    """Counts of calls by status and the time span of each run: two queries for a page."""
    result: dict[uuid.UUID, Summary] = defaultdict(Summary)
    ids = [c.pk for c in chats]
    counted = ToolActivity.objects.filter(chat__in=ids).values("chat_id", "status")
    for entry in counted.annotate(n=Count("id")):
        result[entry["chat_id"]].counts[entry["status"]] = entry["n"]
    spans = InferenceAttempt.objects.filter(chat__in=ids).values("chat_id")
    for span in spans.annotate(first=Min("started_at"), last=Max("ended_at")):
        summary = result[span["chat_id"]]
        summary.started_at, summary.ended_at = span["first"], span["last"]
    return result
