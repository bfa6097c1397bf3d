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
import os
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
        "ANTHROPIC_MODEL": MODEL,
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
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
    if os.environ.get("FAKE_ANTHROPIC_LOG"):
        with open(os.environ["FAKE_ANTHROPIC_LOG"], "a") as log:
            log.write(json.dumps([request.method, request.path, request.body]) + "\n")
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
        return Say("OK")
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        script = fake.find(_prompt_text(message.get("content")))
        if script is not None:
            turns = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
            return script.step(turns)
    return Say("OK")


def _prompt_text(content: Any) -> str:
    """What the person typed in a user message (never a tool's result)."""
    if isinstance(content, str):
        return content
    return " ".join(
        block.get("text", "")
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _blocks(step: Step) -> list[dict[str, Any]]:
    if isinstance(step, Call):
        return [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": step.name}]
    if isinstance(step, Say):
        return [{"type": "text", "text": step.text}]
    return [{"type": "text", "text": ""}]


def _stop_reason(step: Step) -> str:
    return "tool_use" if isinstance(step, Call) else "end_turn"


def _message(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    content = _blocks(step)
    if isinstance(step, Call):
        content[0]["input"] = step.args
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or MODEL,
        "content": content,
        "stop_reason": _stop_reason(step),
        "stop_sequence": None,
        "usage": USAGE,
    }


def _stream(step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    start = _message(step, body) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": USAGE["input_tokens"], "output_tokens": 1}
    yield sse("message_start", {"type": "message_start", "message": start})
    if isinstance(step, Stall):
        yield sse("ping", {"type": "ping"})
        time.sleep(step.seconds)
    for index, block in enumerate(_blocks(step)):
        opened = block | ({"input": {}} if block["type"] == "tool_use" else {"text": ""})
        yield sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        if isinstance(step, Call):
            text = json.dumps(step.args)
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": part}
                yield sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        elif block["text"]:
            delta = {"type": "text_delta", "text": block["text"]}
            yield sse(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
            )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(step), "stop_sequence": None},
            "usage": {"output_tokens": USAGE["output_tokens"]},
        },
    )
    yield sse("message_stop", {"type": "message_stop"})
