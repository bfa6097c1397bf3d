"""What a push says: the fragments that bring a page from one version of a chat to another,
rendered once for every viewer, and cut into parts that each fit a push.

No push or catch-up is longer than ``settings.PUSH_MAX_BYTES`` (Daphne drops a message over
1 MiB without a word, docs/gotchas.md#daphne-drops-messages-over-1-mib). A change that does
not fit goes out in parts: each ``{"from": S, "to": T, "part": k, "parts": n, "content": …}``,
applied in order, the page at T after the last. A single fragment that cannot fit (a huge
reply) goes out as ``{"from": S, "to": T, "reload": true}``: the page fetches its regions
over HTTP and asks for what changed since the version it got (``static/koruweb/live/live.js``). A
page that says it shows a version the chat never reached (its database restored from a
backup, or a forged message) is answered the same way, with ``"to"`` the chat's real version.
``broadcast.py`` sends them.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from activity.people import access
from activity.review import filters, reads
from activity.review.transcript import Segment
from activity.show import dom

log = logging.getLogger(__name__)
PARTS = "activity/pushed/parts.html"


def render_inbox(user: Any) -> str:
    """A person's inbox list: the open prompts they may answer."""
    prompts = reads.inbox(access.answerable_chats(user))
    return render_to_string(
        "activity/pushed/inbox.html#inbox-list", {"prompts": prompts, "oob": True}
    )


def fragments(c: reads.Changes, shared: bool = False) -> list[str]:
    """What brings a page from ``c.since`` to ``c.version``: fragments, in the order they apply.
    ``shared``: as a share link's page draws them (``review/shares.py``): none of the team's
    own, and no filter bar."""
    parts: list[str] = []
    ctx = {"chat": c.chat, "oob": True, "shared": shared}
    if c.meta:
        parts.append(render_to_string(f"{PARTS}#chat-head", ctx))
    if c.new_turns:
        new = {"turns": c.new_turns, "turns_id": dom.TURNS, "shared": shared}
        parts.append(render_to_string(f"{PARTS}#push-new-turns", new))
    parts += [render_to_string(f"{PARTS}#turn-head", {**ctx, "turn": t}) for t in c.turns]
    for flow in c.flows:
        parts.append(texts(flow))
        if flow.added:
            target = tbody(flow.attempt_id, flow.at)
            added = {"target": target, "rows": flow.added, "shared": shared}
            parts.append(render_to_string(f"{PARTS}#push-new-rows", added))
        if flow.segments:
            parts.append(segments(flow, flow.segments, shared))
    if c.rows:
        parts.append(render_to_string(f"{PARTS}#push-rows", {**ctx, "rows": c.rows}))
    if c.panel is not None and not shared:
        parts.append(filter_bar(c.panel))
    return parts


def tbody(attempt_id: uuid.UUID, offset: int) -> str:
    """The id of a turn's table of the calls made at ``offset`` bytes of its reply."""
    return f"{dom.dom_id('tools', attempt_id)}-{offset}"


def texts(flow: reads.Flow) -> str:
    """A turn's thinking and the text of the segments the page shows, morphed in place."""
    ctx = {"oob": True, "reply": flow.reply, "attempt_id": flow.attempt_id}
    html = [render_to_string(f"{PARTS}#thinking", ctx)] if flow.reply is not None else []
    html += [render_to_string(f"{PARTS}#segment-text", {**ctx, "segment": s}) for s in flow.texts]
    return "".join(html)


def segments(flow: reads.Flow, new: list[Segment], shared: bool = False) -> str:
    """New segments, appended to the turn's reply."""
    context = {"target": dom.reply(flow.reply_id), "segments": new, "attempt_id": flow.attempt_id}
    context["shared"] = shared
    return render_to_string(f"{PARTS}#push-segments", context)


