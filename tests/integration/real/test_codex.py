"""The real Codex (``codex-acp``, @zed-industries/codex-acp 0.16.0, Codex 0.137 inside) through
the README's command line, offline against the fake OpenAI Responses API
(tests/agents/real/openai.py).

Each test is what a person does with codex through koruweb; one agent process serves every
prompt of a test (the runner reads them from its standard input). The runner authenticates
(codex asks for it before ``session/new``: ``openai-api-key``, from ``OPENAI_API_KEY``) and sets
the mode with ``--mode``. Codex's own sandbox needs bubblewrap, which these machines lack, so the
tests use the two ways codex runs a command outside it: ``full-access`` (nothing is asked), and
``auto`` with the model asking to run a command outside the sandbox
(``sandbox_permissions: require_escalated``), which codex puts to a person. What codex-acp 0.16
sends, as these tests observed it:

- a command (``exec_command``): ``tool_call`` ``in_progress`` titled from Codex's parse of the
  command ("Read notes.txt" kind ``read``, "List …" kind ``search``, else the command itself,
  kind ``execute``), ``rawInput`` the exec event (``command`` ``["/bin/bash", "-lc", …]``,
  ``cwd``, ``parsed_cmd``, …), then ``tool_call_update`` ``completed``/``failed`` whose only
  output is ``rawOutput`` (``stdout``, ``stderr``, ``aggregated_output``, ``exit_code``,
  ``formatted_output``, …), no content;
- an edit (``apply_patch``): ``tool_call`` ``in_progress`` "Edit <path>" kind ``edit`` with a
  ``diff`` content, then ``completed`` with the diff again and ``rawOutput``;
- ``update_plan``: a ``plan`` update; usage: ``usage_update`` (``used``, ``size``), never
  ``usage`` on the prompt's result;
- a command that needs permission: ``session/request_permission`` first (toolCall ``pending``,
  its content the reason, "Proposed Amendment …" and "Available Decisions …"; options
  ``approved`` allow_once, ``approved-execpolicy-amendment`` allow_always, ``abort``
  reject_once), then on approval the ``tool_call`` ``in_progress`` and its end; on ``abort``
  nothing more for the call and the turn ends ``cancelled``;
- ``session/cancel`` during a command: the turn ends ``cancelled`` at once and nothing more is
  sent for the running call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from activity.models import Chat, InferenceAttempt, Message, Prompt, ToolActivity
from tests.agents.real.fakeapi import Call, FakeModels, Say, Step
from tests.agents.real.fixtures import StartAgent
from tests.agents.real.harness import RealRun, WebUser, eventually
from tests.agents.real.openai import USAGE

pytestmark = pytest.mark.django_db(transaction=True)

GREETED = 'def greet(name):\n    return f"Hello, {name}!"\n'
PATCH = """*** Begin Patch
*** Update File: greet.py
@@
 def greet(name):
-    return "Hello " + name
+    return f"Hello, {name}!"
*** End Patch"""
# The intents of codex's options approved, approved-execpolicy-amendment and abort: the server
# knows the runner's ids for them, not codex's own (activity/runner/ids.py).
ALLOW, ALWAYS, ABORT = "allow_once", "allow_always", "reject_once"
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
def full_access(start_agent: StartAgent) -> Iterator[RealRun]:
    """codex in ``full-access``: it runs commands and edits without asking."""
    yield start(start_agent, "full-access")


@pytest.fixture
def auto(start_agent: StartAgent) -> Iterator[RealRun]:
    """codex in ``auto``: it asks before running a command outside its sandbox."""
    yield start(start_agent, "auto")


def start(start_agent: StartAgent, mode: str) -> RealRun:
    run = start_agent("openai", "--mode", mode, stdin=True)
    assert run.chat_id.int, f"the runner never printed the chat's page:\n{run.stderr}"
    return run


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


def settled(turn: InferenceAttempt, within: float = 10) -> None:
    """Until no call of the turn is still running (its end may come after the turn's)."""
    eventually(
        lambda: not ToolActivity.objects.filter(attempt=turn, status="running").exists(),
        within,
        f"the calls of turn {turn.pk} to settle",
    )


def row_fields(row: ToolActivity) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ROW}


def reply(turn: InferenceAttempt) -> str:
    message = Message.objects.filter(attempt=turn).first()
    return message.markdown if message else ""


def shows(row: ToolActivity, text: str) -> bool:
    """The row's output shows ``text`` as a person reads it: the command's own output, not the
    raw exec event codex sends as ``rawOutput`` (ids, durations, the output three times)."""
    output = row.agent_output or ""
    return text in output and '"call_id"' not in output


