"""The fake Anthropic Messages API, for claude-agent-acp (Claude Code underneath).

``POST /v1/messages`` streams the scripted step as the real API does (``message_start``, one
``content_block_*`` run per block — ``text`` or ``tool_use`` with ``input_json_delta`` —,
``message_delta`` with the stop reason and usage, ``message_stop``), or answers in one JSON
message when ``stream`` is false. ``/v1/messages/count_tokens`` counts roughly. A request of the
agent's main loop (it offers tools) belongs to the script whose tag is in the latest prompt of
its conversation; the step is the number of model turns since that prompt. Anything else —
titles, summaries, side checks — gets a short plain answer.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.agents.real.fakeapi import Call, FakeModels, Reply, Request, Say, Stall, Step, sse

COMMAND = ["claude-agent-acp"]
MODEL = "claude-sonnet-4-5"
USAGE = {"input_tokens": 120, "output_tokens": 30}


def environment(model_url: str, home: Path) -> dict[str, str]:
    """Claude Code pointed at the fake, with a fake key and nothing else to talk to."""
    return {
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests",
        "ANTHROPIC_MODEL": MODEL,  # one known model, not whatever the release defaults to
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        # As root (CI, containers) Claude Code refuses to start a session unless it is told it
        # runs in a sandbox; with it, the Bypass permissions mode is offered too.
        "IS_SANDBOX": "1",
        # No telemetry, error reports, update checks, feedback surveys or other side traffic.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "DISABLE_COST_WARNINGS": "1",
    }


def handle(fake: FakeModels, request: Request) -> Reply:
    """Claude Code calls only ``POST /v1/messages`` here (the turn's model calls and a title)."""
    body = request.body if isinstance(request.body, dict) else {}
    if request.method == "POST" and request.path == "/v1/messages/count_tokens":
        return Reply.json({"input_tokens": len(json.dumps(body)) // 4})
    if request.method != "POST" or request.path != "/v1/messages":
        return Reply.json({"type": "error", "error": {"type": "not_found_error"}}, 404)
    step = _step(fake, body)
    if body.get("stream"):
        return Reply.events(_stream(step, body))
    return Reply.json(_message(step, body))


def _step(fake: FakeModels, body: dict[str, Any]) -> Step:
    """The scripted step for this request, or a plain answer for a side request."""
    messages = body.get("messages") or []
    if not body.get("tools"):
        return _side_answer(body)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        script = fake.find(_prompt_text(message.get("content")))
        if script is not None:
            turns = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
            return script.step(turns)
    return _side_answer(body)


def _side_answer(body: dict[str, Any]) -> Say:
    """A side request's answer: "OK", or an object of the JSON schema it asks for (a title)."""
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema") or {}
    if not schema:
        return Say("OK")
    return Say(json.dumps(dict.fromkeys(schema.get("required", []), "Scripted session")))


def _prompt_text(content: Any) -> str:
    """What the person typed in a user message (never a tool's result)."""
    if isinstance(content, str):
        return content
    return " ".join(
        block.get("text", "")
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _block(step: Step) -> dict[str, Any]:
    """The one content block a step answers with, complete."""
    if isinstance(step, Call):
        tool_id = f"toolu_{uuid.uuid4().hex[:24]}"
        return {"type": "tool_use", "id": tool_id, "name": step.name, "input": step.args}
    return {"type": "text", "text": step.text if isinstance(step, Say) else ""}


def _message(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or MODEL,
        "content": [_block(step)],
        "stop_reason": "tool_use" if isinstance(step, Call) else "end_turn",
        "stop_sequence": None,
        "usage": USAGE,
    }


def _stream(step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    """The message as the API streams it: the block opened empty, its deltas, the stop."""
    message = _message(step, body)
    block = message["content"][0]
    start = message | {"content": [], "stop_reason": None, "usage": USAGE | {"output_tokens": 1}}
    yield sse("message_start", {"type": "message_start", "message": start})
    yield sse("ping", {"type": "ping"})
    if isinstance(step, Stall):
        time.sleep(step.seconds)
    if block["type"] == "tool_use":
        opened = block | {"input": {}}
        text = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in _halves(text)]
    else:
        opened = block | {"text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
    yield sse(
        "content_block_start", {"type": "content_block_start", "index": 0, "content_block": opened}
    )
    for delta in deltas:
        yield sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
    yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": USAGE["output_tokens"]}
    yield sse("message_delta", {"type": "message_delta", "delta": stop, "usage": usage})
    yield sse("message_stop", {"type": "message_stop"})


def _halves(text: str) -> list[str]:
    """``text`` in two deltas, as a stream splits it anywhere (none when empty)."""
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]
