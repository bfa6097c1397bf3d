"""Search: rows and replies found by their words, on SQLite (FTS5) and PostgreSQL alike.

`make test` runs this file twice: on the suite's database (SQLite by default), then on
PostgreSQL (`PG_TEST_URL`).
"""

from __future__ import annotations

import importlib
import itertools
import random
import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from activity.core.contract import ERROR_MESSAGES, ToolApproval, ToolErrorCode, ToolStatus
from activity.live import presence
from activity.live.ingest import ingest
from activity.models import Chat, ToolActivity, Workspace
from activity.review import search, snippets
from activity.wire.frames import runner_frame
from tests import frames
from tests.factories import make_turn

pytestmark = pytest.mark.django_db


class Run:
    """A chat with one turn, started by a runner's frames. Its rows and reply are then written
    each of the ways the database can be written (creates, bulk creates,
    ``save(update_fields=...)``): search must not care which path wrote them."""

    def __init__(self, workspace: Workspace, title: str = "Fix the flaky test") -> None:
        self.reply = make_turn(workspace, title=title, prompt="Make the tests pass\nand more")
        self.chat = self.reply.chat
        self.chat_id, self.reply_id = self.chat.pk, self.reply.pk
        self.positions = itertools.count(1)
        self.rows: dict[str, ToolActivity] = {}

    def new_row(self, label: str | None, **fields: Any) -> ToolActivity:
        fields.setdefault("tool_name", "Read")
        fields.setdefault("status", ToolStatus.COMPLETED)
        return ToolActivity(
            chat=self.chat,
            attempt=self.reply.attempt,
            assistant_message=self.reply,
            tool_call_id=f"call-{uuid.uuid4()}",
            approval=ToolApproval.NOT_REQUIRED,
            proposed_at=frames.T0,
            position=next(self.positions),
            agent_label=label,
            **fields,
        )

    def call(self, label: str | None, **fields: Any) -> ToolActivity:
        row = self.new_row(label, **fields)
        row.save()
        return row

    def say(self, chunk: str) -> None:
        self.reply.markdown += chunk
        self.reply.save(update_fields=["markdown"])


@pytest.fixture
def busy(acme) -> Run:
    """A run whose every searched field holds a word of its own."""
    run = Run(acme)
    run.rows = {
        "label": run.call("Read zebra.md"),
        "summary": run.call("Run a command", agent_summary="Should I feed the giraffe?"),
        "input": run.call("Run tests", agent_input="pytest -k walrus"),
        "output": run.call("List files", agent_output="found the narwhal here"),
        "error": run.call("Build", error_message=ERROR_MESSAGES[ToolErrorCode.TOOL_FAILED]),
    }
    run.say("The **okapi** test was flaky.")
    return run


def found(user: User, query: str, **kwargs: Any) -> list[search.Hit]:
    return search.search(user, query, **kwargs)


@pytest.mark.parametrize(
    ("query", "field", "call_id"),
    [
        ("zebra", "label", "label"),
        ("giraffe", "summary", "summary"),
        ("walrus", "input", "input"),
        ("narwhal", "output", "output"),
        ("reported", "error", "error"),  # "The agent reported that this tool failed."
        ("okapi", "reply", None),
    ],
)
def test_each_field_is_found_and_jumps_to_its_row_or_reply(
    acme_viewer, busy, query, field, call_id
):
    (hit,) = found(acme_viewer, query)
    assert hit.field == field
    assert hit.chat.pk == busy.chat_id
    if call_id is None:
        assert (hit.kind, hit.id) == ("reply", busy.reply_id)
        assert hit.url == f"/chats/{busy.chat_id}/#reply-{busy.reply_id}"
    else:
        row = busy.rows[call_id]
        assert (hit.kind, hit.id) == ("row", row.pk)
        assert hit.url == f"/chats/{busy.chat_id}/#tool-{row.pk}"
    assert re.search(rf"<mark>{query}</mark>", hit.snippet, re.IGNORECASE)


