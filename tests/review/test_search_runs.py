"""The search page as people use it: matches grouped by run, a few lines each, filters in the
URL, identical lines counted, the match highlighted from escaped text, only runs you may see.

`make test` runs this file on SQLite and again on PostgreSQL.
"""

from __future__ import annotations

import itertools
import re
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from activity.core.contract import ToolApproval, ToolStatus
from activity.models import Chat, InferenceAttempt, Membership, Role, ToolActivity, Workspace
from activity.review import grouped
from tests import frames
from tests.factories import make_turn

pytestmark = pytest.mark.django_db


class Run:
    """A run with one turn; its calls are added straight to the database (the index follows
    every write, tests/review/test_search.py)."""

    def __init__(self, workspace: Workspace, title: str = "Fix the flaky test", **turn: Any):
        self.reply = make_turn(workspace, title=title, **turn)
        self.chat = self.reply.chat
        self.positions = itertools.count(1)

    def row(self, label: str, **fields: Any) -> ToolActivity:
        fields.setdefault("tool_name", "Bash")
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

    def calls(self, *labels: str, **fields: Any) -> list[ToolActivity]:
        return ToolActivity.objects.bulk_create([self.row(label, **fields) for label in labels])

    def say(self, text: str) -> None:
        self.reply.markdown += text
        self.reply.save(update_fields=["markdown"])

    def started(self, when: datetime) -> Run:
        Chat.objects.filter(pk=self.chat.pk).update(created_at=when)
        return self

    def ended(self, stop_reason: str = "end_turn") -> Run:
        InferenceAttempt.objects.filter(pk=self.reply.attempt_id).update(
            ended_at=frames.T0 + 1000, stop_reason=stop_reason
        )
        return self


def page(client: Client, **params: str) -> str:
    response = client.get("/search/", params)
    assert response.status_code == 200
    return response.content.decode()


def run_ids(html: str) -> list[str]:
    """The runs the page shows, in order."""
    return re.findall(r'<li class="search-run" id="run-([0-9a-f-]+)"', html)