def exec_command(command: str, **extra: Any) -> Call:
    return Call("exec_command", {"cmd": command, **extra})


def escalated(command: str, reason: str, **extra: Any) -> Call:
    """A command the model asks to run outside the sandbox: codex asks a person first."""
    return exec_command(
        command, sandbox_permissions="require_escalated", justification=reason, **extra
    )


def tool_outputs(fake: FakeModels, tag: str) -> list[str]:
    """What codex sent the model back as the results of its calls, in order."""
    last = fake.sent(tag)[-1].body
    return [
        str(item.get("output"))
        for item in last.get("input", [])
        if item.get("type") in ("function_call_output", "custom_tool_call_output")
    ]


def test_codex_reads_edits_runs_a_command_and_plans_each_call_as_its_row(
    full_access: RealRun, fake_models: FakeModels, project: Path, subtests: Any
) -> None:
    run = full_access

    with subtests.test("a read by cat is a read-only row with the file's text as its output"):
        tag = send(run, fake_models, "Show notes", exec_command("cat notes.txt"), Say("Read."))
        turn = ended(run, tag)
        # codex may report the command's end after the turn's: the row settles, it never stays
        settled(turn)
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "read",
            "agent_label": "Read notes.txt",
            "agent_kind": "read",
            "read_only": True,
            "status": "completed",
            "approval": "not_required",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_input is not None and "cat notes.txt" in row.agent_input
        assert row.started_at is not None and row.completed_at is not None
        assert row.proposed_at <= row.started_at <= row.completed_at
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Read.")
        assert "first line\nsecond line" in tool_outputs(fake_models, tag)[0]
        assert shows(row, "first line\nsecond line"), row.agent_output

    with subtests.test("the chat names the agent and the mode the runner set"):
        chat = Chat.objects.get(pk=run.chat_id)
        assert (chat.agent_name, chat.agent_version) == ("codex-acp", "0.16.0")
        assert chat.mode == "full-access"

    with subtests.test("an edit by apply_patch is a row showing the diff, and the file changes"):
        turn = ask(run, fake_models, "Punctuate greet", Call("apply_patch", {"input": PATCH}))
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "edit",
            "agent_label": f"Edit {project / 'greet.py'}",
            "agent_kind": "edit",
            "read_only": False,
            "status": "completed",
            "approval": "not_required",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_output is not None
        assert '-    return "Hello " + name' in row.agent_output
        assert '+    return f"Hello, {name}!"' in row.agent_output
        assert row.agent_input is not None and "greet.py" in row.agent_input
        assert row.completed_at is not None
        assert (project / "greet.py").read_text() == GREETED
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Done.")

    with subtests.test("a shell command is an execute row with what it printed as its output"):
        command = "echo koru-$((6*7))"
        turn = ask(run, fake_models, "Compute", exec_command(command), Say("It printed 42."))
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "execute",
            "agent_label": command,
            "agent_kind": "execute",
            "read_only": False,
            "status": "completed",
            "approval": "not_required",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_input is not None and command in row.agent_input
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "It printed 42.")
        assert shows(row, "koru-42"), row.agent_output

    with subtests.test("a failing command is a failed row with tool_failed"):
        turn = ask(run, fake_models, "Break", exec_command("echo oops >&2; exit 3"), Say("No."))
        row = only_row(turn)
        assert (row.status, row.error_code, row.agent_kind) == ("failed", "tool_failed", "execute")
        assert row.completed_at is not None
        assert shows(row, "oops"), row.agent_output

    with subtests.test("update_plan becomes the turn's plan and usage reaches the chat"):
        plan = [
            {"step": "Read greet.py", "status": "completed"},
            {"step": "Punctuate the greeting", "status": "in_progress"},
            {"step": "Run the tests", "status": "pending"},
        ]
        turn = ask(
            run,
            fake_models,
            "Plan it",
            Call("update_plan", {"explanation": "Three steps", "plan": plan}),
            Say("Planned."),
        )
        assert turn.plan == [
            {"content": "Read greet.py", "priority": "medium", "status": "completed"},
            {"content": "Punctuate the greeting", "priority": "medium", "status": "in_progress"},
            {"content": "Run the tests", "priority": "medium", "status": "pending"},
        ]
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Planned.")
        chat = Chat.objects.get(pk=run.chat_id)
        assert chat.usage is not None and chat.usage["used"] == USAGE["total_tokens"]
        assert chat.usage["size"] > USAGE["total_tokens"]

    code, err = run.finish()
    assert code == 0, err


