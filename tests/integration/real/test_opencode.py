"""The real OpenCode (``opencode acp``, npm opencode-ai 1.18.33) through the README's command line,
offline against the fake chat completions API (tests/agents/real/chatcompletions.py, configured
by tests/agents/real/opencode.py).

Each test is what a person does with OpenCode through koruweb; one agent process serves every
prompt of a test (the runner reads them from its standard input). OpenCode's config makes it ask
before a command or an edit (its default is to ask for nothing). It has no ``modes``, only a
``configOptions`` select ``mode`` (``build``, ``plan``), which the runner sets with
``session/set_config_option``. What OpenCode 1.18.33 sends, as these tests observed it:

- a call: ``tool_call`` ``pending`` titled with the tool's name, its kind, ``rawInput {}``; then
  ``tool_call_update`` ``in_progress`` with the real title (the command, the path), ``rawInput``
  and ``locations``; a permission request (if it asks) comes after that; the last update is
  ``completed`` or ``failed`` with ``content`` and ``rawOutput {output, metadata}``;
- titles: the command, or the path from OpenCode's worktree (``/`` outside git, so
  ``tmp/…/notes.txt``); a command that exits non-zero still ends ``completed``;
- an edit's ``diff`` item holds the replaced strings, not the file; after an allowed edit or write
  OpenCode also sends ``fs/write_text_file`` (not advertised), and ignores koruweb's ``-32601``;
- rejected: the call ends ``failed`` and the turn ends ``end_turn`` with no further model call;
- ``todowrite`` is only a call: no ``plan``; no ``question`` tool (it is off by default);
  usage: ``usage_update {used, size, cost}`` and the prompt's answer's ``usage``;
- cancelled: a stalled model or a running command ends the turn ``cancelled`` at once;
- ``session/resume`` in a new process takes the conversation up again, with no replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from activity.models import Chat, InferenceAttempt, Message, Prompt, ToolActivity
from tests.agents.real import opencode
from tests.agents.real.fakeapi import Call, FakeModels, Say, Stall, Step
from tests.agents.real.fixtures import StartAgent
from tests.agents.real.harness import RealRun, WebUser, eventually, isolated_env
from tests.agents.real.opencode import USAGE
from tests.liveserver import Server

pytestmark = pytest.mark.django_db(transaction=True)

# The intents of OpenCode's options once, always and reject: the server knows the runner's ids
# for them, not OpenCode's own (activity/runner/ids.py).
ALLOW, ALWAYS, REJECT = "allow_once", "allow_always", "reject_once"
ROW = (
    "tool_name",
    "agent_label",
    "agent_kind",
    "read_only",
    "status",
    "approval",
    "error_code",
    "text_offset",
)


@pytest.fixture
def build(start_agent: StartAgent) -> Iterator[RealRun]:
    """OpenCode in its ``build`` mode, the web allowed to switch it to ``plan``."""
    run = start_agent(
        "opencode", "--mode", "build", "--allow-web", "--web-modes", "plan", stdin=True
    )
    assert run.chat_id.int, f"the runner never printed the chat's page:\n{run.stderr}"
    yield run


def send(run: RealRun, fake: FakeModels, prompt: str, *steps: Step) -> str:
    """Type ``prompt`` with a new script's tag; returns the tag."""
    tag = fake.script(*steps)
    assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
    run.send(f"{tag} {prompt}")
    return tag


def ended(run: RealRun, tag: str, within: float = 30) -> InferenceAttempt:
    """The turn of the prompt tagged ``tag``, once it has ended."""

    def found() -> InferenceAttempt | None:
        assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
        return InferenceAttempt.objects.filter(
            chat_id=run.chat_id, prompt__contains=tag, ended_at__isnull=False
        ).first()

    return eventually(found, within, f"the end of the turn {tag}\n{run.stderr[-4000:]}")


def ask(run: RealRun, fake: FakeModels, prompt: str, *steps: Step) -> InferenceAttempt:
    """A whole turn: type the prompt, wait for its end."""
    return ended(run, send(run, fake, prompt, *steps))


def asked(run: RealRun) -> Prompt:
    """The prompt waiting for a person's answer."""

    def found() -> Prompt | None:
        assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
        return Prompt.objects.filter(chat_id=run.chat_id, closed_at=None).first()

    return eventually(found, 30, f"a permission prompt\n{run.stderr[-4000:]}")


def rows(turn: InferenceAttempt) -> list[ToolActivity]:
    return list(ToolActivity.objects.filter(attempt=turn))


def only_row(turn: InferenceAttempt) -> ToolActivity:
    found = rows(turn)
    assert len(found) == 1, [(r.agent_label, r.status) for r in found]
    return found[0]


