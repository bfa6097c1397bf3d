"""The real Gemini CLI (``gemini --acp``, @google/gemini-cli 0.61.0) through the README's command
line, offline against the fake Gemini API (tests/agents/real/gemini.py).

Each test is what a person does with gemini through koruweb; one agent process serves every
prompt of a test (the runner reads them from its standard input). What gemini 0.61 sends, as
these tests observed it:

- a call that needs no permission: ``tool_call`` ``in_progress`` (title, kind, locations; a
  shell command's content is "[current working directory …] (description)"), then
  ``tool_call_update`` ``completed`` with the result as content (none for a read);
- a call that needs permission: ``session/request_permission`` first (its toolCall ``pending``
  with title, kind, locations, and a diff for an edit), never a ``tool_call``; allowed, only
  ``tool_call_update`` ``completed``; rejected, nothing more at all, and the turn ends
  ``end_turn``;
- never ``rawInput``, ``name``, ``plan`` or ``usage_update``; token counts only in the prompt
  result's ``_meta.quota``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from activity.models import Chat, InferenceAttempt, Prompt, ToolActivity
from tests.agents.real.fakeapi import Call, FakeModels, Say
from tests.agents.real.fixtures import StartAgent
from tests.agents.real.gemini import function_responses, preface
from tests.agents.real.harness import RealRun, WebUser, eventually

pytestmark = pytest.mark.django_db(transaction=True)

GREET = 'def greet(name):\n    return "Hello " + name\n'
# The intents of gemini's options proceed_once, proceed_always and cancel: the server knows the
# runner's ids for them, not gemini's own (activity/runner/ids.py).
ALLOW_ONCE, ALLOW_ALWAYS, REJECT = "allow_once", "allow_always", "reject_once"


def start(start_agent: StartAgent) -> RealRun:
    """gemini in its default mode (it asks before it edits or runs a command), prompts typed."""
    run = start_agent("gemini", "--mode", "default", stdin=True)
    assert run.chat_id.int, f"the runner never printed the chat's page:\n{run.stderr}"
    return run


def turn(run: RealRun, number: int, within: float = 30) -> InferenceAttempt:
    """The ``number``-th turn of the run (1 for the first), once it has ended."""

    def ended() -> InferenceAttempt | None:
        turns = list(InferenceAttempt.objects.filter(chat_id=run.chat_id))
        if len(turns) >= number and turns[number - 1].ended_at is not None:
            return turns[number - 1]
        assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
        return None

    return eventually(ended, within, f"turn {number} to end\n{run.stderr[-2000:]}")


def asked(run: RealRun) -> Prompt:
    """The permission prompt waiting for a person's answer."""

    def waiting() -> Prompt | None:
        assert run.process.poll() is None, f"the runner exited:\n{run.stderr[-4000:]}"
        return Prompt.objects.filter(chat_id=run.chat_id, closed_at=None, answered_at=None).first()

    return eventually(waiting, 30, f"a permission prompt\n{run.stderr[-2000:]}")


def only_row(attempt: InferenceAttempt) -> ToolActivity:
    rows = list(ToolActivity.objects.filter(attempt=attempt))
    assert len(rows) == 1, [(r.tool_call_id, r.agent_label) for r in rows]
    return rows[0]


def done(run: RealRun) -> None:
    """Ctrl-D: the runner ends, with every frame on the server, and nothing went wrong."""
    code, err = run.finish()
    assert code == 0 and "Traceback" not in err, err


def offset(*calls: Call) -> int:
    """Bytes of the reply before a call: what the model said before it and every call before."""
    return sum(len(preface(call).encode()) for call in calls)


