"""Reviewing past turns: as they happened, at any size; permalinks, comments and exports."""

from __future__ import annotations

import json
import uuid

import jsonschema  # type: ignore[import-untyped]
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from activity.core.contract import tool_activity_json_schema
from activity.live import answers
from activity.live.ingest import ingest
from activity.models import (
    AgentToken,
    Chat,
    Comment,
    Prompt,
    ToolActivity,
    Workspace,
)
from activity.push.pushes import render_changes
from activity.review import reads
from activity.wire.frames import runner_frame
from tests import frames
from tests.factories import run

pytestmark = pytest.mark.django_db


def story(workspace: Workspace, approver: User) -> Chat:
    """A turn whose edit waited for the approver's answer on the web."""
    attempt = uuid.uuid4()
    chat = run(
        workspace,
        frames.turn_started(1, attempt, uuid.uuid4(), prompt="Fix the build"),
        frames.say(2, "First I look around. "),
        frames.tool_call(3, "ls", "List files", kind="read", status="completed"),
        frames.say(4, "Now the fix. "),
        frames.tool_call(
            5,
            "edit",
            "Edit a.py",
            kind="edit",
            content=[{"type": "content", "content": {"type": "text", "text": "```py\nx = 1\n```"}}],
        ),
        frames.permission(6, 1, "edit", "Edit a.py"),
    )
    prompt = Prompt.objects.get(chat=chat)
    answers.record(prompt.pk, approver, "Allowed once", {"outcome": "selected"}, "test")
    ingest(
        chat.pk,
        [
            runner_frame.validate_python(raw)
            for raw in (
                frames.outcome(7, 1, "allow-once"),
                frames.tool_update(8, "edit", status="completed"),
                frames.say(9, "Done."),
                frames.turn_ended(10, attempt),
            )
        ],
    )
    return Chat.objects.get(pk=chat.pk)


def big_turn(workspace: Workspace, calls: int) -> Chat:
    attempt = uuid.uuid4()
    raw = [frames.turn_started(1, attempt, uuid.uuid4())]
    raw += [
        frames.tool_call(n + 2, f"c{n}", f"Call {n}", kind="read", status="completed")
        for n in range(calls)
    ]
    return run(workspace, *raw)


def body(response) -> list:
    rows: list = json.loads(b"".join(response.streaming_content))
    return rows


def test_the_export_is_the_contract_json_with_live_null(acme, as_approver, acme_approver):
    chat = story(acme, acme_approver)
    rows = body(as_approver.get(f"/api/chats/{chat.pk}/tool-activity"))
    schema = tool_activity_json_schema()
    assert [r["agent_label"] for r in rows] == ["List files", "Edit a.py"]
    for row in rows:
        jsonschema.validate(row, schema)
        assert row["live"] is None and row["chat_id"] == str(chat.pk)


