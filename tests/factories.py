"""Test data built through the same paths production uses."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from activity.calls import set_state
from activity.merge import CallState
from activity.models import Chat, InferenceAttempt, Message, ToolActivity, Workspace


def make_chat(slug: str = "acme", **fields: Any) -> Chat:
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    fields.setdefault("title", "Fix the flaky test")
    fields.setdefault("agent_name", "demo-agent")
    return Chat.objects.create(id=uuid.uuid4(), workspace=workspace, **fields)


def make_turn(
    chat: Chat, prompt: str = "Make the tests pass", at: int = 1_700_000_000_000
) -> Message:
    attempt = InferenceAttempt.objects.create(
        id=uuid.uuid4(), chat=chat, prompt=prompt, started_at=at
    )
    return Message.objects.create(id=uuid.uuid4(), chat=chat, attempt=attempt)


def save_call(reply: Message, state: CallState) -> ToolActivity:
    chat = reply.chat
    chat.tool_count += 1
    chat.save(update_fields=["tool_count"])
    row = ToolActivity(
        chat=chat, attempt=reply.attempt, assistant_message=reply, position=chat.tool_count
    )
    set_state(row, state)
    row.save()
    return row


class HeldPage:
    """A viewer in this process that keeps a push in flight until it is released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def deliver(self, text: str) -> None:
        await self.release.wait()
