"""The real claude-agent-acp through the README's command line, offline against the fake
Anthropic API: what a user does with it, and the rows, prompts and turns it leaves.

One runner and one agent serve the whole file (``--mode default``, prompts typed on standard
input, one turn per test), as a person uses it; the tests run in file order and the last one
quits with Ctrl-C. The module's data lives outside the tests' transactions (the live server
writes it while a test reads) and is deleted at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from activity.models import (
    AgentToken,
    Chat,
    InferenceAttempt,
    Prompt,
    Role,
    ToolActivity,
    Workspace,
)
from tests.agents.real import anthropic
from tests.agents.real.fakeapi import Call, FakeModels, Say, Step
from tests.agents.real.harness import RealRun, WebUser, eventually, isolated_env
from tests.browser.helpers import PASSWORD, member
from tests.liveserver import Server

TURN_SECONDS = 30


@dataclass
class Claude:
    """The runner with claude-agent-acp, the fake model, and Ann answering on the web."""

    run: RealRun
    fake: FakeModels
    web: WebUser
    project: Path

    @property
    def chat(self) -> Chat:
        return Chat.objects.get(pk=self.run.chat_id)

    def ask(self, *steps: Step, words: str = "Please do this") -> str:
        """Type a prompt whose model does ``steps``; returns the script's tag."""
        tag = self.fake.script(*steps)
        self.run.send(f"{words} {tag}")
        return tag

    def turn(self, tag: str, ended: bool = True) -> InferenceAttempt:
        """The turn of the prompt with ``tag`` (once it has ended, unless ``ended`` is False)."""

        def found() -> InferenceAttempt | None:
            self.running()
            turn = InferenceAttempt.objects.filter(
                chat_id=self.run.chat_id, prompt__contains=tag
            ).first()
            return turn if turn and (turn.ended_at is not None or not ended) else None

        return eventually(found, TURN_SECONDS, f"the turn of {tag}")

    def running(self) -> None:
        """Fail at once, with what it said, when the runner has quit."""
        code = self.run.process.poll()
        assert code is None, f"the runner exited with {code}:\n{self.run.stderr[-4000:]}"

    def prompt(self, tag: str) -> Prompt:
        """The prompt the turn of ``tag`` waits on."""
        turn = self.turn(tag, ended=False)

        def found() -> Prompt | None:
            self.running()
            return Prompt.objects.filter(attempt=turn, closed_at=None).first()

        return eventually(found, TURN_SECONDS, f"a prompt in the turn of {tag}")

    def rows(self, turn: InferenceAttempt) -> list[ToolActivity]:
        return list(ToolActivity.objects.filter(attempt=turn).order_by("position"))

    def sent_back(self, tag: str) -> list[dict[str, Any]]:
        """The tool results claude sent the model in the turn of ``tag`` (the last request)."""
        requests = [r for r in self.fake.sent(tag) if r.body and r.body.get("tools")]
        messages = requests[-1].body["messages"]
        start = max(i for i, m in enumerate(messages) if tag in json.dumps(m["content"]))
        return [
            block
            for message in messages[start + 1 :]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]


@pytest.fixture(scope="module")
def claude(
    agent_server: Server,
    fake_models: FakeModels,
    real_agents: Path,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Claude]:
    """``manage.py agent --mode default -- claude-agent-acp`` reading prompts from stdin."""
    tmp = tmp_path_factory.mktemp("claude")
    project = tmp / "project"
    project.mkdir()
    (project / "greet.py").write_text('def greet(name):\n    return "Hello " + name\n')
    (project / "notes.txt").write_text("first line\nsecond line\n")
    home = tmp / "home"
    with django_db_blocker.unblock():
        if not agent_server.running:
            agent_server.start()
        workspace = Workspace.objects.create(slug=f"claude-{uuid.uuid4().hex[:8]}", name="Claude")
        token = AgentToken.issue(workspace, "laptop")[1]
        person = member(workspace, f"ann-{workspace.slug}", Role.APPROVER)
        env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
        run = RealRun(
            agent_server.ws_url,
            token,
            list(anthropic.COMMAND),
            env,
            "--cwd",
            str(project),
            "--mode",
            "default",
            stdin=True,
        )
        try:
            web = WebUser(agent_server.url, person.username, PASSWORD)
            yield Claude(run, fake_models, web, project)
        finally:
            if run.process.poll() is None:
                run.kill()
            workspace.delete()
            User.objects.filter(pk=person.pk).delete()


