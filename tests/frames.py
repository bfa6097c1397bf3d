"""Builders for the runner's frames, as a runner sends them over /ws/agent/."""

from __future__ import annotations

import uuid
from typing import Any

from activity.wire.frames import PROTOCOL_VERSION

T0 = 1_767_000_000_000  # a fixed runner clock, epoch ms


def hello(chat_id: uuid.UUID, acked: int = 0, secret: str | None = None) -> dict[str, Any]:
    """A runner's hello, with its secret (by default one made from the chat id, so a test's
    every hello for a chat is its runner's)."""
    secret = secret_of(chat_id) if secret is None else secret
    return {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "chat_id": str(chat_id),
        "secret": secret,
        "acked": acked,
    }


def secret_of(chat_id: uuid.UUID) -> str:
    """The secret the tests' runner of ``chat_id`` sends."""
    return f"the-runner-secret-of-{chat_id}"


def turn_started(
    seq: int,
    attempt_id: uuid.UUID,
    message_id: uuid.UUID,
    prompt: str = "Fix the flaky test",
    title: str | None = "Fix the flaky test",
) -> dict[str, Any]:
    return {
        "type": "turn_started",
        "seq": seq,
        "at": T0 + seq,
        "attempt_id": str(attempt_id),
        "message_id": str(message_id),
        "agent_name": "demo-agent",
        "agent_version": "1.0",
        "prompt": prompt,
        "title": title,
    }


def acp(seq: int, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "acp", "seq": seq, "at": T0 + seq, "message": message}


def update(seq: int, update: dict[str, Any]) -> dict[str, Any]:
    return acp(
        seq,
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s1", "update": update},
        },
    )


def tool_call(seq: int, call_id: str, title: str, **fields: Any) -> dict[str, Any]:
    return update(
        seq, {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, **fields}
    )


def tool_update(seq: int, call_id: str, **fields: Any) -> dict[str, Any]:
    return update(seq, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, **fields})


def say(seq: int, text: str, message_id: str = "msg_1") -> dict[str, Any]:
    return update(
        seq,
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": message_id,
            "content": {"type": "text", "text": text},
        },
    )


def permission(seq: int, request_id: int, call_id: str, title: str) -> dict[str, Any]:
    return acp(
        seq,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": {
                "sessionId": "s1",
                "toolCall": {"toolCallId": call_id, "title": title, "status": "pending"},
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            },
        },
    )


CLAUDE_QUESTION = {  # Claude Code's AskUserQuestion, as claude-code-acp sends it
    "question_0": {
        "type": "string",
        "title": "Database",
        "oneOf": [
            {"const": "Postgres", "title": "Postgres", "description": "Relational, robust"},
            {"const": "SQLite", "title": "SQLite", "description": "Single file"},
        ],
    },
    "question_0_custom": {"type": "string", "title": "Other"},
}


def elicitation(
    seq: int,
    request_id: int,
    properties: dict[str, Any],
    message: str = "Which database should I use?",
) -> dict[str, Any]:
    """An agent's form question (``elicitation/create``) with these schema properties."""
    return acp(
        seq,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "sessionId": "s1",
                "message": message,
                "requestedSchema": {"type": "object", "properties": properties},
            },
        },
    )


def outcome(seq: int, request_id: int, option_id: str | None) -> dict[str, Any]:
    chosen = (
        {"outcome": "selected", "optionId": option_id} if option_id else {"outcome": "cancelled"}
    )
    return {
        "type": "prompt_outcome",
        "seq": seq,
        "at": T0 + seq,
        "request_id": request_id,
        "outcome": chosen,
    }


def turn_ended(seq: int, attempt_id: uuid.UUID, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "type": "turn_ended",
        "seq": seq,
        "at": T0 + seq,
        "attempt_id": str(attempt_id),
        "stop_reason": stop_reason,
    }
