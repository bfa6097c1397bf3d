"""Answers to the agent's requests, on their way to the runner that owns the agent.

The runner's socket joins group ``runner-<chat id>``; an answer is sent there as
``{"type": "runner.answer", "text": <an answer frame>}`` and the runner answers the agent.
"""

from __future__ import annotations

import uuid
from typing import Any

from channels.layers import get_channel_layer

from activity.frames import Answer


def runner_group(chat_id: uuid.UUID) -> str:
    return f"runner-{chat_id}"


async def send_answer(chat_id: uuid.UUID, request_id: str | int, outcome: dict[str, Any]) -> None:
    """Send the answer to a JSON-RPC request of the agent to the chat's runner."""
    frame = Answer(request_id=request_id, outcome=outcome)
    await get_channel_layer().group_send(
        runner_group(chat_id), {"type": "runner.answer", "text": frame.model_dump_json()}
    )
