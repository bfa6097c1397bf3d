"""The fake OpenAI Responses API, for codex-acp (Codex 0.137 underneath).

``POST /v1/responses`` streams the scripted step as the real API does: ``response.created``,
``response.output_item.added``, for a message its ``response.output_text.delta`` events,
``response.output_item.done`` with the whole item (a ``message``, a ``function_call``, or a
``custom_tool_call`` for a tool the request declares ``custom`` — Codex's freeform
``apply_patch``, whose patch is the ``input`` argument), then ``response.completed`` with the
usage. A request of the agent's main loop (it offers tools) belongs to the script whose tag is in
the latest user message of its ``input``; the step is the number of model turns (calls and
answers) since that message. Anything else gets a short plain answer.

Codex's built-in ``openai`` provider first tries the Responses API over a WebSocket
(``GET /v1/responses`` with ``Upgrade: websocket``): ``426 Upgrade Required`` makes it use HTTP
at once and quietly (a 404 costs retries and puts "Falling back from WebSockets…" in the reply).
With an API key Codex uses its bundled model catalog and never asks for ``/v1/models``.
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

COMMAND = ["codex-acp"]
MODEL = "gpt-5.4-mini"
API_KEY = "sk-fake-openai-key-for-tests"
USAGE = {
    "input_tokens": 1200,
    "input_tokens_details": {"cached_tokens": 200},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 1230,
}
# What the model produces in the conversation it is sent back (a model turn's items).
MODEL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call"}

# The built-in "openai" provider pointed at the fake (so codex-acp asks the client to
# authenticate, as it does for a real OpenAI key); the approval and sandbox of codex-acp's
# "read-only" mode until the runner's --mode picks another; nothing else to talk to.
CONFIG = """\
# Written by tests/agents/real/openai.py: Codex against the fake model API, offline.
model = "{model}"
model_provider = "openai"
openai_base_url = "{base_url}"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false
hide_agent_reasoning = true
model_reasoning_summary = "none"
model_supports_reasoning_summaries = false
project_doc_max_bytes = 0

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[otel]
exporter = "none"
log_user_prompt = false
"""


def environment(model_url: str, home: Path) -> dict[str, str]:
    """Codex pointed at the fake with a config of its own in ``home`` and a fake key."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(CONFIG.format(model=MODEL, base_url=f"{model_url}/v1"))
    return {
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": API_KEY,
        "RUST_LOG": "warn",
    }


def handle(fake: FakeModels, request: Request) -> Reply:
    if os.environ.get("FAKE_OPENAI_LOG"):
        with open(os.environ["FAKE_OPENAI_LOG"], "a") as log:
            log.write(json.dumps([request.method, request.path, request.headers, request.body]))
            log.write("\n")
    if request.method == "GET" and request.path == "/v1/responses":
        # Responses over WebSocket: 426 makes Codex use HTTP at once, with no warning.
        return Reply(status=426, chunks=[])
    if request.method == "GET" and request.path == "/v1/models":
        return Reply.json({"object": "list", "data": [], "models": []})
    if request.method != "POST" or request.path != "/v1/responses":
        return Reply.json({"error": {"message": f"no {request.method} {request.path}"}}, 404)
    body = request.body if isinstance(request.body, dict) else {}
    return Reply.events(_stream(_step(fake, body), body))


def _step(fake: FakeModels, body: dict[str, Any]) -> Step:
    """The scripted step for this request, or a plain answer for a side request."""
    items = body.get("input") or []
    if not isinstance(items, list) or not body.get("tools"):
        return Say("OK")
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        script = fake.find(_text(item.get("content")))
        if script is not None:
            return script.step(_turns(items[index + 1 :]))
    return Say("OK")


def _turns(items: list[dict[str, Any]]) -> int:
    """Model turns in ``items``: each call the model made, and each answer it gave."""
    turns = 0
    for item in items:
        kind = item.get("type", "message")
        if kind in MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant"):
            turns += 1
    return turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _custom_tools(body: dict[str, Any]) -> set[str]:
    return {
        tool.get("name", "")
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and tool.get("type") == "custom"
    }


def _item(step: Step, body: dict[str, Any]) -> dict[str, Any] | None:
    suffix = uuid.uuid4().hex[:24]
    if isinstance(step, Call):
        if step.name in _custom_tools(body):
            text = step.args.get("input", "")
            return {
                "type": "custom_tool_call",
                "id": f"ctc_{suffix}",
                "call_id": f"call_{suffix}",
                "name": step.name,
                "input": text if isinstance(text, str) else json.dumps(text),
                "status": "completed",
            }
        return {
            "type": "function_call",
            "id": f"fc_{suffix}",
            "call_id": f"call_{suffix}",
            "name": step.name,
            "arguments": json.dumps(step.args),
            "status": "completed",
        }
    if isinstance(step, Say):
        return {
            "type": "message",
            "id": f"msg_{suffix}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    return None


def _stream(step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    response: dict[str, Any] = {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": body.get("model") or MODEL,
        "output": [],
    }
    yield sse("response.created", {"type": "response.created", "response": response})
    if isinstance(step, Stall):
        time.sleep(step.seconds)
    item = _item(step, body)
    output: list[dict[str, Any]] = []
    if item is not None:
        opened = dict(item, status="in_progress")
        if item["type"] == "message":
            opened["content"] = []
        elif item["type"] == "function_call":
            opened["arguments"] = ""
        elif item["type"] == "custom_tool_call":
            opened["input"] = ""
        yield sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": opened},
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                yield sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": part,
                    },
                )
        yield sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        output.append(item)
    done = dict(response, status="completed", output=output, usage=USAGE)
    yield sse("response.completed", {"type": "response.completed", "response": done})
