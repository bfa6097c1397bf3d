"""Pushes: rendered once, coalesced under load, immediate when idle, chained by version."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from activity import broadcast, presence
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import Workspace
from tests import frames

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def new_chat() -> uuid.UUID:
    workspace = Workspace.objects.create(slug=f"w{uuid.uuid4().hex[:8]}", name="W")
    change, _ = presence.connect(workspace.pk, uuid.uuid4(), "runner")
    ingest(
        change.chat_id,
        [runner_frame.validate_python(frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))],
    )
    return change.chat_id


async def apply(chat_id: uuid.UUID, *raw: dict) -> None:
    result = await database_sync_to_async(ingest)(
        chat_id, [runner_frame.validate_python(r) for r in raw]
    )
    await broadcast.changed(chat_id, result.since, result.version)


async def pushes(channel: str, quiet: float) -> list[dict]:
    layer = get_channel_layer()
    received: list[dict] = []
    while True:
        try:
            event = await asyncio.wait_for(layer.receive(channel), quiet)
        except TimeoutError:
            return received
        received.append(json.loads(event["text"]))


async def subscribe(chat_id: uuid.UUID) -> str:
    layer = get_channel_layer()
    channel: str = await layer.new_channel()
    await layer.group_add(broadcast.group(chat_id), channel)
    return channel


async def test_a_change_to_an_idle_chat_is_pushed_at_once(settings):
    settings.PUSH_WINDOW_MS = 30
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    event = await asyncio.wait_for(get_channel_layer().receive(channel), 0.2)
    assert "Read a.py" in json.loads(event["text"])["content"]


class HeldPage:
    """A viewer in this process that keeps the first push in flight until it is released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def deliver(self, text: str) -> None:
        await self.release.wait()


async def test_fifty_updates_while_a_push_goes_out_become_one_push_of_the_latest_state(settings):
    settings.PUSH_WINDOW_MS = 3000  # a push waits this long at most for this process's viewers
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    page = HeldPage()
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, frames.tool_call(2, "c1", "step 0", status="pending"))
        for n in range(3, 53):
            await apply(chat_id, frames.tool_update(n, "c1", title=f"step {n}"))
        page.release.set()  # the first push is out: everything since goes as the next
        received = await pushes(channel, quiet=1.5)
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)
    assert len(received) == 2  # the first change at once, the rest in one push
    last = received[-1]["content"]
    assert "step 52" in last and "step 51" not in last
    assert last.count('id="tool-') == 1  # the row once, in its latest state
    assert received[1]["from"] == received[0]["to"]  # a chain: no gap, no overlap


async def test_one_push_carries_every_row_that_changed_while_the_last_went_out(settings):
    settings.PUSH_WINDOW_MS = 3000
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    page = HeldPage()
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, frames.say(2, "Starting."))
        for n in range(3, 13):
            await apply(chat_id, frames.tool_call(n, f"c{n}", f"call {n}", status="pending"))
        page.release.set()
        received = await pushes(channel, quiet=1.5)
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)
    assert len(received) == 2
    rows = re.findall(r'id="(tool-[0-9a-f-]+)"', "".join(p["content"] for p in received))
    assert len(rows) == len(set(rows)) == 10  # every new row, each appended exactly once


async def test_after_a_push_of_one_change_the_next_change_goes_out_once_it_is_out(settings):
    settings.PUSH_WINDOW_MS = 3000  # the old window would have held the second change this long
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    layer = get_channel_layer()
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    first = json.loads((await asyncio.wait_for(layer.receive(channel), 1.5))["text"])
    await apply(chat_id, frames.tool_update(3, "c1", status="completed"))
    second = json.loads((await asyncio.wait_for(layer.receive(channel), 1.5))["text"])
    assert second["from"] == first["to"] and "Completed" in second["content"]


def test_pushes_space_out_as_changes_pile_up():
    window = 0.030
    assert broadcast.spacing(0.010, 1, window) == 0.010  # idle: the next goes once this is out
    assert broadcast.spacing(0.010, 2, window) == 0.020  # its cost again per change it carried
    assert broadcast.spacing(0.010, 50, window) == window  # under load: at most the window
    assert broadcast.spacing(0.050, 3, window) == 0.050  # never two pushes going out at once
