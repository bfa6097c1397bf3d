"""What a chat page and its pushes show, loaded in a fixed number of queries.

The page shows a chat at one version V: every object created at or before V (``created_version``
≤ V), in its latest state, and its filter bar's counts and jumps over those same objects. A push
from version S brings a page to the chat's current version T: what changed after S, with what
was created after S marked new (it is appended, not morphed), and the filter bar drawn again
at T when a row or a prompt changed. Objects created after T are left for the next push, so
nothing is ever appended twice; what changes after T is in the next push too, so each region
ends as a fresh load at the last version draws it (README "Live updates").
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Max, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from activity.core.contract import ToolApproval
from activity.core.masks.spans import JUNCTION_CHARS, PEM_CHARS
from activity.models import Chat, Comment, InferenceAttempt, Message, Prompt, ToolActivity
from activity.review import filters
from activity.review.transcript import Segment, interleave
from activity.show import timing

# A run's page shows the run's latest calls (and every call waiting for a person) whatever the
# run's length; each turn says how many of its calls it leaves to its turn page.
LIVE_ROWS = 100
# How far back from its end a reply's stored text may change when more arrives: a secret split
# across two chunks is masked where they meet (masking.mask_junction), at most this many bytes
# back. A push draws again the text of every segment that reaches into that stretch.
REWRITTEN_BYTES = 4 * (JUNCTION_CHARS + PEM_CHARS)


@dataclass
class Turn:
    attempt: InferenceAttempt
    reply: Message | None
    rows: list[ToolActivity] = field(default_factory=list)
    standalone: list[Prompt] = field(default_factory=list)  # prompts about no tool row
    earlier: int = 0  # calls older than the ones shown
    # The reply's text and the calls shown, in the order they happened (transcript.interleave).
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Flow:
    """What changed in the reply and calls of a turn a page shows (its ``segments``), as a push
    brings it: the text of the page's segments that may have changed, the new calls made at the
    page's last segment (``at``), and the new segments after it. Rows that changed are morphed
    by their own ids, wherever they stand (``Changes.rows``)."""

    attempt_id: uuid.UUID
    reply_id: uuid.UUID  # the turn's reply: where new segments go
    reply: Message | None  # the reply, when it changed: its thinking is drawn again
    texts: list[Segment]  # segments on the page whose text is drawn again (their rows are not)
    at: int  # the page's last segment: where ``added`` go
    added: list[ToolActivity]
    segments: list[Segment]  # new segments, appended in order


@dataclass
class Changes:
    chat: Chat
    since: int
    version: int
    meta: bool
    new_turns: list[Turn]
    turns: list[Turn]  # changed turns the page already shows: their heads are re-rendered
    flows: list[Flow]  # turns the page shows whose reply changed or that made new calls
    rows: list[ToolActivity]  # rows the page shows that changed
    # The filter bar at ``version``, when what it counts changed since (counts, jumps); a
    # push is one render for every viewer, so it is the bar of a page with no filter.
    panel: filters.Panel | None = None


@dataclass
class Page:
    """What a chat page shows of its chat, all at one ``version``: its turns (rows, prompts,
    replies) and its filter bar."""

    version: int
    turns: list[Turn]
    panel: filters.Panel


def with_prompts(rows: list[ToolActivity]) -> list[ToolActivity]:
    """Attach what a row shows beside its own columns, in three queries at most for any number
    of rows: its latest prompt as ``row.prompt`` (open, it is the row's ``live`` state; answered
    or closed, it carries the decision) and its comments as ``row.notes``, with their mentions."""
    ids = [r.pk for r in rows]
    prompts = Prompt.objects.filter(tool__in=ids).select_related("answered_by")
    by_row = {p.tool_id: p for p in prompts.order_by("opened_at")}
    notes: dict[uuid.UUID, list[Comment]] = defaultdict(list)
    comments = Comment.objects.filter(tool__in=ids).select_related("author")
    for comment in comments.prefetch_related("mentions"):
        notes[comment.tool_id].append(comment)
    for row in rows:
        row.prompt = by_row.get(row.pk)  # type: ignore[attr-defined]
        row.notes = notes[row.pk]  # type: ignore[attr-defined]
    return rows


def turns(
    chat: Chat, attempts: Iterable[InferenceAttempt], upto: int, where: Q | None = None
) -> list[Turn]:
    """Whole turns as the page shows them at version ``upto`` (only the calls ``where`` keeps:
    a filtered page, activity/review/filters.py): the latest ``LIVE_ROWS`` calls of these turns
    and every call waiting for a person, each turn counting the calls it leaves out (``earlier``).
    A turn none of whose calls is shown shows its reply from its last call on."""
    result = {a.pk: Turn(attempt=a, reply=None) for a in attempts}
    if not result:
        return []
    for reply in Message.objects.filter(attempt__in=result):
        result[reply.attempt_id].reply = reply
    timing.waits([turn.attempt for turn in result.values()])  # each head's time, one query
    rows = ToolActivity.objects.filter(attempt__in=result, created_version__lte=upto)
    rows = rows.filter(where or Q())
    counted = rows.order_by().values("attempt_id").annotate(n=Count("id"), last=Max("text_offset"))
    last: dict[uuid.UUID, int] = {}
    for group in counted:
        result[group["attempt_id"]].earlier = group["n"]
        last[group["attempt_id"]] = group["last"] or 0
    for row in with_prompts(list(on_page(rows).order_by("position"))):
        turn = result[row.attempt_id]
        turn.rows.append(row)
        turn.earlier -= 1
    standalone = Prompt.objects.filter(
        attempt__in=result, tool__isnull=True, created_version__lte=upto
    ).select_related("answered_by")
    for prompt in standalone:
        result[prompt.attempt_id].standalone.append(prompt)
    for pk, turn in result.items():
        markdown = turn.reply.markdown if turn.reply else ""
        start = 0
        if turn.earlier:
            start = (turn.rows[0].text_offset or 0) if turn.rows else last.get(pk, 0)
        turn.segments = interleave(markdown, turn.rows, min(start, len(markdown.encode())))
    return list(result.values())


def on_page(calls: QuerySet[ToolActivity], which: Q | None = None) -> QuerySet[ToolActivity]:
    """Those of ``calls`` a run's page shows: the latest ``LIVE_ROWS``, and every one waiting
    for a person (its prompt stays in reach however much came after it); with ``which``, only
    those of them it picks. The latest are those from the ``LIVE_ROWS``-th newest position on,
    found through the chat's (chat, position) index: the cost does not grow with the run."""
    newest = calls.order_by("-position").values("position")[LIVE_ROWS - 1 : LIVE_ROWS]
    cutoff = Coalesce(Subquery(newest), Value(0))
    shown = calls.filter(Q(position__gte=cutoff) | Q(approval=ToolApproval.PENDING))
    return shown.filter(which) if which is not None else shown


