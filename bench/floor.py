"""The second baseline, the floor of koruweb's own stack: Daphne and Channels, nothing of koruweb.

``daphne bench.floor:application`` speaks the bare baseline's frames (``bench/bare.py``: a
runner's ``hello`` and numbered frames in, acks out on ``/agent``; a viewer's ``{"since": V}`` in,
``{"from", "to", "content"}`` pushes out on ``/view/<chat id>``) with Channels consumers, as
koruweb does: an update is kept and rendered as the bare server does (its ``Hub``), then sent
to the chat's group on the in-memory channel layer, and each viewer's consumer hands it to its
socket. No database, no ORM, no templates, no sessions, no masking: what a push costs here is
what Daphne, Autobahn and Channels cost, which koruweb cannot go below without leaving them.
An idle viewer here is an accepted socket that joined a group: the floor of koruweb's memory
per viewer.
"""

# ruff: noqa: E402  (Django is configured before Channels is imported)
from __future__ import annotations

import json
from typing import Any

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    INSTALLED_APPS=[],
    CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
)
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path

from bench.bare import Hub

hubs: dict[str, Hub] = {}  # one per chat, as in bench/bare.py


def group(chat_id: str) -> str:
    return f"floor-{chat_id}"


class AgentConsumer(AsyncWebsocketConsumer):
    chat_id = ""

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        frame = json.loads(text_data or "{}")
        if frame.get("type") == "hello":
            self.chat_id = str(frame["chat_id"])
            hubs.setdefault(self.chat_id, Hub())
            await self.send(json.dumps({"type": "ack", "seq": 0}))
            return
        params = frame.get("message", {}).get("params", {})
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict) and "toolCallId" in update:
            hub = hubs[self.chat_id]
            row = hub.apply(update)
            since = hub.version
            hub.version += 1
            push = json.dumps({"from": since, "to": hub.version, "content": row})
            await self.channel_layer.group_send(group(self.chat_id), {"type": "push", "text": push})
        await self.send(json.dumps({"type": "ack", "seq": frame["seq"]}))


class ViewerConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.chat_id = str(self.scope["url_route"]["kwargs"]["chat_id"])
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        since = json.loads(text_data or "{}").get("since")
        if not isinstance(since, int):
            return
        hub = hubs.setdefault(self.chat_id, Hub())
        content = "".join(hub.rows.values())  # everything at once, as bench/bare.py
        await self.send(json.dumps({"from": since, "to": hub.version, "content": content}))
        await self.channel_layer.group_add(group(self.chat_id), self.channel_name)

    async def push(self, event: dict[str, Any]) -> None:
        await self.send(event["text"])

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(group(self.chat_id), self.channel_name)


async def ready(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Any HTTP request: 200, so the bench knows the server is up."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ready"})


application = ProtocolTypeRouter(
    {
        "http": ready,
        "websocket": URLRouter(
            [
                path("agent", AgentConsumer.as_asgi()),
                path("view/<str:chat_id>", ViewerConsumer.as_asgi()),
            ]
        ),
    }
)
