"""Search what rows and replies keep: ``search(user, query, limit, offset) -> list[Hit]``; the
search page's results grouped by run are ``grouped.grouped(user, form, page) -> Results``, and a
hit's snippet is ``snippets.best_snippet``.

A row is found by its ``agent_label``, ``agent_summary``, ``error_message``, ``agent_input`` and
``agent_output``; a reply by its Markdown. Only chats the user may see are searched.

1. The query becomes plain words (``terms``): anything else a person types — quotes, ``*``,
   ``NEAR``, ``-``, parentheses, ``:`` — only separates words, so no query is ever a syntax
   error. Every word must match; the last one also matches as a prefix ("zeb" finds "zebra").
2. The database finds and ranks: SQLite with FTS5, PostgreSQL with tsvectors and GIN indexes,
   both kept by triggers (migration 0007_search). Hits whose title (the row's
   ``agent_label``) holds every word come first, then by relevance (bm25 / ts_rank).
3. The page's hits are loaded through the ORM and highlighted (``snippets``), the same way on both
   databases: every character of a snippet is escaped except the ``<mark>`` tags added here.
4. The page groups the matches by run (``grouped.py``): 20 runs a page, best match first (a run
   with a call whose title holds every word, then its best relevance, then the newest) or
   newest first, each with its best five lines, where calls of one run with the same label
   are one line with their count; the rest is "N more in this run", a link to the run's
   calls filtered to the query (activity/review/filters.py). A fixed number of queries for
   any number of runs and matches: the database groups, counts and picks the lines.

Both databases split words at ASCII punctuation and ignore case; SQLite also ignores accents.
A row field is indexed up to a cut (2,000 characters of a label, summary or error, 60,000 of
an input or output), and a call's output once the call has finished (completed, failed or
cancelled), not at every chunk while it streams. A reply is indexed in blocks of about 8,000
characters (13 of them, about 104,000 characters), so that a streaming reply re-indexes only
its last block: every word of a query must then stand within one block of the reply.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db import connection
from django.urls import reverse
from django.utils.safestring import SafeString

from activity.models import Chat, Message, ToolActivity
from activity.people import access
from activity.review.snippets import best_snippet
from activity.show import dom

MAX_QUERY_CHARS = 500
MAX_TERMS = 12
MAX_TERM_CHARS = 100  # a longer "word" is a blob no one types; PostgreSQL ignores words > 2 KB
MIN_PREFIX_CHARS = 2

WORD = re.compile(r"[^\W_]+")  # letters and digits: what both databases treat as a word

Kind = Literal["row", "reply"]
# The fields a hit's snippet may come from, in the order a tie is broken.
ROW_FIELDS = {
    "label": "agent_label",
    "summary": "agent_summary",
    "error": "error_message",
    "input": "agent_input",
    "output": "agent_output",
}


@dataclass(frozen=True)
class Terms:
    """A query as plain words; ``prefix``: the last word also matches the start of a word."""

    words: tuple[str, ...]
    prefix: bool

    def fts5(self) -> str:
        """An FTS5 query: each word a quoted string (words hold no quote), all required."""
        query = " ".join(f'"{word}"' for word in self.words)
        return query + "*" if self.prefix else query

    def tsquery(self) -> str:
        """A to_tsquery() argument: each word quoted (words hold no quote or backslash)."""
        quoted = [f"'{word}'" for word in self.words]
        if self.prefix:
            quoted[-1] += ":*"
        return " & ".join(quoted)

    def pattern(self) -> re.Pattern[str]:
        """Where the words stand in a text, whole words only, ignoring case."""
        words = [re.escape(word) for word in self.words]
        if self.prefix:
            words[-1] += r"[^\W_]*"
        return re.compile(rf"(?<![^\W_])(?:{'|'.join(words)})(?![^\W_])", re.IGNORECASE)


def shortened(query: str) -> bool:
    """Whether words of the query are left out of the search (``terms``): past
    ``MAX_QUERY_CHARS``, past ``MAX_TERMS`` distinct words, or words over ``MAX_TERM_CHARS``."""
    text = unicodedata.normalize("NFKC", query).lower()
    found = WORD.findall(text)
    return (
        len(query) > MAX_QUERY_CHARS
        or len(set(found)) > MAX_TERMS
        or any(len(word) > MAX_TERM_CHARS for word in found)
    )


def terms(query: str) -> Terms | None:
    """The words of a query, or None when it has none."""
    text = unicodedata.normalize("NFKC", query[:MAX_QUERY_CHARS]).lower()
    found = [m for m in WORD.finditer(text) if len(m.group()) <= MAX_TERM_CHARS]
    words = list(dict.fromkeys(m.group() for m in found))[:MAX_TERMS]
    if not words:
        return None
    last = found[-1]
    # A word still being typed (nothing after it) is a prefix; "zebra " or '"zebra"' is whole.
    prefix = (
        last.end() == len(text) and last.group() == words[-1] and len(words[-1]) >= MIN_PREFIX_CHARS
    )
    return Terms(tuple(words), prefix)


@dataclass(frozen=True)
class Hit:
    kind: Kind
    chat: Chat
    id: uuid.UUID  # the row's or the reply's
    title: str  # the row's label (or tool name); for a reply, the prompt it answers
    field: str  # where the snippet comes from: a ROW_FIELDS key, or "reply"
    snippet: SafeString
    rank: float  # higher is better: 1 + relevance for a title hit, relevance (0–1) otherwise
    texts: tuple[str, ...] = ()  # every text searched, as stored
    tag: str = ""  # what it is, for people: the call's kind (ACP's "execute", "read", …), "reply"

    @property
    def url(self) -> str:
        anchor = dom.tool(self.id) if self.kind == "row" else dom.reply(self.id)
        return f"{reverse('chat', args=[self.chat.pk])}#{anchor}"


@dataclass(frozen=True)
class Found:
    kind: Kind
    id: uuid.UUID
    chat_id: uuid.UUID
    rank: float


def search(user: access.User, query: str, limit: int = 20, offset: int = 0) -> list[Hit]:
    """The hits for a query among the chats ``user`` may see, best first."""
    words = terms(query)
    if words is None or not user.is_authenticated or limit <= 0:
        return []
    chats = access.visible_chats(user).order_by().values("pk")
    visible, params = chats.query.sql_with_params()
    # The settings refuse any other database (koruweb/settings.py, DATABASE_URL).
    find = _find_postgresql if connection.vendor == "postgresql" else _find_sqlite
    found = find(words, visible, list(params), limit, max(offset, 0))
    return load_hits(words, found, access.visible_chats(user).in_bulk({f.chat_id for f in found}))


def _find_sqlite(
    words: Terms, visible: str, params: list[Any], limit: int, offset: int
) -> list[Found]:
    # bm25 weighs matches by column (label, summary, error, input, output, reply); it is
    # negative, lower is better, and never above zero.
    # A reply is several documents (its blocks): a hit is its best one. MATERIALIZED keeps
    # bm25() beside its MATCH (it cannot run inside the GROUP BY of a flattened query).
    sql = f"""
        WITH found AS MATERIALIZED (
            SELECT d.kind, d.ref, d.chat_id,
                   activity_search_fts.rowid IN (SELECT rowid FROM activity_search_fts
                                                 WHERE activity_search_fts MATCH %s) AS title,
                   -bm25(activity_search_fts, 10.0, 4.0, 4.0, 2.0, 1.0, 2.0) AS score
            FROM activity_search_fts JOIN activity_search_doc AS d
                 ON d.id = activity_search_fts.rowid
            WHERE activity_search_fts MATCH %s AND d.chat_id IN ({visible})
        )
        SELECT kind, ref, chat_id, max(title), max(score) AS best FROM found
        GROUP BY kind, ref, chat_id
        ORDER BY max(title) DESC, best DESC, ref
        LIMIT %s OFFSET %s
    """
    query = words.fts5()
    args = [f"label : ({query})", query, *params, limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        rows = cursor.fetchall()
    return [
        Found(kind, uuid.UUID(ref), uuid.UUID(chat_id), rank(bool(title), score))
        for kind, ref, chat_id, title, score in rows
    ]


def _find_postgresql(
    words: Terms, visible: str, params: list[Any], limit: int, offset: int
) -> list[Found]:
    # The words of rows and reply blocks, kept by the triggers of migration 0007_search.
    sql = f"""
        SELECT kind, id, chat_id, title, score FROM (
            SELECT 'row' AS kind, tool_id AS id, chat_id,
                   title @@ to_tsquery('simple', %s) AS title,
                   ts_rank(words, to_tsquery('simple', %s)) AS score
            FROM activity_search_row
            WHERE words @@ to_tsquery('simple', %s) AND chat_id IN ({visible})
            UNION ALL
            SELECT 'reply', message_id, chat_id, false,
                   max(ts_rank(words, to_tsquery('simple', %s)))
            FROM activity_search_reply
            WHERE words @@ to_tsquery('simple', %s) AND chat_id IN ({visible})
            GROUP BY message_id, chat_id
        ) AS hits
        ORDER BY title DESC, score DESC, kind, id
        LIMIT %s OFFSET %s
    """
    query = words.tsquery()
    args = [query, query, query, *params, query, query, *params, limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        rows = cursor.fetchall()
    return [
        Found(kind, id_, chat_id, rank(title, score)) for kind, id_, chat_id, title, score in rows
    ]


def rank(title: bool, score: float) -> float:
    score = max(float(score), 0.0)
    return (1.0 if title else 0.0) + score / (1.0 + score)


def load_hits(words: Terms, found: Sequence[Found], chats: dict[Any, Chat]) -> list[Hit]:
    """Load and highlight the hits found in ``chats``, in their order (two queries for any
    number)."""
    row_ids = [f.id for f in found if f.kind == "row"]
    reply_ids = [f.id for f in found if f.kind == "reply"]
    rows = ToolActivity.objects.filter(pk__in=row_ids).only(
        "id", "chat_id", "tool_name", "agent_kind", *ROW_FIELDS.values()
    )
    replies = Message.objects.filter(pk__in=reply_ids).select_related("attempt")
    replies = replies.only("id", "chat_id", "markdown", "attempt__prompt")
    loaded: dict[uuid.UUID, ToolActivity | Message] = {
        **{r.pk: r for r in rows},
        **{m.pk: m for m in replies},
    }
    pattern = words.pattern()
    hits = []
    for f in found:
        obj, chat = loaded.get(f.id), chats.get(f.chat_id)
        if obj is None or chat is None:
            continue  # deleted since it was found
        if isinstance(obj, ToolActivity):
            texts = {name: getattr(obj, column) or "" for name, column in ROW_FIELDS.items()}
            title = obj.agent_label or obj.tool_name
            tag = obj.agent_kind or "call"
        else:
            texts = {"reply": obj.markdown}
            title = _first_line(obj.attempt.prompt) or "Reply"
            tag = "reply"
        name, snippet = best_snippet(texts, pattern)
        hits.append(
            Hit(f.kind, chat, f.id, title, name, snippet, f.rank, tuple(texts.values()), tag)
        )
    return hits


def _first_line(text: str, chars: int = 120) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= chars else line[: chars - 1] + "…"