def row_fields(row: ToolActivity) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ROW}


def reply(turn: InferenceAttempt) -> str:
    message = Message.objects.filter(attempt=turn).first()
    return message.markdown if message else ""


def tool_outputs(fake: FakeModels, tag: str) -> list[str]:
    """What OpenCode sent the model back as the results of its calls, in order."""
    last = fake.sent(tag)[-1].body
    return [str(m.get("content")) for m in last.get("messages", []) if m.get("role") == "tool"]


def bash(command: str) -> Call:
    return Call("bash", {"command": command, "description": "Run a command"})


def plan_mode(fake: FakeModels, tag: str) -> bool:
    """Whether OpenCode told the model it is in plan mode (its system reminder)."""
    return "Plan mode ACTIVE" in fake.sent(tag)[-1].text


def test_opencode_reads_runs_and_edits_each_call_its_row_asking_the_web_first(
    build: RealRun, fake_models: FakeModels, approver: WebUser, project: Path, subtests: Any
) -> None:
    run = build

    with subtests.test("a read is a read-only row with the file's text, never asked"):
        path = project / "notes.txt"
        turn = ask(run, fake_models, "Show notes", Call("read", {"filePath": str(path)}), Say("Ok"))
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "read",
            # OpenCode's title: the path from its worktree, "/" outside git
            "agent_label": str(path).lstrip("/"),
            "agent_kind": "read",
            "read_only": True,
            "status": "completed",
            "approval": "not_required",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_input is not None and str(path) in row.agent_input
        assert row.agent_output is not None and "first line" in row.agent_output
        assert row.started_at is not None and row.completed_at is not None
        assert row.proposed_at <= row.started_at <= row.completed_at
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Ok")
        assert not Prompt.objects.filter(attempt=turn).exists()

    with subtests.test("the chat names the agent, its modes and the mode the runner set"):
        chat = Chat.objects.get(pk=run.chat_id)
        assert (chat.agent_name, chat.agent_version) == ("OpenCode", "1.18.33")
        assert [mode["id"] for mode in chat.modes] == ["build", "plan"]
        assert chat.mode == "build"

    with subtests.test("allowed from the web, a command runs and its output is the row's"):
        command = "echo koru-$((6*7))"
        tag = send(run, fake_models, "Compute", bash(command), Say("It printed 42."))
        prompt = asked(run)
        assert [c["intent"] for c in prompt.choices] == [ALLOW, ALWAYS, REJECT]
        assert [c["label"] for c in prompt.choices] == ["Allow once", "Always allow", "Reject"]
        approver.choose(prompt, ALLOW)
        turn = ended(run, tag)
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "execute",
            "agent_label": command,
            "agent_kind": "execute",
            "read_only": False,
            "status": "completed",
            "approval": "approved",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_input is not None and command in row.agent_input
        assert row.agent_output is not None and "koru-42" in row.agent_output
        assert "koru-42" in tool_outputs(fake_models, tag)[-1]
        prompt.refresh_from_db()
        assert prompt.outcome == "approved" and prompt.answered_by is not None
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "It printed 42.")

    with subtests.test("rejected from the web, the command never runs and the row is denied"):
        command = "echo no > rejected.txt"
        tag = send(run, fake_models, "Write rejected", bash(command), Say("Never said."))
        approver.choose(asked(run), REJECT)
        turn = ended(run, tag)
        row = only_row(turn)
        assert not (project / "rejected.txt").exists()
        assert (row.status, row.approval, row.error_code) == (
            "failed",
            "denied",
            "permission_denied",
        )
        assert row.completed_at is not None
        assert "The user rejected permission" in (row.agent_output or "")
        # OpenCode ends the turn at once: the model never sees the refusal
        assert turn.stop_reason == "end_turn" and reply(turn) == ""
        assert len(fake_models.sent(tag)) == 1

    with subtests.test("always allowed, the next command of that kind runs without asking"):
        tag = send(
            run,
            fake_models,
            "Touch two files",
            bash("touch always-1.txt"),
            bash("touch always-2.txt"),
            Say("Touched both."),
        )
        approver.choose(asked(run), ALWAYS)
        turn = ended(run, tag)
        first, second = rows(turn)
        assert (first.status, first.approval) == ("completed", "approved")
        assert (second.status, second.approval) == ("completed", "not_required")
        assert Prompt.objects.filter(attempt=turn).count() == 1
        assert (project / "always-1.txt").exists() and (project / "always-2.txt").exists()
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Touched both.")

    with subtests.test("a written file, allowed from the web, is an edit row showing its diff"):
        path = project / "hello.py"
        write = Call("write", {"filePath": str(path), "content": "print('hi')\n"})
        tag = send(run, fake_models, "Write hello", write, Say("Written."))
        approver.choose(asked(run), ALLOW)
        turn = ended(run, tag)
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "edit",
            "agent_label": str(path).lstrip("/"),
            "agent_kind": "edit",
            "read_only": False,
            "status": "completed",
            "approval": "approved",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_input is not None and "+print('hi')" in row.agent_input
        assert path.read_text() == "print('hi')\n"
        # then OpenCode asks the client to write it too (fs/write_text_file, not advertised):
        # koruweb answers -32601, which OpenCode ignores
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Written.")

    with subtests.test("an edit of a file it read, allowed from the web, shows its diff"):
        path = project / "greet.py"
        edit = Call(
            "edit",
            {
                "filePath": str(path),
                "oldString": '"Hello " + name',
                "newString": 'f"Hello, {name}!"',
            },
        )
        read = Call("read", {"filePath": str(path)})
        tag = send(run, fake_models, "Punctuate greet", read, edit, Say("Punctuated."))
        approver.choose(asked(run), ALLOW)
        turn = ended(run, tag)
        first, second = rows(turn)
        assert (first.agent_kind, first.approval) == ("read", "not_required")
        assert row_fields(second) == {
            "tool_name": "edit",
            "agent_label": str(path).lstrip("/"),
            "agent_kind": "edit",
            "read_only": False,
            "status": "completed",
            "approval": "approved",
            "error_code": None,
            "text_offset": 0,
        }
        # the diff of the strings it replaced (OpenCode's diff item holds them, not the file)
        diff = second.agent_output or ""
        assert diff.startswith("Edit applied successfully.")
        assert '-"Hello " + name' in diff and '+f"Hello, {name}!"' in diff
        assert path.read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n'
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Punctuated.")

    with subtests.test("a command that exits 3 is still a completed row: OpenCode says so"):
        tag = send(run, fake_models, "Break", bash("echo oops >&2; exit 3"), Say("It failed."))
        approver.choose(asked(run), ALLOW)
        turn = ended(run, tag)
        row = only_row(turn)
        # OpenCode ends the call completed; the exit code is only in its rawOutput's metadata
        assert (row.status, row.error_code, row.agent_kind) == ("completed", None, "execute")
        assert "oops" in (row.agent_output or "")
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "It failed.")

    with subtests.test("a todo list is a row of its own and no plan; usage reaches the chat"):
        todos = [
            {"content": "Read greet.py", "status": "completed", "priority": "high"},
            {"content": "Run the tests", "status": "pending", "priority": "medium"},
        ]
        turn = ask(run, fake_models, "List", Call("todowrite", {"todos": todos}), Say("Listed."))
        row = only_row(turn)
        assert (row.tool_name, row.agent_kind, row.status) == ("other", "other", "completed")
        assert row.agent_label == "1 todos"  # OpenCode counts the ones not completed
        assert turn.plan in (None, [])
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Listed.")
        assert turn.usage is not None
        assert (turn.usage["inputTokens"], turn.usage["outputTokens"]) == (1200, 30)
        assert turn.usage["totalTokens"] == USAGE["total_tokens"]
        chat = Chat.objects.get(pk=run.chat_id)
        assert chat.usage is not None and chat.usage["used"] == USAGE["prompt_tokens"]
        assert chat.usage["size"] == 128000  # the context limit of the config's model

    with subtests.test("OpenCode offers the model no question tool: it never asks a person"):
        tag = send(run, fake_models, "Anything to ask?", Say("No."))
        turn = ended(run, tag)
        tools = {tool["function"]["name"] for tool in fake_models.sent(tag)[-1].body["tools"]}
        assert {"bash", "edit", "read", "todowrite", "write"} <= tools
        assert "question" not in tools
        assert not Prompt.objects.filter(chat_id=run.chat_id, kind="question").exists()

    with subtests.test("Ctrl-C cancels a turn whose model stalls, and the runner goes on"):
        tag = send(run, fake_models, "Wait", Stall(30))
        eventually(lambda: fake_models.sent(tag), 20, "the stalled model call")
        run.ctrl_c()
        turn = ended(run, tag, within=15)
        assert turn.stop_reason == "cancelled"
        after = ask(run, fake_models, "Still there?", Say("Still here."))
        assert (after.stop_reason, reply(after)) == ("end_turn", "Still here.")
        assert not ToolActivity.objects.filter(attempt=turn).exists()

    run.ctrl_c()  # no turn runs: the runner quits
    code, err = run.finish()
    assert code == 130 and "Traceback" not in err, err[-4000:]