def test_a_person_allows_rejects_and_always_allows_codex_commands_from_the_web(
    auto: RealRun, fake_models: FakeModels, approver: WebUser, project: Path, subtests: Any
) -> None:
    run = auto

    with subtests.test("allowed from the web, the command runs and its output is the row's"):
        tag = send(
            run,
            fake_models,
            "Write allowed.txt",
            escalated("echo allowed | tee allowed.txt", "Write allowed.txt?"),
            Say("Written."),
        )
        prompt = asked(run)
        assert [c["intent"] for c in prompt.choices] == [ALLOW, ALWAYS, ABORT]
        approver.choose(prompt, ALLOW)
        turn = ended(run, tag)
        row = only_row(turn)
        assert row_fields(row) == {
            "tool_name": "execute",
            "agent_label": "echo allowed | tee allowed.txt",
            "agent_kind": "execute",
            "read_only": False,
            "status": "completed",
            "approval": "approved",
            "error_code": None,
            "text_offset": 0,
        }
        assert row.agent_summary is not None and "Write allowed.txt?" in row.agent_summary
        assert "Available Decisions" not in (row.agent_output or "")
        assert row.completed_at is not None
        assert (project / "allowed.txt").read_text() == "allowed\n"
        prompt.refresh_from_db()
        assert prompt.outcome == "approved" and prompt.answered_by is not None
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Written.")
        assert shows(row, "allowed"), row.agent_output

    with subtests.test("rejected from the web, the command never runs and the row is denied"):
        tag = send(
            run,
            fake_models,
            "Write rejected.txt",
            escalated("echo rejected > rejected.txt", "Write rejected.txt?"),
            Say("Never said."),
        )
        prompt = asked(run)
        approver.choose(prompt, ABORT)
        turn = ended(run, tag)
        row = only_row(turn)
        assert not (project / "rejected.txt").exists()
        assert turn.stop_reason == "cancelled"  # codex's "abort" ends the turn
        assert (row.status, row.approval, row.error_code) == (
            "failed",
            "denied",
            "permission_denied",
        )
        assert row.completed_at is not None
        assert row.agent_summary is not None and "Write rejected.txt?" in row.agent_summary
        prompt.refresh_from_db()
        assert prompt.outcome == "denied"
        assert len(fake_models.sent(tag)) == 1  # the model never saw a result

    with subtests.test("always allowed, the next command of that prefix runs without asking"):
        tag = send(
            run,
            fake_models,
            "Touch two files",
            escalated("touch always-1.txt", "Touch?", prefix_rule=["touch"]),
            escalated("touch always-2.txt", "Touch again?", prefix_rule=["touch"]),
            Say("Touched both."),
        )
        prompt = asked(run)
        always = next(c for c in prompt.choices if c["intent"] == ALWAYS)
        assert "`touch`" in always["label"], always
        approver.choose(prompt, ALWAYS)
        turn = ended(run, tag)
        first, second = rows(turn)
        assert (first.status, first.approval) == ("completed", "approved")
        assert (second.status, second.approval) == ("completed", "not_required")
        assert Prompt.objects.filter(attempt=turn).count() == 1
        assert (project / "always-1.txt").exists() and (project / "always-2.txt").exists()
        assert (turn.stop_reason, reply(turn)) == ("end_turn", "Touched both.")

    code, err = run.finish()
    assert code == 0, err


def test_ctrl_c_cancels_a_long_codex_command_the_runner_goes_on_and_a_second_exits_130(
    full_access: RealRun, fake_models: FakeModels
) -> None:
    run = full_access
    tag = send(run, fake_models, "Wait", exec_command("sleep 30"), Say("Never said."))
    eventually(
        lambda: ToolActivity.objects.filter(chat_id=run.chat_id, status="running").first(),
        30,
        "the sleep running",
    )
    run.ctrl_c()
    turn = ended(run, tag, within=15)
    assert turn.stop_reason == "cancelled"
    row = only_row(turn)
    assert (row.agent_label, row.status, row.error_code) == ("sleep 30", "cancelled", "cancelled")
    assert row.completed_at is not None

    after = ask(run, fake_models, "Still there?", Say("Still here."))
    assert (after.stop_reason, reply(after)) == ("end_turn", "Still here.")

    run.ctrl_c()
    code, err = run.finish(within=15)
    assert code == 130, err
