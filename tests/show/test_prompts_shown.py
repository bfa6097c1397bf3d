"""Approving with the change in view: every prompt shows what it asks about — the diff with its
files, the command with its directory, the question as its form — on the chat page, in the inbox
and on a page of its own; after the answer (above all after *Reject*, once the agent's refusal
has replaced the call's output) the page and the transcript still show what was refused, and by
whom. What was asked is kept once, bounded, in the row's ``agent_summary``."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client

from activity.core import prompts
from activity.core.contract import Limits
from activity.live import presence
from activity.models import Chat, Prompt, ToolActivity
from activity.runner.turns import with_cwd
from activity.wire.acp import META_CWD
from tests import frames
from tests.core.merge.events import request_permission
from tests.factories import apply

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = "/home/ana/project/notes.txt"
OLD, NEW = "first line\nsecond line\n", "first line\nsecond line!\n"
REFUSED = "User refused permission to run tool"
OPTIONS = [
    {"optionId": "allow-once", "name": "Yes", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Yes, and don't ask again", "kind": "allow_always"},
    {"optionId": "reject", "name": "No", "kind": "reject_once"},
]


def ask(seq: int, request_id: int, call: dict[str, Any] | None, **params: Any) -> dict[str, Any]:
    """A ``session/request_permission`` about ``call``, as claude-agent-acp sends it."""
    return frames.acp(
        seq,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": {"sessionId": "s1", "toolCall": call, "options": OPTIONS, **params},
        },
    )


def edit(call_id: str = "edit-1") -> dict[str, Any]:
    return {
        "toolCallId": call_id,
        "title": "Edit notes.txt",
        "kind": "edit",
        "status": "pending",
        "rawInput": {"file_path": NOTES, "old_string": "second line", "new_string": "second line!"},
        "content": [{"type": "diff", "path": NOTES, "oldText": OLD, "newText": NEW}],
    }


def bash(command: str = "pytest -x tests/ && echo done") -> dict[str, Any]:
    return {
        "toolCallId": "bash-1",
        "title": command,
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": command, "description": "Run the tests"},
        "content": [{"type": "content", "content": {"type": "text", "text": "Run the tests"}}],
    }


def running(acme: Any, *raw: dict[str, Any]) -> Chat:
    change, _ = presence.connect(acme.pk, uuid.uuid4(), "runner")
    apply(change.chat_id, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()), *raw)
    return Chat.objects.get(pk=change.chat_id)


def box(page: str, prompt: Prompt) -> str:
    """The prompt's box in a page's HTML."""
    found = re.search(
        rf'<div class="prompt-box[^"]*" id="prompt-{prompt.pk}".*?</form>', page, re.S
    )
    assert found, f"no open prompt box for {prompt.pk}"
    return found.group(0)


def shows_the_diff(html: str) -> bool:
    """The change as the rows show diffs (activity/show/diffs.py): its file, each line marked."""
    return (
        re.search(r'<tr class="del">.*?<td class="code">second line</td></tr>', html) is not None
        and re.search(r'<tr class="add">.*?<td class="code">second line!</td></tr>', html)
        is not None
        and '<span class="diff-path">home/ana/project/notes.txt</span>' in html
    )


# --- what is kept ------------------------------------------------------------------------------


def test_what_an_edit_asked_is_kept_once_in_the_rows_summary_with_its_diff(acme):
    chat = running(acme, ask(2, 7, edit()))
    row = ToolActivity.objects.get(chat=chat)
    prompt = Prompt.objects.get(chat=chat)

    assert row.agent_summary is not None
    assert row.agent_summary.startswith("Edit notes.txt\n\n--- a/home/ana/project/notes.txt\n")
    assert "-second line\n+second line!" in row.agent_summary
    assert prompt.summary == ""  # no second copy of the agent's words


def test_a_command_is_kept_with_the_directory_it_runs_in(acme):
    chat = running(acme, ask(2, 7, bash(), _meta={META_CWD: "/home/ana/project"}))
    row = ToolActivity.objects.get(chat=chat)

    view = prompts.asked(row.agent_summary)
    assert view.command == "pytest -x tests/ && echo done"
    assert view.cwd == "/home/ana/project" and view.text == "Run the tests"
    assert "Command, in /home/ana/project:\n```sh\npytest -x tests/ && echo done\n```" in (
        row.agent_summary or ""
    )


def test_the_directory_the_agent_names_wins_over_the_sessions():
    call = {**bash(), "rawInput": {"command": ["make", "test"], "cwd": "/srv/app"}}
    request = request_permission({"toolCall": call, "_meta": {META_CWD: "/home/ana"}})

    assert prompts.command_of(request) == ("make test", "/srv/app")


def test_a_v2_command_prompt_about_no_call_keeps_its_command_and_directory(acme):
    command = {"type": "command", "command": "rm -rf build", "cwd": "/home/ana/project"}
    chat = running(acme, ask(2, 7, None, title="Delete the build?", subject=command))
    prompt = Prompt.objects.get(chat=chat)

    view = prompts.asked(prompt.summary)
    assert prompt.tool_id is None
    assert (view.title, view.command, view.cwd) == (
        "Delete the build?",
        "rm -rf build",
        "/home/ana/project",
    )


def test_the_runner_adds_the_sessions_directory_and_never_the_agents_own_message():
    message = {"jsonrpc": "2.0", "id": 3, "method": "session/request_permission", "params": {}}
    sent = with_cwd(message, "/home/ana/project")
    said = {"params": {"_meta": {META_CWD: "/elsewhere"}}}

    assert sent["params"]["_meta"] == {META_CWD: "/home/ana/project"}
    assert message["params"] == {}  # the SDK still reads what the agent sent
    assert with_cwd(said, "/home/ana/project") is said


def test_what_was_asked_reads_back_in_its_parts_even_with_backticks_in_the_command():
    command = "cat <<'EOF' > notes.md\n```sh\nls\n```\n\nEOF"
    text = prompts.summary(
        request_permission({"toolCall": bash(command)}), None, Limits(content_chars=2_000)
    )

    view = prompts.asked(text)
    assert (view.title, view.command, view.text) == (command, command, "Run the tests")


def test_the_summary_is_bounded_by_the_short_bound_alone_and_the_content_bound_with_a_diff():
    limits = Limits(content_chars=1_000, short_chars=100)
    words = request_permission({"toolCall": {"toolCallId": "c", "title": "x" * 500}})
    big = "".join(f"line {n}\n" for n in range(500))
    change = request_permission({"toolCall": {**edit(), "content": [diff(big)]}})

    assert len(prompts.summary(words, None, limits) or "") == 100
    cut = prompts.summary(change, None, limits) or ""
    assert len(cut) == 1_000 and cut.endswith("more characters cut]")
    view = prompts.asked(cut)
    assert view.title == "Edit notes.txt" and view.files == ["home/ana/project/notes.txt"]
    assert view.diff is not None and "+line 1\n" in view.diff


def diff(new: str) -> dict[str, Any]:
    return {"type": "diff", "path": NOTES, "oldText": None, "newText": new}


# --- what pages show before the answer ---------------------------------------------------------


def test_the_chat_page_the_inbox_and_the_prompts_own_page_show_the_diff_before_answering(
    acme, as_approver: Client
):
    chat = running(acme, ask(2, 7, edit()))
    prompt = Prompt.objects.get(chat=chat)

    for url in (f"/chats/{chat.pk}/", "/inbox/", f"/prompts/{prompt.pk}/answer"):
        page = as_approver.get(url).content.decode()
        shown = box(page, prompt)
        assert shows_the_diff(shown), url
        assert "The agent asks:</span> Edit notes.txt" in shown, url


def test_the_inbox_shows_a_command_and_the_directory_it_runs_in(acme, as_approver: Client):
    running(acme, ask(2, 7, bash(), _meta={META_CWD: "/home/ana/project"}))
    prompt = Prompt.objects.get()

    shown = box(as_approver.get("/inbox/").content.decode(), prompt)
    assert '<pre class="command"><code>pytest -x tests/ &amp;&amp; echo done</code></pre>' in shown
    assert '<p class="cwd">in <code>/home/ana/project</code></p>' in shown
    assert "Run this command" in shown and "Run the tests" in shown


def test_the_inbox_shows_a_question_as_its_form_never_as_json(acme, as_approver: Client):
    questions = [{"question": "Which database should I use?", "header": "Database"}]
    chat = running(
        acme,
        frames.tool_call(2, "ask-1", "Asking for your input", kind="other"),
        frames.tool_update(3, "ask-1", rawInput={"questions": questions}),
        question(4, 8, "ask-1"),
    )
    prompt = Prompt.objects.get(chat=chat)

    page = as_approver.get("/inbox/").content.decode()
    shown = box(page, prompt)
    assert "The agent asks:</span> Which database should I use?" in shown
    assert '<input type="radio" name="question_0" value="Postgres">' in shown
    assert 'name="question_0_other"' in shown
    assert "questions: [" not in page and "&quot;question&quot;" not in page  # the input's JSON
    # Said once where people see it; the form's fieldset is still named by it for screen readers.
    seen = re.sub(r'<span class="visually-hidden">[^<]*</span>', "", shown)
    assert seen.count("Which database should I use?") == 1
    assert '<span class="visually-hidden">Which database should I use?</span></legend>' in shown


def question(seq: int, request_id: int, call_id: str) -> dict[str, Any]:
    asked = frames.elicitation(seq, request_id, frames.CLAUDE_QUESTION)
    asked["message"]["params"]["toolCallId"] = call_id
    return asked


def test_a_viewer_sees_what_is_asked_without_the_buttons(acme, as_viewer: Client):
    chat = running(acme, ask(2, 7, edit()))

    page = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    before_form = page.split('<form class="answer"')[0]
    assert shows_the_diff(before_form)  # outside the form a viewer's page hides


# --- after the answer --------------------------------------------------------------------------


def refuse(acme: Any, as_approver: Client) -> tuple[Chat, Prompt]:
    """alice rejects the edit; claude tells the runner, then fails the call with its refusal."""
    chat = running(acme, ask(2, 7, edit()))
    prompt = Prompt.objects.get(chat=chat)
    answered = as_approver.post(f"/prompts/{prompt.pk}/answer", {"choice": "reject"})
    assert answered.status_code in (200, 302)
    apply(
        chat.pk,
        frames.outcome(3, 7, "reject"),
        frames.tool_update(
            4, "edit-1", status="failed", content=[{"type": "content", "content": text(REFUSED)}]
        ),
    )
    return chat, prompt


def text(words: str) -> dict[str, str]:
    return {"type": "text", "text": words}


def test_after_reject_the_row_shows_the_refused_diff_and_who_refused(acme, as_approver):
    chat, prompt = refuse(acme, as_approver)
    row = ToolActivity.objects.get(chat=chat)
    assert row.agent_output == REFUSED  # the agent's refusal replaced the output

    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    after = page.split(f'id="prompt-{prompt.pk}"')[1].split("</details>")[0]
    assert "Rejected by alice" in after
    assert f'<details class="asked-after refused" id="asked-{prompt.pk}" open>' in page
    assert "What was refused" in after and shows_the_diff(after)


def test_after_reject_the_transcript_shows_the_refused_diff_and_who_refused(acme, as_approver):
    chat, _ = refuse(acme, as_approver)

    transcript = as_approver.get(f"/chats/{chat.pk}/transcript.md").content.decode()
    assert "Rejected by alice at" in transcript
    assert "```diff\n  --- a/home/ana/project/notes.txt" in transcript
    assert "  -second line\n  +second line!" in transcript


def test_an_allowed_change_stays_on_the_row_folded_away(acme, as_approver):
    chat = running(acme, ask(2, 7, edit()))
    prompt = Prompt.objects.get(chat=chat)
    as_approver.post(f"/prompts/{prompt.pk}/answer", {"choice": "allow-once"})

    page = as_approver.get(f"/chats/{chat.pk}/").content.decode()
    assert f'<details class="asked-after allowed" id="asked-{prompt.pk}">' in page
    assert "What was allowed" in page