def page(chat: Chat, chosen: filters.CallFilter) -> Page:
    """The chat page at the chat's version, with the calls ``chosen`` keeps."""
    version = chat.version
    attempts = chat.attempts.filter(created_version__lte=version)
    where = chosen.where() if chosen.active else None
    bar = filters.panel(chat.pk, chosen, version, on_page)
    return Page(version, turns(chat, attempts, version, where), bar)


def changes(chat_id: uuid.UUID, since: int) -> Changes:
    chat = Chat.objects.select_related("workspace", "resumed_by", "stopped_by").get(pk=chat_id)
    upto = chat.version
    # Only the kinds that changed since are looked for. A chat whose version is past every
    # kind's was written by code that keeps no kind versions (a rolling upgrade, a
    # downgrade and back): then everything is.
    kinds = (chat.meta_version, chat.turns_version, chat.replies_version, chat.rows_version)
    if upto > max(kinds):
        since_kind = dict.fromkeys(("turns", "replies", "rows", "facets"), upto)
    else:
        since_kind = {
            "turns": chat.turns_version,
            "replies": chat.replies_version,
            "rows": chat.rows_version,
            "facets": chat.facets_version,
        }
    changed: list[InferenceAttempt] = []
    if since_kind["turns"] > since:
        changed = list(chat.attempts.filter(version__gt=since, created_version__lte=upto))
    new_ids = {a.pk for a in changed if a.created_version > since}
    new_turns = turns(chat, [a for a in changed if a.pk in new_ids], upto)
    old_turns = turns_heads(chat, [a for a in changed if a.pk not in new_ids], upto)
    replies: dict[uuid.UUID, Message] = {}
    if since_kind["replies"] > since:
        changed_replies = Message.objects.filter(chat=chat, version__gt=since)
        replies = {r.attempt_id: r for r in changed_replies.exclude(attempt__in=new_ids)}
    rows_list: list[ToolActivity] = []
    if since_kind["rows"] > since:
        rows = ToolActivity.objects.filter(
            chat=chat, version__gt=since, created_version__lte=upto
        ).exclude(attempt__in=new_ids)
        rows_list = with_prompts(list(rows.order_by("position")))
    new_rows = [r for r in rows_list if r.created_version > since]
    panel = None
    if since_kind["facets"] > since:  # a call made, a status, a prompt (activity/live/work.py)
        panel = filters.panel(chat.pk, filters.unfiltered(), upto, on_page)
    return Changes(
        chat=chat,
        since=since,
        version=upto,
        meta=chat.meta_version > since,
        new_turns=new_turns,
        turns=old_turns,
        flows=flows(since, replies, new_rows),
        rows=[r for r in rows_list if r.created_version <= since],
        panel=panel,
    )


