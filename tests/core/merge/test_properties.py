"""Generated sequences (hypothesis): whatever the events, a row keeps its promises.

Pure: no database, no socket.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activity.core.contract import (
    ERROR_MESSAGES,
    FINAL_STATUSES,
    READ_ONLY_KINDS,
    Limits,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
)
from activity.core.exits import exit_message
from activity.core.merge import (
    AgentExited,
    CallState,
    Event,
    MergeContext,
    PromptClosed,
    TurnCancelled,
    TurnEnded,
    merge,
)
from activity.wire.acp import (
    CreateElicitation,
    RequestPermission,
    ToolCallUpdate,
)
from tests.core.merge.events import (
    CALL,
    content_chunk,
    diff,
    permission,
    question,
    text,
    tool_call,
    tool_call_update,
)

# The merge is pure: no database.
pytestmark = pytest.mark.once

# --- 3. generated sequences (hypothesis) -----------------------------------------------------

GEN_LIMITS = Limits(content_chars=96, short_chars=64)
KNOWN_STATUS = {"pending", "in_progress", "completed", "failed", "cancelled"}
FINAL = {ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED}

# NUL is left out: a NUL-only title is the separate failing test in test_rules.py.
words = st.text(st.characters(exclude_characters="\x00"), max_size=120)
titles = st.none() | st.sampled_from(["", "Terminal", "ls -la", "Lire é🙂"]) | words
kinds = st.none() | st.sampled_from(
    ["", "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
    + ["switch_mode", "teleport", "vendor_kind"]
)
statuses = st.none() | st.sampled_from(
    ["", "pending", "in_progress", "completed", "failed", "cancelled", "paused", "waiting"]
)
content_items = st.one_of(
    words.map(text),
    st.builds(diff, st.just("/w/a.py"), st.none() | words, words),
    st.just({"type": "terminal", "terminalId": "term_1"}),
    st.just({"type": "hologram"}),
    st.just({"type": "content", "content": {"type": "smell"}}),
    st.just({"type": "content", "content": {"type": "image", "data": "", "mimeType": "image/png"}}),
)
raw_inputs = st.one_of(
    st.none(),
    st.sampled_from([{}, [], ""]),
    st.builds(lambda c: {"command": c}, words),
    st.builds(lambda c: {"command": c}, st.lists(words, min_size=1, max_size=4)),
    st.builds(lambda p: {"file_path": p, "limit": 5}, words),
    st.builds(lambda q: {"query": q, "n": 3}, words),
    words,
)
raw_outputs = st.none() | st.sampled_from(["", {"ok": True}, [1, 2], {"exit_code": 3}]) | words
metas = st.none() | st.sampled_from(
    [
        {},
        {"claudeCode": {"toolName": "Bash"}},
        {"claudeCode": {"toolResponse": {"stdout": "x"}}},
        {"claudeCode": {"toolName": ""}},
    ]
)
call_fields = st.fixed_dictionaries(
    {},
    optional={
        "title": titles,
        "kind": kinds,
        "status": statuses,
        "name": st.none() | st.sampled_from(["", "Bash", "read_file"]),
        "content": st.none() | st.lists(content_items, max_size=3),
        "locations": st.none() | st.lists(st.just({"path": "/w/a.py", "line": 1}), max_size=2),
        "rawInput": raw_inputs,
        "rawOutput": raw_outputs,
        "_meta": metas,
    },
)
wire_events = st.one_of(
    st.tuples(st.sampled_from(["tool_call", "tool_call_update"]), call_fields),
    st.tuples(st.just("permission"), call_fields),
    st.tuples(st.just("question"), words),
    st.tuples(st.just("chunk"), content_items),
)
turn_events = st.sampled_from(
    [
        PromptClosed(ToolApproval.APPROVED),
        PromptClosed(ToolApproval.DENIED),
        PromptClosed(ToolApproval.CANCELLED),
        TurnCancelled(),
        TurnEnded(),
        AgentExited(),
    ]
)


def build(spec: Any) -> Event:
    """A generated event: raw JSON through the wire models, or one of koruweb's own."""
    if not isinstance(spec, tuple):
        event: Event = spec
        return event
    what, body = spec
    if what in ("tool_call", "tool_call_update"):
        return tool_call(**body) if what == "tool_call" else tool_call_update(**body)
    if what == "permission":
        return permission(**body)
    if what == "question":
        return question(body)
    return content_chunk(body)