def test_gemini_reads_a_file_and_runs_a_command_without_asking_and_each_becomes_its_row(
    start_agent: StartAgent, fake_models: FakeModels, project: Path
) -> None:
    run = start(start_agent)
    read = Call("read_file", {"file_path": "notes.txt"})
    read2 = Call("read_file", {"file_path": "greet.py"})
    tag = fake_models.script(read, read2, Say("Two lines, and a greeting."))
    run.send(f"What is in notes.txt and greet.py? {tag}")
    first = turn(run, 1)
    echo = Call("run_shell_command", {"command": "echo hi there", "description": "Say hi"})
    tag2 = fake_models.script(echo, Say("It said hi there."))
    run.send(f"Say hi from the shell {tag2}")
    second = turn(run, 2)

    assert first.stop_reason == "end_turn" and first.prompt.startswith("What is in notes.txt")
    assert first.reply.markdown == preface(read) + preface(read2) + "Two lines, and a greeting."
    notes, greet = ToolActivity.objects.filter(attempt=first)
    for row, name in ((notes, "notes.txt"), (greet, "greet.py")):
        assert (row.tool_name, row.agent_kind, row.read_only) == ("read", "read", True)
        assert (row.status, row.approval, row.error_code) == ("completed", "not_required", None)
        assert row.agent_label == name
        assert row.agent_input == str(project / name)  # gemini sends locations, no rawInput
        assert row.agent_output is None  # a read's result goes to the model only
        assert row.started_at is not None and row.completed_at is not None
        assert row.proposed_at <= row.started_at <= row.completed_at
    # Each call stands where it was made in the reply.
    assert (notes.text_offset, greet.text_offset) == (offset(read), offset(read, read2))
    # The model was given the files' text.
    assert function_responses(fake_models, tag) == [
        {"id": notes.tool_call_id.split("__", 1)[1], "name": "read_file",
         "response": {"output": "first line\nsecond line\n"}},
        {"id": greet.tool_call_id.split("__", 1)[1], "name": "read_file",
         "response": {"output": GREET}},
    ]  # fmt: skip

    assert second.stop_reason == "end_turn"
    assert second.reply.markdown == preface(echo) + "It said hi there."
    command = only_row(second)
    assert (command.tool_name, command.agent_kind, command.read_only) == (
        "execute",
        "execute",
        False,
    )
    assert (command.status, command.approval) == ("completed", "not_required")
    assert command.agent_label == "echo hi there"
    assert command.agent_output == "hi there"
    assert command.text_offset == offset(echo)
    assert command.completed_at is not None and command.error_code is None

    done(run)
    # The mode --mode set (gemini accepts it with `{}` and sends no current_mode_update).
    assert Chat.objects.get(pk=run.chat_id).mode == "default"


def test_an_edit_allowed_from_the_web_changes_the_file_and_shows_its_diff_and_a_rejected_one_does_not(  # noqa: E501
    start_agent: StartAgent, fake_models: FakeModels, approver: WebUser, project: Path
) -> None:
    run = start(start_agent)
    edit = Call(
        "replace",
        {
            "file_path": "greet.py",
            "old_string": '"Hello "',
            "new_string": '"Hi "',
            "instruction": "Greet more casually.",
        },
    )
    tag = fake_models.script(edit, Say("Greeting changed."))
    run.send(f"Make the greeting casual {tag}")
    prompt = asked(run)
    assert [(c["label"], c["intent"]) for c in prompt.choices] == [
        ("Allow for this session", ALLOW_ALWAYS),
        ("Allow", ALLOW_ONCE),
        ("Reject", REJECT),
    ]
    waiting = prompt.tool  # gemini's request is the first sight of the call: it made the row
    assert waiting is not None
    assert (waiting.status, waiting.approval) == ("proposed", "pending")
    assert (project / "greet.py").read_text() == GREET  # nothing happens before the answer
    approver.choose(prompt, ALLOW_ONCE)
    allowed = turn(run, 1)

    assert (project / "greet.py").read_text() == 'def greet(name):\n    return "Hi " + name\n'
    assert allowed.stop_reason == "end_turn"
    assert allowed.reply.markdown == preface(edit) + "Greeting changed."
    row = only_row(allowed)
    assert row.pk == waiting.pk
    assert (row.tool_name, row.agent_kind, row.read_only) == ("edit", "edit", False)
    assert (row.status, row.approval, row.error_code) == ("completed", "approved", None)
    assert row.agent_label == 'greet.py: "Hello " => "Hi "'
    assert row.agent_input == str(project / "greet.py")
    assert row.agent_output is not None
    assert '-    return "Hello " + name' in row.agent_output
    assert '+    return "Hi " + name' in row.agent_output
    assert row.agent_summary is not None and row.agent_summary.startswith(row.agent_label)
    assert row.text_offset == offset(edit)
    assert row.started_at is not None and row.completed_at is not None
    prompt.refresh_from_db()
    assert (prompt.outcome, prompt.decision) == ("approved", "Allowed once")
    assert prompt.answered_by is not None and prompt.answered_by.username == "ann"

    again = Call(
        "replace",
        {"file_path": "greet.py", "old_string": '"Hi "', "new_string": '"Yo "', "instruction": "x"},
    )
    tag2 = fake_models.script(again, Say("Left as it was."))
    run.send(f"Make it even more casual {tag2}")
    approver.choose(asked(run), REJECT)
    rejected = turn(run, 2)

    assert (project / "greet.py").read_text() == 'def greet(name):\n    return "Hi " + name\n'
    assert rejected.stop_reason == "end_turn"
    assert rejected.reply.markdown == preface(again) + "Left as it was."
    denied = only_row(rejected)
    # gemini says nothing more about a rejected call; the row still tells the truth.
    assert (denied.status, denied.approval, denied.error_code) == (
        "failed",
        "denied",
        "permission_denied",
    )
    assert denied.completed_at is not None
    assert denied.text_offset == offset(again)
    assert denied.agent_label == 'greet.py: "Hi " => "Yo "'
    [response] = function_responses(fake_models, tag2)
    assert response["response"] == {"error": 'Tool "replace" was canceled by the user.'}

    done(run)


