"""The real GitHub Copilot CLI (``copilot --acp``, @github/copilot 1.0.102) through the README's
command line, offline (``COPILOT_OFFLINE=true``) with the fake Anthropic API as its own model
(tests/agents/real/copilot.py): what a user does with it, and the rows, prompts and turns it
leaves.

One runner and one agent serve the file (``--mode`` Copilot's ``#agent`` URL, ``--allow-web``
with ``#agent`` and ``#plan`` for the web, prompts typed on standard input, one turn per test),
as a person uses it; the tests run in file order, a Ctrl-C quits, and the last two start
runners of their own: one resumes the quit run (``session/load``), one runs in autopilot. The
module's data lives outside the tests' transactions (the live server writes it while a test
reads) and is deleted at the end.
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
from tests.agents.real import copilot
from tests.agents.real.copilot import AGENT, AUTOPILOT, PLAN
from tests.agents.real.fakeapi import Call, FakeModels, Say, Step
from tests.agents.real.harness import RealRun, WebUser, eventually, isolated_env
from tests.browser.helpers import PASSWORD, member
from tests.liveserver import Server

TURN_SECONDS = 30


@dataclass
class Copilot:
    """The runner with copilot, the fake model, and Ann answering on the web."""

    run: RealRun
    fake: FakeModels
    web: WebUser
    project: Path
    token: str  # the workspace's agent token, for a second runner
    env: dict[str, str]  # the runner's environment (its home keeps the run's state)

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

    def model_calls(self, tag: str) -> list[dict[str, Any]]:
        """The bodies of the agent's model calls in the turn of ``tag`` (those with tools)."""
        return [r.body for r in self.fake.sent(tag) if r.body and r.body.get("tools")]

    def sent_back(self, tag: str) -> list[dict[str, Any]]:
        """The tool results copilot sent the model in the turn of ``tag`` (the last request)."""
        messages = self.model_calls(tag)[-1]["messages"]
        start = max(i for i, m in enumerate(messages) if tag in json.dumps(m["content"]))
        return [
            block
            for message in messages[start + 1 :]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]


@pytest.fixture(scope="module")
def agent(
    agent_server: Server,
    fake_models: FakeModels,
    real_agents: Path,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Copilot]:
    """``manage.py agent --mode …#agent --allow-web --web-modes …#agent,…#plan -- copilot
    --acp`` reading prompts from stdin."""
    tmp = tmp_path_factory.mktemp("copilot")
    project = tmp / "project"
    project.mkdir()
    (project / "greet.py").write_text('def greet(name):\n    return "Hello " + name\n')
    (project / "notes.txt").write_text("first line\nsecond line\n")
    home = tmp / "home"
    with django_db_blocker.unblock():
        if not agent_server.running:
            agent_server.start()
        workspace = Workspace.objects.create(slug=f"copilot-{uuid.uuid4().hex[:8]}", name="Cop")
        token = AgentToken.issue(workspace, "laptop")[1]
        person = member(workspace, f"ann-{workspace.slug}", Role.APPROVER)
        env = isolated_env(home, copilot.environment(f"{fake_models.url}/copilot", home))
        run = RealRun(
            agent_server.ws_url,
            token,
            list(copilot.COMMAND),
            env,
            "--cwd",
            str(project),
            "--mode",
            AGENT,
            "--allow-web",
            "--web-modes",
            f"{AGENT},{PLAN}",
            stdin=True,
        )
        try:
            web = WebUser(agent_server.url, person.username, PASSWORD)
            yield Copilot(run, fake_models, web, project, token, env)
        finally:
            if run.process.poll() is None:
                run.kill()
            workspace.delete()
            User.objects.filter(pk=person.pk).delete()


# The file's one test with the database mark, and so the first to run: the mark is what has
# pytest-django set up the test database when this file runs alone. The others share one agent
# outside any test's transaction (a transaction would hide the live server's writes).
@pytest.mark.django_db
def test_the_pinned_copilot_cli_is_installed(real_agents):
    env = {**os.environ, "PATH": f"{real_agents}{os.pathsep}{os.environ['PATH']}"}
    found = subprocess.run(
        [real_agents / "copilot", "--version"], env=env, capture_output=True, text=True
    )
    assert found.stdout.startswith("GitHub Copilot CLI 1.0.102."), found.stderr


