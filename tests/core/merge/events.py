"""Building merge events from the raw JSON an agent sends, and applying them.

Every ACP event is built from the raw JSON and parsed by ``parse_agent_message``, so the wire
models are exercised on the way in.
"""

from __future__ import annotations

import re
from typing import Any

from activity.core.contract import (
    Limits,
)
from activity.core.merge import (
    CallState,
    Event,
    MergeContext,
    merge,
)
from activity.wire.acp import (
    CreateElicitation,
    RequestPermission,
    SessionNotification,
    ToolCallContentChunk,
    ToolCallUpdate,
    parse_agent_message,
)

SESSION = "sess-1"
CALL = "toolu_01"
LIMITS = Limits()
SMALL = Limits(content_chars=64, short_chars=64)
CUT_MARKER = re.compile(r"…\[([\d,]+) more characters cut\]$")
ALLOW_OR_REJECT = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


# --- building events from raw JSON ------------------------------------------------------------


def _session_update(update: dict[str, Any]) -> Any:
    raw = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SESSION, "update": update},
    }
    _, message = parse_agent_message(raw)
    assert isinstance(message, SessionNotification)
    return message.update


def tool_call(**fields: Any) -> ToolCallUpdate:
    """A ``tool_call`` (the opening) for CALL, or for ``toolCallId=`` if given."""
    update = _session_update({"sessionUpdate": "tool_call", "toolCallId": CALL, **fields})
    assert isinstance(update, ToolCallUpdate)
    return update


def tool_call_update(**fields: Any) -> ToolCallUpdate:
    """A ``tool_call_update`` for CALL: only the fields given are on the wire."""
    update = _session_update({"sessionUpdate": "tool_call_update", "toolCallId": CALL, **fields})
    assert isinstance(update, ToolCallUpdate)
    return update


def content_chunk(item: dict[str, Any]) -> ToolCallContentChunk:
    """v2 ``tool_call_content_chunk``: one more content item for CALL."""
    update = _session_update(
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": CALL, "content": item}
    )
    assert isinstance(update, ToolCallContentChunk)
    return update


def request_permission(params: dict[str, Any], rpc_id: int = 3) -> RequestPermission:
    raw = {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "session/request_permission",
        "params": {"sessionId": SESSION, "options": ALLOW_OR_REJECT, **params},
    }
    _, message = parse_agent_message(raw)
    assert isinstance(message, RequestPermission)
    return message


def permission(**call: Any) -> RequestPermission:
    """A v1 permission request whose embedded ``toolCall`` carries ``call``'s fields."""
    return request_permission({"toolCall": {"toolCallId": CALL, **call}})


def question(message: str, **params: Any) -> CreateElicitation:
    raw = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "sessionId": SESSION,
            "toolCallId": CALL,
            "message": message,
            "requestedSchema": {"type": "object", "properties": {}},
            **params,
        },
    }
    _, parsed = parse_agent_message(raw)
    assert isinstance(parsed, CreateElicitation)
    return parsed


def text(value: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": value}}


def diff(path: str, old: str | None, new: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "diff", "path": path, "newText": new}
    if old is not None:
        item["oldText"] = old
    return item


# --- applying them ---------------------------------------------------------------------------


def apply(
    state: CallState | None,
    event: Event,
    at: int = 1_000,
    reply_bytes: int = 0,
    limits: Limits = LIMITS,
) -> CallState:
    return merge(state, event, MergeContext(at=at, reply_bytes=reply_bytes, limits=limits))


def replay(*events: Event, limits: Limits = LIMITS) -> CallState:
    """Apply ``events`` in order; the n-th (from 1) arrives at n × 1000 ms."""
    state: CallState | None = None
    for n, event in enumerate(events, start=1):
        state = apply(state, event, at=n * 1_000, limits=limits)
    assert state is not None
    return state


def assert_cut(value: str | None, original: str, limit: int) -> None:
    """``value`` is ``original`` cut on a character boundary, with a truthful visible marker."""
    assert value is not None
    assert len(value) <= limit
    marker = CUT_MARKER.search(value)
    assert marker is not None, value
    kept = value[: marker.start()]
    assert original.startswith(kept)
    assert kept.encode("utf-8") == original.encode("utf-8")[: len(kept.encode("utf-8"))]
    assert int(marker.group(1).replace(",", "")) == len(original) - len(kept)