def test_the_web_switches_opencode_to_plan_and_ctrl_c_cancels_its_running_command(
    build: RealRun, fake_models: FakeModels, approver: WebUser, subtests: Any
) -> None:
    run = build

    with subtests.test("in build mode OpenCode tells its model nothing of plan mode"):
        tag = send(run, fake_models, "Build it", Say("Built."))
        assert ended(run, tag).stop_reason == "end_turn"
        assert not plan_mode(fake_models, tag)

    with subtests.test("a mode not in --web-modes is refused"):
        status, said = approver.post(f"/chats/{run.chat_id}/mode", {"mode": "nonsense"})
        assert status == 400, said

    with subtests.test("switched to plan from the web, OpenCode's model is told it plans"):
        status, said = approver.post(f"/chats/{run.chat_id}/mode", {"mode": "plan"})
        assert status == 200 and "switch to plan" in said, said
        eventually(lambda: Chat.objects.get(pk=run.chat_id).mode == "plan", 20, "mode plan")
        tag = send(run, fake_models, "Plan it", Say("Planned."))
        turn = ended(run, tag)
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Planned.")
        assert plan_mode(fake_models, tag)
        assert "switched the agent to mode 'plan' (asked from the web by ann)" in run.stderr

    with subtests.test("Ctrl-C cancels a running command: its row is cancelled"):
        tag = send(run, fake_models, "Wait", bash("sleep 30"), Say("Never said."))
        approver.choose(asked(run), ALLOW)
        eventually(
            lambda: ToolActivity.objects.filter(
                chat_id=run.chat_id, status="running", approval="approved"
            ).first(),
            30,
            "the sleep running",
        )
        run.ctrl_c()
        turn = ended(run, tag, within=15)
        assert turn.stop_reason == "cancelled"
        row = only_row(turn)
        assert (row.agent_label, row.status, row.error_code) == (
            "sleep 30",
            "cancelled",
            "cancelled",
        )
        assert row.completed_at is not None

    run.ctrl_c()  # no turn runs: the runner quits
    code, err = run.finish(within=15)
    assert code == 130 and "Traceback" not in err, err[-4000:]