def test_the_page_shows_the_snippet_and_links_to_the_row(as_viewer, busy):
    html = as_viewer.get("/search/", {"q": "narwhal"}).content.decode()
    row = busy.rows["output"]
    assert f'href="/chats/{busy.chat_id}/#tool-{row.pk}"' in html
    assert "found the <mark>narwhal</mark> here" in html
    assert "List files" in html and "Fix the flaky test" in html


def test_the_page_links_a_reply_hit_to_the_reply(as_viewer, busy):
    html = as_viewer.get("/search/", {"q": "okapi"}).content.decode()
    assert f'href="/chats/{busy.chat_id}/#reply-{busy.reply_id}"' in html
    assert "The **<mark>okapi</mark>** test was flaky." in html


def test_a_snippet_escapes_everything_but_its_own_marks(as_viewer, acme_viewer, acme):
    run = Run(acme)
    evil = '<script>alert("x")</script> <mark>fake</mark> <b onclick="x()">quagga</b> & more'
    run.call("Echo", agent_output=evil)
    (hit,) = found(acme_viewer, "quagga")
    assert "<script>" not in hit.snippet and "<b " not in hit.snippet
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in hit.snippet
    assert "&lt;mark&gt;fake&lt;/mark&gt;" in hit.snippet
    assert "<mark>quagga</mark>&lt;/b&gt; &amp; more" in hit.snippet
    assert re.sub(r"</?mark>", "", hit.snippet).count("<") == 0
    html = as_viewer.get("/search/", {"q": "quagga"}).content.decode()
    assert "<script>alert" not in html and "<b onclick" not in html


def test_a_label_match_is_escaped_too(acme_viewer, acme):
    Run(acme).call("Read <img src=x onerror=alert(1)> ibex")
    (hit,) = found(acme_viewer, "ibex")
    assert hit.field == "label"
    assert str(hit.snippet) == "Read &lt;img src=x onerror=alert(1)&gt; <mark>ibex</mark>"


def test_a_long_output_is_cut_around_the_match(acme_viewer, acme):
    filler = "lorem ipsum dolor sit amet " * 200
    Run(acme).call("Log", agent_output=filler + "the tapir woke " + filler)
    (hit,) = found(acme_viewer, "tapir")
    assert "<mark>tapir</mark>" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < snippets.SNIPPET_CHARS + 60


def test_a_snippet_prefers_the_window_with_every_word(acme_viewer, acme):
    far = "lemur " + "x " * 400
    Run(acme).call("Log", agent_output=far + "a lemur met a gecko")
    (hit,) = found(acme_viewer, "lemur gecko")
    assert "<mark>lemur</mark> met a <mark>gecko</mark>" in hit.snippet


def test_someone_outside_the_workspace_finds_nothing(
    acme_viewer, busy, globex, outsider, as_outsider
):
    Run(globex).call("Read zebra notes")
    hits = found(outsider, "zebra")
    assert [h.chat.workspace.slug for h in hits] == ["globex"]
    assert all(found(outsider, word) == [] for word in ["giraffe", "walrus", "narwhal", "okapi"])
    html = as_outsider.get("/search/", {"q": "okapi"}).content.decode()
    assert "Nothing found" in html and str(busy.chat_id) not in html


def test_a_superuser_finds_everything_and_anonymous_people_log_in_first(client, busy):
    root = User.objects.create_superuser("root", password=None)
    assert len(found(root, "okapi")) == 1
    response = client.get("/search/", {"q": "okapi"})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_shows_the_form_and_nothing_else(as_viewer, busy, query):
    response = as_viewer.get("/search/", {"q": query})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="q"' in html and 'class="hit' not in html and 'class="empty"' not in html


@pytest.mark.parametrize("query", ["!!! --- ***", '"', "()", "-", "_"])
def test_a_query_without_words_asks_for_words(as_viewer, busy, query):
    html = as_viewer.get("/search/", {"q": query}).content.decode()
    assert "letters or digits" in html and 'class="hit' not in html