# The file's one test with the database mark, and so the first to run: the mark is what has
# pytest-django set up the test database when this file runs alone. The others share one agent
# outside any test's transaction (a transaction would hide the live server's writes).
@pytest.mark.django_db
def test_the_pinned_claude_agent_is_installed(real_agents):
    env = {**os.environ, "PATH": f"{real_agents}{os.pathsep}{os.environ['PATH']}"}
    found = subprocess.run(
        [real_agents / "claude-agent-acp", "--version"], env=env, capture_output=True, text=True
    )
    assert found.stdout.strip() == "0.101.0", found.stderr


def test_the_run_shows_claude_in_the_mode_asked_for(claude):
    tag = claude.ask(Say("Hello! How can I help?"))
    turn = claude.turn(tag)
    chat = claude.chat
    assert chat.agent_name == "@agentclientprotocol/claude-agent-acp"
    assert chat.agent_version == "0.101.0"
    assert chat.mode == "default"
    assert turn.stop_reason == "end_turn"
    assert turn.reply.markdown == "Hello! How can I help?"
    assert claude.rows(turn) == []


def test_a_turn_reports_its_token_usage_and_the_context_window(claude):
    tag = claude.ask(Say("Nothing to do."))
    turn = claude.turn(tag)
    # One model call of 120 input and 30 output tokens (the fake's usage).
    assert turn.usage is not None
    assert (turn.usage["inputTokens"], turn.usage["outputTokens"]) == (120, 30)
    assert turn.usage["totalTokens"] == 150
    usage = claude.chat.usage
    assert usage is not None and usage["size"] == 200000 and usage["used"] > 0
    assert usage["cost"]["currency"] == "USD" and usage["cost"]["amount"] > 0


def test_reading_a_file_is_a_read_only_row_with_the_files_text(claude):
    notes = claude.project / "notes.txt"
    tag = claude.ask(Call("Read", {"file_path": str(notes)}), Say("The notes have two lines."))
    turn = claude.turn(tag)
    assert turn.stop_reason == "end_turn"
    assert turn.reply.markdown == "The notes have two lines."
    [read] = claude.rows(turn)
    assert (read.tool_name, read.agent_label, read.agent_kind) == ("Read", "Read notes.txt", "read")
    assert read.read_only and read.opened
    assert (read.status, read.approval, read.error_code) == ("completed", "not_required", None)
    assert read.text_offset == 0
    assert read.agent_input is not None and str(notes) in read.agent_input
    assert read.agent_output is not None
    assert "first line" in read.agent_output and "second line" in read.agent_output
    assert read.completed_at is not None and read.proposed_at <= read.completed_at
    assert not Prompt.objects.filter(attempt=turn).exists()
    [result] = claude.sent_back(tag)
    assert "second line" in str(result["content"]) and not result.get("is_error")


def test_an_edit_allowed_on_the_web_changes_the_file_and_shows_a_diff(claude):
    notes = claude.project / "notes.txt"
    tag = claude.ask(
        Call("Read", {"file_path": str(notes)}),
        Call(
            "Edit",
            {"file_path": str(notes), "old_string": "second line", "new_string": "second line!"},
        ),
        Say("Edited the notes."),
    )
    prompt = claude.prompt(tag)
    assert prompt.kind == "permission"
    # claude's allow-once, allow-with-updates and reject, under the runner's ids (runner/ids.py)
    assert [c["intent"] for c in prompt.choices] == ["allow_once", "allow_always", "reject_once"]
    assert prompt.tool is not None and prompt.tool.agent_label == "Edit notes.txt"
    assert notes.read_text() == "first line\nsecond line\n"  # nothing happens before the answer
    claude.web.choose(prompt, "allow_once")
    turn = claude.turn(tag)
    assert notes.read_text() == "first line\nsecond line!\n"
    assert turn.stop_reason == "end_turn" and turn.reply.markdown == "Edited the notes."
    read, edit = claude.rows(turn)
    assert read.tool_name == "Read" and read.status == "completed"
    assert (edit.tool_name, edit.agent_label, edit.agent_kind) == ("Edit", "Edit notes.txt", "edit")
    assert not edit.read_only and edit.text_offset == 0
    assert (edit.status, edit.approval, edit.error_code) == ("completed", "approved", None)
    assert edit.completed_at is not None
    assert edit.agent_input is not None and str(notes) in edit.agent_input
    shown = f"{edit.agent_summary}\n{edit.agent_output}"
    assert "-second line" in shown and "+second line!" in shown
    prompt.refresh_from_db()
    assert prompt.outcome == "approved" and prompt.decision == "Allowed once"
    assert prompt.closed_at is not None and prompt.answered_by is not None