def test_a_mode_opencode_lacks_stops_the_runner_with_exit_5_and_its_own_modes(
    start_agent: StartAgent,
) -> None:
    run = start_agent("opencode", "--mode", "default", "--prompt", "Never sent")
    code, err = run.finish()
    assert code == 5, err[-4000:]
    assert "the agent has no mode 'default'; its modes: build, plan" in err


def test_a_killed_opencode_run_is_resumed_in_place_with_its_conversation(
    fake_models: FakeModels,
    real_agents: Path,
    koruweb_server: Server,
    agent_token: str,
    project: Path,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = isolated_env(home, opencode.environment(f"{fake_models.url}/opencode", home))
    server, token, agent = koruweb_server.ws_url, agent_token, list(opencode.COMMAND)
    first = RealRun(server, token, agent, env, "--cwd", str(project), "--mode", "build", stdin=True)
    runs = [first]
    try:
        before = send(first, fake_models, "Remember the word teal", Say("The first answer."))
        turn1 = ended(first, before)
        chat = Chat.objects.get(pk=first.chat_id)
        assert chat.agent_session_id and chat.agent_resumes and chat.agent_closes
        # OpenCode keeps its sessions in SQLite: the laptop closes once the turn is written
        data = home / ".local" / "share" / "opencode"
        eventually(
            lambda: any(b"teal" in path.read_bytes() for path in data.glob("opencode.db*")),
            30,
            "the session in OpenCode's database",
        )
        first.kill()  # the runner and its agent die, nothing is said
        eventually(lambda: not Chat.objects.get(pk=chat.pk).runner_connected, 30, "runner gone")

        second = RealRun(server, token, agent, env, "--resume", str(chat.pk), stdin=True)
        runs.append(second)
        assert second.chat_id == chat.pk, second.stderr
        after = send(second, fake_models, "Which word?", Say("The word was teal."))
        turn2 = ended(second, after)
        assert list(InferenceAttempt.objects.filter(chat_id=chat.pk)) == [turn1, turn2]
        assert reply(turn2) == "The word was teal."
        # session/resume: OpenCode took its own conversation up again, and replayed nothing
        assert "Remember the word teal" in fake_models.sent(after)[-1].text
        assert reply(turn1) == "The first answer."
        code, err = second.finish()
        assert code == 0, err[-4000:]
    finally:
        for run in runs:
            if run.process.poll() is None:
                run.kill()