def filter_bar(panel: filters.Panel) -> str:
    """The chat page's filter bar at the push's version, as a fresh page draws it (a region)."""
    context = {**panel.context(), "turns_id": dom.TURNS, "oob": True}
    return render_to_string("activity/pushed/long.html#filter-bar", context)


def render_changes(chat_id: uuid.UUID, since: int) -> tuple[str, int]:
    """The fragments that bring a page from version ``since`` to now, and now's version."""
    c = reads.changes(chat_id, since)
    return "".join(fragments(c)), c.version


def push_text(since: int, version: int, html: str) -> str:
    return json.dumps({"from": since, "to": version, "content": html})


def render_push(
    chat_id: uuid.UUID, since: int, catch_up: bool = False, shared: bool = False
) -> list[str]:
    """What brings a page from version ``since`` to now, as push texts to send in order, none
    longer than ``PUSH_MAX_BYTES``: one push (one render, as ever) when the change fits, else
    its parts, else one telling the page to fetch its regions over HTTP. A page catching up
    (``catch_up``: one page's own request, after it was away) that missed more calls than a
    page shows is told to fetch its regions too: the window a fresh load draws costs less than
    every call it missed (bench/README.md, "Catch-up"). ``shared``: for a share link's pages
    (``fragments``)."""
    c = reads.changes(chat_id, since)
    if since > c.version:  # the page says it is ahead of the database: it fetches the truth
        return [json.dumps({"from": since, "to": c.version, "reload": True})]
    if catch_up and brought(c) > reads.LIVE_ROWS:
        return [json.dumps({"from": since, "to": c.version, "reload": True})]
    to = c.version
    text = push_text(since, to, "".join(fragments(c, shared)))
    if len(text) <= settings.PUSH_MAX_BYTES:  # ASCII (json.dumps escapes the rest): len = bytes
        return [text]
    return split(since, to, list(units(c, shared)), settings.PUSH_MAX_BYTES)


def brought(c: reads.Changes) -> int:
    """The calls a change draws: new ones, in new turns and after the page's last segment, and
    changed ones the page may show."""
    new = sum(len(s.rows) for t in c.new_turns for s in t.segments)
    added = sum(len(f.added) + sum(len(s.rows) for s in f.segments) for f in c.flows)
    return new + added + len(c.rows)


@dataclass(frozen=True)
class Unit:
    """The smallest piece of a change a page can apply by itself. Rows are rendered alone and
    share their wrapper (``wrap``, one per ``key``) with the rows next to them in the same part.
    """

    html: str
    wrap: str = ""  # "push-new-rows" (appended to the table ``key``) or "push-rows" (morphed)
    key: str = ""
    opens: tuple[str, ...] = ()  # the tables a new turn or segment brings: their rows follow


def units(c: reads.Changes, shared: bool = False) -> Iterator[Unit]:
    """``fragments(c)`` cut as fine as a page can apply them: a new turn's section, or a new
    segment, comes without its rows, which follow it one by one (``split`` keeps them out of
    its part)."""
    ctx = {"chat": c.chat, "oob": True, "shared": shared}
    if c.meta:
        yield Unit(render_to_string(f"{PARTS}#chat-head", ctx))
    for turn in c.new_turns:
        bare = [replace(s, rows=[]) for s in turn.segments]
        shell: dict[str, Any] = {"turns": [replace(turn, rows=[], segments=bare)]}
        shell |= {"turns_id": dom.TURNS, "shared": shared}
        opens = tuple(tbody(turn.attempt.pk, s.offset) for s in turn.segments)
        yield Unit(render_to_string(f"{PARTS}#push-new-turns", shell), opens=opens)
        for segment in turn.segments:
            for row in segment.rows:
                yield new_row(row, turn.attempt.pk, segment.offset, shared)
    for t in c.turns:
        yield Unit(render_to_string(f"{PARTS}#turn-head", {**ctx, "turn": t}))
    for flow in c.flows:
        if flow.reply is not None:
            yield Unit(texts(flow))
        yield from (new_row(row, flow.attempt_id, flow.at, shared) for row in flow.added)
        if flow.segments:
            bare = [replace(s, rows=[]) for s in flow.segments]
            opens = tuple(tbody(flow.attempt_id, s.offset) for s in flow.segments)
            yield Unit(segments(flow, bare, shared), opens=opens)
        for segment in flow.segments:
            for row in segment.rows:
                yield new_row(row, flow.attempt_id, segment.offset, shared)
    for row in c.rows:
        yield Unit(render_to_string(f"{PARTS}#tool-row", {**ctx, "row": row}), "push-rows")
    if c.panel is not None and not shared:
        yield Unit(filter_bar(c.panel))