def test_near_and_other_operators_are_plain_words(acme_viewer, acme):
    row = Run(acme).call("Keep NEAR the zebra, NOT the lion")
    assert [h.id for h in found(acme_viewer, "NEAR zebra NOT")] == [row.pk]
    assert found(acme_viewer, "zebra NOT elephant") == []


def test_no_query_parameter_shows_the_form(as_viewer):
    response = as_viewer.get("/search/")
    assert response.status_code == 200 and 'role="search"' in response.content.decode()


SYNTAX = [
    '"zebra',
    'zebra"',
    '"zebra" "',
    "zebra*",
    "*zebra",
    "**",
    "NEAR(zebra md)",
    "NEAR(zebra",
    "zebra NEAR/2 md",
    "-zebra",
    "zebra -md",
    "(zebra",
    "zebra)",
    "((zebra))",
    "zebra OR",
    "AND zebra",
    "zebra NOT",
    "label:zebra",
    "{label}: zebra",
    "^zebra",
    "zebra:*",
    "zebra & | ! <-> <2>",
    "'zebra'",
    "zebra\\",
    "zebra%",
    "zebra_",
    "zebra;--",
    "zebra\x00",
    "ｚｅｂｒａ",  # full-width letters: NFKC makes them plain
    "zebra " + "x" * 5000,
    " ".join(["zebra"] * 100),
]


@pytest.mark.parametrize("query", SYNTAX)
def test_search_syntax_is_only_words_and_never_an_error(as_viewer, acme_viewer, busy, query):
    hits = found(acme_viewer, query)
    assert all(h.chat.pk == busy.chat_id for h in hits)
    assert as_viewer.get("/search/", {"q": query}).status_code == 200


@pytest.mark.parametrize("query", ['"zebra', "-zebra", "(zebra)", "'zebra'", "zebra*"])
def test_syntax_around_a_word_still_finds_it(acme_viewer, busy, query):
    assert [h.field for h in found(acme_viewer, query)] == ["label"]


def test_the_last_word_matches_as_a_prefix(acme_viewer, busy):
    assert [h.field for h in found(acme_viewer, "zeb")] == ["label"]
    assert [h.field for h in found(acme_viewer, "flaky oka")] == ["reply"]
    assert found(acme_viewer, "zeb ") == []  # a finished word is a whole word
    assert found(acme_viewer, "zeb md") == []  # only the last word is a prefix


def test_every_word_must_match(acme_viewer, busy):
    assert len(found(acme_viewer, "okapi flaky")) == 1
    assert found(acme_viewer, "okapi walrus") == []


def test_case_and_accents(acme_viewer, acme):
    Run(acme).call("Déjà vu in CAFÉ.py")
    assert len(found(acme_viewer, "déjà café")) == 1
    assert len(found(acme_viewer, "DÉJÀ")) == 1


def test_paths_and_identifiers_split_into_words(acme_viewer, acme):
    run = Run(acme)
    run.call("Read tests/test_merge.py")
    run.call("Fetch https://example.org/api?q=wombat")
    run.call("Mail ops@koala.dev")
    assert len(found(acme_viewer, "test_merge")) == 1
    assert len(found(acme_viewer, "merge.py")) == 1
    assert len(found(acme_viewer, "wombat")) == 1
    assert len(found(acme_viewer, "koala")) == 1


def test_a_title_hit_ranks_first(acme_viewer, acme):
    run = Run(acme)
    run.call("Show log", agent_output="heron " * 50 + "heron again")
    run.say("heron heron heron, the heron reply")
    title = run.call("Read heron.md")
    hits = found(acme_viewer, "heron")
    assert hits[0].id == title.pk
    assert len(hits) == 3
    assert hits[0].rank > hits[1].rank >= hits[2].rank > 0


