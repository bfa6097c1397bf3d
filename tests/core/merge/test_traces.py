"""Real sequences agents send (docs/gotchas.md#what-real-agents-send): claude-agent-acp, codex,
gemini and kiro.

Pure: no database, no socket.
"""

from __future__ import annotations

import pytest

from activity.core.contract import (
    ERROR_MESSAGES,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
)
from activity.core.merge import (
    Event,
    PromptClosed,
    TurnEnded,
)
from tests.core.merge.events import (
    apply,
    diff,
    permission,
    question,
    replay,
    text,
    tool_call,
    tool_call_update,
)

# The merge is pure: no database.
pytestmark = pytest.mark.once


# --- 2. real sequences (docs/gotchas.md#what-real-agents-send) -------------------------------

CLAUDE_COMMAND = "touch acp_demo_file.txt && echo created"
CLAUDE_INPUT = {"command": CLAUDE_COMMAND, "description": "Create a demo file"}


def test_claude_agent_acp_bash_call_in_manual_mode() -> None:
    opening = tool_call(
        name="Bash",
        title="Terminal",
        kind="execute",
        status="pending",
        rawInput={},
        content=[],
        _meta={"claudeCode": {"toolName": "Bash"}},
    )
    s = apply(None, opening, at=1_000, reply_bytes=42)
    assert (s.agent_label, s.agent_input, s.agent_output) == ("Terminal", None, None)

    events: list[Event] = [
        tool_call_update(
            title=CLAUDE_COMMAND, rawInput=CLAUDE_INPUT, content=[text("Create a demo file")]
        ),
        permission(
            name="Bash",
            status="pending",
            title=CLAUDE_COMMAND,
            kind="execute",
            rawInput=CLAUDE_INPUT,
            content=[text("Create a demo file")],
        ),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(_meta={"claudeCode": {"toolResponse": {"stdout": "created"}}}),
        tool_call_update(
            status="completed", content=[text("```console\ncreated\n```")], rawOutput="created"
        ),
        TurnEnded(),
    ]
    for n, event in enumerate(events, start=2):
        s = apply(s, event, at=n * 1_000, reply_bytes=500)

    assert s.opened is True
    assert s.tool_name == "Bash"
    assert s.read_only is False
    assert s.status is ToolStatus.COMPLETED
    assert s.approval is ToolApproval.APPROVED
    assert s.agent_label == CLAUDE_COMMAND
    assert s.agent_summary == (  # what it asked, the command it would run, what it showed
        f"{CLAUDE_COMMAND}\n\nCommand:\n```sh\n{CLAUDE_COMMAND}\n```\n\nCreate a demo file"
    )
    assert s.agent_input == CLAUDE_COMMAND
    assert s.agent_output == "```console\ncreated\n```"
    assert s.result_bytes == len(b"```console\ncreated\n```")
    assert s.proposed_at == 1_000
    assert s.started_at == 4_000  # approved; claude never sends in_progress
    assert s.completed_at == 6_000
    assert s.error_code is None
    assert s.error_message is None
    assert s.text_offset == 42
    assert (s.agent_kind, s.agent_status) == ("execute", "completed")


def test_claude_agent_acp_rejected_call_is_permission_denied() -> None:
    s = replay(
        tool_call(name="Bash", title="Terminal", kind="execute", status="pending", rawInput={}),
        tool_call_update(title=CLAUDE_COMMAND, rawInput=CLAUDE_INPUT),
        permission(name="Bash", status="pending", title=CLAUDE_COMMAND, rawInput=CLAUDE_INPUT),
        PromptClosed(ToolApproval.DENIED),
        tool_call_update(
            status="failed",
            content=[text("User refused permission to run tool")],
            _meta={"claudeCode": {"nonExecutionKind": "permission_denied"}},
        ),
        TurnEnded(),
    )

    assert s.status is ToolStatus.FAILED
    assert s.approval is ToolApproval.DENIED
    assert s.error_code is ToolErrorCode.PERMISSION_DENIED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.PERMISSION_DENIED]
    assert s.started_at is None
    assert s.completed_at == 4_000  # when the person said no
    assert s.agent_input == CLAUDE_COMMAND
    assert s.agent_output == "User refused permission to run tool"


