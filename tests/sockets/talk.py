"""What a socket test hears from the server: the messages a socket is sent and how it closes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.testing import WebsocketCommunicator


async def closed_with(socket: WebsocketCommunicator) -> int:
    """The code the server closes ``socket`` with, passing over what it sends before."""
    async with asyncio.timeout(5):
        while True:
            output = await socket.receive_output(timeout=5)
            if output["type"] == "websocket.close":
                return int(output["code"])


async def heard(socket: WebsocketCommunicator, until: Any) -> dict[str, Any]:
    """The first message ``socket`` is sent for which ``until`` holds (within 5 s)."""
    async with asyncio.timeout(5):
        while True:
            output = await socket.receive_output(timeout=5)
            assert output["type"] == "websocket.send", f"closed instead: {output}"
            message: dict[str, Any] = json.loads(output["text"])
            if until(message):
                return message