def test_an_edit_rejected_on_the_web_leaves_the_file_alone_and_ends_denied(claude):
    greet = claude.project / "greet.py"
    before = greet.read_text()
    tag = claude.ask(
        Call("Read", {"file_path": str(greet)}),
        Call("Edit", {"file_path": str(greet), "old_string": "Hello ", "new_string": "Hi "}),
        Say("You did not want that edit."),
    )
    prompt = claude.prompt(tag)
    claude.web.choose(prompt, "reject_once")
    turn = claude.turn(tag)
    assert greet.read_text() == before
    assert turn.stop_reason == "end_turn" and turn.reply.markdown == "You did not want that edit."
    _, edit = claude.rows(turn)
    assert (edit.tool_name, edit.status, edit.approval) == ("Edit", "failed", "denied")
    assert edit.error_code == "permission_denied" and edit.completed_at is not None
    prompt.refresh_from_db()
    assert prompt.outcome == "denied" and prompt.decision == "Rejected"
    [*_, refused] = claude.sent_back(tag)
    assert refused.get("is_error") and "refused" in str(refused["content"])


def test_a_shell_command_allowed_on_the_web_runs_and_its_output_is_the_rows_output(claude):
    command = "touch made.txt && echo made it"
    tag = claude.ask(
        Call("Bash", {"command": command, "description": "Make a file"}), Say("Made the file.")
    )
    prompt = claude.prompt(tag)
    assert [c["intent"] for c in prompt.choices] == ["allow_once", "reject_once"]
    assert not (claude.project / "made.txt").exists()
    claude.web.choose(prompt, "allow_once")
    turn = claude.turn(tag)
    assert (claude.project / "made.txt").exists()
    [bash] = claude.rows(turn)
    assert (bash.tool_name, bash.agent_label, bash.agent_kind) == ("Bash", command, "execute")
    assert not bash.read_only and bash.text_offset == 0
    assert (bash.status, bash.approval, bash.error_code) == ("completed", "approved", None)
    assert bash.agent_input is not None and command in bash.agent_input
    # What was asked is the summary; what the command printed is the output.
    assert bash.agent_summary is not None and "Make a file" in bash.agent_summary
    assert bash.agent_output is not None and "made it" in bash.agent_output
    assert "Make a file" not in bash.agent_output
    [result] = claude.sent_back(tag)
    assert "made it" in str(result["content"])


def test_always_allow_on_the_web_is_honoured_for_the_next_same_command(claude):
    command = "python3 -c 'print(6*7)'"
    first = claude.ask(Call("Bash", {"command": command, "description": "Compute"}), Say("42."))
    prompt = claude.prompt(first)
    always = next(c for c in prompt.choices if c["intent"] == "allow_always")
    assert "don't ask again" in always["label"]
    claude.web.answer(prompt.pk, choice=always["id"])
    [once] = claude.rows(claude.turn(first))
    assert (once.status, once.approval) == ("completed", "approved")
    assert once.agent_output is not None and "42" in once.agent_output
    second = claude.ask(Call("Bash", {"command": command, "description": "Again"}), Say("42!"))
    turn = claude.turn(second)
    assert not Prompt.objects.filter(attempt=turn).exists()
    [again] = claude.rows(turn)
    assert (again.status, again.approval) == ("completed", "not_required")
    assert again.agent_output is not None and "42" in again.agent_output


