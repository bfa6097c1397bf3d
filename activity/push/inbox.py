"""Needs you: what waits for a person, on every page — the count on *Inbox*, the tab title, a
spoken line for each new prompt, and the runs list's lines, live.

Two kinds of message go out after a committed change (``announce``), each rendered once for
everyone who receives it; what differs per person is the page's to work out (needs.js):

- ``inbox.changed`` to ``groups.inbox(W)`` and ``groups.INBOX_ALL`` (the people who may answer
  in workspace W: their inbox pages re-render, their needs sockets pass on ``"needs"``)::

      {"workspace": W, "waiting": n, "asks": [{"prompt", "chat", "run", "text"}]}

  ``waiting`` is how many prompts wait in W now; ``asks`` the prompts that opened with this
  change (what the page reads out). A page adds up the counts of its person's workspaces.
- ``runs.changed`` to ``groups.runs(W)`` and ``groups.RUNS_ALL`` (runs-list pages of W's
  members, any role)::

      {"run": chat id, "workspace": W, "html": <tr> of the runs list}  or  {"run": id, "gone": true}

  only when the line changed: the run's head (title, runner), a turn started or ended, or a
  prompt opened or closed (``ChatChange.listed``).

A needs socket starts from ``snapshot`` (its person's counts, and so their workspaces) and, on a
runs page, from ``catch_up`` (the lines that page shows): nothing said between the page's render
and the socket joining its groups is missed. On every heartbeat it joins its groups again, and
in team mode is sent ``snapshot`` again (``activity/sockets/inbox.GroupMember``): a restarted Redis
forgot them, and what it said to nobody meanwhile is put right within a heartbeat.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db.models import Count, QuerySet
from django.template.loader import render_to_string

from activity.core import groups
from activity.live import faults
from activity.live.work import ChatChange
from activity.models import Chat, Membership, Prompt
from activity.people import access
from activity.push import watching
from activity.review import mentions, queue
from activity.review import runs as runs_list

log = logging.getLogger(__name__)
RUN_ROW = "activity/pushed/runs.html#run-row"
ASK_CHARS = 160  # what a spoken line quotes of a prompt
RUN_CHARS = 80  # … and of its run's title
ASKED_MAX_CHARS = 4_000  # a runs page's {"runs": [ids]}: a page shows PAGE_SIZE runs


def waiting() -> QuerySet[Prompt]:
    """Prompts waiting for a person: open, and answered by nobody yet."""
    return Prompt.objects.filter(closed_at__isnull=True, answered_at__isnull=True)


def waiting_by_chat(chat_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    counted = waiting().filter(chat__in=list(chat_ids)).values("chat_id").annotate(n=Count("id"))
    return {entry["chat_id"]: entry["n"] for entry in counted}


def counts(user: Any) -> dict[str, Any]:
    """What waits for this person, per workspace where they may answer (0 included), and
    whether they may answer everywhere (a superuser: every workspace with a prompt waiting)."""
    workspaces = access.answering_workspaces(user)
    prompts = waiting()
    shown: dict[str, int] = {}
    if workspaces is not None:
        prompts = prompts.filter(chat__workspace_id__in=workspaces)
        shown = {str(w): 0 for w in workspaces}
    per = prompts.values("chat__workspace_id").annotate(n=Count("id"))
    shown.update({str(entry["chat__workspace_id"]): entry["n"] for entry in per})
    mentioned, asked = queue.waiting_counts(user)  # and the runs they are asked to review
    return {"counts": shown, "all": workspaces is None, "mentions": mentioned, "reviews": asked}


def snapshot(user: Any) -> str:
    """A needs socket's first message: its person's counts."""
    return json.dumps(counts(user))


def member_workspaces(user: Any) -> list[uuid.UUID] | None:
    """The workspaces whose runs this person sees; None for a superuser (all of them)."""
    if getattr(user, "is_superuser", False):
        return None
    if not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user_id=user.pk).values_list("workspace_id", flat=True))


# --- the runs list ---------------------------------------------------------------------------


def rows(chats: list[Chat]) -> list[tuple[Chat, runs_list.Summary]]:
    """Each run as the runs list shows it: its counts, who watches, what waits."""
    summaries = runs_list.summaries(chats)
    ids = [c.pk for c in chats]
    for chat_id, people in watching.counts(ids).items():
        summaries[chat_id].watching = people
    for chat_id, n in waiting_by_chat(ids).items():
        summaries[chat_id].waiting = n
    return [(chat, summaries[chat.pk]) for chat in chats]


def run_texts(chats: QuerySet[Chat], ids: list[uuid.UUID]) -> list[str]:
    """The runs-list lines of these chats, one message each; a chat not among ``chats``
    (deleted, or not this person's) is ``gone``."""
    found = rows(list(chats.filter(pk__in=ids)))
    texts = [
        json.dumps(
            {
                "run": str(chat.pk),
                "workspace": str(chat.workspace_id),
                "html": render_to_string(RUN_ROW, {"chat": chat, "summary": summary}),
            }
        )
        for chat, summary in found
    ]
    missing = set(ids) - {chat.pk for chat, _ in found}
    return texts + [json.dumps({"run": str(pk), "gone": True}) for pk in missing]


def catch_up(user: Any, ids: list[uuid.UUID]) -> list[str]:
    """The lines a runs page shows, as they are now (only runs this person sees)."""
    return run_texts(access.visible_chats(user), ids)


def asked_runs(text: str | None) -> list[uuid.UUID] | None:
    """The runs a page says it shows (``{"runs": [ids]}``), or None for anything else;
    parsed only when short, so no nesting can exhaust the stack."""
    if not text or len(text) > ASKED_MAX_CHARS:
        return None
    try:
        asked = json.loads(text)["runs"]
        if not isinstance(asked, list) or len(asked) > runs_list.PAGE_SIZE:
            return None
        return [uuid.UUID(str(value)) for value in asked]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError, AttributeError):
        return None