def lines(html: str, run: Run) -> list[str]:
    """The text of each line a run shows (tags dropped), in order."""
    card = html.split(f'id="run-{run.chat.pk}"', 1)[1].split('<li class="search-run"', 1)[0]
    found = re.findall(r'<li class="search-line[^"]*"[^>]*>(.*?)</li>', card, re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", line).split()) for line in found]


def test_matches_are_grouped_by_run_with_its_title_agent_workspace_time_and_status(as_viewer, acme):
    greet = Run(acme, title="Fix the greeting", agent_name="claude-agent-acp").ended()
    greet.started(datetime(2026, 11, 3, 14, 5, tzinfo=UTC))
    greet.calls("Run python3 test_greet.py", "Read test_greet.py")
    untitled = Run(acme, title="", agent_name="codex-acp")
    untitled.calls("Edit greet.py to print test_greet")

    html = page(as_viewer, q="test_greet")
    assert sorted(run_ids(html)) == sorted([str(greet.chat.pk), str(untitled.chat.pk)])
    assert html.count('class="search-run"') == 2
    card = html.split(f'id="run-{greet.chat.pk}"')[1].split('class="search-run"')[0]
    assert "Fix the greeting" in card and "claude-agent-acp" in card and "Acme" in card
    assert '<time datetime="2026-11-03T14:05:00Z"' in card and "3 Nov 2026, 14:05" in card
    assert '<span class="badge is-succeeded" title="The agent finished the turn.">Finished' in card
    assert f'href="/chats/{greet.chat.pk}/"' in card
    assert "codex-acp run, " in html  # an untitled run goes by its agent and start
    assert "3 matches in 2 runs" in html


def test_identical_labels_in_a_run_are_one_line_with_a_count(as_viewer, acme):
    run = Run(acme)
    run.calls(*["Run python3 test_greet.py"] * 4, "Read test_greet.py")
    other = Run(acme)
    other.calls("Run python3 test_greet.py")

    html = page(as_viewer, q="test_greet")
    shown = lines(html, run)
    assert len(shown) == 2
    counted = [line for line in shown if "×4" in line]
    assert len(counted) == 1 and "Run python3" in counted[0]
    assert "4 calls with this label" in counted[0]
    assert not any("×" in line for line in lines(html, other))
    marked = "Run python3 <mark>test_greet</mark>.py"  # one mark for what was typed
    assert html.count(marked) == 2  # one line in each run
    assert "more in this run" not in html  # every match is on a line


def test_a_run_shows_five_lines_and_how_many_more_with_a_link_to_its_filtered_calls(
    as_viewer, acme
):
    run = Run(acme)
    run.calls(*["Run pytest"] * 3, *[f"Run pytest -k case{n}" for n in range(8)])
    html = page(as_viewer, q="pytest")
    assert len(lines(html, run)) == grouped.LINES_PER_RUN
    (more,) = re.findall(r'<p class="search-more"><a href="([^"]+)">([^<]+)</a>', html)
    href = more[0].replace("&amp;", "&")
    # The label shared by three calls is the best match, or as good and the first: one line, ×3.
    assert "×3" in html and more[1] == "4 more in this run"
    # Equal matches in the order the run made them.
    assert [line.split()[-1] for line in lines(html, run)[1:]] == [f"case{n}" for n in range(4)]
    url = urlsplit(href)
    assert url.path == f"/chats/{run.chat.pk}/" and parse_qs(url.query) == {"q": ["pytest"]}
    filtered = as_viewer.get(href).content.decode()
    assert "11 of 11 calls match “pytest”" in filtered


def test_a_query_matching_hundreds_of_calls_in_one_run_shows_five_lines_and_the_rest_counted(
    as_viewer, acme
):
    run = Run(acme)
    run.calls(*[f"Read src/module_{n}.py" for n in range(600)])
    html = page(as_viewer, q="module")
    assert len(lines(html, run)) == 5
    assert "595 more in this run" in html and "600 matches in 1 run" in html


def test_the_more_link_keeps_the_phrase_when_the_lines_hold_it_else_its_longest_word(
    as_viewer, acme
):
    run = Run(acme)
    run.calls(*[f"Run python3 test_greet.py --case {n}" for n in range(7)])
    html = page(as_viewer, q="python3 test_greet")
    (href,) = re.findall(r'class="search-more"><a href="([^"]+)"', html)
    assert parse_qs(urlsplit(href.replace("&amp;", "&")).query)["q"] == ["python3 test_greet"]
    html = page(as_viewer, q="case python3")  # the words stand apart in every label
    (href,) = re.findall(r'class="search-more"><a href="([^"]+)"', html)
    assert parse_qs(urlsplit(href.replace("&amp;", "&")).query)["q"] == ["python3"]


def test_each_filter_narrows_the_runs_and_stays_in_the_url(as_viewer, acme_viewer, acme):
    lab = Workspace.objects.create(slug="lab", name="Lab")
    Membership.objects.create(workspace=lab, user=acme_viewer, role=Role.VIEWER)
    old = Run(acme, agent_name="claude-agent-acp").started(datetime(2026, 1, 5, tzinfo=UTC))
    old.ended().calls("Read walrus.md", agent_kind="read")
    new = Run(acme, agent_name="codex-acp").started(datetime(2026, 6, 5, tzinfo=UTC))
    new.calls("Run walrus --fast", agent_kind="execute")
    elsewhere = Run(lab, agent_name="codex-acp").started(datetime(2026, 3, 1, tzinfo=UTC))
    elsewhere.ended("cancelled").calls("Fetch walrus facts", agent_kind="fetch")
    every = {str(r.chat.pk) for r in (old, new, elsewhere)}

    assert set(run_ids(page(as_viewer, q="walrus"))) == every
    cases = {
        "workspace": ("lab", elsewhere),
        "agent": ("claude-agent-acp", old),
        "status": ("running", new),
        "kind": ("execute", new),
        "since": ("2026-06-01", new),
        "until": ("2026-01-31", old),
    }
    for name, (value, kept) in cases.items():
        html = page(as_viewer, q="walrus", **{name: value})
        assert run_ids(html) == [str(kept.chat.pk)], name
        assert "clear filters" in html, name
    assert run_ids(page(as_viewer, q="walrus", status="cancelled")) == [str(elsewhere.chat.pk)]
    assert run_ids(page(as_viewer, q="walrus", status="finished")) == [str(old.chat.pk)]
    both = page(as_viewer, q="walrus", agent="codex-acp", since="2026-04-01")
    assert run_ids(both) == [str(new.chat.pk)]
    html = page(as_viewer, q="walrus", agent="codex-acp", kind="read")
    assert run_ids(html) == [] and "with these filters" in html and "Search without filters" in html
    # The form shows what is chosen, so the URL and the page agree.
    html = page(as_viewer, q="walrus", workspace="lab", kind="fetch")
    assert '<option value="lab" selected>' in html and '<option value="fetch" selected>' in html


def test_the_kind_filter_leaves_out_replies_and_reaches_the_runs_filtered_calls(as_viewer, acme):
    run = Run(acme)
    run.say("The heron test passes now.")
    run.calls(*[f"Run heron {n}" for n in range(7)], agent_kind="execute")
    run.calls("Read heron.md", agent_kind="read")
    html = page(as_viewer, q="heron", kind="execute")
    assert "reply" not in " ".join(lines(html, run)).split()
    assert "2 more in this run" in html
    (href,) = re.findall(r'class="search-more"><a href="([^"]+)"', html)
    query = parse_qs(urlsplit(href.replace("&amp;", "&")).query)
    assert query == {"q": ["heron"], "kind": ["execute"]}


def test_a_filter_that_cannot_apply_says_so_and_shows_nothing(as_viewer, acme, globex):
    Run(globex).calls("Read walrus.md")  # a workspace bob is not in
    Run(acme).calls("Read walrus.md")
    for params in ({"workspace": "globex"}, {"since": "not a date"}, {"kind": "dance"}):
        html = page(as_viewer, q="walrus", **params)
        assert "cannot apply" in html and run_ids(html) == [], params


def test_runs_come_twenty_a_page_best_match_first_or_newest_first(as_viewer, acme):
    made = []
    for n in range(45):
        run = Run(acme, title=f"Run {n}").started(datetime(2026, 1, 1 + n % 28, n % 24, tzinfo=UTC))
        run.calls(f"Read puffin_{n}.md" if n % 3 else f"Read notes {n}", agent_output="puffin")
        made.append(run)
    pages = [run_ids(page(as_viewer, q="puffin", page=str(n))) for n in (1, 2, 3)]
    assert [len(p) for p in pages] == [20, 20, 5]
    everything = [chat for p in pages for chat in p]
    assert len(set(everything)) == 45
    # Best match first: the runs whose call label holds the word come before the others.
    label_hits = {str(r.chat.pk) for n, r in enumerate(made) if n % 3}
    assert set(everything[: len(label_hits)]) == label_hits
    assert pages == [run_ids(page(as_viewer, q="puffin", page=str(n))) for n in (1, 2, 3)]
    first = page(as_viewer, q="puffin")
    assert "page 1 of 3" in first and 'rel="next"' in first and 'rel="prev"' not in first
    assert "?q=puffin&amp;page=2" in first and 'start="1"' in first
    third = page(as_viewer, q="puffin", page="3")
    assert 'start="41"' in third and 'rel="next"' not in third
    newest = [run_ids(page(as_viewer, q="puffin", sort="newest", page=str(n))) for n in (1, 2, 3)]
    started = dict(Chat.objects.values_list("pk", "created_at"))
    times = [started[uuid.UUID(chat)] for p in newest for chat in p]
    assert len(set(times)) == 45 and times == sorted(times, reverse=True)
    assert "newest runs first" in page(as_viewer, q="puffin", sort="newest")
    past = page(as_viewer, q="puffin", page="4")
    assert run_ids(past) == [] and "No more results" in past


def test_only_runs_of_your_workspaces_are_found(as_viewer, as_outsider, acme, globex):
    mine = Run(acme, title="Acme secret plan")
    mine.calls("Read okapi.md")
    mine.say("okapi reply")
    theirs = Run(globex, title="Globex plan")
    theirs.calls("Read okapi.md")
    outsider = page(as_outsider, q="okapi")
    assert run_ids(outsider) == [str(theirs.chat.pk)]
    assert "Acme secret plan" not in outsider and str(mine.chat.pk) not in outsider
    assert "1 match in 1 run" in outsider
    # Choosing a workspace they are not in does not show it either.
    assert run_ids(page(as_outsider, q="okapi", workspace="acme")) == []
    assert '<option value="acme"' not in outsider
    assert run_ids(page(as_viewer, q="okapi")) == [str(mine.chat.pk)]


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)> <mark>fake</mark> quagga &amp;'


