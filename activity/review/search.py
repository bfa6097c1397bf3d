"""Search what rows and replies keep: ``search(user, query, limit, offset) -> list[Hit]``, and
the search page's results grouped by run, ``grouped(user, form, page) -> Results``.

A row is found by its ``agent_label``, ``agent_summary``, ``error_message``, ``agent_input`` and
``agent_output``; a reply by its Markdown. Only chats the user may see are searched.

1. The query becomes plain words (``terms``): anything else a person types — quotes, ``*``,
   ``NEAR``, ``-``, parentheses, ``:`` — only separates words, so no query is ever a syntax
   error. Every word must match; the last one also matches as a prefix ("zeb" finds "zebra").
2. The database finds and ranks: SQLite with FTS5, PostgreSQL with tsvectors and GIN indexes,
   both kept by triggers (migration 0007_search). Hits whose title (the row's
   ``agent_label``) holds every word come first, then by relevance (bm25 / ts_rank).
3. The page's hits are loaded through the ORM and highlighted here, the same way on both
   databases: every character of a snippet is escaped except the ``<mark>`` tags added here.
4. The page groups the matches by run (``grouped``): 20 runs a page, best match first (a run
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

import itertools
import re
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from activity.models import Chat, Message, ToolActivity, Workspace
from activity.people import access
from activity.review import runs
from activity.review.filters import OTHER_KIND, QUERY_CHARS
from activity.show import dom

MAX_QUERY_CHARS = 500
MAX_TERMS = 12
MAX_TERM_CHARS = 100  # a longer "word" is a blob no one types; PostgreSQL ignores words > 2 KB
MIN_PREFIX_CHARS = 2
SNIPPET_CHARS = 240
SNIPPET_BEFORE = 60  # characters of context before the first match

WORD = re.compile(r"[^\W_]+")  # letters and digits: what both databases treat as a word
JOINER = re.compile(r"[^\w\s]{1,2}|_{1,2}")  # what may join two marked words into one mark

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
    if connection.vendor == "sqlite":
        found = _find_sqlite(words, visible, list(params), limit, max(offset, 0))
    elif connection.vendor == "postgresql":
        found = _find_postgresql(words, visible, list(params), limit, max(offset, 0))
    else:
        raise NotImplementedError(f"search needs SQLite or PostgreSQL, not {connection.vendor}")
    return _hits(words, found, access.visible_chats(user).in_bulk({f.chat_id for f in found}))


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
        Found(kind, uuid.UUID(ref), uuid.UUID(chat_id), _rank(bool(title), score))
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
        Found(kind, id_, chat_id, _rank(title, score)) for kind, id_, chat_id, title, score in rows
    ]


def _rank(title: bool, score: float) -> float:
    score = max(float(score), 0.0)
    return (1.0 if title else 0.0) + score / (1.0 + score)


def _hits(words: Terms, found: Sequence[Found], chats: dict[Any, Chat]) -> list[Hit]:
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


def best_snippet(texts: dict[str, str], pattern: re.Pattern[str]) -> tuple[str, SafeString]:
    """The field whose text holds the most distinct words of the query (the first on a tie),
    and its snippet; with no match anywhere, the first field with any text, unmarked."""
    best: tuple[int, str, SafeString] | None = None
    for name, text in texts.items():
        distinct, snippet = highlight(text, pattern)
        if distinct and (best is None or distinct > best[0]):
            best = (distinct, name, snippet)
    if best is not None:
        return best[1], best[2]
    name = next((name for name, text in texts.items() if text.strip()), next(iter(texts)))
    return name, highlight(texts[name], pattern)[1]


def highlight(text: str, pattern: re.Pattern[str]) -> tuple[int, SafeString]:
    """A window of ``text`` around its best cluster of matches, each match in ``<mark>``.

    Returns how many distinct words the window marks, and the snippet. Everything but the
    ``<mark>`` tags is escaped; runs of whitespace become one space.
    """
    matches = [m.span() for m in itertools.islice(pattern.finditer(text), 500)]
    anchor = _best_cluster(text, matches)
    # From the beginning when the matches are near it; else a little before them.
    start = anchor - SNIPPET_BEFORE
    start = _word_start(text, start) if start > SNIPPET_BEFORE // 2 else 0
    end = _word_end(text, start + SNIPPET_CHARS)
    parts = ["…"] if start > 0 else []
    shown = [(b, f) for b, f in matches if start <= b < end]
    marked = {text[b:f].lower() for b, f in shown}
    position = start
    for begin, finish in _joined(text, shown):
        end = max(end, finish)  # never cut a match in two
        parts += [_plain(text[position:begin]), "<mark>", escape(text[begin:finish]), "</mark>"]
        position = finish
    parts.append(_plain(text[position:end]))
    if end < len(text):
        parts.append("…")
    return len(marked), mark_safe("".join(parts))  # every part was escaped above


def _joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Matches one mark: those only a sign or two apart with no space ("test_greet", "greet.py"
    for the query ``test_greet.py``) read as the one thing a person typed."""
    joined: list[tuple[int, int]] = []
    for begin, finish in spans:
        if joined and JOINER.fullmatch(text[joined[-1][1] : begin]):
            joined[-1] = (joined[-1][0], finish)
        else:
            joined.append((begin, finish))
    return joined


