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

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from activity.models import Chat, Comment, InferenceAttempt, Message, Prompt, ToolActivity
from activity.review import filters

LIVE_ROWS = 300  # a live page shows a turn's latest calls; the turn page shows them all


@dataclass
class Turn:
    attempt: InferenceAttempt
    reply: Message | None
    rows: list[ToolActivity] = field(default_factory=list)
    standalone: list[Prompt] = field(default_factory=list)  # prompts about no tool row
    earlier: int = 0  # calls older than the ones shown


@dataclass
class Changes:
    chat: Chat
    since: int
    version: int
    meta: bool
    new_turns: list[Turn]
    turns: list[Turn]  # changed turns the page already shows: their heads are re-rendered
    replies: list[Message]
    new_rows: list[ToolActivity]
    rows: list[ToolActivity]
    # The filter bar at ``version``, when a row or a prompt changed since (counts, jumps); a
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
    a filtered page, activity/review/filters.py)."""
    result = {a.pk: Turn(attempt=a, reply=None) for a in attempts}
    if not result:
        return []
    for reply in Message.objects.filter(attempt__in=result):
        result[reply.attempt_id].reply = reply
    rows = ToolActivity.objects.filter(attempt__in=result, created_version__lte=upto)
    rows = rows.filter(where or Q()).annotate(
        newest=Window(RowNumber(), partition_by=[F("attempt_id")], order_by=F("position").desc()),
        calls=Window(Count("id"), partition_by=[F("attempt_id")]),
    )
    for row in with_prompts(list(rows.filter(newest__lte=LIVE_ROWS).order_by("position"))):
        turn = result[row.attempt_id]
        turn.rows.append(row)
        turn.earlier = row.calls - min(row.calls, LIVE_ROWS)  # type: ignore[attr-defined]
    standalone = Prompt.objects.filter(
        attempt__in=result, tool__isnull=True, created_version__lte=upto
    ).select_related("answered_by")
    for prompt in standalone:
        result[prompt.attempt_id].standalone.append(prompt)
    return list(result.values())


def page(chat: Chat, chosen: filters.CallFilter) -> Page:
    """The chat page at the chat's version, with the calls ``chosen`` keeps."""
    version = chat.version
    attempts = chat.attempts.filter(created_version__lte=version)
    where = chosen.where() if chosen.active else None
    bar = filters.panel(chat.pk, chosen, version, LIVE_ROWS)
    return Page(version, turns(chat, attempts, version, where), bar)


def changes(chat_id: uuid.UUID, since: int) -> Changes:
    chat = Chat.objects.select_related("workspace").get(pk=chat_id)
    upto = chat.version
    # Only the kinds that changed since are looked for. A chat whose version is past every
    # kind's was written by code that keeps no kind versions (a rolling upgrade, a
    # downgrade and back): then everything is.
    kinds = (chat.meta_version, chat.turns_version, chat.replies_version, chat.rows_version)
    if upto > max(kinds):
        since_kind = dict.fromkeys(("turns", "replies", "rows"), upto)
    else:
        since_kind = {
            "turns": chat.turns_version,
            "replies": chat.replies_version,
            "rows": chat.rows_version,
        }
    changed: list[InferenceAttempt] = []
    if since_kind["turns"] > since:
        changed = list(chat.attempts.filter(version__gt=since, created_version__lte=upto))
    new_ids = {a.pk for a in changed if a.created_version > since}
    new_turns = turns(chat, [a for a in changed if a.pk in new_ids], upto)
    old_turns = turns_heads(chat, [a for a in changed if a.pk not in new_ids], upto)
    replies: list[Message] = []
    if since_kind["replies"] > since:
        replies = list(
            Message.objects.filter(chat=chat, version__gt=since).exclude(attempt__in=new_ids)
        )
    rows_list: list[ToolActivity] = []
    if since_kind["rows"] > since:
        rows = ToolActivity.objects.filter(
            chat=chat, version__gt=since, created_version__lte=upto
        ).exclude(attempt__in=new_ids)
        rows_list = with_prompts(list(rows.order_by("position")))
    panel = None
    if since_kind["rows"] > since:  # a prompt moves rows_version too (activity/live/work.py)
        panel = filters.panel(chat.pk, filters.unfiltered(), upto, LIVE_ROWS)
    return Changes(
        chat=chat,
        since=since,
        version=upto,
        meta=chat.meta_version > since,
        new_turns=new_turns,
        turns=old_turns,
        replies=replies,
        new_rows=[r for r in rows_list if r.created_version > since],
        rows=[r for r in rows_list if r.created_version <= since],
        panel=panel,
    )


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