def test_hostile_text_in_every_field_is_shown_escaped_with_only_its_own_marks(as_viewer, acme):
    workspace = Workspace.objects.create(slug="evil", name=HOSTILE)
    bob = User.objects.get(username="bob")
    Membership.objects.create(workspace=workspace, user=bob, role=Role.VIEWER)
    run = Run(workspace, title=HOSTILE, agent_name=HOSTILE)
    for column in ("agent_label", "agent_summary", "agent_input", "agent_output"):
        fields = {"agent_summary": "", "agent_input": "", "agent_output": "", column: HOSTILE}
        label = fields.pop("agent_label", None) or f"Call with {column}"
        run.calls(label, **fields)
    run.calls("Failing call", status=ToolStatus.FAILED, error_message=HOSTILE)
    run.say(HOSTILE)
    html = page(as_viewer, q="quagga")
    assert len(lines(html, run)) == 5  # label, summary, input, output, reply
    assert "<script>" not in html.split("</head>", 1)[1].replace('<script src="', "")
    assert "<img" not in html and "onerror=alert(1)&gt;" in html
    assert "&lt;mark&gt;fake&lt;/mark&gt;" in html
    body = html.split('<ol class="search-runs"', 1)[1].split("</ol>", 1)[0]
    assert body.count("<mark>quagga</mark>") >= 5 and body.count("<mark>") == body.count(
        "<mark>quagga</mark>"
    )
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