def _best_cluster(text: str, matches: list[tuple[int, int]]) -> int:
    """Where the window holding the most distinct matched words begins (the first such)."""
    best, anchor = 0, matches[0][0] if matches else 0
    reach = SNIPPET_CHARS - SNIPPET_BEFORE
    for i, (begin, _) in enumerate(matches):
        inside = set()
        for b, e in matches[i:]:
            if e > begin + reach:
                break
            inside.add(text[b:e].lower())
        if len(inside) > best:
            best, anchor = len(inside), begin
    return anchor


def _word_start(text: str, at: int) -> int:
    """``at``, moved forward past a word it would cut (at most 20 characters)."""
    if at == 0 or text[at - 1].isspace():
        return at
    space = re.compile(r"\s").search(text, at, at + 20)
    return space.end() if space else at


def _word_end(text: str, at: int) -> int:
    """``at``, moved back to the end of the last whole word (at most 20 characters)."""
    if at >= len(text):
        return len(text)
    spaces = [m.start() for m in re.finditer(r"\s", text[max(at - 20, 0) : at])]
    return max(at - 20, 0) + spaces[-1] if spaces else at


def _plain(text: str) -> str:
    return escape(re.sub(r"\s+", " ", text))


# --- Results grouped by run (the search page) ------------------------------------------------

RUNS_PER_PAGE = 20
LINES_PER_RUN = 5
MAX_PAGE = 500
# The kinds of call ACP names (ToolKind); "other" also holds a call whose agent named none.
KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode")
SORTS = [("", "best match"), ("newest", "newest runs first")]
ORDERS = {  # ties end on the run's id: a page never moves between two loads of the same data
    "": "runs.title DESC, runs.score DESC, c.created_at DESC, c.id",
    "newest": "c.created_at DESC, c.id",
}
FILTER_WORDS = {"kind": "kind of call", "since": "from", "until": "to", "sort": "order"}


class SearchForm(forms.Form):
    """The search page's GET form: its URL is the search, so a search is a link to share."""

    q = forms.CharField(required=False, strip=False)
    workspace = forms.ChoiceField(
        required=False, widget=forms.Select(attrs={"aria-label": "Workspace"})
    )
    agent = forms.ChoiceField(required=False, widget=forms.Select(attrs={"aria-label": "Agent"}))
    status = forms.ChoiceField(
        required=False, choices=runs.STATUSES, widget=forms.Select(attrs={"aria-label": "Status"})
    )
    kind = forms.ChoiceField(
        required=False,
        choices=[("", "any kind of call"), *((k, k) for k in KINDS), (OTHER_KIND, OTHER_KIND)],
        widget=forms.Select(attrs={"aria-label": "Kind of call"}),
    )
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    sort = forms.ChoiceField(
        required=False, choices=SORTS, widget=forms.Select(attrs={"aria-label": "Order"})
    )

    def __init__(self, data: object, chats: QuerySet[Chat]) -> None:
        super().__init__(data)  # type: ignore[arg-type]
        spaces = Workspace.objects.filter(chats__in=chats).distinct().order_by("name")
        agents = chats.exclude(agent_name="").order_by().values_list("agent_name", flat=True)
        agents = agents.distinct()
        self.fields["workspace"].choices = [("", "any workspace")] + [  # type: ignore[attr-defined]
            (w.slug, w.name) for w in spaces
        ]
        self.fields["agent"].choices = [("", "any agent")] + [  # type: ignore[attr-defined]
            (name, name) for name in sorted(set(agents))
        ]

    @property
    def query(self) -> str:
        return str(self.data.get("q", ""))

    @property
    def narrowed(self) -> bool:
        """Whether a filter beyond the words is chosen (the sort is not a filter)."""
        return any(self.data.get(name) for name in self.fields if name not in ("q", "sort"))

    @property
    def problem(self) -> str:
        """Why the filters in the URL cannot apply (nothing is then shown), or ""."""
        if self.is_valid():
            return ""
        names = ", ".join(FILTER_WORDS.get(name, name) for name in self.errors)
        return f"These filters cannot apply: {names}. Pick from the lists; dates are YYYY-MM-DD."

    def chats(self, chats: QuerySet[Chat]) -> QuerySet[Chat]:
        """The runs the filters keep among ``chats``."""
        if not self.is_valid():
            return chats.none()
        f = self.cleaned_data
        if f["workspace"]:
            chats = chats.filter(workspace__slug=f["workspace"])
        if f["agent"]:
            chats = chats.filter(agent_name=f["agent"])
        chats = chats.filter(runs.status_filter(f["status"]))
        if f["since"]:
            chats = chats.filter(created_at__date__gte=f["since"])
        if f["until"]:
            chats = chats.filter(created_at__date__lte=f["until"])
        return chats


