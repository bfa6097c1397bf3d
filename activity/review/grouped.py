"""The search page's results grouped by run (activity/review/search.py, step 4): the form and its
filters, the runs of a page with their best lines, and "N more in this run".
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet
from django.urls import reverse

from activity.models import Chat, Workspace
from activity.people import access
from activity.review import runs
from activity.review.filters import OTHER_KIND, QUERY_CHARS
from activity.review.search import Found, Hit, Terms, load_hits, rank, terms

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
    hits = {h.id: h for h in load_hits(words, [f for f, _ in lines], shown)}
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
    if connection.vendor != "postgresql":  # SQLite: the settings allow no third (DATABASE_URL)
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
    else:
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
        (Found(kind, _uuid(ref), _uuid(chat_id), rank(bool(title), score)), int(times))
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