def test_a_command_or_an_edit_allowed_for_the_session_runs_and_the_next_one_runs_without_asking(
    start_agent: StartAgent, fake_models: FakeModels, approver: WebUser, project: Path
) -> None:
    run = start(start_agent)
    touch = Call("run_shell_command", {"command": "touch made.txt", "description": "Make a file"})
    tag = fake_models.script(touch, Say("Made it."))
    run.send(f"Make a file {tag}")
    prompt = asked(run)
    assert [c["intent"] for c in prompt.choices] == [ALLOW_ALWAYS, ALLOW_ONCE, REJECT]
    assert not (project / "made.txt").exists()
    approver.choose(prompt, ALLOW_ALWAYS)
    first = turn(run, 1)
    assert (project / "made.txt").exists()
    row = only_row(first)
    assert (row.tool_name, row.agent_kind, row.read_only) == ("execute", "execute", False)
    assert (row.status, row.approval, row.error_code) == ("completed", "approved", None)
    assert row.agent_label == "touch made.txt"
    # What the request showed is what was asked; the command printed nothing.
    assert row.agent_summary is not None
    assert row.agent_summary.startswith("touch made.txt") and "(Make a file)" in row.agent_summary
    assert row.agent_output is None
    prompt.refresh_from_db()
    assert (prompt.outcome, prompt.decision) == ("approved", "Always allowed")

    second_touch = Call(
        "run_shell_command", {"command": "touch also.txt", "description": "Another file"}
    )
    tag2 = fake_models.script(second_touch, Say("Made another."))
    run.send(f"Make another file {tag2}")
    second = turn(run, 2)
    assert (project / "also.txt").exists()
    assert not Prompt.objects.filter(attempt=second).exists()
    again = only_row(second)
    assert (again.status, again.approval) == ("completed", "not_required")
    assert again.agent_label == "touch also.txt"

    # "Allow for this session" on an edit puts gemini in its autoEdit mode (it says nothing of
    # it over ACP): the next edit, to another file, does not ask.
    edit = Call(
        "replace",
        {
            "file_path": "greet.py",
            "old_string": '"Hello "',
            "new_string": '"Hi "',
            "instruction": "x",
        },
    )
    run.send(f"Make the greeting casual {fake_models.script(edit, Say('Changed.'))}")
    approver.choose(asked(run), ALLOW_ALWAYS)
    turn(run, 3)
    assert 'return "Hi " + name' in (project / "greet.py").read_text()
    notes = Call(
        "replace",
        {"file_path": "notes.txt", "old_string": "first", "new_string": "1st", "instruction": "x"},
    )
    run.send(f"Shorten the notes {fake_models.script(notes, Say('Shortened.'))}")
    fourth = turn(run, 4)
    assert (project / "notes.txt").read_text() == "1st line\nsecond line\n"
    assert not Prompt.objects.filter(attempt=fourth).exists()
    unasked = only_row(fourth)
    assert (unasked.tool_name, unasked.status, unasked.approval) == (
        "edit",
        "completed",
        "not_required",
    )
    assert unasked.agent_output is not None and "+1st line" in unasked.agent_output

    done(run)


