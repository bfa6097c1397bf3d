"""Permission requests and questions on a call: the approval they open and how it closes
(docs/gotchas.md#permission-requests-and-questions).

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
    TurnCancelled,
    TurnEnded,
)
from tests.core.merge.events import (
    CALL,
    apply,
    diff,
    permission,
    question,
    replay,
    request_permission,
    text,
    tool_call,
    tool_call_update,
)

# The merge is pure: no database.
pytestmark = pytest.mark.once

# --- 1. approval -----------------------------------------------------------------------------


def test_a_call_without_a_prompt_needs_no_approval() -> None:
    s = replay(tool_call(status="pending"), tool_call_update(status="completed"), TurnEnded())

    assert s.approval is ToolApproval.NOT_REQUIRED


def test_a_permission_request_opens_the_approval_and_records_what_it_asked() -> None:
    s = replay(tool_call(title="Terminal"), permission(title="touch a.txt"))

    assert s.approval is ToolApproval.PENDING
    assert s.agent_summary == "touch a.txt"
    assert s.agent_label == "touch a.txt"


def test_a_permission_request_without_a_title_asks_about_the_rows_label() -> None:
    s = replay(tool_call(title="Edit README.md"), permission(title=""))

    assert s.agent_summary == "Edit README.md"
    assert s.agent_label == "Edit README.md"


def test_a_v2_permission_request_asks_its_title_and_description() -> None:
    request = request_permission(
        {
            "title": "Run a command?",
            "description": "npm install",
            "subject": {"type": "tool_call", "toolCall": {"toolCallId": CALL, "kind": "execute"}},
        }
    )
    s = apply(None, request)

    assert s.approval is ToolApproval.PENDING
    assert s.agent_summary == "Run a command?\nnpm install"
    assert s.agent_kind == "execute"


def test_a_question_opens_the_approval_with_its_message() -> None:
    s = replay(tool_call(title="Asking for your input"), question("Which database?"))

    assert s.approval is ToolApproval.PENDING
    assert s.agent_summary == "Which database?"
    assert s.agent_label == "Asking for your input"


@pytest.mark.parametrize(
    "answer", [ToolApproval.APPROVED, ToolApproval.DENIED, ToolApproval.CANCELLED]
)
def test_closing_the_prompt_records_the_answer(answer: ToolApproval) -> None:
    s = replay(tool_call(status="pending"), permission(), PromptClosed(answer))

    assert s.approval is answer
    assert s.status is (ToolStatus.FAILED if answer is ToolApproval.DENIED else ToolStatus.PROPOSED)


@pytest.mark.parametrize(
    "after",
    [
        [],
        [TurnEnded()],
        [TurnCancelled()],
        [tool_call_update(status="failed")],
        [tool_call_update(status="cancelled")],
        [TurnCancelled(), tool_call_update(status="cancelled")],
    ],
    ids=["nothing more", "turn ends", "turn cancelled", "failed", "cancelled", "both"],
)
def test_a_call_a_person_denied_ends_permission_denied_whatever_the_agent_does_next(
    after: list[Event],
) -> None:
    # gemini says nothing more and ends the turn; codex cancels the turn; claude fails the call.
    s = replay(tool_call(status="pending"), permission(), PromptClosed(ToolApproval.DENIED), *after)

    assert s.approval is ToolApproval.DENIED
    assert s.status in (ToolStatus.FAILED, ToolStatus.CANCELLED)
    assert s.error_code is ToolErrorCode.PERMISSION_DENIED
    assert s.error_message == ERROR_MESSAGES[ToolErrorCode.PERMISSION_DENIED]
    assert s.completed_at == 3_000 and s.started_at is None


def test_what_a_permission_request_showed_is_its_summary_and_the_calls_own_output_follows():
    # codex-acp: the request's toolCall content is the prompt's text; the command's output
    # comes later, as rawOutput only.
    asked = "Proposed Amendment: allow `make`\nAvailable Decisions: approved, abort"
    s = replay(
        tool_call(status="pending", title="make", kind="execute"),
        permission(title="make", content=[text(asked)]),
        PromptClosed(ToolApproval.APPROVED),
        tool_call_update(status="completed", rawOutput={"stdout": "built\n", "exit_code": 0}),
    )

    assert s.agent_summary == f"make\n\n{asked}"
    assert s.agent_output is not None and "built" in s.agent_output
    assert "Proposed Amendment" not in s.agent_output


def test_a_permission_requests_content_never_replaces_the_calls_own_output():
    s = replay(
        tool_call(title="Edit a", kind="edit", content=[diff("/w/a", "x\n", "y\n")]),
        permission(title="Edit a", content=[text("May I?")]),
    )

    assert s.agent_output is not None and "+y" in s.agent_output
    assert s.agent_summary == "Edit a\n\nMay I?"


def test_a_long_diff_a_permission_request_showed_fits_the_content_bound():
    big = "\n".join(f"line {n}" for n in range(200))
    s = replay(permission(title="Edit big", content=[diff("/w/big", "", big)]))

    assert s.agent_summary is not None and s.agent_summary.startswith("Edit big\n\n--- ")
    assert 512 < len(s.agent_summary) <= 16_384 and "+line 199" in s.agent_summary


@pytest.mark.parametrize("end", [TurnEnded(), TurnCancelled()], ids=["ended", "cancelled"])
def test_the_turn_ending_closes_an_open_prompt_as_cancelled(end: Event) -> None:
    s = replay(tool_call(status="pending"), question("Which database?"), end)

    assert s.approval is ToolApproval.CANCELLED
    assert s.started_at is None


def test_a_turn_that_ends_leaves_its_calls_open_to_late_updates() -> None:
    s = replay(tool_call(status="in_progress"), TurnEnded())
    assert s.status is ToolStatus.RUNNING
    assert s.error_code is None

    s = apply(s, tool_call_update(status="completed", content=[text("late")]), at=9_000)
    assert s.status is ToolStatus.COMPLETED
    assert s.agent_output == "late"


@pytest.mark.parametrize(
    "closed", [ToolApproval.APPROVED, ToolApproval.DENIED, ToolApproval.CANCELLED]
)
@pytest.mark.parametrize(
    "then",
    [
        PromptClosed(ToolApproval.APPROVED),
        PromptClosed(ToolApproval.DENIED),
        TurnEnded(),
    ],
    ids=["approved", "denied", "ended"],
)
def test_closing_a_prompt_that_is_not_open_changes_nothing(
    closed: ToolApproval, then: Event
) -> None:

    s = replay(tool_call(status="failed"), permission(), PromptClosed(closed))

    assert apply(s, then, at=9_000) == s


def test_closing_a_prompt_on_a_call_that_never_asked_changes_nothing() -> None:
    s = replay(tool_call(status="in_progress"))

    assert apply(s, PromptClosed(ToolApproval.DENIED), at=5_000) == s


def test_a_permission_request_may_be_the_first_sight_of_a_call() -> None:
    s = apply(
        None,
        permission(title="Write config.toml", kind="edit", locations=[{"path": "/w/config.toml"}]),
        at=4_000,
    )

    assert s.opened is False
    assert s.status is ToolStatus.PROPOSED
    assert s.approval is ToolApproval.PENDING
    assert s.proposed_at == 4_000
    assert s.agent_label == "Write config.toml"
    assert s.agent_input == "/w/config.toml"
    assert s.tool_name == "edit"


def test_a_turn_event_needs_a_call_that_has_been_seen() -> None:
    with pytest.raises(ValueError):
        apply(None, PromptClosed(ToolApproval.APPROVED))


def test_a_permission_request_that_names_no_call_is_not_a_row() -> None:
    request = request_permission({"title": "Allow network access?"})

    with pytest.raises(ValueError):
        apply(None, request)