# --- what a change says ----------------------------------------------------------------------


def first_line(text: str, limit: int) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def needs_text(workspace_id: uuid.UUID, chat_id: uuid.UUID, since: int) -> str:
    """A workspace's count, and the prompts of this chat that opened after version ``since``."""
    count = waiting().filter(chat__workspace_id=workspace_id).count()
    opened = (
        waiting()
        .filter(chat_id=chat_id, created_version__gt=since)
        .select_related("chat", "tool")
        .order_by("opened_at")
    )
    asks = [
        {
            "prompt": str(prompt.pk),
            "chat": str(prompt.chat_id),
            "run": first_line(prompt.chat.title, RUN_CHARS) or "an untitled run",
            "text": first_line(asked(prompt), ASK_CHARS),
        }
        for prompt in opened[:5]
    ]
    return json.dumps({"workspace": str(workspace_id), "waiting": count, "asks": asks})


def asked(prompt: Prompt) -> str:
    """A prompt's question in a few words: its summary, a question's own words, or its call."""
    if prompt.summary:
        return prompt.summary
    for question in prompt.questions or []:
        if isinstance(question, dict) and question.get("question"):
            return str(question["question"])
    if prompt.tool is not None:
        return prompt.tool.agent_label or prompt.tool.tool_name
    return "an answer"


def said(change: ChatChange) -> tuple[str | None, str | None]:
    """What a change says to the needs sockets: the workspace's count (if prompts changed) and
    the run's line (if the runs list shows something new of it)."""
    needs = None
    if change.prompts_changed:
        needs = needs_text(change.workspace_id, change.chat_id, change.since)
    run = None
    if change.listed:
        chats = Chat.objects.select_related("workspace", "current_attempt")
        run = run_texts(chats, [change.chat_id])[0]
    return needs, run


async def announce(change: ChatChange) -> None:
    """Tell the needs sockets (and the inboxes) what a committed change did, if anything."""
    if change.prompts_changed or change.listed:
        try:
            await tell(change, *await database_sync_to_async(said)(change))
        except Exception:  # committed: a needs socket catches up when it reconnects
            faults.report(
                log, "telling the needs sockets of workspace %s failed", change.workspace_id
            )
    if change.mentioned:
        await tell_mentions(change.mentioned, announced=True)


def announce_sync(change: ChatChange) -> None:
    """``announce`` for synchronous code (a view, a command): rendered here, on its connection."""
    if change.prompts_changed or change.listed:
        try:
            async_to_sync(tell)(change, *said(change))
        except Exception:
            faults.report(
                log, "telling the needs sockets of workspace %s failed", change.workspace_id
            )
    if change.mentioned:
        tell_mentions_sync(change.mentioned, announced=True)


def mentions_texts(user_ids: Iterable[int], announced: bool) -> dict[int, str]:
    """What each person's pages hear of their mentions and of the runs they are asked to
    review (``reviews``: review/queue.py): how many wait, and, when a comment has just
    mentioned them (``announced``), who mentioned them where, to be read out."""
    texts = {}
    for person in get_user_model().objects.filter(pk__in=list(user_ids)):
        mentioned, asked = queue.waiting_counts(person)
        said: dict[str, Any] = {"mentions": mentioned, "reviews": asked}
        newest = mentions.newest(person) if announced else None
        if newest is not None:
            who = newest.comment.author.get_username() if newest.comment.author else "Someone"
            run = first_line(newest.comment.tool.chat.title, RUN_CHARS) or "an untitled run"
            said["said"] = f"{who} mentioned you in {run}"
        texts[person.pk] = json.dumps(said)
    return texts


async def tell_mentions(user_ids: Iterable[int], announced: bool = False) -> None:
    """Tell these people's pages how many mentions wait for them now."""
    try:
        await send_mentions(await database_sync_to_async(mentions_texts)(user_ids, announced))
    except Exception:  # committed: the pages catch up when their sockets reconnect
        faults.report(log, "telling people %s of their mentions failed", list(user_ids))


async def send_mentions(texts: dict[int, str]) -> None:
    layer = get_channel_layer()
    for user_id, text in texts.items():
        await layer.group_send(groups.person(user_id), {"type": "mentions.changed", "text": text})


def tell_mentions_sync(user_ids: Iterable[int], announced: bool = False) -> None:
    """``tell_mentions`` for synchronous code (a view): counted here, on its connection."""
    try:
        async_to_sync(send_mentions)(mentions_texts(user_ids, announced))
    except Exception:
        faults.report(log, "telling people %s of their mentions failed", list(user_ids))


async def tell(change: ChatChange, needs: str | None, run: str | None) -> None:
    layer = get_channel_layer()
    if needs is not None:
        message = {"type": "inbox.changed", "needs": needs}
        for name in (groups.inbox(change.workspace_id), groups.INBOX_ALL):
            await layer.group_send(name, message)
    if run is not None:
        message = {"type": "runs.changed", "text": run}
        for name in (groups.runs(change.workspace_id), groups.RUNS_ALL):
            await layer.group_send(name, message)