def flows(
    since: int, replies: dict[uuid.UUID, Message], new_rows: list[ToolActivity]
) -> list[Flow]:
    """What a push changes in the reply and calls of each turn the page shows (``Flow``).

    The page's last segment is where its last call was made (the greatest ``text_offset`` of
    the turn's rows created by ``since``; the start when there is none): new calls made there
    join its table, the rest of the reply and the later calls are new segments. When the reply
    changed, the text of the page's segments that reach into the last ``REWRITTEN_BYTES``
    before the last one is drawn again too; when it did not, every new call was made at its
    end, and its text is not read."""
    added: dict[uuid.UUID, list[ToolActivity]] = defaultdict(list)
    for row in new_rows:
        added[row.attempt_id].append(row)
    result = []
    for attempt_id in [*replies, *(a for a in added if a not in replies)]:
        reply = replies.get(attempt_id)
        old = ToolActivity.objects.filter(attempt=attempt_id, created_version__lte=since)
        last = old.aggregate(at=Max("text_offset"))["at"] or 0
        texts: list[Segment] = []
        if reply is None:  # the text is as the page shows it: the calls were made at its end
            tail = [Segment(last)]
            for row in added[attempt_id]:
                if (row.text_offset or 0) > tail[-1].offset:
                    tail.append(Segment(row.text_offset or 0))
                tail[-1].rows.append(row)
        else:
            last = min(last, len(reply.markdown.encode()))
            tail = interleave(reply.markdown, added[attempt_id], last)
            texts = [*page_segments(old, reply.markdown, last), tail[0]]
        reply_id = reply.pk if reply else added[attempt_id][0].assistant_message_id
        result.append(Flow(attempt_id, reply_id, reply, texts, last, tail[0].rows, tail[1:]))
    return result


def page_segments(old: QuerySet[ToolActivity], markdown: str, last: int) -> list[Segment]:
    """The segments before ``last`` of a page that shows the calls ``old``, text only, from the
    one that holds the byte ``REWRITTEN_BYTES`` before ``last`` (a page that shows only a
    turn's latest calls may lack the first of them: a push to it skips what it lacks)."""
    reach = last - REWRITTEN_BYTES
    before = old.filter(text_offset__lt=last)
    first = 0
    if reach > 0:
        first = before.filter(text_offset__lte=reach).aggregate(at=Max("text_offset"))["at"] or 0
        before = before.filter(text_offset__gt=reach)
    found = before.values_list("text_offset", flat=True)
    offsets = sorted({first, *(offset for offset in found if offset is not None)})
    data = markdown.encode()
    ends = [*offsets[1:], last]
    return [
        Segment(start, text=data[start:end].decode("utf-8", "replace"))
        for start, end in zip(offsets, ends, strict=True)
        if start < last
    ]


def turns_heads(chat: Chat, attempts: list[InferenceAttempt], upto: int) -> list[Turn]:
    """Turns whose head changed: their standalone prompts, without their rows."""
    result = {a.pk: Turn(attempt=a, reply=None) for a in attempts}
    standalone: dict[uuid.UUID, list[Prompt]] = defaultdict(list)
    if result:
        for prompt in Prompt.objects.filter(
            attempt__in=result, tool__isnull=True, created_version__lte=upto
        ).select_related("answered_by"):
            standalone[prompt.attempt_id].append(prompt)
    for pk, turn in result.items():
        turn.standalone = standalone[pk]
    return list(result.values())


def inbox(chats: QuerySet[Chat]) -> list[Prompt]:
    """Every prompt still waiting for a person in these chats, oldest first."""
    waiting = Prompt.objects.filter(
        chat__in=chats, closed_at__isnull=True, answered_at__isnull=True
    ).select_related("chat", "chat__workspace", "tool")
    return list(waiting.order_by("opened_at"))
