"""Test data built through the same paths production uses.

A chat is made by a runner's hello (``activity.live.presence.connect``) and everything in it by
the runner's frames (``tests/frames.py``) applied by ``activity.live.ingest.ingest``: the same
validation, merge and unit of work (``activity/live/chats.py``) as a real runner's. Give a large
fixture all its frames in one call: they are applied as one batch, as a runner's backlog is, so
a 10,000-call turn stays fast.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from activity.core.merge import CallState
from activity.live import chats, presence
from activity.live.calls import set_state
from activity.live.ingest import Result, ingest
from activity.models import Chat, Message, ToolActivity, Workspace
from activity.wire.frames import runner_frame
from tests import frames


def apply(chat_id: uuid.UUID, *raw: dict[str, Any]) -> Result:
    """Apply frames, as a runner sends them, to a chat in one batch."""
    return ingest(chat_id, [runner_frame.validate_python(r) for r in raw])


def run(workspace: Workspace, *raw: dict[str, Any], channel: str = "runner") -> Chat:
    """A new chat in ``workspace``, made by a runner's hello, with ``raw`` applied in one batch."""
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), channel)
    if raw:
        apply(change.chat_id, *raw)
    return Chat.objects.get(pk=change.chat_id)


def make_turn(
    workspace: Workspace | str = "acme",
    *,
    title: str = "Fix the flaky test",
    prompt: str = "Make the tests pass",
    agent_name: str = "demo-agent",
    at: int = 1_700_000_000_000,
) -> Message:
    """The reply of a new chat's first turn (the workspace is made if it is only a slug)."""
    if isinstance(workspace, str):
        workspace, _ = Workspace.objects.get_or_create(
            slug=workspace, defaults={"name": workspace.title()}
        )
    start = frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), prompt=prompt, title=title)
    start.update(at=at, agent_name=agent_name)
    chat = run(workspace, start)
    return Message.objects.select_related("chat", "attempt").get(attempt=chat.current_attempt_id)


def save_call(reply: Message, state: CallState) -> ToolActivity:
    """A row holding exactly ``state``, added to the reply's turn by the unit of work.

    For tests of how a row stores and exports a state; the merge makes a state only from
    events, so this is the one factory that skips it (``ingest.merge_call`` does the rest).
    """
    with chats.change(reply.chat_id) as work:
        chat = work.chat
        chat.tool_count += 1
        work.touch(chat, "tool_count")
        row = ToolActivity(
            chat=chat, attempt=reply.attempt, assistant_message=reply, position=chat.tool_count
        )
        set_state(row, state)
        work.add(row)
    return row


class HeldPage:
    """A viewer in this process that keeps a push in flight until it is released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.closed: tuple[int | None, str | None] | None = None

    async def deliver(self, text: str) -> None:
        await self.release.wait()

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = (code, reason)