def test_the_run_shows_copilot_in_the_url_mode_asked_for_and_the_web_its_listed_modes(agent):
    tag = agent.ask(Say("Hello! How can I help?"))
    turn = agent.turn(tag)
    chat = agent.chat
    assert (chat.agent_name, chat.agent_version) == ("Copilot", "1.0.102")
    assert chat.mode == AGENT
    assert [(m["id"], m["name"]) for m in chat.modes] == [
        (AGENT, "Agent"),
        (PLAN, "Plan"),
        (AUTOPILOT, "Autopilot"),
    ]
    # Autopilot lets copilot act without asking: the web gets it only if --web-modes lists it.
    assert [m["name"] for m in chat.web_choices] == ["Agent", "Plan"]
    assert turn.stop_reason == "end_turn"
    assert turn.reply.markdown == "Hello! How can I help?"
    assert agent.rows(turn) == []


def test_copilot_offers_its_model_no_question_and_no_todo_tool_so_no_question_or_plan_comes(agent):
    tag = agent.ask(Say("Nothing to plan."))
    turn = agent.turn(tag)
    [call] = agent.model_calls(tag)
    assert sorted(call) == [
        "max_tokens", "messages", "model", "stream", "system", "temperature", "thinking", "tools"
    ]  # fmt: skip
    tools = {tool["name"] for tool in call["tools"]}
    assert {"bash", "view", "create", "edit", "task"} <= tools
    assert not tools & {"todo", "todowrite", "update_todo", "ask_user", "ask_user_question"}
    assert not [name for name in tools if "todo" in name or "question" in name]
    assert turn.plan == []
    assert not Prompt.objects.filter(attempt=turn).exists()


def test_copilots_usage_on_a_turn_counts_the_whole_session_so_far(agent):
    before = agent.chat.current_attempt
    assert before is not None and before.usage is not None
    tag = agent.ask(Say("One more model call."))
    turn = agent.turn(tag)
    # One model call of 120 input and 30 output tokens (the fake's usage), added to the last
    # turn's: copilot 1.0.102 reports the session's tokens, not the turn's.
    assert turn.usage is not None
    assert turn.usage["inputTokens"] == before.usage["inputTokens"] + 120
    assert turn.usage["outputTokens"] == before.usage["outputTokens"] + 30
    assert turn.usage["totalTokens"] == turn.usage["inputTokens"] + turn.usage["outputTokens"]
    usage = agent.chat.usage
    assert usage is not None and usage["size"] > 0 and usage["used"] > 0


def test_a_shell_command_allowed_on_the_web_runs_and_its_output_is_the_rows_output(agent):
    command = "touch made.txt && echo made it"
    tag = agent.ask(
        Call("bash", {"command": command, "description": "Make a file"}), Say("Made the file.")
    )
    prompt = agent.prompt(tag)
    assert prompt.kind == "permission"
    # copilot's allow_once "Allow once", allow_always "Always allow", reject_once "Deny"
    assert [(c["intent"], c["label"]) for c in prompt.choices] == [
        ("allow_once", "Allow once"),
        ("allow_always", "Always allow"),
        ("reject_once", "Deny"),
    ]
    assert prompt.tool is not None and prompt.tool.agent_label == "Make a file"
    assert not (agent.project / "made.txt").exists()  # nothing happens before the answer
    agent.web.choose(prompt, "allow_once")
    turn = agent.turn(tag)
    assert (agent.project / "made.txt").exists()
    assert turn.stop_reason == "end_turn" and turn.reply.markdown == "Made the file."
    [bash] = agent.rows(turn)
    # No tool name in copilot's calls: the row's is the ACP kind; its label the description.
    assert (bash.tool_name, bash.agent_label, bash.agent_kind) == (
        "execute",
        "Make a file",
        "execute",
    )
    assert not bash.read_only and bash.text_offset == 0
    assert (bash.status, bash.approval, bash.error_code) == ("completed", "approved", None)
    assert bash.agent_input == command
    assert bash.agent_summary is not None and command in bash.agent_summary
    assert bash.agent_output == "made it\n<shellId: 0 completed with exit code 0>"
    [result] = agent.sent_back(tag)
    assert "made it" in str(result["content"])
    prompt.refresh_from_db()
    assert prompt.outcome == "approved" and prompt.decision == "Allowed once"


def test_always_allow_on_the_web_is_honoured_for_the_next_command(agent):
    command = "python3 -c 'print(6*7)'"
    first = agent.ask(Call("bash", {"command": command, "description": "Compute"}), Say("42."))
    agent.web.choose(agent.prompt(first), "allow_always")
    [once] = agent.rows(agent.turn(first))
    assert (once.status, once.approval) == ("completed", "approved")
    assert once.agent_output is not None and "42" in once.agent_output
    second = agent.ask(Call("bash", {"command": command, "description": "Again"}), Say("42!"))
    turn = agent.turn(second)
    assert not Prompt.objects.filter(attempt=turn).exists()
    [again] = agent.rows(turn)
    assert (again.status, again.approval) == ("completed", "not_required")
    assert again.agent_output is not None and "42" in again.agent_output