def test_an_updated_row_is_found_by_its_new_words_not_its_old_ones(acme_viewer, acme):
    run = Run(acme)
    row = run.call("Build alpaca", agent_output="compiling mongoose")
    row.agent_label, row.agent_output = "Build llama", "linked meerkat"
    row.save(update_fields=["agent_label", "agent_output"])
    assert found(acme_viewer, "alpaca") == [] and found(acme_viewer, "mongoose") == []
    assert [h.id for h in found(acme_viewer, "llama")] == [row.pk]
    assert [h.id for h in found(acme_viewer, "meerkat")] == [row.pk]


def test_a_streaming_reply_is_found_by_every_chunk(acme_viewer, acme):
    run = Run(acme)
    run.say("First the badger, ")
    assert [h.id for h in found(acme_viewer, "badger")] == [run.reply_id]
    run.say("then the marmot.")
    assert [h.id for h in found(acme_viewer, "badger marmot")] == [run.reply_id]


def test_a_row_changed_by_the_orm_is_reindexed(acme_viewer, acme):
    row = Run(acme).call("Read bison.md")
    ToolActivity.objects.filter(pk=row.pk).update(agent_label="Read yak.md")
    assert found(acme_viewer, "bison") == [] and len(found(acme_viewer, "yak")) == 1
    ToolActivity.objects.filter(pk=row.pk).update(agent_label=None)
    assert found(acme_viewer, "yak") == []


def test_a_deleted_chats_rows_and_reply_vanish(acme_viewer, acme, busy):
    other = Run(acme)
    other.call("Read zebra too")
    assert len(found(acme_viewer, "zebra")) == 2
    busy.chat.delete()
    assert [h.chat.pk for h in found(acme_viewer, "zebra")] == [other.chat_id]
    assert all(found(acme_viewer, word) == [] for word in ["giraffe", "walrus", "narwhal", "okapi"])
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM activity_search_doc WHERE chat_id = %s", [busy.chat_id.hex]
            )
            assert cursor.fetchone() == (0,)
            cursor.execute(
                "INSERT INTO activity_search_fts (activity_search_fts) VALUES ('integrity-check')"
            )


def test_hits_come_in_pages_and_the_page_shows_them_as_one_run(as_viewer, acme_viewer, acme):
    run = Run(acme)
    ToolActivity.objects.bulk_create(
        [run.new_row(f"Step {n} of the puffin plan") for n in range(45)]
    )
    pages = [found(acme_viewer, "puffin", limit=20, offset=o) for o in (0, 20, 40)]
    assert [len(page) for page in pages] == [20, 20, 5]
    ids = [h.id for page in pages for h in page]
    assert len(ids) == len(set(ids)) == 45
    html = as_viewer.get("/search/", {"q": "puffin"}).content.decode()
    assert html.count('class="search-run"') == 1 and html.count('class="search-line ') == 5
    assert "40 more in this run" in html and 'rel="next"' not in html


@pytest.mark.parametrize("page", ["0", "-1", "x", "99999999999", "2.5", ""])
def test_a_bad_page_number_is_the_first_page(as_viewer, busy, page):
    response = as_viewer.get("/search/", {"q": "zebra", "page": page})
    assert response.status_code == 200 and "<mark>zebra</mark>" in response.content.decode()


def test_the_header_has_a_search_box(as_viewer):
    html = as_viewer.get("/").content.decode()
    assert 'action="/search/"' in html and 'name="q"' in html


def test_the_query_takes_a_fixed_number_of_queries(
    acme_viewer, acme, django_assert_max_num_queries
):
    run = Run(acme)
    ToolActivity.objects.bulk_create([run.new_row(f"Read mole {n}") for n in range(10)])
    run.say("the mole is here")
    with django_assert_max_num_queries(4):
        assert len(found(acme_viewer, "mole")) == 11


def test_terms_are_plain_words():
    assert search.terms('"Fix" NEAR(the) -flaky* test') == search.Terms(
        ("fix", "near", "the", "flaky", "test"), prefix=True
    )
    assert search.terms("zebra ") == search.Terms(("zebra",), prefix=False)
    assert search.terms("a") == search.Terms(("a",), prefix=False)  # too short for a prefix
    assert search.terms(" \t*()\"' ") is None
    assert search.terms("x" * 101) is None