def sent_fields(event: Event) -> dict[str, Any]:
    """The toolCall fields an ACP event carried, as parsed."""
    if isinstance(event, ToolCallUpdate):
        return {"kind": event.kind, "status": event.status, "title": event.title}
    if isinstance(event, RequestPermission) and event.call is not None:
        call = event.call
        return {"kind": call.kind, "status": call.status, "title": call.title}
    return {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(wire_events, turn_events), min_size=1, max_size=14))
def test_any_sequence_of_events_keeps_the_rows_promises(specs: list[Any]) -> None:
    state: CallState | None = None
    first_at: int | None = None
    first_offset: int | None = None
    last_kind: str | None = None
    last_status: str | None = None

    for n, spec in enumerate(specs, start=1):
        event = build(spec)
        if state is None and not isinstance(spec, tuple):
            continue  # the ingest applies turn events only to calls it has seen
        at, reply_bytes = 1_000 * n, 17 * n
        before = state
        state = merge(state, event, MergeContext(at=at, reply_bytes=reply_bytes, limits=GEN_LIMITS))
        s = state
        if before is None:
            first_at, first_offset = at, reply_bytes

        sent = sent_fields(event)
        if sent.get("kind"):
            last_kind = sent["kind"]
        if sent.get("status"):
            last_status = sent["status"]

        # Identity and first sight never drift.
        assert s.tool_call_id == CALL
        assert s.proposed_at == first_at
        assert s.text_offset == first_offset
        assert s.agent_kind == last_kind
        assert s.agent_status == last_status
        assert s.tool_name == (s.agent_tool or s.agent_kind or "other")
        assert s.read_only is (s.agent_kind in READ_ONLY_KINDS)

        # Bounds.
        for short in (s.agent_label, s.error_message):
            assert short is None or len(short) <= GEN_LIMITS.short_chars
        for long in (s.agent_input, s.agent_output, s.agent_summary):
            assert long is None or len(long) <= GEN_LIMITS.content_chars
        assert (s.agent_output is None) == (s.result_bytes is None)
        assert s.result_bytes is None or s.result_bytes >= len(s.agent_output or "") > 0

        # Status: final is final; completed_at iff final; errors only on failed/cancelled.
        assert (s.completed_at is not None) == (s.status in FINAL_STATUSES)
        assert (s.error_code is not None) == (s.status in (ToolStatus.FAILED, ToolStatus.CANCELLED))
        exited = s.error_code is ToolErrorCode.TOOL_FAILED and s.error_message == exit_message(3)
        assert exited or s.error_message == (ERROR_MESSAGES[s.error_code] if s.error_code else None)
        if s.approval is ToolApproval.DENIED and s.status is not ToolStatus.COMPLETED:
            assert s.status in (ToolStatus.FAILED, ToolStatus.CANCELLED), "denied never runs"
            assert s.error_code is ToolErrorCode.PERMISSION_DENIED
        elif s.status is ToolStatus.CANCELLED:  # a call denied earlier keeps its reason
            assert s.error_code in (ToolErrorCode.CANCELLED, ToolErrorCode.PERMISSION_DENIED)
        if isinstance(event, (TurnCancelled, TurnEnded, AgentExited)):
            assert s.approval is not ToolApproval.PENDING
        if isinstance(event, (RequestPermission, CreateElicitation)):
            assert s.approval is ToolApproval.PENDING

        if before is None:
            continue
        if before.agent_label:
            assert s.agent_label, "a title once set is never blank again"
        if before.status in FINAL:
            assert s.status in FINAL, "a finished call never returns to proposed/running"
            assert s.completed_at == before.completed_at
        if before.started_at is not None:
            assert s.started_at == before.started_at
        status_word = sent.get("status")
        if status_word and status_word not in KNOWN_STATUS:
            assert s.status is before.status, "an unknown status leaves the status as it was"
        denial = (
            event == PromptClosed(ToolApproval.DENIED) and before.approval is ToolApproval.PENDING
        )
        if denial and before.status not in FINAL:
            assert s.status is ToolStatus.FAILED, "a denied call ends when the person says no"
        elif isinstance(event, (RequestPermission, CreateElicitation, PromptClosed, TurnEnded)):
            assert s.status is before.status, "a prompt never moves the status"
        if isinstance(event, PromptClosed) and before.approval is not ToolApproval.PENDING:
            assert s == before, "closing a prompt that is not open changes nothing"