def new_row(row: Any, attempt_id: uuid.UUID, offset: int, shared: bool = False) -> Unit:
    html = render_to_string(f"{PARTS}#tool-row", {"row": row, "shared": shared})
    return Unit(html, "push-new-rows", tbody(attempt_id, offset))


def encoded(text: str) -> int:
    """The bytes ``text`` takes inside a push's JSON."""
    return len(json.dumps(text)) - 2


def wrapper(wrap: str, key: str, rows_html: str) -> str:
    context = {"target": key, "rows_html": mark_safe(rows_html)}  # rendered rows
    return render_to_string(f"{PARTS}#{wrap}", context)


def split(since: int, to: int, pieces: list[Unit], limit: int) -> list[str]:
    """The parts of a change, each with its versions and place, each at most ``limit`` bytes;
    or, if one piece cannot fit, the word to fetch the regions over HTTP.

    A row appended to a new turn or segment never shares a part with the section or segment
    that brings its table: htmx looks up every out-of-band target of a message before it swaps
    any, so rows appended to a table that the same message brings find no target and are
    dropped without a word (a page that said Live would lack a new turn's first calls for
    good)."""
    reload = [json.dumps({"from": since, "to": to, "reload": True})]
    envelope = len(json.dumps({"from": since, "to": to, "part": 10**9, "parts": 10**9}))
    budget = limit - envelope - len(', "content": ""')
    overhead: dict[tuple[str, str], int] = {}
    parts: list[list[Unit]] = [[]]
    opened: set[str] = set()  # the tables new turns and segments in the part being filled bring
    size = 0
    for piece in pieces:
        cost = encoded(piece.html)
        group = (piece.wrap, piece.key)
        if piece.wrap and group not in overhead:
            overhead[group] = encoded(wrapper(piece.wrap, piece.key, ""))
        opens = overhead.get(group, 0)
        if cost + opens > budget:
            log.warning("a fragment of %d bytes is over PUSH_MAX_BYTES: pages reload it", cost)
            return reload
        last = parts[-1][-1] if parts[-1] else None
        if last is None or (last.wrap, last.key) != group or not piece.wrap:
            cost += opens
        if size + cost > budget or (piece.wrap == "push-new-rows" and piece.key in opened):
            parts.append([])
            opened = set()
            size = 0
            cost = encoded(piece.html) + opens
        parts[-1].append(piece)
        size += cost
        opened.update(piece.opens)
    texts = []
    for number, part in enumerate(parts, 1):
        content = "".join(assemble(part))
        texts.append(
            json.dumps(
                {"from": since, "to": to, "part": number, "parts": len(parts), "content": content}
            )
        )
    if any(len(text) > limit for text in texts):  # never: the sizes above are exact
        log.error("a part came out over PUSH_MAX_BYTES: pages reload instead")
        return reload
    return texts


def assemble(part: list[Unit]) -> Iterator[str]:
    """A part's HTML: each run of rows inside one wrapper."""
    run: list[Unit] = []
    for piece in [*part, Unit("")]:
        if run and (not piece.wrap or (piece.wrap, piece.key) != (run[0].wrap, run[0].key)):
            yield wrapper(run[0].wrap, run[0].key, "".join(u.html for u in run))
            run = []
        if piece.wrap:
            run.append(piece)
        else:
            yield piece.html
