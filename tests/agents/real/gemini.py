"""The fake Gemini API (``generativelanguage.googleapis.com``), for gemini-cli in ACP mode.

``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` streams the scripted step as the
real API does: ``data: {"candidates": [...]}`` events, the last one with ``finishReason`` and
``usageMetadata``; a tool call is one ``functionCall`` part after a few words of text (``preface``,
so a call's place in the reply shows). ``:generateContent`` answers in one
JSON body, ``:countTokens`` counts roughly, ``GET /v1beta/models`` lists the one model. A
request of the agent's main loop (it offers tools) belongs to the script whose tag is in the
latest prompt of its conversation (one gemini session holds several prompts, each with its own
tag); the step is the number of model turns since that prompt. Anything else — the loop
detector's and the router's JSON checks — gets a short answer that lets the agent go on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.agents.real.fakeapi import Call, FakeModels, Reply, Request, Say, Stall, Step, sse

COMMAND = ["gemini", "--acp"]
# A fixed model: no routing classifier, and a Gemini 2 model keeps the write_todos tool.
MODEL = "gemini-2.5-flash"
USAGE = {"promptTokenCount": 1200, "candidatesTokenCount": 34, "totalTokenCount": 1234}
# One JSON answer for every side check that asks for JSON (the next-speaker check, the loop
# detector, the model router): the user speaks next, no loop, the fixed model.
SIDE_ANSWER = {
    "next_speaker": "user",
    "reasoning": "The model has answered.",
    "unproductive_state_confidence": 0.0,
    "unproductive_state_analysis": "No loop.",
    "model_choice": "flash",
}


def settings() -> dict[str, Any]:
    """``~/.gemini/settings.json``: an API key, one model, and nothing that calls home."""
    return {
        "security": {
            "auth": {"selectedType": "gemini-api-key"},
            "folderTrust": {"enabled": False},
        },
        "model": {"name": MODEL},
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "checkpointing": {"enabled": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False, "logPrompts": False},
        "ide": {"enabled": False},
        "skills": {"enabled": False},
        "useWriteTodos": True,
        "tools": {"useRipgrep": False, "shell": {"enableInteractiveShell": False}},
    }


def environment(model_url: str, home: Path) -> dict[str, str]:
    """gemini-cli pointed at the fake with a fake API key, its settings in ``home``."""
    config = home / ".gemini"
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text(json.dumps(settings(), indent=2))
    return {
        "GOOGLE_GEMINI_BASE_URL": model_url,
        "GEMINI_API_KEY": "fake-gemini-key-for-tests",
        "GEMINI_MODEL": MODEL,
        "GEMINI_CLI_HOME": str(home),
        # One process: no relaunch of itself in a child (Ctrl-C and kill reach the agent).
        "GEMINI_CLI_NO_RELAUNCH": "true",
        # The project folder is trusted: nothing asks, nothing is put in restricted mode.
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "NO_BROWSER": "1",
    }


def handle(fake: FakeModels, request: Request) -> Reply:
    if os.environ.get("FAKE_GEMINI_LOG"):
        with open(os.environ["FAKE_GEMINI_LOG"], "a") as log:
            log.write(json.dumps([request.method, request.path, request.query, request.body]))
            log.write("\n")
    body = request.body if isinstance(request.body, dict) else {}
    path = request.path
    if request.method == "GET" and path.rstrip("/").endswith("/models"):
        return Reply.json({"models": [{"name": f"models/{MODEL}", "displayName": MODEL}]})
    if request.method != "POST" or ":" not in path:
        return Reply.json(_error(404, "NOT_FOUND", f"no such method: {path}"), 404)
    method = path.rsplit(":", 1)[1]
    if method == "countTokens":
        return Reply.json({"totalTokens": len(json.dumps(body)) // 4})
    if method == "streamGenerateContent":
        return Reply.events(_stream(_step(fake, body)))
    if method == "generateContent":
        return Reply.json(_response(_step(fake, body), final=True))
    return Reply.json(_error(404, "NOT_FOUND", f"no such method: {method}"), 404)


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "status": status, "message": message}}


def _step(fake: FakeModels, body: dict[str, Any]) -> Step | None:
    """The scripted step for this request; None for a side request (no tools offered)."""
    if not body.get("tools"):
        return None
    contents = body.get("contents") or []
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.get("role") != "user":
            continue
        script = fake.find(prompt_text(content))
        if script is not None:
            turns = sum(1 for c in contents[index + 1 :] if c.get("role") == "model")
            return script.step(turns)
    return Say("OK")


def preface(call: Call) -> str:
    """What the model says before it asks for ``call``."""
    return f"Using {call.name}.\n\n"


def prompt_text(content: dict[str, Any]) -> str:
    """What the person typed in a user content (never a tool's result)."""
    return " ".join(
        part["text"]
        for part in content.get("parts") or []
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def latest_prompt(body: Any) -> str:
    """The text of the latest prompt in a request's conversation."""
    for content in reversed((body or {}).get("contents") or []):
        if content.get("role") == "user" and (text := prompt_text(content)):
            return text
    return ""


def function_responses(fake: FakeModels, tag: str) -> list[dict[str, Any]]:
    """What the agent sent back to the model for the tool calls of the prompt tagged ``tag``,
    in order (each a ``functionResponse``: ``{"name", "response", "id"}``)."""
    found: list[dict[str, Any]] = []
    for request in fake.sent(tag):
        contents = (request.body or {}).get("contents") or []
        start = next(
            (
                i
                for i in range(len(contents) - 1, -1, -1)
                if contents[i].get("role") == "user" and tag in prompt_text(contents[i])
            ),
            None,
        )
        if start is None:
            continue
        parts = []
        for content in contents[start + 1 :]:
            if content.get("role") == "user" and prompt_text(content):
                break  # the next prompt
            parts += [
                part["functionResponse"]
                for part in content.get("parts") or []
                if isinstance(part, dict) and "functionResponse" in part
            ]
        if len(parts) > len(found):
            found = parts
    return found


def _parts(step: Step | None) -> list[dict[str, Any]]:
    if step is None:
        return [{"text": json.dumps(SIDE_ANSWER)}]
    if isinstance(step, Call):
        # A model says a word before it calls a tool: the call's place in the reply shows.
        call = {"functionCall": {"name": step.name, "args": step.args}}
        return [{"text": preface(step)}, call]
    if isinstance(step, Say):
        return [{"text": step.text}]
    return [{"text": "Still thinking."}]


def _response(step: Step | None, *, final: bool, parts: list[Any] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": _parts(step) if parts is None else parts},
        "index": 0,
    }
    answer: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if final:
        candidate["finishReason"] = "STOP"
        answer["usageMetadata"] = USAGE
    return answer


def _stream(step: Step | None) -> Iterator[bytes]:
    if isinstance(step, Stall):
        time.sleep(step.seconds)
    if isinstance(step, Say) and len(step.text) > 1:
        # Text streams in more than one event, as the real API sends it.
        half = len(step.text) // 2
        yield sse(None, _response(step, final=False, parts=[{"text": step.text[:half]}]))
        yield sse(None, _response(step, final=True, parts=[{"text": step.text[half:]}]))
        return
    yield sse(None, _response(step, final=True))