@dataclass
class Line:
    """One line of a run's matches: a call (with how many calls of the run share its label)
    or a reply."""

    hit: Hit
    times: int


@dataclass
class RunHits:
    chat: Chat
    matches: int  # the run's calls and replies that match
    lines: list[Line]
    more_url: str  # the run's calls, filtered to the query

    @property
    def more(self) -> int:
        return self.matches - sum(line.times for line in self.lines)


@dataclass
class Results:
    runs: list[RunHits] = field(default_factory=list)
    total_runs: int = 0
    total_matches: int = 0
    page: int = 1

    @property
    def first(self) -> int:
        return (self.page - 1) * RUNS_PER_PAGE + 1

    @property
    def pages(self) -> int:
        return min(-(-self.total_runs // RUNS_PER_PAGE), MAX_PAGE)


def grouped(user: access.User, form: SearchForm, page: int = 1) -> Results:
    """The runs whose calls or replies match, a page of ``RUNS_PER_PAGE``, each with its best
    ``LINES_PER_RUN`` lines (identical labels as one line with a count). A fixed number of
    queries whatever the number of runs, calls or matches: the runs (with the totals), the
    runs' chats, their lines, and the lines' rows and replies."""
    words = terms(form.query)
    page = min(max(page, 1), MAX_PAGE)
    if words is None or not user.is_authenticated or not form.is_valid():
        return Results(page=page)
    chats = form.chats(access.visible_chats(user))
    kind = form.cleaned_data["kind"]
    offset = (page - 1) * RUNS_PER_PAGE
    order = ORDERS[form.cleaned_data["sort"]]
    matches, args = _matches(words, chats, kind)
    sql = f"""{matches},
        runs AS (SELECT chat_id, count(*) AS matches, max(title) AS title, max(score) AS score
                 FROM matches GROUP BY chat_id)
        SELECT runs.chat_id, runs.matches, count(*) OVER (), sum(runs.matches) OVER ()
        FROM runs JOIN activity_chat AS c ON c.id = runs.chat_id
        ORDER BY {order} LIMIT %s OFFSET %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*args, RUNS_PER_PAGE, offset])
        found = cursor.fetchall()
    if not found:
        return Results(page=page)
    counts = {_uuid(chat_id): int(n) for chat_id, n, _, _ in found}
    shown = chats.in_bulk(list(counts))
    _known_cancellers(list(shown.values()))
    lines = _lines(words, chats.filter(pk__in=list(counts)), kind)
    hits = {h.id: h for h in _hits(words, [f for f, _ in lines], shown)}
    by_run: dict[uuid.UUID, list[Line]] = {chat_id: [] for chat_id in counts}
    for f, times in lines:
        if f.id in hits:
            by_run[f.chat_id].append(Line(hits[f.id], times))
    results = Results(page=page, total_runs=int(found[0][2]), total_matches=int(found[0][3]))
    for chat_id, n in counts.items():
        chat = shown.get(chat_id)
        if chat is not None:
            more = more_url(chat, form.query, kind, by_run[chat_id])
            results.runs.append(RunHits(chat, n, by_run[chat_id], more))
    return results


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def _matches(words: Terms, chats: QuerySet[Chat], kind: str) -> tuple[str, list[Any]]:
    """``WITH … matches AS (…)``: each matching call or reply of ``chats`` (kind, ref, chat_id,
    title, score, line), where ``line`` is the same for calls of a run with the same label."""
    visible, params = chats.order_by().values("pk").query.sql_with_params()
    if connection.vendor == "sqlite":
        query = words.fts5()
        docs = f"""WITH found AS MATERIALIZED (
            SELECT d.kind, d.ref, d.chat_id,
                   activity_search_fts.rowid IN (SELECT rowid FROM activity_search_fts
                                                 WHERE activity_search_fts MATCH %s) AS title,
                   -bm25(activity_search_fts, 10.0, 4.0, 4.0, 2.0, 1.0, 2.0) AS score
            FROM activity_search_fts JOIN activity_search_doc AS d
                 ON d.id = activity_search_fts.rowid
            WHERE activity_search_fts MATCH %s AND d.chat_id IN ({visible})
        ),
        docs AS (SELECT kind, ref, chat_id, max(title) AS title, max(score) AS score
                 FROM found GROUP BY kind, ref, chat_id)"""
        args: list[Any] = [f"label : ({query})", query, *params]
    elif connection.vendor == "postgresql":
        query = words.tsquery()
        docs = f"""WITH docs AS (
            SELECT 'row' AS kind, tool_id AS ref, chat_id,
                   CASE WHEN title @@ to_tsquery('simple', %s) THEN 1 ELSE 0 END AS title,
                   ts_rank(words, to_tsquery('simple', %s)) AS score
            FROM activity_search_row
            WHERE words @@ to_tsquery('simple', %s) AND chat_id IN ({visible})
            UNION ALL
            SELECT 'reply', message_id, chat_id, 0, max(ts_rank(words, to_tsquery('simple', %s)))
            FROM activity_search_reply
            WHERE words @@ to_tsquery('simple', %s) AND chat_id IN ({visible})
            GROUP BY message_id, chat_id
        )"""
        args = [query, query, query, *params, query, query, *params]
    else:
        raise NotImplementedError(f"search needs SQLite or PostgreSQL, not {connection.vendor}")
    where = "TRUE"
    if kind == OTHER_KIND:
        where = "docs.kind = 'row' AND (t.agent_kind IS NULL OR t.agent_kind IN ('', %s))"
        args.append(OTHER_KIND)
    elif kind:
        where = "docs.kind = 'row' AND t.agent_kind = %s"
        args.append(kind)
    sql = f"""{docs},
        matches AS (
            SELECT docs.kind, docs.ref, docs.chat_id, docs.title, docs.score,
                   coalesce(t.position, 0) AS position,
                   CASE WHEN docs.kind = 'row'
                        THEN 'row:' || coalesce(nullif(t.agent_label, ''), t.tool_name, '')
                        ELSE 'reply:' || CAST(docs.ref AS TEXT) END AS line
            FROM docs LEFT JOIN activity_toolactivity AS t
                 ON docs.kind = 'row' AND t.id = docs.ref
            WHERE {where}
        )"""
    return sql, args


def _lines(words: Terms, chats: QuerySet[Chat], kind: str) -> list[tuple[Found, int]]:
    """The best ``LINES_PER_RUN`` lines of each of ``chats``: calls with the same label are one
    line (its best call, and how many they are), each reply a line of its own. Equal matches
    come in the order the run made them."""
    matches, args = _matches(words, chats, kind)
    sql = f"""{matches},
        lines AS (
            SELECT kind, ref, chat_id, title, score, position,
                   row_number() OVER (PARTITION BY chat_id, line
                                      ORDER BY title DESC, score DESC, position, ref) AS nth,
                   count(*) OVER (PARTITION BY chat_id, line) AS times
            FROM matches
        ),
        placed AS (
            SELECT kind, ref, chat_id, title, score, times,
                   row_number() OVER (PARTITION BY chat_id
                                      ORDER BY title DESC, score DESC, position, ref) AS place
            FROM lines WHERE nth = 1
        )
        SELECT kind, ref, chat_id, title, score, times FROM placed
        WHERE place <= %s ORDER BY chat_id, place
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*args, LINES_PER_RUN])
        rows = cursor.fetchall()
    return [
        (Found(kind, _uuid(ref), _uuid(chat_id), _rank(bool(title), score)), int(times))
        for kind, ref, chat_id, title, score, times in rows
    ]