def test_the_search_index_is_in_place():
    """Django's SQLite schema editor rebuilds a table for most ALTERs, dropping its triggers.

    If this fails after a new migration, that migration must re-create the triggers and
    rebuild the index: see activity/migrations/0007_search.py.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            events: tuple[str, ...] = ("insert", "update", "delete")
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
            events = ("insert", "update", "delete", "truncate")
        names = {name for (name,) in cursor.fetchall()}
    expected = {f"activity_search_{kind}_{event}" for kind in ("row", "reply") for event in events}
    assert expected <= names


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plan")
def test_postgresql_uses_the_indexes(as_viewer, busy):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for table in ["activity_search_row", "activity_search_reply"]:
            cursor.execute(
                f"EXPLAIN SELECT 1 FROM {table} WHERE words @@ to_tsquery('simple', 'zebra')"
            )
            plan = "\n".join(line for (line,) in cursor.fetchall())
            assert f"{table}_words" in plan, plan


def test_a_row_that_loses_its_words_is_no_longer_found(acme_viewer, acme):
    row = Run(acme).call("Read stoat.md", agent_output="stoat")
    row.agent_label = row.agent_output = None
    row.save()
    assert found(acme_viewer, "stoat") == []


def test_a_deleted_row_vanishes(acme_viewer, busy):
    busy.rows["label"].delete()
    assert found(acme_viewer, "zebra") == [] and len(found(acme_viewer, "narwhal")) == 1


def text(value: str) -> list[dict]:
    return [{"type": "content", "content": {"type": "text", "text": value}}]


def question(seq: int, call_id: str, message: str) -> dict:
    return frames.acp(
        seq,
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "sessionId": "s1",
                "toolCallId": call_id,
                "message": message,
                "requestedSchema": {"type": "object", "properties": {}},
            },
        },
    )


def test_what_the_runner_sends_is_found(acme_viewer, acme):
    change, _ = presence.connect(acme.pk, uuid.uuid4(), "runner")
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    raw = [
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "c1", "Read zebra.md", kind="read"),
        frames.tool_call(3, "c2", "Run", kind="execute", rawInput={"command": "pytest -k walrus"}),
        question(4, "c2", "Should I feed the giraffe?"),
        frames.tool_call(5, "c3", "List", kind="read", content=text("found the narwhal")),
        frames.tool_update(6, "c3", status="failed"),
        frames.say(7, "The **okapi** "),
        frames.say(8, "test was flaky."),
        frames.tool_update(9, "c1", title="Read ibex.md"),
    ]
    ingest(change.chat_id, [runner_frame.validate_python(r) for r in raw])
    fields = {
        word: [(h.kind, h.field) for h in found(acme_viewer, word)]
        for word in ["ibex", "walrus", "giraffe", "narwhal", "reported", "okapi flaky", "zebra"]
    }
    assert fields == {
        "ibex": [("row", "label")],
        "walrus": [("row", "input")],
        "giraffe": [("row", "summary")],
        "narwhal": [("row", "output")],
        "reported": [("row", "error")],
        "okapi flaky": [("reply", "reply")],
        "zebra": [],
    }
    assert Chat.objects.get(pk=change.chat_id).tool_activities.count() == 3


def reply_blocks(run: Run) -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT count(*) FROM activity_search_doc WHERE ref = %s AND kind = 'reply'",
                [run.reply_id.hex],
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM activity_search_reply WHERE message_id = %s", [run.reply_id]
            )
        (count,) = cursor.fetchone()
        return int(count)


def test_a_long_reply_is_found_in_every_block_as_it_streams(acme_viewer, acme):
    run = Run(acme)
    words = [f"w{n}x" for n in range(6000)]  # 40,890 characters: six blocks
    for start in range(0, len(words), 250):
        run.say(" ".join(words[start : start + 250]) + " ")
        assert [h.id for h in found(acme_viewer, words[start + 249])] == [run.reply_id]
    assert reply_blocks(run) == 6
    for word in words[::97]:
        assert [h.id for h in found(acme_viewer, word)] == [run.reply_id], word
    assert found(acme_viewer, "w12 ") == [] and len(found(acme_viewer, "w1234")) == 1
    (hit,) = found(acme_viewer, "w5000x w5001x")
    assert "<mark>w5000x</mark> <mark>w5001x</mark>" in hit.snippet


def test_a_reply_rewritten_or_cut_short_forgets_its_old_words(acme_viewer, acme):
    run = Run(acme)
    run.say("start " + "filler " * 3000 + "pangolin " + "filler " * 1000 + "tail")
    assert reply_blocks(run) == 4 and len(found(acme_viewer, "pangolin")) == 1
    run.reply.markdown = "rewritten start " + run.reply.markdown[6:]
    run.reply.save(update_fields=["markdown"])
    assert found(acme_viewer, "start") != [] and len(found(acme_viewer, "rewritten pangolin")) == 0
    assert (
        len(found(acme_viewer, "rewritten")) == 1
        and len(found(acme_viewer, "pangolin filler")) == 1
    )
    run.reply.markdown = "short now"
    run.reply.save(update_fields=["markdown"])
    assert reply_blocks(run) == 1
    assert found(acme_viewer, "pangolin") == [] and found(acme_viewer, "filler") == []
    assert len(found(acme_viewer, "short now")) == 1
    run.reply.markdown = ""
    run.reply.save(update_fields=["markdown"])
    assert reply_blocks(run) == 0 and found(acme_viewer, "short") == []
    run.reply.delete()
    assert reply_blocks(run) == 0


def test_a_word_at_a_block_boundary_is_whole(acme_viewer, acme):
    run = Run(acme)
    run.say("a" * 7_995 + " boundaryword here")  # the word straddles character 8,000
    assert [h.id for h in found(acme_viewer, "boundaryword")] == [run.reply_id]
    assert found(acme_viewer, "ndaryword") == [] and found(acme_viewer, "bound") != []


def test_a_word_streamed_across_a_block_boundary_is_whole(acme_viewer, acme):
    run = Run(acme)
    run.say("a" * 7_995 + " bound")  # ends inside the word, past character 8,000
    run.say("aryword")
    run.say(" and on")
    assert [h.id for h in found(acme_viewer, "boundaryword")] == [run.reply_id]
    assert found(acme_viewer, "ndaryword") == [] and found(acme_viewer, "aryword") == []


def test_a_reply_with_no_blank_for_pages_is_still_indexed(acme_viewer, acme):
    run = Run(acme)
    run.say("日本" * 4_000)  # 24,000 bytes and no blank: the blocks are cut inside it
    run.say(" 東京タワー and the quokka")
    assert [h.id for h in found(acme_viewer, "quokka")] == [run.reply_id]
    assert [h.id for h in found(acme_viewer, "東京タワー")] == [run.reply_id]
    run.say(" more")
    run.reply.markdown = run.reply.markdown.replace("quokka", "wombat")
    run.reply.save(update_fields=["markdown"])
    assert found(acme_viewer, "quokka") == [] and len(found(acme_viewer, "wombat more")) == 1
    run.reply.delete()
    assert reply_blocks(run) == 0 and found(acme_viewer, "wombat") == []
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO activity_search_fts (activity_search_fts) VALUES ('integrity-check')"
            )


def index_state() -> set[tuple]:
    """What the index holds, by document (kind, id, block) rather than by internal rowid."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT 'reply', message_id, block, chat_id, words::text "
                "FROM activity_search_reply UNION ALL "
                "SELECT 'row', tool_id, 0, chat_id, title::text || words::text "
                "FROM activity_search_row"
            )
        else:
            cursor.execute(
                "INSERT INTO activity_search_fts (activity_search_fts) VALUES ('integrity-check')"
            )
            cursor.execute(
                "SELECT d.kind, d.ref, d.chat_id, d.block, f.label, f.summary, f.error, f.input, "
                "f.output, f.reply FROM activity_search_fts AS f "
                "JOIN activity_search_doc AS d ON d.id = f.rowid"
            )
        return set(cursor.fetchall())