def test_claude_agent_acp_ask_user_question_through_elicitation() -> None:
    s = replay(
        tool_call(
            title="Asking for your input",
            kind="other",
            status="pending",
            _meta={"claudeCode": {"toolName": "AskUserQuestion"}},
        ),
        tool_call_update(
            title="Which database should I use?",
            rawInput={"questions": [{"question": "Which database should I use?"}]},
        ),
        question("Which database should I use?"),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(status="completed", content=[text("Postgres")]),
    )

    assert s.tool_name == "AskUserQuestion"
    assert s.agent_summary == "Which database should I use?"
    assert s.approval is ToolApproval.APPROVED
    assert s.status is ToolStatus.COMPLETED
    assert s.agent_output == "Postgres"


def test_codex_permission_request_before_its_tool_call() -> None:
    raw_input = {"command": ["git", "status", "--short"], "cwd": "/repo"}
    s = apply(
        None,
        permission(
            status="pending",
            title="git status --short",
            kind="execute",
            rawInput=raw_input,
            locations=[{"path": "/repo"}],
        ),
        at=1_000,
        reply_bytes=10,
    )
    assert (s.opened, s.status, s.approval) == (False, ToolStatus.PROPOSED, ToolApproval.PENDING)

    s = apply(s, PromptClosed(ToolApproval.APPROVED), at=2_000)
    s = apply(
        s,
        tool_call(
            status="in_progress", title="git status --short", kind="execute", rawInput=raw_input
        ),
        at=3_000,
        reply_bytes=99,
    )
    assert (s.opened, s.status) == (True, ToolStatus.RUNNING)

    s = apply(
        s,
        tool_call_update(status="completed", rawOutput={"stdout": " M a.py\n", "exit_code": 0}),
        at=4_000,
    )

    assert s.status is ToolStatus.COMPLETED
    assert s.approval is ToolApproval.APPROVED
    assert s.agent_input == "git status --short"
    assert s.agent_output == " M a.py\n"  # the command's output, not the structure around it
    assert s.tool_name == "execute"
    assert (s.proposed_at, s.started_at, s.completed_at) == (1_000, 2_000, 4_000)
    assert s.text_offset == 10
    assert s.error_code is None


def test_codex_web_search_without_a_status() -> None:
    s = replay(
        tool_call(title="Searching the web", kind="fetch"),
        tool_call_update(status="in_progress", rawInput={"query": "acp merge rules"}),
        tool_call_update(status="completed"),
    )

    assert s.status is ToolStatus.COMPLETED
    assert s.read_only is True
    assert s.agent_input == "query: acp merge rules"
    assert (s.started_at, s.completed_at) == (2_000, 3_000)


def test_gemini_permission_request_without_a_tool_call_then_only_completed() -> None:
    s = replay(
        permission(
            title="Edit README.md",
            kind="edit",
            status="pending",
            locations=[{"path": "/w/README.md"}],
            content=[diff("/w/README.md", "old", "new")],
        ),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(status="completed"),
        TurnEnded(),
    )

    assert s.opened is False
    assert s.status is ToolStatus.COMPLETED
    assert s.approval is ToolApproval.APPROVED
    assert s.agent_label == "Edit README.md"
    assert s.agent_summary == (
        "Edit README.md\n\n--- a/w/README.md\n+++ b/w/README.md\n@@ -1 +1 @@\n-old\n+new"
    )
    assert s.agent_input == "/w/README.md"
    assert s.agent_output == "--- a/w/README.md\n+++ b/w/README.md\n@@ -1 +1 @@\n-old\n+new"
    assert s.tool_name == "edit"
    assert (s.proposed_at, s.started_at, s.completed_at) == (1_000, 2_000, 3_000)
    assert s.error_code is None


def test_kiro_call_without_any_status() -> None:
    s = replay(
        tool_call(title="Reading notes.md", kind="read", rawInput={"path": "/w/notes.md"}),
        tool_call_update(content=[text("# Notes")]),
        TurnEnded(),
    )

    assert s.status is ToolStatus.PROPOSED
    assert s.agent_status is None
    assert s.completed_at is None
    assert s.error_code is None
    assert s.agent_input == "/w/notes.md"
    assert s.agent_output == "# Notes"
    assert s.read_only is True


def test_a_call_that_arrives_already_completed() -> None:
    s = apply(
        None,
        tool_call(title="Recall memory", kind="think", status="completed", content=[text("ok")]),
        at=7_000,
    )

    assert s.status is ToolStatus.COMPLETED
    assert s.proposed_at == s.completed_at == 7_000
    assert s.started_at is None
    assert s.approval is ToolApproval.NOT_REQUIRED
    assert s.read_only is True
    assert s.agent_output == "ok"
    assert s.error_code is None