def test_an_edit_allowed_on_the_web_changes_the_file_and_shows_a_diff(agent):
    notes = agent.project / "notes.txt"
    tag = agent.ask(
        Call("view", {"path": str(notes)}),
        Call("edit", {"path": str(notes), "old_str": "second line", "new_str": "second line!"}),
        Say("Edited the notes."),
    )
    prompt = agent.prompt(tag)
    assert notes.read_text() == "first line\nsecond line\n"
    agent.web.choose(prompt, "allow_once")
    turn = agent.turn(tag)
    assert notes.read_text() == "first line\nsecond line!\n"
    assert turn.stop_reason == "end_turn" and turn.reply.markdown == "Edited the notes."
    view, edit = agent.rows(turn)
    assert (view.agent_kind, view.status, view.approval) == ("read", "completed", "not_required")
    assert view.agent_output is not None and "second line" in view.agent_output
    assert (edit.tool_name, edit.agent_kind) == ("edit", "edit")
    assert (edit.status, edit.approval, edit.error_code) == ("completed", "approved", None)
    shown = f"{edit.agent_summary}\n{edit.agent_output}"
    assert "-second line" in shown and "+second line!" in shown


def test_a_file_creation_rejected_on_the_web_is_never_made_and_ends_the_turn_denied(agent):
    path = agent.project / "new.txt"
    tag = agent.ask(Call("create", {"path": str(path), "file_text": "hello\n"}), Say("Never said."))
    prompt = agent.prompt(tag)
    assert prompt.tool is not None and prompt.tool.agent_label == "Create file"
    agent.web.choose(prompt, "reject_once")
    turn = agent.turn(tag)
    assert not path.exists()
    [row] = agent.rows(turn)
    assert (row.tool_name, row.agent_kind) == ("edit", "edit")
    assert (row.status, row.approval, row.error_code) == ("failed", "denied", "permission_denied")
    assert row.completed_at is not None
    assert row.agent_output is not None and "+hello" in row.agent_output  # the diff it proposed
    # copilot ends the turn at once, in its own words: the model never hears of the refusal.
    assert turn.stop_reason == "end_turn"
    assert turn.reply.markdown == "Info: Operation cancelled by user"
    assert len(agent.model_calls(tag)) == 1
    prompt.refresh_from_db()
    assert prompt.outcome == "denied" and prompt.decision == "Rejected"


def test_a_subagents_words_show_in_the_turns_own_reply_and_its_task_is_one_row(agent):
    helper = agent.fake.script(Say("The notes have two lines."))
    task = {
        "description": "Count the lines",
        "prompt": f"Count the lines of notes.txt {helper}",
        "agent_type": "explore",
        "name": "counter",
    }
    tag = agent.ask(Call("task", task), Say("The helper counted two."))
    turn = agent.turn(tag)
    # copilot streams the subagent's text into the turn's own message chunks (1.0.102)
    assert turn.reply.markdown == "The notes have two lines.The helper counted two."
    [row] = agent.rows(turn)
    assert (row.tool_name, row.agent_kind, row.agent_label) == ("other", "other", "Count the lines")
    assert (row.status, row.approval) == ("completed", "not_required")
    assert row.agent_input is not None and helper in row.agent_input
    assert row.agent_output == "The notes have two lines."
    subagent = [r.body for r in agent.fake.sent(helper) if tag not in r.text]
    assert subagent and "exploration agent" in json.dumps(subagent[0]["system"])


def test_the_web_switches_copilot_to_plan_and_back_but_not_to_autopilot(agent):
    chat = f"/chats/{agent.run.chat_id}/mode"
    status, text = agent.web.post(chat, {"mode": AUTOPILOT})
    assert status == 400, text  # not in --web-modes
    status, text = agent.web.post(chat, {"mode": PLAN})
    assert status == 200, text
    eventually(lambda: agent.chat.mode == PLAN, TURN_SECONDS, "copilot in plan mode")
    tag = agent.ask(Say("Here is my plan."))
    assert agent.turn(tag).reply.markdown == "Here is my plan."
    assert "task_complete" in {t["name"] for t in agent.model_calls(tag)[-1]["tools"]}
    status, text = agent.web.post(chat, {"mode": AGENT})
    assert status == 200, text
    eventually(lambda: agent.chat.mode == AGENT, TURN_SECONDS, "copilot back in agent mode")


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