def _known_cancellers(chats: list[Chat]) -> None:
    """Who cancelled each run's latest turn from the web, in one query for the page: a run's
    status names them (statuses.run_status), which would otherwise ask once per run."""
    ids = [
        c.current_attempt.cancelled_by_id
        for c in chats
        if c.current_attempt is not None and c.current_attempt.cancelled_by_id is not None
    ]
    user = get_user_model()
    names = dict(user.objects.filter(pk__in=ids).values_list("pk", user.USERNAME_FIELD))
    for chat in chats:
        chat.__dict__["web_people"] = names  # Chat.web_people is a cached_property


def more_url(chat: Chat, query: str, kind: str, lines: list[Line]) -> str:
    """The run's page with its calls filtered to the query (activity/review/filters.py).

    That filter finds one piece of text (``q``): the query as typed when every line shown holds
    it as typed, else its longest word, so the run's page shows at least what was found."""
    words = terms(query)
    phrase = " ".join(query.split())[:QUERY_CHARS]
    texts = [" ".join(line.hit.texts).lower() for line in lines]
    if words is not None and not all(phrase.lower() in text for text in texts):
        phrase = max(words.words, key=len)
    values = {"q": phrase, "kind": kind}
    return f"{reverse('chat', args=[chat.pk])}?{urlencode({k: v for k, v in values.items() if v})}"
