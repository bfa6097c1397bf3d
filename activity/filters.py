"""Finding calls in a long run: filter a run's calls by status, kind and text, on the server.

The filter lives in the page's query string (``?status=failed&kind=execute&q=pytest``), so a
filtered view is a link anyone can share, works without JavaScript, and survives a reload. The
same filter narrows the chat page (each turn shows its matching calls) and the turn page.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django import forms
from django.db.models import Count, Q, QuerySet

from activity import dom
from activity.contract import ToolApproval, ToolStatus
from activity.models import Prompt, ToolActivity

QUERY_CHARS = 200
WAITING = "waiting"  # not a contract status: a call whose prompt waits for a person
OTHER_KIND = "other"  # a call whose agent named no kind
# What each status is called in the filter, in the order a person scans them.
STATUS_WORDS = {
    WAITING: "waiting for a person",
    ToolStatus.FAILED.value: "failed",
    ToolStatus.RUNNING.value: "running",
    ToolStatus.PROPOSED.value: "proposed",
    ToolStatus.COMPLETED.value: "completed",
    ToolStatus.CANCELLED.value: "cancelled",
}
TEXT_FIELDS = (
    "agent_label",
    "agent_summary",
    "agent_input",
    "agent_output",
    "error_message",
    "tool_name",
)


class CallFilter(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *STATUS_WORDS.items()])
    kind = forms.CharField(required=False, max_length=64)
    q = forms.CharField(required=False, max_length=QUERY_CHARS, strip=True, label="Find")

    @property
    def active(self) -> bool:
        return bool(self.is_valid() and any(self.cleaned_data.values()))

    @property
    def problem(self) -> str:
        """Why the filter in the URL cannot apply (the page then shows every call), or ""."""
        if not self.is_bound or self.is_valid():
            return ""
        said = {
            "status": "no such status",
            "kind": "a kind is at most 64 characters",
            "q": f"the text to find is at most {QUERY_CHARS} characters",
        }
        return "This filter cannot apply: " + "; ".join(said[name] for name in self.errors) + "."

    def where(self, *, skip: str = "") -> Q:
        """The rows the filter keeps (``skip`` one facet, to count that facet's values)."""
        if not self.is_valid():
            return Q(pk__in=[])
        f = self.cleaned_data
        where = Q()
        if f["status"] and skip != "status":
            where &= status_q(f["status"])
        if f["kind"] and skip != "kind":
            where &= kind_q(f["kind"])
        if f["q"]:
            text = Q()
            for name in TEXT_FIELDS:
                text |= Q(**{f"{name}__icontains": f["q"]})
            where &= text
        return where

    def query(self, **changes: str) -> str:
        """The query string of this filter with ``changes`` (an empty value drops a key)."""
        values = dict(self.cleaned_data) if self.is_valid() else {}
        values.update(changes)
        return urlencode({k: v for k, v in values.items() if v})


def status_q(status: str) -> Q:
    if status == WAITING:
        return Q(approval=ToolApproval.PENDING)
    return Q(status=status)


def kind_q(kind: str) -> Q:
    if kind == OTHER_KIND:
        return Q(agent_kind__isnull=True) | Q(agent_kind__in=["", OTHER_KIND])
    return Q(agent_kind=kind)


@dataclass
class Facet:
    value: str
    words: str
    count: int
    chosen: bool
    query: str  # the page's query string with this value chosen (or unchosen)


@dataclass
class Facets:
    """What the filter bar offers: each status and kind with how many calls have it."""

    statuses: list[Facet] = field(default_factory=list)
    kinds: list[Facet] = field(default_factory=list)
    total: int = 0  # calls in the run
    matching: int = 0  # calls the whole filter keeps


def facets(calls: QuerySet[ToolActivity], chosen: CallFilter) -> Facets:
    """Counts for the filter bar, faceted: each status counted with the kind and text chosen,
    each kind with the status and text chosen. Four aggregate queries, any number of calls."""
    f = chosen.cleaned_data if chosen.is_valid() else {}
    result = Facets(total=calls.count())
    by_status = calls.filter(chosen.where(skip="status")).aggregate(
        **{
            value: Count("pk", filter=status_q(value)) for value in STATUS_WORDS if value != WAITING
        },
        waiting=Count("pk", filter=status_q(WAITING)),
    )
    for value, words in STATUS_WORDS.items():
        picked = f.get("status") == value
        n = by_status[value]
        if n or picked:
            result.statuses.append(
                Facet(value, words, n, picked, chosen.query(status="" if picked else value))
            )
    kinds = calls.filter(chosen.where(skip="kind")).values("agent_kind").annotate(n=Count("pk"))
    counted: dict[str, int] = {}
    for entry in kinds:
        name = entry["agent_kind"] or OTHER_KIND
        counted[name] = counted.get(name, 0) + entry["n"]
    if f.get("kind") and f["kind"] not in counted:
        counted[f["kind"]] = 0
    for name in sorted(counted, key=lambda k: (-counted[k], k)):
        picked = f.get("kind") == name
        result.kinds.append(
            Facet(name, name, counted[name], picked, chosen.query(kind="" if picked else name))
        )
    result.matching = calls.filter(chosen.where()).count() if chosen.active else result.total
    return result


def open_prompt(chat_id: uuid.UUID) -> Prompt | None:
    """The run's oldest prompt still waiting for an answer."""
    waiting = Prompt.objects.filter(
        chat_id=chat_id, closed_at__isnull=True, answered_at__isnull=True
    )
    return waiting.order_by("opened_at").first()


@dataclass
class Jump:
    """A link to something on a long page that may not show it: its anchor on this page, else
    the filtered view that does."""

    href: str
    count: int


def jumps(
    chat_id: uuid.UUID, chosen: CallFilter, shown: list[ToolActivity], counts: Facets
) -> tuple[Jump | None, Jump | None]:
    """Where "next failure" and "the waiting prompt" lead from this page."""
    failures = next((f.count for f in counts.statuses if f.value == ToolStatus.FAILED), 0)
    failure = None
    first = next((r for r in shown if r.status == ToolStatus.FAILED), None)
    if first is not None:
        failure = Jump(f"#{dom.tool(first.pk)}", failures)
    elif failures:
        failure = Jump(f"?{chosen.query(status=ToolStatus.FAILED.value)}", failures)
    prompt = open_prompt(chat_id)
    waiting = None
    if prompt is not None:
        on_page = prompt.tool_id is None or any(r.pk == prompt.tool_id for r in shown)
        href = f"#prompt-{prompt.pk}" if on_page else f"?{CallFilter({'status': WAITING}).query()}"
        waiting = Jump(href, 1)
    return failure, waiting
