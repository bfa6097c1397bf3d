"""Finding calls in a long run: filter a run's calls by status, kind and text, on the server.

The filter lives in the page's query string (``?status=failed&kind=execute&q=pytest``), so a
filtered view is a link anyone can share, works without JavaScript, and survives a reload. The
same filter narrows the chat page (each turn shows its matching calls) and the turn page.

The chat page's filter bar (``panel``) is a live region like the rows: drawn from the chat at
the page's version, and drawn again at the new version by every push that changed a row or a
prompt (README "Live updates"), so its counts, chips and jumps never lag behind the rows. A push
is rendered once for every viewer, unfiltered: a filtered page fetches its regions over HTTP
instead (static/koruweb/review/long.js).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.db.models import Count, Q, QuerySet

from activity.core.contract import ToolApproval, ToolStatus
from activity.models import Prompt, ToolActivity
from activity.show import dom

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
        return where & self.text()

    def text(self) -> Q:
        """The calls whose text holds what is to be found (every call when nothing is)."""
        found = self.cleaned_data.get("q") if self.is_valid() else ""
        text = Q()
        for name in TEXT_FIELDS if found else ():
            text |= Q(**{f"{name}__icontains": found})
        return text

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


def counting(where: Q) -> Count:
    return Count("pk", filter=where) if where else Count("pk")


def facets(calls: QuerySet[ToolActivity], chosen: CallFilter) -> Facets:
    """Counts for the filter bar, faceted: each status counted with the kind and text chosen,
    each kind with the status and text chosen. One aggregate query, any number of calls: the
    calls grouped by kind, each group counting its calls, those the chosen status and text keep,
    and those of each status the text keeps. A filter that cannot apply counts as none, as the
    page then shows every call."""
    f = chosen.cleaned_data if chosen.is_valid() else {}
    text = chosen.text()
    status = status_q(f["status"]) if f.get("status") else Q()
    by_kind: Iterable[Mapping[str, Any]] = (
        calls.order_by()
        .values("agent_kind")
        .annotate(
            calls=Count("pk"),
            kept=counting(status & text),
            **{f"n_{value}": counting(status_q(value) & text) for value in STATUS_WORDS},
        )
    )
    kind = f.get("kind") or ""
    by_status = dict.fromkeys(STATUS_WORDS, 0)
    counted: dict[str, int] = {}
    result = Facets()
    for group in by_kind:
        name = group["agent_kind"] or OTHER_KIND
        counted[name] = counted.get(name, 0) + group["kept"]
        result.total += group["calls"]
        if not kind or name == kind:
            result.matching += group["kept"] if chosen.active else group["calls"]
            for value in STATUS_WORDS:
                by_status[value] += group[f"n_{value}"]
    for value, words in STATUS_WORDS.items():
        picked = f.get("status") == value
        if by_status[value] or picked:
            query = chosen.query(status="" if picked else value)
            result.statuses.append(Facet(value, words, by_status[value], picked, query))
    if kind:
        counted.setdefault(kind, 0)
    for name in sorted(counted, key=lambda k: (-counted[k], k)):
        picked = kind == name
        if counted[name] or picked:
            query = chosen.query(kind="" if picked else name)
            result.kinds.append(Facet(name, name, counted[name], picked, query))
    return result


def open_prompt(chat_id: uuid.UUID, upto: int | None = None) -> Prompt | None:
    """The run's oldest prompt still waiting for an answer (among those a page at version
    ``upto`` shows)."""
    waiting = Prompt.objects.filter(
        chat_id=chat_id, closed_at__isnull=True, answered_at__isnull=True
    )
    if upto is not None:
        waiting = waiting.filter(created_version__lte=upto)
    return waiting.order_by("opened_at").first()


@dataclass
class Jump:
    """A link to something on a long page that may not show it: its anchor on this page, else
    the filtered view that does."""

    href: str
    count: int


def failure_jump(chosen: CallFilter, first: uuid.UUID | None, counts: Facets) -> Jump | None:
    """To the first failure this page shows (``first``), else to the view of the failures."""
    failures = next((f.count for f in counts.statuses if f.value == ToolStatus.FAILED), 0)
    if first is not None:
        return Jump(f"#{dom.tool(first)}", failures)
    if failures:
        return Jump(f"?{chosen.query(status=ToolStatus.FAILED.value)}", failures)
    return None


def waiting_jump(prompt: Prompt | None, on_page: bool) -> Jump | None:
    """To the waiting prompt on this page, else to the view of the calls waiting for a person."""
    if prompt is None:
        return None
    href = f"#prompt-{prompt.pk}" if on_page else f"?{CallFilter({'status': WAITING}).query()}"
    return Jump(href, 1)


def jumps(
    chat_id: uuid.UUID, chosen: CallFilter, shown: list[ToolActivity], counts: Facets
) -> tuple[Jump | None, Jump | None]:
    """Where "next failure" and "the waiting prompt" lead from a page showing ``shown``."""
    first = next((r.pk for r in shown if r.status == ToolStatus.FAILED), None)
    prompt = open_prompt(chat_id)
    on_page = prompt is not None and (
        prompt.tool_id is None or any(r.pk == prompt.tool_id for r in shown)
    )
    return failure_jump(chosen, first, counts), waiting_jump(prompt, on_page)


@dataclass
class Panel:
    """The chat page's filter bar at one version of the chat: the filter, its counts and where
    its jumps lead (``long.html#filter-bar``)."""

    chosen: CallFilter
    facets: Facets
    failure: Jump | None
    waiting: Jump | None

    def context(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "facets": self.facets,
            "jump_failure": self.failure,
            "jump_waiting": self.waiting,
            "filter_query": self.chosen.query() if self.chosen.active else "",
        }


def unfiltered() -> CallFilter:
    """The filter of a page with none in its URL, as every push is rendered (once for all)."""
    return CallFilter({})


def panel(
    chat_id: uuid.UUID,
    chosen: CallFilter,
    upto: int,
    on_page: Callable[[QuerySet[ToolActivity], Q], QuerySet[ToolActivity]],
) -> Panel:
    """The filter bar of the chat page at version ``upto``, which shows the calls ``on_page``
    picks of those the filter keeps (``reads.on_page``): the counts in one aggregate query, each
    jump in one more (none for failures when the counts have none), whatever the run's
    length."""
    calls = ToolActivity.objects.filter(chat_id=chat_id, created_version__lte=upto)
    counts = facets(calls, chosen)
    kept = calls.filter(chosen.where()) if chosen.active else calls
    failures = next((f.count for f in counts.statuses if f.value == ToolStatus.FAILED), 0)
    first = first_of(on_page(kept, Q(status=ToolStatus.FAILED))) if failures else None
    prompt = open_prompt(chat_id, upto)
    here = prompt is not None and (
        prompt.tool_id is None or first_of(on_page(kept, Q(pk=prompt.tool_id))) is not None
    )
    return Panel(chosen, counts, failure_jump(chosen, first, counts), waiting_jump(prompt, here))


def first_of(calls: QuerySet[ToolActivity]) -> uuid.UUID | None:
    found: uuid.UUID | None = calls.order_by("position").values_list("pk", flat=True).first()
    return found
