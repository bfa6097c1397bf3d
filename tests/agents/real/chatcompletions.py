"""The fake OpenAI chat completions API, for every agent that speaks it (OpenCode's
``@ai-sdk/openai-compatible`` provider; later Qwen Code and Copilot CLI's ``openai`` BYOK mode).

``POST /v1/chat/completions`` with ``stream: true`` answers in standard ``chat.completion.chunk``
server-sent events (``data: {...}`` and a blank line each): a first delta with the ``role``; then
the text as ``content`` deltas, or a tool call as ``tool_calls`` deltas (the first with its
``index``, ``id``, ``type`` and ``function.name`` and empty ``arguments``, then the arguments in
fragments); a last chunk with ``finish_reason`` (``stop`` or ``tool_calls``) and ``usage``; then
``data: [DONE]``. A request without ``stream`` gets the same answer as one JSON
``chat.completion``.

A request of an agent's main loop (it offers ``tools``) belongs to the script whose tag is in the
latest ``user`` message; the step is the number of model turns (``assistant`` messages) since
that message. A request without tools (OpenCode's title generator, summaries) gets a short plain
answer.

A vendor module uses it as its ``handle`` (``handle = chatcompletions.handle``): its URL prefix in
``FakeModels`` is the module's name, so two agents never share an address.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from tests.agents.real.fakeapi import Call, FakeModels, Reply, Request, Say, Stall, Step

MODEL = "fake-model"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230}


def handle(fake: FakeModels, request: Request) -> Reply:
    if request.method == "GET" and request.path == "/v1/models":
        return Reply.json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
    if request.method != "POST" or request.path != "/v1/chat/completions":
        return Reply.json({"error": {"message": f"no {request.method} {request.path}"}}, 404)
    body = request.body if isinstance(request.body, dict) else {}
    step = _step(fake, body)
    if not body.get("stream"):
        return Reply.json(_whole(step, body))
    return Reply.events(_stream(step, body))


def _step(fake: FakeModels, body: dict[str, Any]) -> Step:
    """The scripted step for this request, or a plain answer for a side request."""
    messages = body.get("messages") or []
    if not isinstance(messages, list) or not body.get("tools"):
        return Say("OK")
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        script = fake.find(text(message.get("content")))
        if script is not None:
            later = messages[index + 1 :]
            return script.step(sum(1 for m in later if m.get("role") == "assistant"))
        return Say("OK")
    return Say("OK")


def text(content: Any) -> str:
    """A message's text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content or [] if isinstance(part, dict))


def _chunk(body: dict[str, Any], ident: str, delta: dict[str, Any], **extra: Any) -> bytes:
    data = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": extra.pop("finish", None)}],
        **extra,
    }
    return f"data: {json.dumps(data)}\n\n".encode()


def _stream(step: Step, body: dict[str, Any]) -> Iterator[bytes]:
    ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    yield _chunk(body, ident, {"role": "assistant", "content": ""})
    finish = "stop"
    if isinstance(step, Stall):
        time.sleep(step.seconds)
    elif isinstance(step, Say):
        half = len(step.text) // 2
        for part in (step.text[:half], step.text[half:]):
            yield _chunk(body, ident, {"content": part})
    else:
        arguments = json.dumps(step.args)
        call = {
            "index": 0,
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": step.name, "arguments": ""},
        }
        yield _chunk(body, ident, {"tool_calls": [call]})
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            fragment = {"index": 0, "function": {"arguments": part}}
            yield _chunk(body, ident, {"tool_calls": [fragment]})
        finish = "tool_calls"
    yield _chunk(body, ident, {}, finish=finish, usage=USAGE)
    yield b"data: [DONE]\n\n"


def _whole(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    finish = "stop"
    if isinstance(step, Say):
        message["content"] = step.text
    elif isinstance(step, Call):
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": step.name, "arguments": json.dumps(step.args)},
            }
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }
