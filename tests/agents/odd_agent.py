"""ACP agent that writes whatever lines a test gives it in the middle of an ordinary turn.

Run: ``python tests/agents/odd_agent.py LINES RESPONSES``. Stdlib only.

``LINES`` is a JSON file holding a list of JSON values: each is written as one line (a JSON-RPC
message, a batch, anything) with ``json.dumps``, so a lone surrogate travels as ``\\ud800``.
A value ``{"odd_agent": "raw", "line": TEXT}`` is written as the line TEXT itself instead.

``RESPONSES`` is a file the agent appends to, one JSON line per response it gets to a request
it wrote from ``LINES`` (``{"id": …, "result": …}`` or ``{"id": …, "error": …}`` as received).

Requests it answers:
  initialize        → {protocolVersion: 1, agentInfo: {name: "koruweb-odd-test-agent"}}
  session/new       → {sessionId: "odd-1"}
  session/prompt    → the turn below. A prompt whose text starts with "fail" is answered with
                      the JSON-RPC error {code: -32603, message: "the model API is down"}
                      instead, after an agent_message_chunk "Trying…".
  anything else     → error -32601 "Method not found"

Each turn (prompt text not starting with "fail") sends, with P = "o<turn>":
  1. tool_call {toolCallId: "P-ok", title: "Read notes.txt", kind: "read", status: "pending"}
  2. the first half of LINES
  3. tool_call_update {toolCallId: "P-ok", status: "completed", content: [text "hello"]}
  4. the second half of LINES
  5. agent_message_chunk {messageId: "P-msg", content: text "Done."}
  6. waits (up to ``WAIT`` seconds) until every request it wrote from LINES has a response,
     without blocking the reading of the runner's messages, then
  7. result {stopReason: "end_turn"}
A permission request among LINES that the runner holds for a person is answered when the
person answers; the agent does not wait for it past ``WAIT`` (``ODD_AGENT_WAIT`` in the
environment, 5 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

WAIT = float(os.environ.get("ODD_AGENT_WAIT", "5"))


def requests_in(value: Any) -> list[Any]:
    """The ids of the requests a line carries (a batch may carry several)."""
    items = value if isinstance(value, list) else [value]
    return [
        item["id"]
        for item in items
        if isinstance(item, dict) and isinstance(item.get("method"), str) and "id" in item
    ]


def key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


class OddAgent:
    def __init__(self, lines: list[Any], responses: str) -> None:
        self.lines = lines
        self.responses = responses
        self.turns = 0
        self.expected: dict[str, int] = {}  # ids of requests written, how many responses due
        self.answered = asyncio.Event()

    def write(self, message: Any) -> None:
        if isinstance(message, dict) and message.get("odd_agent") == "raw":
            text = str(message["line"])
        else:
            text = json.dumps(message)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        params = {"sessionId": session_id, "update": update}
        self.write({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def handle(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        method, request_id = message.get("method"), message.get("id")
        if method is None:  # a response to one of the odd requests
            with open(self.responses, "a", encoding="utf-8") as log:
                log.write(json.dumps(message) + "\n")
            due = self.expected.get(key(request_id), 0)
            if due > 1:
                self.expected[key(request_id)] = due - 1
            else:
                self.expected.pop(key(request_id), None)
            if not self.expected:
                self.answered.set()
            return
        if "id" not in message:
            return  # session/cancel and other notifications: nothing to do
        params = message.get("params") or {}
        if method == "initialize":
            info = {"name": "koruweb-odd-test-agent", "version": "1"}
            return self.result(request_id, {"protocolVersion": 1, "agentInfo": info})
        if method == "session/new":
            return self.result(request_id, {"sessionId": "odd-1"})
        if method == "session/prompt":
            text = "".join(block.get("text", "") for block in params.get("prompt", []) if block)
            asyncio.get_running_loop().create_task(self.turn(request_id, text))
            return None
        error = {"code": -32601, "message": "Method not found"}
        return self.write({"jsonrpc": "2.0", "id": request_id, "error": error})

    def result(self, request_id: Any, result: Any) -> None:
        self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def turn(self, request_id: Any, text: str) -> None:
        self.turns += 1
        p, sid = f"o{self.turns}", "odd-1"
        if text.startswith("fail"):
            chunk = {"type": "text", "text": "Trying…"}
            self.update(sid, {"sessionUpdate": "agent_message_chunk", "content": chunk})
            error = {"code": -32603, "message": "the model API is down"}
            return self.write({"jsonrpc": "2.0", "id": request_id, "error": error})
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"{p}-ok",
                "title": "Read notes.txt",
                "kind": "read",
                "status": "pending",
            },
        )
        half = len(self.lines) // 2
        self.send_odd(self.lines[:half])
        await asyncio.sleep(0)
        done = [{"type": "content", "content": {"type": "text", "text": "hello"}}]
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"{p}-ok",
                "status": "completed",
                "content": done,
            },
        )
        self.send_odd(self.lines[half:])
        chunk = {"type": "text", "text": "Done."}
        self.update(
            sid, {"sessionUpdate": "agent_message_chunk", "messageId": f"{p}-msg", "content": chunk}
        )
        if self.expected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.answered.wait(), WAIT)
        self.result(request_id, {"stopReason": "end_turn"})

    def send_odd(self, lines: list[Any]) -> None:
        for line in lines:
            for request_id in requests_in(line):
                self.expected[key(request_id)] = self.expected.get(key(request_id), 0) + 1
            self.answered.clear() if self.expected else self.answered.set()
            self.write(line)


async def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as source:
        lines = json.load(source)
    agent = OddAgent(lines, sys.argv[2])
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            agent.handle(line)


if __name__ == "__main__":
    asyncio.run(main())