def test_a_todo_list_gemini_writes_is_a_row_of_its_own_and_no_plan(
    start_agent: StartAgent, fake_models: FakeModels, approver: WebUser
) -> None:
    run = start(start_agent)
    todos = [
        {"description": "Read the notes", "status": "completed"},
        {"description": "Edit greet.py", "status": "in_progress"},
    ]
    write = Call("write_todos", {"todos": todos})
    tag = fake_models.script(write, Say("Planned."))
    run.send(f"Plan the work {tag}")
    # gemini asks before it writes its todo list (a tool of kind "other").
    approver.choose(asked(run), ALLOW_ONCE)
    planned = turn(run, 1)
    row = only_row(planned)
    assert (row.tool_name, row.agent_kind, row.read_only) == ("other", "other", False)
    assert (row.status, row.approval) == ("completed", "approved")
    assert row.agent_label == "Set 2 todo(s)"
    # gemini 0.61 sends no ACP `plan` update and no rawInput: the list reaches the model only.
    assert planned.plan == []
    [response] = function_responses(fake_models, tag)
    listed = "1. [completed] Read the notes\n2. [in_progress] Edit greet.py"
    assert response["response"]["output"].endswith(listed)

    done(run)


def test_the_tokens_gemini_reports_for_a_turn_are_its_usage(
    start_agent: StartAgent, fake_models: FakeModels
) -> None:
    run = start(start_agent)
    tag = fake_models.script(Call("read_file", {"file_path": "notes.txt"}), Say("Read."))
    run.send(f"Read the notes {tag}")
    ended = turn(run, 1)
    # Two model requests of 1200 prompt and 34 output tokens each (gemini.USAGE), which gemini
    # reports only as its prompt result's _meta.quota.token_count.
    assert ended.usage is not None, "the turn lost the token counts gemini reported"
    assert (ended.usage.get("inputTokens"), ended.usage.get("outputTokens")) == (2400, 68)

    done(run)


def test_ctrl_c_cancels_a_long_command_the_runner_goes_on_and_a_second_ctrl_c_quits(
    start_agent: StartAgent, fake_models: FakeModels, approver: WebUser
) -> None:
    run = start(start_agent)
    sleep = Call("run_shell_command", {"command": "sleep 30", "description": "Wait a while"})
    tag = fake_models.script(sleep, Say("Waited."))
    run.send(f"Wait half a minute {tag}")
    approver.choose(asked(run), ALLOW_ONCE)
    eventually(
        lambda: ToolActivity.objects.filter(chat_id=run.chat_id, approval="approved").first(),
        what="the command to be allowed",
    )
    time.sleep(1)  # the command is running
    started = time.monotonic()
    run.ctrl_c()
    cancelled = turn(run, 1)
    assert time.monotonic() - started < 15, "the command was not stopped"

    tag2 = fake_models.script(Say("Still here."))
    run.send(f"Are you there? {tag2}")
    after = turn(run, 2)
    assert (after.stop_reason, after.reply.markdown) == ("end_turn", "Still here.")
    assert run.process.poll() is None

    run.ctrl_c()
    code, err = run.finish(within=20)
    assert code == 130, err

    assert cancelled.stop_reason == "cancelled"
    row = only_row(cancelled)
    assert row.agent_label == "sleep 30"
    assert row.approval == "approved"
    # gemini reports the stopped command as "completed" ("Command cancelled by user."); the row
    # still ends cancelled.
    assert row.error_code == "cancelled", (row.status, row.agent_status, row.agent_output)
    assert row.status == "cancelled"
    assert row.completed_at is not None