def test_a_question_from_claude_is_answered_on_the_web(claude):
    question = {
        "question": "Which database should I use?",
        "header": "Database",
        "multiSelect": False,
        "options": [
            {"label": "Postgres", "description": "Relational, for the team"},
            {"label": "SQLite", "description": "Embedded, one file"},
        ],
    }
    tag = claude.ask(Call("AskUserQuestion", {"questions": [question]}), Say("Postgres it is."))
    prompt = claude.prompt(tag)
    assert prompt.kind == "question"
    [asked] = prompt.questions
    assert (asked["id"], asked["header"]) == ("question_0", "Database")
    assert asked["question"] == question["question"]
    assert [o["label"] for o in asked["options"]] == ["Postgres", "SQLite"]
    assert asked["allow_other"] and not asked["multi_select"]
    claude.web.answer(prompt.pk, question_0="Postgres")
    turn = claude.turn(tag)
    assert turn.reply.markdown == "Postgres it is."
    [row] = claude.rows(turn)
    assert (row.tool_name, row.agent_label) == ("AskUserQuestion", question["question"])
    assert (row.status, row.approval, row.error_code) == ("completed", "approved", None)
    assert row.agent_output is not None and "Postgres" in row.agent_output
    prompt.refresh_from_db()
    assert prompt.outcome == "approved" and prompt.decision == "Answered: Postgres"
    [result] = claude.sent_back(tag)
    assert "Postgres" in str(result["content"])


def test_claudes_task_list_becomes_the_turns_plan(claude):
    tag = claude.ask(
        Call("TaskCreate", {"subject": "Read the notes", "description": "Read notes.txt"}),
        Call("TaskCreate", {"subject": "Greet Ann", "description": "Edit greet.py"}),
        Call("TaskUpdate", {"taskId": "1", "status": "completed"}),
        Say("Planned."),
    )
    turn = claude.turn(tag)
    assert [(e["content"], e["status"]) for e in turn.plan] == [
        ("Read the notes", "completed"),
        ("Greet Ann", "pending"),
    ]
    assert claude.rows(turn) == []  # the task tools are the plan, never rows


# Claude Code refuses a plain ``sleep 30`` ("Blocked: standalone sleep 30. … use Monitor …"),
# so the long-running command is a Python one.
SLOW = "python3 -c 'import time; time.sleep(30)'"


def running_in(project: Path) -> list[int]:
    """The processes of ``SLOW`` working in ``project``."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                entry.name.isdigit()
                and b"time.sleep(30)" in (entry / "cmdline").read_bytes()
                and os.readlink(entry / "cwd") == str(project)
            ):
                found.append(int(entry.name))
    return found


def test_ctrl_c_cancels_a_long_command_and_the_runner_takes_the_next_prompt(claude):
    tag = claude.ask(Call("Bash", {"command": SLOW, "description": "Wait a while"}), Say("Done."))
    claude.web.choose(claude.prompt(tag), "allow_once")
    eventually(lambda: running_in(claude.project), TURN_SECONDS, "the command running")
    started = time.monotonic()
    claude.run.ctrl_c()
    turn = claude.turn(tag)
    assert time.monotonic() - started < 15
    assert turn.stop_reason == "cancelled"
    [slow] = claude.rows(turn)
    assert (slow.tool_name, slow.agent_label, slow.approval) == ("Bash", SLOW, "approved")
    assert slow.error_code == "cancelled" and slow.completed_at is not None
    assert slow.status in ("cancelled", "failed")
    eventually(lambda: not running_in(claude.project), 10, "the command stopped")
    assert claude.run.process.poll() is None  # the runner goes on
    after = claude.ask(Say("Still here."))
    turn = claude.turn(after)
    assert (turn.stop_reason, turn.reply.markdown) == ("end_turn", "Still here.")


def test_a_second_ctrl_c_quits_with_130(claude):
    claude.run.ctrl_c()
    code, err = claude.run.finish(within=20)
    assert code == 130, err
