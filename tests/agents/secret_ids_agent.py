"""ACP agent whose own ids are secret-shaped (issue 22), writing raw JSON lines. Stdlib only.

Run: ``python tests/agents/secret_ids_agent.py``. Its request ids, permission option ids and
the key it prints are the constants below: keys of known shapes (``activity/core/masking.py``), so a
test can tell that none of them reached the server as the agent sent them.

  initialize      → {protocolVersion: 1, agentInfo: {name: "koruweb-secret-ids-agent"}}
  session/new     → {sessionId: "ids-1"}
  session/prompt  → (the prompt's text ignored), for session S:
    1. tool_call {toolCallId: "split", title: "Print the key", kind: "execute", status:
       "in_progress", rawInput: {command: "print-key"}}
    2. tool_call_update "split" completed, content [text "key: " + KEY[:33], text KEY[33:]]:
       the key split across two blocks, each half masked or not on its own
    3. tool_call "deploy" "Deploy" kind execute pending, then session/request_permission with
       JSON-RPC id PERMISSION_ID, toolCall "deploy", options [ALLOW_ID "Allow once"
       allow_once, REJECT_ID "Reject" reject_once]. Once answered (the response must carry
       PERMISSION_ID exactly, or it is never matched): "deploy" completed, and the reply says
       "Permission outcome: X." with X = "allow" or "reject" when the optionId is exactly one of
       its own, "cancelled", or "unknown option" for anything else.
    4. elicitation/create with JSON-RPC id QUESTION_ID, form mode, one string question
       "region". The reply goes on " Question outcome: ACTION REGION." (REGION = the answer's
       region, or "-").
    5. result {stopReason: "end_turn"}
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

PERMISSION_ID = "ghp_" + "Rq7Lm2Xv9Kp4Tz8Wn3Yb6Hc1Df5Gj0Sa2Ue4"
QUESTION_ID = "ghp_" + "Vb5Nc8Md2Qf6Rg1Sh4Tj7Uk0Wl3Xm9Yn2Zo5"
ALLOW_ID = "sk-ant-api03-" + "Jx3kP9vQ2mW7zR5tY1uN8bC4dF6gH0jLa2s4d6f8"
REJECT_ID = "sk-ant-api03-" + "Pw4eR7tY1uI9oP3aS6dF2gH8jK5lZ0xC7vB4nM1q"
KEY = "sk-ant-api03-" + "Hq2Wd9Ls4Kf7Np1Bx6Mz3Cv8Tr5Gy0Ju7Ek2Ao9x"
IDS = (PERMISSION_ID, QUESTION_ID, ALLOW_ID, REJECT_ID)


class Agent:
    def __init__(self) -> None:
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def write(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()

    def update(self, sid: str, update: dict[str, Any]) -> None:
        self.write({"method": "session/update", "params": {"sessionId": sid, "update": update}})

    async def request(self, request_id: str, method: str, params: dict[str, Any]) -> Any:
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self.write({"id": request_id, "method": method, "params": params})
        return await future

    def handle(self, line: bytes) -> None:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None:  # a response: to one of ours only if it carries our exact id
            future = self.pending.pop(request_id, None) if isinstance(request_id, str) else None
            if future is None:
                print(
                    f"secret-ids agent: a response to no request of mine: {line!r:.80}",
                    file=sys.stderr,
                )
            elif not future.done():
                future.set_result(message)
        elif method == "initialize":
            info = {"name": "koruweb-secret-ids-agent", "version": "1"}
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": info}
            self.write({"id": request_id, "result": result})
        elif method == "session/new":
            self.write({"id": request_id, "result": {"sessionId": "ids-1"}})
        elif method == "session/prompt":
            task = asyncio.get_running_loop().create_task(self.prompt(request_id, "ids-1"))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif request_id is not None:
            self.write({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})

    async def prompt(self, request_id: Any, sid: str) -> None:
        run = {"title": "Print the key", "kind": "execute", "rawInput": {"command": "print-key"}}
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": "split", **run})
        halves = [f"key: {KEY[:33]}", KEY[33:]]
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "split",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": t}} for t in halves
                ],
            },
        )
        call = {"toolCallId": "deploy", "title": "Deploy", "kind": "execute", "status": "pending"}
        self.update(sid, {"sessionUpdate": "tool_call", **call})
        options = [
            {"optionId": ALLOW_ID, "name": "Allow once", "kind": "allow_once"},
            {"optionId": REJECT_ID, "name": "Reject", "kind": "reject_once"},
        ]
        asked = {"sessionId": sid, "toolCall": call, "options": options}
        told = await self.request(PERMISSION_ID, "session/request_permission", asked)
        outcome = (told.get("result") or {}).get("outcome") or {}
        names: dict[Any, str] = {ALLOW_ID: "allow", REJECT_ID: "reject"}
        chosen = names.get(outcome.get("optionId"))
        said = "cancelled" if outcome.get("outcome") == "cancelled" else chosen or "unknown option"
        done = {"toolCallId": "deploy", "status": "completed"}
        self.update(sid, {"sessionUpdate": "tool_call_update", **done})
        schema = {"type": "object", "properties": {"region": {"type": "string", "title": "Region"}}}
        form = {"sessionId": sid, "mode": "form", "message": "Which region?"}
        answer = await self.request(
            QUESTION_ID, "elicitation/create", {**form, "requestedSchema": schema}
        )
        result = answer.get("result") or {}
        region = (result.get("content") or {}).get("region") or "-"
        reply = f"Permission outcome: {said}. Question outcome: {result.get('action')} {region}."
        chunk = {"type": "text", "text": reply}
        self.update(sid, {"sessionUpdate": "agent_message_chunk", "content": chunk})
        self.write({"id": request_id, "result": {"stopReason": "end_turn"}})


async def main() -> None:
    agent = Agent()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            agent.handle(line)


if __name__ == "__main__":
    asyncio.run(main())
