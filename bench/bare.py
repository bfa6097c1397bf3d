"""The baseline: a bare ``websockets`` server that fans every agent update out to every viewer.

It speaks the same frames as koruweb (on ``/agent``, a runner's ``hello`` and numbered frames
in, cumulative acks out; on ``/view/<chat id>``, a viewer's ``{"since": V}`` in,
``{"from", "to", "content"}`` pushes out) but keeps each chat's rows in a dict and renders each
row as an f-string: no database, no Django, no channel layer, no coalescing. One push per
update per viewer, written with ``websockets.broadcast``. Whatever it reaches is the
transport's limit on this machine.

Run: ``python bench/bare.py PORT`` (the benchmark starts it as a child process).
"""

from __future__ import annotations

import asyncio
import html
import json
import signal
import sys
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast, serve


class Hub:
    def __init__(self) -> None:
        self.viewers: set[ServerConnection] = set()
        self.version = 0
        self.state: dict[str, dict[str, str]] = {}  # toolCallId → fields shown
        self.rows: dict[str, str] = {}  # toolCallId → its <tr>

    def apply(self, update: dict[str, Any]) -> str:
        call = str(update["toolCallId"])
        state = self.state.setdefault(call, {"title": call, "status": "pending", "kind": ""})
        for key in ("title", "status", "kind"):
            if isinstance(update.get(key), str):
                state[key] = update[key]
        content = update.get("content")
        if isinstance(content, list) and content:
            block = content[0].get("content", {}) if isinstance(content[0], dict) else {}
            state["output"] = str(block.get("text", ""))
        if isinstance(update.get("rawInput"), dict):
            state["input"] = json.dumps(update["rawInput"])
        row = render(call, state)
        self.rows[call] = row
        return row


def render(call: str, s: dict[str, str]) -> str:
    e = html.escape
    return (
        f'<tr id="tool-{e(call)}" class="tool status-{e(s["status"])}" '
        f'hx-swap-oob="outerMorph"><td class="label"><details id="details-{e(call)}">'
        f"<summary>{e(s['title'])}</summary><h4>Input</h4>"
        f'<pre class="input">{e(s.get("input", ""))}</pre><h4>Output</h4>'
        f'<pre class="output">{e(s.get("output", ""))}</pre></details></td>'
        f'<td class="tool-name">{e(s["kind"])}</td><td class="status">'
        f'<span class="badge {e(s["status"])}">{e(s["status"])}</span></td>'
        f'<td class="duration"></td></tr>'
    )


hubs: dict[str, Hub] = {}  # one per chat, like koruweb's groups


async def agent(ws: ServerConnection) -> None:
    hub = Hub()
    async for text in ws:
        frame = json.loads(text)
        if frame.get("type") == "hello":
            hub = hubs.setdefault(str(frame["chat_id"]), hub)
            await ws.send(json.dumps({"type": "ack", "seq": 0}))
            continue
        params = frame.get("message", {}).get("params", {})
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict) and "toolCallId" in update:
            row = hub.apply(update)
            since = hub.version
            hub.version += 1
            push = json.dumps({"from": since, "to": hub.version, "content": row})
            broadcast(hub.viewers, push)
        await ws.send(json.dumps({"type": "ack", "seq": frame["seq"]}))


async def viewer(ws: ServerConnection, chat_id: str) -> None:
    hub = hubs.setdefault(chat_id, Hub())
    try:
        async for text in ws:
            since = json.loads(text).get("since")
            if not isinstance(since, int):
                continue
            # Everything at once, like a resync from 0: a bare server keeps no history.
            content = "".join(hub.rows.values())
            await ws.send(json.dumps({"from": since, "to": hub.version, "content": content}))
            hub.viewers.add(ws)
    finally:
        hub.viewers.discard(ws)


async def handler(ws: ServerConnection) -> None:
    assert ws.request is not None
    if ws.request.path == "/agent":
        await agent(ws)
    elif ws.request.path.startswith("/view/"):
        await viewer(ws, ws.request.path.removeprefix("/view/"))


async def main(port: int) -> None:
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    async with serve(handler, "127.0.0.1", port, compression=None, max_queue=None):
        print("ready", flush=True)
        await stop


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
