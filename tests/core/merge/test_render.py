"""How the merge renders what the agent sent (``activity/core/render.py``): inputs, outputs,
diffs, terminals and content it does not know.

Pure: no database, no socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.merge.events import (
    apply,
    diff,
    replay,
    text,
    tool_call,
    tool_call_update,
)

# The merge is pure: no database.
pytestmark = pytest.mark.once

# --- 1. content the merge does not know ------------------------------------------------------


def test_unknown_content_types_are_shown_generically() -> None:
    s = apply(
        None,
        tool_call_update(
            content=[
                {"type": "hologram", "frames": 3},
                {"type": "content", "content": {"type": "smell", "intensity": 2}},
                text("and some text"),
            ]
        ),
    )

    assert s.agent_output == "[hologram content]\n[smell]\nand some text"


# --- 1. agent_input: what the agent asked for ------------------------------------------------


def test_a_command_string_renders_as_the_command_line() -> None:
    s = apply(None, tool_call(kind="execute", rawInput={"command": "ls -la", "timeout": 5}))

    assert s.agent_input == "ls -la"


def test_a_command_list_renders_as_a_shell_quoted_command_line() -> None:
    s = apply(
        None,
        tool_call(kind="execute", rawInput={"command": ["git", "commit", "-m", "fix it's bug"]}),
    )

    assert s.agent_input == "git commit -m 'fix it'\"'\"'s bug'"


@pytest.mark.parametrize(
    ("kind", "raw", "shown"),
    [
        ("read", {"file_path": "/w/notes.md", "limit": 20}, "/w/notes.md"),
        ("read", {"path": "/w/a.py"}, "/w/a.py"),
        ("edit", {"file_path": "/w/a.py", "old_string": "x", "new_string": "y"}, "/w/a.py"),
        ("edit", {"paths": ["/w/a.py", "/w/b.py"]}, "/w/a.py\n/w/b.py"),
    ],
)
def test_read_and_edit_inputs_render_as_their_paths(
    kind: str, raw: dict[str, Any], shown: str
) -> None:
    assert apply(None, tool_call(kind=kind, rawInput=raw)).agent_input == shown


def test_an_mcp_calls_arguments_render_as_key_value_lines() -> None:
    s = apply(
        None,
        tool_call(
            title="mcp__github__search_issues",
            kind="other",
            rawInput={"query": "is:open merge", "limit": 3, "labels": ["bug", "p1"]},
        ),
    )

    assert s.agent_input == 'query: is:open merge\nlimit: 3\nlabels: ["bug", "p1"]'


# --- 1. agent_output: what came back ---------------------------------------------------------


def test_text_content_renders_as_its_text() -> None:
    s = apply(None, tool_call_update(content=[text("Found 3 files"), text("a.py\nb.py\nc.py")]))

    assert s.agent_output == "Found 3 files\na.py\nb.py\nc.py"


def test_a_diff_renders_as_a_unified_diff() -> None:
    s = apply(None, tool_call_update(content=[diff("/w/f.json", '{\n "a":1\n}', '{\n "a":2\n}')]))

    assert s.agent_output == (
        '--- a/w/f.json\n+++ b/w/f.json\n@@ -1,3 +1,3 @@\n {\n- "a":1\n+ "a":2\n }'
    )


def test_a_new_file_diff_starts_from_dev_null() -> None:
    s = apply(None, tool_call_update(content=[diff("/w/new.txt", None, "hello\nworld")]))

    assert s.agent_output == "--- /dev/null\n+++ b/w/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world"


def test_terminal_content_names_its_terminal() -> None:
    s = apply(None, tool_call_update(content=[{"type": "terminal", "terminalId": "term_xyz"}]))

    assert s.agent_output == "[terminal term_xyz]"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("created", "created"), ({"ok": True}, '{\n  "ok": true\n}')],
    ids=["text", "json"],
)
def test_raw_output_is_shown_when_there_is_no_content(raw: Any, shown: str) -> None:
    s = apply(None, tool_call_update(status="completed", rawOutput=raw))

    assert s.agent_output == shown
    assert s.result_bytes == len(shown.encode("utf-8"))


def test_raw_output_is_shown_when_the_content_is_empty() -> None:
    s = apply(None, tool_call_update(content=[], rawOutput="created"))

    assert s.agent_output == "created"


def test_content_wins_over_raw_output() -> None:
    s = apply(
        None, tool_call_update(content=[text("```console\ncreated\n```")], rawOutput="created")
    )

    assert s.agent_output == "```console\ncreated\n```"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (
            {"stdout": "a\n", "stderr": "b\n", "aggregated_output": "a\nb\n", "call_id": "x"},
            "a\nb\n",
        ),
        ({"stdout": "out\n", "stderr": "err\n", "exit_code": 1}, "out\nerr\n"),
        ({"formatted_output": "Exit code: 0\nhi\n"}, "Exit code: 0\nhi\n"),
        ({"exit_code": 0}, '{\n  "exit_code": 0\n}'),
        (["a", 1], '[\n  "a",\n  1\n]'),
    ],
)
def test_a_commands_raw_output_shows_what_the_terminal_showed(raw: Any, shown: str) -> None:
    s = replay(tool_call(status="in_progress"), tool_call_update(status="completed", rawOutput=raw))

    assert s.agent_output == shown


def test_raw_output_never_replaces_content_already_shown() -> None:
    s = replay(
        tool_call(
            toolCallId="e1",
            title="Edit notes.txt",
            kind="edit",
            content=[diff("/w/notes.txt", "a\n", "b\n")],
        ),
        tool_call_update(toolCallId="e1", status="completed", rawOutput={"ok": True}),
    )
    assert s.agent_output is not None and "+b" in s.agent_output and "ok" not in s.agent_output