def test_the_index_always_equals_a_fresh_build(as_viewer, acme):
    """Random writes of every kind; then the index holds exactly what a rebuild would."""
    rng = random.Random(7)
    vocabulary = ["alpha", "beta", "délta", "東京", "x_y", "a.b/c", "\n", "  ", "q" * 90, "z" * 250]
    runs = [Run(acme) for _ in range(3)]
    rows = [run.call(f"Row {n}", agent_output="seed") for n, run in enumerate(runs * 2)]

    def words(count: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(count))

    for _ in range(400):
        run, row = rng.choice(runs), rng.choice(rows)
        action = rng.random()
        if len(run.reply.markdown) > 90_000:  # past the indexed blocks nothing changes
            run.reply.markdown = run.reply.markdown[: rng.randint(0, 90_000)]
            run.reply.save(update_fields=["markdown"])
        elif action < 0.4:
            run.say(words(rng.choice([1, 2, 5, 20, 300])))
        elif action < 0.5:  # end just before or after a block boundary, inside a word
            size = len(run.reply.markdown.encode())
            run.say("y" * max(1, (size // 8_000 + 1) * 8_000 + rng.randint(-5, 30) - size))
        elif action < 0.6:
            cut = rng.randint(0, len(run.reply.markdown))
            run.reply.markdown = words(3) + run.reply.markdown[cut:]
            run.reply.save(update_fields=["markdown"])
        elif action < 0.65:
            run.reply.markdown = run.reply.markdown[: rng.randint(0, len(run.reply.markdown))]
            run.reply.save(update_fields=["markdown"])
        elif action < 0.97 and row.pk is not None:
            field = rng.choice(["agent_label", "agent_summary", "agent_input", "agent_output"])
            setattr(row, field, rng.choice([None, words(rng.randint(1, 50))]))
            row.status = rng.choice([row.status, *ToolStatus])
            row.save(update_fields=[field, "status"])
        elif row.pk is not None:
            row.delete()
            rows.remove(row)
            rows.append(run.call("A new row", agent_input=words(5)))
    runs[0].chat.delete()

    actual = index_state()
    migration = importlib.import_module("activity.migrations.0007_search")
    with connection.cursor() as cursor:  # build afresh, as the migration does for old data
        if connection.vendor == "sqlite":
            cursor.execute("DELETE FROM activity_search_fts")
            cursor.execute("DELETE FROM activity_search_doc")
            for sql in migration.SQLITE_BACKFILL:
                cursor.execute(sql)
        else:
            cursor.execute("DELETE FROM activity_search_reply")
            cursor.execute("DELETE FROM activity_search_row")
            for sql in migration.POSTGRES_BACKFILL:
                cursor.execute(sql)
    assert index_state() == actual
    assert actual  # not a vacuous comparison


def test_a_running_calls_output_is_found_once_the_call_has_finished(acme_viewer, acme):
    row = Run(acme).call("Run the suite", status=ToolStatus.RUNNING, agent_output="collecting")
    for chunk in [" dingo", " emu", " koala"]:  # streaming: not indexed chunk by chunk
        row.agent_output = f"{row.agent_output}{chunk}"
        row.save(update_fields=["agent_output", "version"])
        assert found(acme_viewer, "dingo") == []
    assert len(found(acme_viewer, "suite")) == 1  # the title is indexed at once
    row.status = ToolStatus.FAILED
    row.save(update_fields=["status"])
    assert [h.field for h in found(acme_viewer, "dingo koala")] == ["output"]
    row.agent_output = "rewritten"
    row.save(update_fields=["agent_output"])
    assert found(acme_viewer, "dingo") == [] and len(found(acme_viewer, "rewritten")) == 1
    row.status = ToolStatus.RUNNING  # a stray update never does this, but the index follows
    row.save(update_fields=["status"])
    assert found(acme_viewer, "rewritten") == []
