"""ACP agent that writes raw JSON lines (no SDK), to send what the SDK would refuse.

Run: ``python tests/agents/raw_agent.py [--burst N]`` (N defaults to 2000). Stdlib only.

Requests it answers:
  initialize        → {protocolVersion: 1, agentCapabilities: {loadSession: false}, authMethods: [],
                       agentInfo: {name: "koruweb-raw-test-agent", version: "1"}}
  session/new       → {sessionId: "raw-<n>" (n = 1, 2, … per process), modes: {currentModeId:
                       "default", availableModes: [default, auto]}}
  session/set_mode  → {} for "default"/"auto"; error -32602 for another modeId or unknown session
  session/prompt    → the sequence below (prompt text ignored); unknown session → error -32602
  anything else     → error -32601 "Method not found". Notifications other than session/cancel
                       and responses to unknown ids are ignored; a line that is not JSON gets a
                       -32700 error with id null.

Each session/prompt, with P = "r<turn>" (1-based turn number within the session, e.g. "r1"),
sends in this order (all session/update for the prompt's sessionId):
  1. tool_call_update {toolCallId: "P-orphan", title: "Orphan update", status: "completed",
     content: [text "update for a call that was never opened"]}        (no tool_call ever)
  2. tool_call {toolCallId: "P-weird", title: "Unknown kind and status", kind: "teleport",
     status: "paused"}
  3. tool_call {toolCallId: "P-untitled", kind: "execute", status: "pending",
     rawInput: {command: "true"}}                          (no title; never updated again)
  4. {sessionUpdate: "mystery_update", detail: "an update type no client knows"}
  5. request session/request_permission (JSON-RPC id = 0, 1, … counted per process) with
     toolCall {toolCallId: "P-perm", title: "Delete build/", kind: "delete", status: "pending",
     rawInput: {path: "build/"}} (no tool_call/update for P-perm is ever sent) and options
     [allow-once "Allow once" allow_once, reject "Reject" reject_once]; waits for the answer, then
     agent_message_chunk {messageId: "P-msg", content: text "Permission outcome: X"} with X = the
     selected optionId, "cancelled", or "error <code>" for an error response.
  6. tool_call_update {toolCallId: "P-weird", _meta: {claudeCode: {toolResponse: {stdout:
     "meta only"}}}}                                                     (only _meta)
  7. N tool_call_updates, i = 0 … N-1, for toolCallId "P-burst-<j:02>" with j = i % 20 and
     step = i // 20: {toolCallId, status, content: [text "step <step>"]}, plus title
     "Burst call <j:02>" and kind "execute" on each id's first update (step 0). status is
     "completed" on each id's last update and "in_progress" before it. With N = 2000: 20 ids,
     100 updates each, all ending completed with content "step 99".
  8. result {stopReason: "end_turn"}
session/cancel for the session, seen before any of steps 2–8 (checked before each step and every
100 burst updates), stops the sequence: the prompt is answered {stopReason: "cancelled"} at once.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

BURST_IDS = 20
MODES = [{"id": "default", "name": "Default"}, {"id": "auto", "name": "Auto"}]


class RawAgent:
    def __init__(self, burst: int) -> None:
        self.burst = burst
        self.sessions: dict[str, dict[str, Any]] = {}
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        self.tasks: set[asyncio.Task[None]] = set()

    # --- wire -------------------------------------------------------------------------------

    def write(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def result(self, request_id: Any, result: Any) -> None:
        self.write({"id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.write({"id": request_id, "error": error})

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        self.write(
            {"method": "session/update", "params": {"sessionId": session_id, "update": update}}
        )

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self.write({"id": request_id, "method": method, "params": params})
        return await future

    # --- dispatch ---------------------------------------------------------------------------

    def handle(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return self.error(None, -32700, "Parse error", {"details": str(exc)})
        method, params = message.get("method"), message.get("params") or {}
        if method is None:  # a response to one of our requests
            future = self.pending.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message)
            return None
        if "id" not in message:  # a notification
            if method == "session/cancel" and params.get("sessionId") in self.sessions:
                self.sessions[params["sessionId"]]["cancelled"] = True
            return None
        request_id = message["id"]
        if method == "initialize":
            return self.result(
                request_id,
                {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": False},
                    "authMethods": [],
                    "agentInfo": {"name": "koruweb-raw-test-agent", "version": "1"},
                },
            )
        if method == "session/new":
            session_id = f"raw-{len(self.sessions) + 1}"
            self.sessions[session_id] = {"turns": 0, "cancelled": False, "mode": "default"}
            modes = {"currentModeId": "default", "availableModes": MODES}
            return self.result(request_id, {"sessionId": session_id, "modes": modes})
        if method in {"session/set_mode", "session/prompt"}:
            sid = str(params.get("sessionId"))
            session = self.sessions.get(sid)
            if session is None:
                return self.error(request_id, -32602, "Invalid params", {"unknownSession": True})
            if method == "session/set_mode":
                if params.get("modeId") not in {m["id"] for m in MODES}:
                    return self.error(request_id, -32602, "Invalid params", {"modeId": True})
                session["mode"] = params["modeId"]
                return self.result(request_id, {})
            task = asyncio.create_task(self.prompt(request_id, sid, session))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return None
        return self.error(request_id, -32601, "Method not found", {"method": method})

    # --- the prompt sequence ------------------------------------------------------------------

    async def prompt(self, request_id: Any, sid: str, session: dict[str, Any]) -> None:
        session["turns"] += 1
        session["cancelled"] = False
        p = f"r{session['turns']}"

        def cancelled() -> bool:
            if session["cancelled"]:
                self.result(request_id, {"stopReason": "cancelled"})
            return bool(session["cancelled"])

        def text(value: str) -> list[dict[str, Any]]:
            return [{"type": "content", "content": {"type": "text", "text": value}}]

        orphan_text = text("update for a call that was never opened")
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"{p}-orphan",
                "title": "Orphan update",
                "status": "completed",
                "content": orphan_text,
            },
        )
        update: dict[str, Any]
        steps: list[dict[str, Any]] = [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"{p}-weird",
                "title": "Unknown kind and status",
                "kind": "teleport",
                "status": "paused",
            },
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"{p}-untitled",
                "kind": "execute",
                "status": "pending",
                "rawInput": {"command": "true"},
            },
            {"sessionUpdate": "mystery_update", "detail": "an update type no client knows"},
        ]
        for update in steps:
            await asyncio.sleep(0)  # let a pending session/cancel be read
            if cancelled():
                return
            self.update(sid, update)
        await asyncio.sleep(0)
        if cancelled():
            return
        tool_call = {
            "toolCallId": f"{p}-perm",
            "title": "Delete build/",
            "kind": "delete",
            "status": "pending",
            "rawInput": {"path": "build/"},
        }
        options = [
            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        response = await self.request(
            "session/request_permission",
            {"sessionId": sid, "toolCall": tool_call, "options": options},
        )
        if "error" in response:
            outcome = f"error {(response.get('error') or {}).get('code')}"
        else:
            chosen = (response.get("result") or {}).get("outcome") or {}
            outcome = chosen.get("optionId") or chosen.get("outcome") or "?"
        self.update(
            sid,
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"{p}-msg",
                "content": {"type": "text", "text": f"Permission outcome: {outcome}"},
            },
        )
        await asyncio.sleep(0)
        if cancelled():
            return
        meta = {"claudeCode": {"toolResponse": {"stdout": "meta only"}}}
        self.update(
            sid, {"sessionUpdate": "tool_call_update", "toolCallId": f"{p}-weird", "_meta": meta}
        )
        for i in range(self.burst):
            if i % 100 == 0:
                await asyncio.sleep(0)
                if cancelled():
                    return
            j, step = i % BURST_IDS, i // BURST_IDS
            last = i + BURST_IDS >= self.burst
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"{p}-burst-{j:02d}",
                "status": "completed" if last else "in_progress",
                "content": text(f"step {step}"),
            }
            if step == 0:
                update |= {"title": f"Burst call {j:02d}", "kind": "execute"}
            self.update(sid, update)
        await asyncio.sleep(0)
        if cancelled():
            return
        self.result(request_id, {"stopReason": "end_turn"})


async def main() -> None:
    burst = 2000
    if "--burst" in sys.argv:
        burst = int(sys.argv[sys.argv.index("--burst") + 1])
    agent = RawAgent(burst)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            agent.handle(line)
    for future in agent.pending.values():
        future.cancel()


if __name__ == "__main__":
    asyncio.run(main())