def mole_runs(workspace: Workspace, count: int, canceller: User) -> None:
    """Runs with nine matching calls (two with one label) and a matching reply; every other one
    cancelled by a person from the web, whom its status names."""
    for n in range(count):
        run = Run(workspace, title=f"Run {n}").ended("cancelled" if n % 2 else "end_turn")
        if n % 2:
            InferenceAttempt.objects.filter(pk=run.reply.attempt_id).update(cancelled_by=canceller)
        run.calls(*[f"Read mole {m}" for m in range(7)], "Read mole", "Read mole")
        run.say("the mole is here")


def queries_of(client: Client, **params: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        html = page(client, **params)
    return len(queries), html


def test_the_page_takes_the_same_number_of_queries_for_any_number_of_runs(
    as_viewer, acme_viewer, acme
):
    mole_runs(acme, 2, acme_viewer)
    page(as_viewer, q="mole")  # the first request of a session may do more
    few, html = queries_of(as_viewer, q="mole")
    assert len(run_ids(html)) == 2 and "cancelled by bob" in html.lower()
    mole_runs(acme, 18, acme_viewer)
    many, html = queries_of(as_viewer, q="mole")
    assert len(run_ids(html)) == 20 and html.count('class="search-line ') == 100
    assert many == few
    filtered, html = queries_of(as_viewer, q="mole", kind="other", status="cancelled")
    assert len(run_ids(html)) == 10 and filtered == few


def test_an_empty_query_says_what_to_type_and_links_the_runs_list_for_filters_alone(
    as_viewer, acme
):
    Run(acme).calls("Read walrus.md")
    html = page(as_viewer, q="", workspace="acme")
    assert run_ids(html) == [] and "Type words" in html
    assert 'href="/?workspace=acme"' in html


def test_unicode_queries_find_and_highlight(as_viewer, acme):
    run = Run(acme, title="Übersetzung")
    run.calls("Lies café_menü.md", "Run 東京タワー")
    html = page(as_viewer, q="menü")
    assert run_ids(html) == [str(run.chat.pk)] and "café_<mark>menü</mark>.md" in html
    assert "<mark>東京タワー</mark>" in page(as_viewer, q="東京タワー")
    assert "Übersetzung" in html  # the run's title, on its card


def test_a_very_long_query_says_what_was_searched(as_viewer, acme):
    Run(acme).calls("Read walrus.md")
    html = page(as_viewer, q="walrus " + " ".join(f"w{n}" for n in range(300)))
    assert "Only the first 12 words" in html and "Nothing found" in html
    html = page(as_viewer, q="walrus " + "x" * 5000)
    assert "Only the first 12 words" in html
    assert "Only the first" not in page(as_viewer, q="walrus")


def test_no_match_says_so_and_what_search_looks_at(as_viewer, acme):
    Run(acme).calls("Read walrus.md")
    html = page(as_viewer, q="narwhal")
    assert "Nothing found for “narwhal”" in html and "call labels" in html
