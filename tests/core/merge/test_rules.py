"""The merge rules, event by event (docs/architecture.md#merge-rules): upserts, patching,
status, the tool's identity, sizes, times and error codes.

Pure: no database, no socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from activity.core.contract import (
    ERROR_MESSAGES,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
)
from activity.core.merge import (
    AgentExited,
    Event,
    PromptClosed,
    TurnCancelled,
)
from tests.core.merge.events import (
    CALL,
    SMALL,
    apply,
    assert_cut,
    content_chunk,
    permission,
    replay,
    text,
    tool_call,
    tool_call_update,
)

# The merge is pure: no database.
pytestmark = pytest.mark.once

# --- 1. upserts ------------------------------------------------------------------------------


def test_an_update_for_an_unknown_call_still_makes_a_row() -> None:
    s = apply(None, tool_call_update(title="Read notes.md", status="in_progress"), at=5_000)

    assert s.tool_call_id == CALL
    assert s.agent_label == "Read notes.md"
    assert s.status is ToolStatus.RUNNING
    assert s.error_code is None  # never an invented failure (zed#61667)
    assert s.opened is False
    assert s.proposed_at == 5_000


def test_a_tool_call_opening_marks_the_row_opened() -> None:
    s = apply(None, tool_call(title="Read notes.md", kind="read"))

    assert s.opened is True
    assert s.status is ToolStatus.PROPOSED
    assert s.approval is ToolApproval.NOT_REQUIRED


def test_a_tool_call_for_a_known_id_merges_into_the_row_without_resetting_it() -> None:
    s = replay(
        tool_call_update(title="git status", kind="execute", rawInput={"command": "git status"}),
        permission(title="git status"),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(content=[text("clean")]),
        tool_call(status="in_progress"),
    )

    assert s.opened is True
    assert s.agent_label == "git status"
    assert s.agent_input == "git status"
    assert s.agent_output == "clean"
    assert s.agent_summary == "git status"
    assert s.approval is ToolApproval.APPROVED
    assert s.status is ToolStatus.RUNNING
    assert s.proposed_at == 1_000
    assert s.started_at == 3_000


def test_a_replayed_pending_tool_call_does_not_reopen_a_finished_call() -> None:
    live = replay(
        tool_call(title="ls", kind="execute", status="pending"),
        tool_call_update(status="completed", content=[text("a.py")]),
    )
    # session/load replays the same id: tool_call (status pending), then completed.
    s = apply(live, tool_call(title="ls", kind="execute", status="pending"), at=9_000)
    assert s.status is ToolStatus.COMPLETED
    assert s.completed_at == 2_000
    assert s.agent_output == "a.py"

    s = apply(s, tool_call_update(status="completed"), at=10_000)
    assert s.completed_at == 2_000


# --- 1. patching only what is present --------------------------------------------------------


@pytest.mark.parametrize("absent", [False, True], ids=["null", "absent"])
def test_absent_and_null_fields_never_blank_stored_ones(absent: bool) -> None:
    s = replay(
        tool_call(
            title="Read notes.md",
            kind="read",
            name="read_file",
            status="in_progress",
            rawInput={"path": "/w/notes.md"},
            content=[text("hello")],
        )
    )
    fields = ("title", "kind", "status", "content", "locations", "rawInput", "rawOutput", "name")
    s = apply(s, tool_call_update() if absent else tool_call_update(**dict.fromkeys(fields)))

    assert s.agent_label == "Read notes.md"
    assert s.agent_kind == "read"
    assert s.tool_name == "read_file"
    assert s.read_only is True
    assert s.status is ToolStatus.RUNNING
    assert s.agent_input == "/w/notes.md"
    assert s.agent_output == "hello"
    assert s.result_bytes == 5


def test_an_empty_title_never_blanks_the_label() -> None:
    s = replay(tool_call(title="Run tests"), tool_call_update(title=""), tool_call(title=""))

    assert s.agent_label == "Run tests"


def test_a_title_made_only_of_nul_characters_never_blanks_the_label() -> None:
    # JSON "\u0000" is a valid title; the database-safe cleaning drops NULs, leaving nothing.
    s = replay(tool_call(title="Run tests"), tool_call_update(title="\u0000"))

    assert s.agent_label == "Run tests"


def test_the_latest_title_wins() -> None:
    s = replay(
        tool_call(title="Terminal"),
        tool_call_update(title="touch a.txt"),
        tool_call_update(title="touch a.txt && echo created"),
    )

    assert s.agent_label == "touch a.txt && echo created"


def test_content_replaces_the_whole_output_rather_than_appending() -> None:
    s = replay(
        tool_call_update(content=[text("step 1"), text("step 2")]),
        tool_call_update(content=[text("step 3")]),
    )

    assert s.agent_output == "step 3"
    assert s.result_bytes == len(b"step 3")


def test_an_empty_content_list_empties_the_output() -> None:
    s = replay(tool_call_update(content=[text("partial")]), tool_call_update(content=[]))

    assert s.agent_output is None
    assert s.result_bytes is None


def test_locations_replace_the_paths_shown_when_no_input_was_seen() -> None:
    s = replay(
        tool_call(kind="edit", locations=[{"path": "/w/a.py", "line": 3}, {"path": "/w/b.py"}]),
    )
    assert s.agent_input == "/w/a.py:3\n/w/b.py"

    s = apply(s, tool_call_update(locations=[{"path": "/w/c.py"}]))
    assert s.agent_input == "/w/c.py"


def test_locations_never_replace_a_real_input() -> None:
    s = replay(
        tool_call(kind="execute", rawInput={"command": "pytest -q"}),
        tool_call_update(locations=[{"path": "/w/tests"}]),
    )

    assert s.agent_input == "pytest -q"


@pytest.mark.parametrize("empty", [{}, [], "", None], ids=repr)
def test_an_empty_input_never_overwrites_a_real_one(empty: Any) -> None:
    s = replay(
        tool_call(kind="execute", rawInput={"command": "make test"}),
        tool_call_update(rawInput=empty),
        tool_call(rawInput=empty),
    )

    assert s.agent_input == "make test"
    assert s.input_seen is True


def test_an_input_that_starts_empty_fills_in_later() -> None:
    s = apply(None, tool_call(title="Terminal", kind="execute", rawInput={}))
    assert s.agent_input is None
    assert s.input_seen is False

    s = apply(s, tool_call_update(rawInput={"command": "ls", "description": "List"}))
    assert s.agent_input == "ls"
    assert s.input_seen is True


def test_a_permission_request_with_an_empty_input_keeps_the_real_one() -> None:
    # opencode#7370: the permission request's toolCall resets rawInput to {}.
    s = replay(
        tool_call(title="bash", kind="execute", rawInput={"command": "rm -rf build"}),
        permission(title="bash", kind="execute", rawInput={}),
    )

    assert s.agent_input == "rm -rf build"
    assert s.approval is ToolApproval.PENDING


def test_a_newer_real_input_replaces_the_older_one() -> None:
    s = replay(
        tool_call(kind="execute", rawInput={"command": "ls"}),
        tool_call_update(rawInput={"command": "ls -la"}),
    )

    assert s.agent_input == "ls -la"


# --- 1. status is not a ladder ---------------------------------------------------------------


def test_pending_may_go_straight_to_completed() -> None:
    s = replay(tool_call(status="pending"), tool_call_update(status="completed"))

    assert s.status is ToolStatus.COMPLETED
    assert s.started_at is None
    assert s.completed_at == 2_000


@pytest.mark.parametrize(
    ("wire", "status"),
    [
        ("in_progress", ToolStatus.RUNNING),
        ("completed", ToolStatus.COMPLETED),
        ("failed", ToolStatus.FAILED),
        ("cancelled", ToolStatus.CANCELLED),
    ],
)
def test_the_first_report_may_already_be_past_pending(wire: str, status: ToolStatus) -> None:
    s = apply(None, tool_call_update(status=wire))

    assert s.status is status
    assert s.agent_status == wire


@pytest.mark.parametrize("final", ["completed", "failed", "cancelled"])
@pytest.mark.parametrize("late", ["pending", "in_progress"])
def test_a_finished_call_never_goes_back_to_pending_or_running(final: str, late: str) -> None:
    s = replay(tool_call(status="in_progress"), tool_call_update(status=final))
    before = s.status

    s = apply(s, tool_call_update(status=late), at=9_000)
    s = apply(s, tool_call(status=late), at=9_500)

    assert s.status is before
    assert s.is_final
    assert s.completed_at == 2_000


@pytest.mark.parametrize("final", ["completed", "failed"])
def test_a_permission_request_never_moves_a_finished_call_back(final: str) -> None:
    s = replay(
        tool_call(status=final),
        permission(status="pending", title="late prompt"),
        PromptClosed(ToolApproval.APPROVED),
    )

    assert s.status is ToolStatus(final)
    assert s.completed_at == 1_000


def test_a_permission_request_never_moves_a_running_call_back_to_proposed() -> None:
    s = replay(tool_call(status="in_progress"), permission(status="pending"))

    assert s.status is ToolStatus.RUNNING


@pytest.mark.parametrize("word", ["completed", "failed"])
def test_a_cancelled_call_stays_cancelled_whatever_status_word_the_agent_sends_after(word):
    # gemini-cli 0.61 reports a command stopped by session/cancel as "completed".
    s = replay(
        tool_call(status="in_progress"),
        TurnCancelled(),
        tool_call_update(status=word, content=[text("Command cancelled by user.")]),
    )

    assert s.status is ToolStatus.CANCELLED
    assert s.error_code is ToolErrorCode.CANCELLED
    assert s.agent_status == word
    assert s.agent_output == "Command cancelled by user."
    assert s.completed_at == 2_000  # the first final status


def test_a_v2_cancelled_status_cancels_the_call() -> None:
    s = replay(tool_call(status="in_progress"), tool_call_update(status="cancelled"))

    assert s.status is ToolStatus.CANCELLED
    assert s.error_code is ToolErrorCode.CANCELLED


@pytest.mark.parametrize("start", ["pending", "in_progress", "completed"])
def test_an_unknown_status_is_kept_raw_and_leaves_the_status_as_it_was(start: str) -> None:
    s = replay(tool_call(status=start))
    before = s

    s = apply(s, tool_call_update(status="paused"), at=7_000)

    assert s.agent_status == "paused"
    assert s.status is before.status
    assert s.completed_at == before.completed_at
    assert s.started_at == before.started_at


def test_an_unknown_kind_is_kept_raw_and_names_the_tool() -> None:
    s = apply(None, tool_call(title="Teleport", kind="teleport"))

    assert s.agent_kind == "teleport"
    assert s.tool_name == "teleport"
    assert s.read_only is False


# --- 1. the tool's identity ------------------------------------------------------------------


def test_the_tool_name_comes_from_name_first() -> None:
    s = apply(
        None, tool_call(name="Bash", kind="execute", _meta={"claudeCode": {"toolName": "Shell"}})
    )

    assert s.tool_name == "Bash"


def test_the_tool_name_falls_back_to_claudes_meta_tool_name() -> None:
    s = apply(None, tool_call(kind="execute", _meta={"claudeCode": {"toolName": "Bash"}}))

    assert s.tool_name == "Bash"


def test_the_tool_name_falls_back_to_the_kind() -> None:
    s = apply(None, tool_call(kind="search", _meta={"claudeCode": {"parentToolUseId": "x"}}))

    assert s.tool_name == "search"


def test_the_tool_name_is_other_when_nothing_names_the_tool() -> None:
    s = apply(None, tool_call_update(status="pending"))

    assert s.tool_name == "other"
    assert s.read_only is False


def test_the_tool_name_survives_updates_that_do_not_name_it() -> None:
    s = replay(
        tool_call(name="Bash", kind="execute"),
        tool_call_update(kind="other", _meta={"claudeCode": {"toolResponse": {"stdout": "x"}}}),
    )

    assert s.tool_name == "Bash"


@pytest.mark.parametrize(
    ("kind", "read_only"),
    [
        ("read", True),
        ("search", True),
        ("think", True),
        ("fetch", True),
        ("edit", False),
        ("delete", False),
        ("move", False),
        ("execute", False),
        ("switch_mode", False),
        ("other", False),
        ("teleport", False),
    ],
)
def test_read_only_follows_the_kind(kind: str, read_only: bool) -> None:
    assert apply(None, tool_call(kind=kind)).read_only is read_only


def test_read_only_follows_the_latest_kind() -> None:
    s = replay(tool_call(kind="read"), tool_call_update(kind="edit"))

    assert s.read_only is False


# --- 1. sizes and cuts -----------------------------------------------------------------------


@pytest.mark.parametrize("char", ["é", "日", "🙂", "a"])
def test_result_bytes_is_the_utf8_size_before_the_cut(char: str) -> None:
    body = char * 100
    s = apply(None, tool_call_update(content=[text(body)]), limits=SMALL)

    assert s.result_bytes == len(body.encode("utf-8"))
    assert_cut(s.agent_output, body, SMALL.content_chars)


@pytest.mark.parametrize("body", ["é" * 200, "🙂" * 65, "日本語のテキスト" * 9, "a🙂" * 40])
def test_long_output_is_cut_on_a_character_boundary_with_a_visible_marker(body: str) -> None:
    s = apply(None, tool_call_update(content=[text(body)]), limits=SMALL)

    assert_cut(s.agent_output, body, SMALL.content_chars)


def test_output_that_fits_is_kept_whole() -> None:
    body = "🙂" * SMALL.content_chars
    s = apply(None, tool_call_update(content=[text(body)]), limits=SMALL)

    assert s.agent_output == body


def test_long_input_title_and_summary_are_cut_to_their_bounds() -> None:
    command = "echo " + "ü" * 200
    title = "Lire " + "日本" * 100
    s = replay(
        tool_call(title=title, kind="execute", rawInput={"command": command}),
        permission(title=title),
        limits=SMALL,
    )

    assert_cut(s.agent_input, command, SMALL.content_chars)
    assert_cut(s.agent_label, title, SMALL.short_chars)
    assert_cut(s.agent_summary, title, SMALL.short_chars)


# --- 1. timestamps and text offset -----------------------------------------------------------


def test_proposed_at_is_the_first_sight_and_never_moves() -> None:
    s = apply(None, tool_call_update(title="x"), at=1_111)
    s = apply(s, tool_call(title="y", status="in_progress"), at=2_222)
    s = apply(s, tool_call_update(status="completed"), at=3_333)

    assert s.proposed_at == 1_111


def test_started_at_is_the_first_time_the_call_ran() -> None:
    s = replay(
        tool_call(status="pending"),
        tool_call_update(status="in_progress"),
        tool_call_update(status="pending"),
        tool_call_update(status="in_progress"),
        tool_call_update(status="completed"),
    )

    assert s.started_at == 2_000


def test_started_at_is_when_the_prompt_was_approved() -> None:
    s = replay(
        tool_call(status="pending"),
        permission(status="pending"),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(status="in_progress"),
        tool_call_update(status="completed"),
    )

    assert s.started_at == 3_000


def test_approving_a_call_that_already_finished_never_starts_it_after_it_finished() -> None:
    # A late prompt on a finished call (the very case the status rule guards against) must
    # not give the row a start after its end: its duration would be negative.
    s = replay(
        tool_call(status="pending"),
        permission(status="pending"),
        tool_call_update(status="completed"),
        PromptClosed(ToolApproval.APPROVED),
    )

    assert s.completed_at == 3_000
    assert s.started_at is None or s.started_at <= s.completed_at


@pytest.mark.parametrize("answer", [ToolApproval.DENIED, ToolApproval.CANCELLED])
def test_a_call_whose_prompt_was_not_approved_never_started(answer: ToolApproval) -> None:
    s = replay(tool_call(status="pending"), permission(), PromptClosed(answer))

    assert s.started_at is None


def test_completed_at_is_the_first_final_status_and_a_second_does_not_move_it() -> None:
    s = replay(
        tool_call(status="in_progress"),
        tool_call_update(status="failed"),
        tool_call_update(status="completed"),
    )

    assert s.status is ToolStatus.COMPLETED
    assert s.completed_at == 2_000


def test_an_unfinished_call_has_no_completion_time() -> None:
    s = replay(tool_call(status="pending"), tool_call_update(status="in_progress"))

    assert s.completed_at is None


def test_text_offset_is_the_reply_length_at_first_sight_only() -> None:
    s = apply(None, tool_call(title="Read"), reply_bytes=120)
    s = apply(s, tool_call_update(status="completed"), reply_bytes=480)

    assert s.text_offset == 120


def test_a_call_first_seen_through_its_permission_request_takes_the_offset_then() -> None:
    s = apply(None, permission(title="Run make"), reply_bytes=37)
    s = apply(s, tool_call(status="in_progress"), reply_bytes=90)

    assert s.text_offset == 37


# --- 1. error codes --------------------------------------------------------------------------


def test_a_failed_call_is_a_tool_failure() -> None:
    s = replay(tool_call(status="in_progress"), tool_call_update(status="failed"))

    assert s.error_code is ToolErrorCode.TOOL_FAILED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.TOOL_FAILED]


def test_a_failure_after_a_denied_prompt_is_permission_denied() -> None:
    s = replay(
        tool_call(status="pending"),
        permission(),
        PromptClosed(ToolApproval.DENIED),
        tool_call_update(status="failed"),
    )

    assert s.status is ToolStatus.FAILED
    assert s.error_code is ToolErrorCode.PERMISSION_DENIED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.PERMISSION_DENIED]


def test_a_denial_recorded_after_the_failure_is_still_permission_denied() -> None:
    s = replay(
        tool_call(status="pending"),
        permission(),
        tool_call_update(status="failed"),
        PromptClosed(ToolApproval.DENIED),
    )

    assert s.error_code is ToolErrorCode.PERMISSION_DENIED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.PERMISSION_DENIED]


@pytest.mark.parametrize("status", ["pending", "in_progress"])
def test_a_cancelled_turn_cancels_unfinished_calls(status: str) -> None:
    s = replay(tool_call(status=status), TurnCancelled())

    assert s.status is ToolStatus.CANCELLED
    assert s.error_code is ToolErrorCode.CANCELLED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.CANCELLED]
    assert s.completed_at == 2_000


def test_a_cancelled_turn_leaves_finished_calls_alone() -> None:
    done = replay(tool_call(status="completed"))

    assert apply(done, TurnCancelled(), at=5_000) == done


def test_claude_failing_a_call_after_the_turn_was_cancelled_still_reads_cancelled() -> None:
    # Claude fails a call cancelled during its permission request, and the turn ends
    # cancelled (docs/gotchas.md#what-real-agents-send). The person
    # cancelled; the row must not then claim the tool itself failed.
    s = replay(
        tool_call(title="Terminal", kind="execute", status="pending"),
        permission(title="rm -rf build"),
        TurnCancelled(),
        tool_call_update(status="failed"),
    )

    assert s.approval is ToolApproval.CANCELLED
    assert s.error_code is ToolErrorCode.CANCELLED


@pytest.mark.parametrize("status", ["pending", "in_progress"])
def test_an_agent_exit_fails_unfinished_calls(status: str) -> None:
    s = replay(tool_call(status=status), permission(), AgentExited())

    assert s.status is ToolStatus.FAILED
    assert s.error_code is ToolErrorCode.AGENT_EXITED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.AGENT_EXITED]
    assert s.approval is ToolApproval.CANCELLED
    assert s.completed_at == 3_000


def test_an_agent_exit_leaves_finished_calls_alone() -> None:
    done = replay(tool_call(status="completed"))

    assert apply(done, AgentExited(), at=5_000) == done


@pytest.mark.parametrize(
    "fail",
    [AgentExited(), tool_call_update(status="failed")],
    ids=["agent_exited", "failed"],
)
def test_completing_clears_an_earlier_error(fail: Event) -> None:
    s = replay(tool_call(status="in_progress"), fail, tool_call_update(status="completed"))

    assert s.status is ToolStatus.COMPLETED
    assert s.error_code is None
    assert s.error_message is None


# --- v2 content chunks -----------------------------------------------------------------------


def test_content_chunks_append_to_the_output() -> None:
    s = replay(
        tool_call(status="in_progress"),
        content_chunk(text("line 1")),
        content_chunk(text("línea 2")),
    )

    assert s.agent_output == "line 1\nlínea 2"
    assert s.result_bytes == len("line 1\nlínea 2".encode())


def test_a_content_update_replaces_the_appended_chunks() -> None:
    s = replay(
        content_chunk(text("partial 1")),
        content_chunk(text("partial 2")),
        tool_call_update(content=[text("final")]),
    )

    assert s.agent_output == "final"
    assert s.result_bytes == 5


def test_appending_to_a_cut_output_keeps_the_cut_marker_truthful() -> None:
    first, second = "a" * 100, "b" * 5
    s = replay(content_chunk(text(first)), content_chunk(text(second)), limits=SMALL)

    assert s.result_bytes == len(f"{first}\n{second}")
    assert_cut(s.agent_output, f"{first}\n{second}", SMALL.content_chars)


# --- issue 13: corner cases where the merge lost or reordered data ---------------------------


def test_output_that_merely_ends_with_the_cut_markers_words_is_not_taken_for_a_cut() -> None:
    s = replay(
        tool_call(status="in_progress"),
        content_chunk(text("the log says …[12 more characters cut]")),
        content_chunk(text("and then it went on")),
    )

    assert s.agent_output == "the log says …[12 more characters cut]\nand then it went on"


def test_an_opening_that_arrives_after_its_update_never_sends_the_call_back_to_proposed() -> None:
    s = replay(
        tool_call_update(status="in_progress", title="Run tests"),
        tool_call(status="pending", title="Terminal", kind="execute"),
    )

    assert s.status is ToolStatus.RUNNING and s.started_at == 1_000
    assert s.opened and s.agent_kind == "execute"
    assert s.agent_label == "Run tests"  # the update's title is newer than the opening's


def test_a_permission_requests_older_snapshot_never_replaces_a_newer_title() -> None:
    s = replay(
        tool_call(status="pending", title="Terminal"),
        tool_call_update(title="make test"),
        permission(title="Terminal"),  # the snapshot the agent took before it renamed the call
    )

    assert s.agent_label == "make test"