def test_ctrl_c_cancels_a_long_command_and_the_runner_takes_the_next_prompt(agent):
    tag = agent.ask(Call("bash", {"command": SLOW, "description": "Wait a while"}), Say("Done."))
    agent.web.choose(agent.prompt(tag), "allow_once")
    eventually(lambda: running_in(agent.project), TURN_SECONDS, "the command running")
    started = time.monotonic()
    agent.run.ctrl_c()
    turn = agent.turn(tag)
    assert time.monotonic() - started < 15
    assert turn.stop_reason == "cancelled"
    [slow] = agent.rows(turn)
    # copilot sends nothing more for the running call: koruweb cancels its row.
    assert (slow.agent_label, slow.approval, slow.agent_status) == (
        "Wait a while",
        "approved",
        "pending",
    )
    assert (slow.status, slow.error_code) == ("cancelled", "cancelled")
    assert slow.completed_at is not None
    eventually(lambda: not running_in(agent.project), 10, "the command stopped")
    after = agent.ask(Say("Still here."))
    turn = agent.turn(after)
    assert (turn.stop_reason, turn.reply.markdown) == ("end_turn", "Still here.")


def test_a_second_ctrl_c_quits_with_130(agent):
    agent.run.ctrl_c()
    code, err = agent.run.finish(within=20)
    assert code == 130, err


def test_koruweb_resumes_the_quit_run_with_copilots_session_load_and_shows_no_turn_twice(
    agent, agent_server
):
    chat = agent.chat
    # copilot offers session/load (a replay) and session/close, but no session/resume
    assert chat.agent_session_id and chat.agent_resumes and chat.agent_closes
    eventually(lambda: not agent.chat.runner_connected, 30, "the runner gone")
    turns = list(InferenceAttempt.objects.filter(chat_id=chat.pk))
    rows = ToolActivity.objects.filter(chat_id=chat.pk).count()
    first = turns[0].reply.markdown
    run = RealRun(
        agent_server.ws_url,
        agent.token,
        list(copilot.COMMAND),
        agent.env,
        "--resume",
        str(chat.pk),
        stdin=True,
    )
    try:
        assert run.chat_id == chat.pk, run.stderr
        tag = agent.fake.script(Say("I remember."))
        run.send(f"What did you say first? {tag}")
        agent.run = run  # the helpers now follow the new runner
        turn = agent.turn(tag)
        assert turn.reply.markdown == "I remember."
        assert list(InferenceAttempt.objects.filter(chat_id=chat.pk)) == [*turns, turn]
        assert ToolActivity.objects.filter(chat_id=chat.pk).count() == rows  # nothing replayed
        turns[0].reply.refresh_from_db()
        assert turns[0].reply.markdown == first  # nor said twice
        # copilot took its own conversation up again: the model saw the first turn's words
        [*_, request] = agent.fake.sent(tag)
        assert "Hello! How can I help?" in request.text
        assert agent.chat.mode == AGENT
        code, err = run.finish()
        assert code == 0, err
    finally:
        if run.process.poll() is None:
            run.kill()


def test_in_autopilot_mode_from_the_command_line_copilot_runs_a_command_without_asking(
    agent, agent_server, tmp_path
):
    tag = agent.fake.script(
        Call("bash", {"command": "echo unasked > auto.txt", "description": "Write"}), Say("Did.")
    )
    home = tmp_path / "home"
    env = isolated_env(home, copilot.environment(f"{agent.fake.url}/copilot", home))
    flags = ["--cwd", str(agent.project), "--mode", AUTOPILOT, "--prompt", f"Go {tag}"]
    flags += ["--allow-web", "--web-modes", AUTOPILOT]
    run = RealRun(agent_server.ws_url, agent.token, list(copilot.COMMAND), env, *flags)
    code, err = run.finish(within=60)
    assert code == 0, err
    said = f"the web may switch the agent to {AUTOPILOT}: it then acts without asking anyone"
    assert said in err
    assert (agent.project / "auto.txt").read_text() == "unasked\n"
    chat = Chat.objects.get(pk=run.chat_id)
    assert chat.mode == AUTOPILOT
    assert [m["name"] for m in chat.web_choices] == ["Autopilot"]
    turn = chat.current_attempt
    assert turn is not None and turn.stop_reason == "end_turn"
    [row] = ToolActivity.objects.filter(attempt=turn)
    assert (row.status, row.approval) == ("completed", "not_required")
    assert not Prompt.objects.filter(attempt=turn).exists()