def test_the_export_takes_an_agent_token_of_the_chats_workspace(acme, acme_approver, globex):
    chat = story(acme, acme_approver)
    _, token = AgentToken.issue(acme, "ci")
    client = Client()
    ok = client.get(f"/api/chats/{chat.pk}/tool-activity", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ok.status_code == 200 and len(body(ok)) == 2
    _, other = AgentToken.issue(globex, "ci")
    refused = client.get(
        f"/api/chats/{chat.pk}/tool-activity", HTTP_AUTHORIZATION=f"Bearer {other}"
    )
    assert refused.status_code == 404
    assert client.get(f"/api/chats/{chat.pk}/tool-activity").status_code == 401


def test_the_transcript_reads_the_turn_in_order_with_decisions(acme, as_approver, acme_approver):
    chat = story(acme, acme_approver)
    response = as_approver.get(f"/chats/{chat.pk}/transcript.md")
    assert response["Content-Disposition"].endswith(f'koruweb-{chat.pk}.md"')
    text = response.content.decode()
    order = [
        "Fix the build",
        "First I look around.",
        "List files",
        "Now the fix.",
        "Edit a.py",
        "Done.",
    ]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "Allowed once by alice" in text
    assert "````\n  ```py" in text  # output with backticks inside gets a longer fence


def test_the_transcript_keeps_what_the_team_said_of_each_call_under_it(
    acme, as_approver, acme_approver
):
    chat = story(acme, acme_approver)
    row = ToolActivity.objects.get(chat=chat, tool_call_id="edit")
    as_approver.post(f"/tools/{row.pk}/comments", {"text": "Why **a.py**?\n\nSee the plan."})
    text = as_approver.get(f"/chats/{chat.pk}/transcript.md").content.decode()
    edit, done = text.index("Edit a.py"), text.index("Done.")
    said = text.index("alice commented at")
    assert edit < said < done  # under its call
    assert "  > Why **a.py**?\n  >\n  > See the plan." in text


def test_the_turn_page_puts_each_call_where_it_happened_and_draws_the_timeline(
    acme, as_approver, acme_approver
):
    chat = story(acme, acme_approver)
    page = as_approver.get(f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/").content.decode()
    figure, html = page.split("</figure>")
    assert figure.count('<rect class="run') == 2
    assert html.index("First I look around") < html.index("List files") < html.index("Now the fix")
    assert html.index("Now the fix") < html.index("Edit a.py") < html.index("Done.")
    assert "Allowed once by alice" in html


def test_a_ten_thousand_call_turn_opens_with_as_many_queries_as_a_small_one(acme, as_approver):
    small, big = big_turn(acme, reads.LIVE_ROWS + 700), big_turn(acme, 10_000)
    counts = {}
    for name, chat in (("small", small), ("big", big)):
        for url in (f"/chats/{chat.pk}/", f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/"):
            with CaptureQueriesContext(connection) as queries:
                assert as_approver.get(url).status_code == 200
            counts[(name, url.count("turns"))] = len(queries)
    assert counts[("big", 0)] == counts[("small", 0)]
    assert counts[("big", 1)] == counts[("small", 1)]
    page = as_approver.get(f"/chats/{big.pk}/").content.decode()
    assert page.count('<tr id="tool-') == reads.LIVE_ROWS
    assert f"{10_000 - reads.LIVE_ROWS:,} earlier calls" in page


def turns_of_calls(workspace: Workspace, sizes: list[int], asks_first: bool = False) -> Chat:
    """A run of one turn per size, each turn's calls then its closing words; with
    ``asks_first``, the first call of all asks a person and is still waiting."""
    raw: list[dict] = []
    seq = 0
    for t, size in enumerate(sizes):
        attempt = uuid.uuid4()
        raw.append(frames.turn_started(seq := seq + 1, attempt, uuid.uuid4(), prompt=f"Turn {t}"))
        for n in range(size):
            status = "pending" if asks_first and (t, n) == (0, 0) else "completed"
            title = f"Call {t}.{n}"
            raw.append(frames.tool_call(seq := seq + 1, f"t{t}c{n}", title, status=status))
            if asks_first and (t, n) == (0, 0):
                raw.append(frames.permission(seq := seq + 1, 1, "t0c0", f"Call {t}.{n}"))
        raw.append(frames.say(seq := seq + 1, f"Turn {t} is done.", message_id=f"m{t}"))
        if t < len(sizes) - 1:
            raw.append(frames.turn_ended(seq := seq + 1, attempt))
    return run(workspace, *raw)


def test_a_run_page_shows_the_runs_latest_calls_whatever_its_turns_and_says_what_it_left(
    acme, as_approver
):
    chat = turns_of_calls(acme, [150, 60, 70])  # 280 calls: the page shows the latest 100
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert page.count('<tr id="tool-') == reads.LIVE_ROWS == 100
    assert "Call 2.0<" in page and "Call 1.30<" in page and "Call 1.29<" not in page
    assert "Call 0." not in page
    assert "150 earlier calls" in page and "30 earlier calls" in page
    # every turn keeps its head and its closing words, in order
    assert page.index("Turn 0 is done.") < page.index("Turn 1 is done.") < page.index("Turn 2")
    short = turns_of_calls(acme, [3])
    with CaptureQueriesContext(connection) as one_turn:
        as_approver.get(f"/chats/{short.pk}/")
    with CaptureQueriesContext(connection) as three_turns:
        as_approver.get(f"/chats/{chat.pk}/")
    assert len(three_turns) == len(one_turn)


def test_a_call_waiting_for_a_person_stays_on_the_run_page_however_many_calls_came_after(
    acme, as_approver
):
    chat = turns_of_calls(acme, [205], asks_first=True)  # its first call asks, 204 follow
    waiting = ToolActivity.objects.get(chat=chat, tool_call_id="t0c0")
    prompt = Prompt.objects.get(chat=chat, tool=waiting, closed_at__isnull=True)
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert f'id="tool-{waiting.pk}"' in page and f'id="prompt-{prompt.pk}"' in page
    assert page.count('<tr id="tool-') == reads.LIVE_ROWS + 1
    assert "104 earlier calls" in page
    assert f'id="jump-prompt" class="jump waiting" href="#prompt-{prompt.pk}"' in page
    found = as_approver.get(f"/tools/{waiting.pk}/")["Location"]
    assert found == f"/chats/{chat.pk}/#tool-{waiting.pk}"


def test_a_permalink_to_an_old_call_of_a_long_turn_finds_its_page(acme, as_approver):
    chat = big_turn(acme, 1200)
    first = ToolActivity.objects.get(chat=chat, tool_call_id="c0")
    late = ToolActivity.objects.get(chat=chat, tool_call_id="c1199")
    assert as_approver.get(f"/tools/{late.pk}/")["Location"] == f"/chats/{chat.pk}/#tool-{late.pk}"
    found = as_approver.get(f"/tools/{first.pk}/")["Location"]
    assert found == f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/?page=1#tool-{first.pk}"
    assert f'id="tool-{first.pk}"' in as_approver.get(found.split("#")[0]).content.decode()


def test_a_member_comments_on_a_call_and_everyone_sees_it(acme, as_approver, acme_approver):
    chat = story(acme, acme_approver)
    row = ToolActivity.objects.get(chat=chat, tool_call_id="edit")
    version = Chat.objects.get(pk=chat.pk).version
    response = as_approver.post(
        f"/tools/{row.pk}/comments", {"text": "Why <b>a.py</b>?"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 204
    assert Comment.objects.get(tool=row).text == "Why <b>a.py</b>?"
    row.refresh_from_db()
    assert row.version > version
    pushed, _ = render_changes(chat.pk, version)  # what every other viewer is sent
    assert "Why &lt;b&gt;a.py&lt;/b&gt;?" in pushed
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert "Why &lt;b&gt;a.py&lt;/b&gt;?" in page


def test_an_outsider_can_neither_comment_nor_export(acme, acme_approver, as_outsider):
    chat = story(acme, acme_approver)
    row = ToolActivity.objects.get(chat=chat, tool_call_id="edit")
    assert as_outsider.post(f"/tools/{row.pk}/comments", {"text": "hi"}).status_code == 404
    assert as_outsider.get(f"/api/chats/{chat.pk}/tool-activity").status_code == 404
    assert as_outsider.get(f"/chats/{chat.pk}/transcript.md").status_code == 404
    assert not Comment.objects.exists()


# A key line and a token in the shapes activity/core/masking.py masks (issue 22).
KEY_LINE = "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_secret_in_a_comment_is_masked_before_it_is_stored_pushed_shown_or_exported(
    acme, as_approver, acme_approver
):
    chat = story(acme, acme_approver)
    row = ToolActivity.objects.get(chat=chat, tool_call_id="edit")
    version = Chat.objects.get(pk=chat.pk).version
    text = f"It printed\n\n    {KEY_LINE}\n\nand the token {GITHUB_TOKEN}: rotate both."
    response = as_approver.post(f"/tools/{row.pk}/comments", {"text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204

    stored = Comment.objects.get(tool=row).text
    assert "OPENAI_API_KEY=" + "*" * 38 in stored and "ghp_" + "*" * 36 in stored
    assert "rotate both." in stored and len(stored.encode()) == len(text.encode())
    pushed, _ = render_changes(chat.pk, version)  # what every other viewer is sent
    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    transcript = as_approver.get(f"/chats/{chat.pk}/transcript.md").content.decode()
    for shown in (stored, pushed, page, transcript):
        assert "abcdefghijklmnopqrstuvwxyz0123" not in shown and GITHUB_TOKEN not in shown
        assert "ghp_" + "*" * 36 in shown
    found = as_approver.get("/search/", {"q": "abcdefghijklmnopqrstuvwxyz0123"}).content.decode()
    assert "Nothing found" in found
