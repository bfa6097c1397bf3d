"""Pushes: rendered once, immediate, chained by version, never queued behind a slow fan-out."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from activity import broadcast, groups, presence
from activity.frames import runner_frame
from activity.ingest import ingest
from activity.models import Workspace
from tests import frames
from tests.factories import HeldPage

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
    await broadcast.announce(result.change)


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
    await layer.group_add(groups.chat(chat_id), channel)
    return channel


async def test_a_change_to_an_idle_chat_is_pushed_at_once():
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    event = await asyncio.wait_for(get_channel_layer().receive(channel), 0.2)
    assert "Read a.py" in json.loads(event["text"])["content"]


async def test_a_change_after_a_push_is_out_goes_out_at_once():
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    layer = get_channel_layer()
    await apply(chat_id, frames.tool_call(2, "c1", "Read a.py", status="pending"))
    first = json.loads((await asyncio.wait_for(layer.receive(channel), 0.5))["text"])
    await apply(chat_id, frames.tool_update(3, "c1", status="completed"))
    second = json.loads((await asyncio.wait_for(layer.receive(channel), 0.5))["text"])
    assert second["from"] == first["to"] and "Completed" in second["content"]


async def a_second_push_behind_a_held_one(
    chat_id: uuid.UUID,
) -> tuple[str, HeldPage, asyncio.Task[None]]:
    """A viewer here holds the first push; the second change is being pushed meanwhile."""
    channel = await subscribe(chat_id)
    page = HeldPage()
    await broadcast.join(chat_id, page)
    await apply(chat_id, frames.tool_call(2, "c1", "step 2", status="pending"))
    second = asyncio.create_task(apply(chat_id, frames.tool_update(3, "c1", title="step 3")))
    return channel, page, second


async def test_a_push_waits_for_this_processs_viewers_to_have_the_last_one(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    channel, page, second = await a_second_push_behind_a_held_one(chat_id)
    try:
        first = await pushes(channel, quiet=0.3)
        assert len(first) == 1 and not second.done()  # held: the viewer has not got the first
        page.release.set()
        await asyncio.wait_for(second, 2)
        assert "step 3" in (await pushes(channel, quiet=0.3))[0]["content"]
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)


async def test_a_viewer_that_never_takes_a_push_holds_the_next_for_a_moment_only(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 0.2)
    chat_id = await new_chat()
    channel = await subscribe(chat_id)
    page = HeldPage()  # never released
    await broadcast.join(chat_id, page)
    try:
        await apply(chat_id, frames.tool_call(2, "c1", "step 0", status="pending"))
        await asyncio.wait_for(apply(chat_id, frames.tool_update(3, "c1", title="step 3")), 2)
        received = await pushes(channel, quiet=0.5)
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)
    assert "step 3" in received[-1]["content"]


def test_a_push_looks_only_for_the_kinds_that_changed_and_misses_none():
    from django.db import connection
    from django.db.models import F
    from django.test.utils import CaptureQueriesContext

    from activity.models import Chat

    chat_id = async_to_sync(new_chat)()

    def step(*raw: dict) -> int:
        return ingest(chat_id, [runner_frame.validate_python(r) for r in raw]).change.since

    def render(since: int) -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            html, _ = broadcast.render_changes(chat_id, since)
        return html, len(queries)

    def every_kind_changed_at_the_last_version() -> None:
        version = F("version")
        Chat.objects.filter(pk=chat_id).update(
            turns_version=version, replies_version=version, rows_version=version
        )

    start = step(frames.tool_call(2, "c1", "Read a.py", status="pending"))
    text_since = step(frames.say(3, "Reading."))
    text, text_queries = render(text_since)
    assert "Reading." in text and "Read a.py" not in text
    every_kind_changed_at_the_last_version()
    assert render(text_since) == (text, text_queries + 2)  # it looked for turns and rows too
    row_since = step(frames.tool_update(4, "c1", status="completed"))
    row, row_queries = render(row_since)
    assert "Completed" in row and "Reading." not in row
    both, _ = render(start)  # a page further behind gets both
    assert "Reading." in both and "Completed" in both
    every_kind_changed_at_the_last_version()
    assert render(row_since) == (row, row_queries + 2)  # it looked for turns and replies too


def test_a_chat_written_by_code_without_kind_versions_pushes_every_kind():
    from activity.models import Chat

    chat_id = async_to_sync(new_chat)()
    since = ingest(
        chat_id, [runner_frame.validate_python(frames.tool_call(2, "c1", "Read a.py"))]
    ).change.since
    Chat.objects.filter(pk=chat_id).update(  # as an older process would have left it
        meta_version=0, turns_version=0, replies_version=0, rows_version=0
    )
    html, _ = broadcast.render_changes(chat_id, since)
    assert "Read a.py" in html


async def test_a_push_does_not_wait_for_a_room_that_has_not_joined_the_group_yet(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    joining = broadcast.Room(chat_id)  # its first viewer is still being let in
    monkeypatch.setitem(broadcast._rooms, chat_id, joining)
    await asyncio.wait_for(apply(chat_id, frames.tool_call(2, "c1", "step 2")), 2)
    await asyncio.wait_for(apply(chat_id, frames.tool_update(3, "c1", title="step 3")), 2)


async def test_a_push_waiting_on_a_room_goes_out_when_its_last_viewer_leaves(monkeypatch):
    monkeypatch.setattr(broadcast, "HAND_ON_WAIT", 5)
    chat_id = await new_chat()
    channel, page, second = await a_second_push_behind_a_held_one(chat_id)
    try:
        await asyncio.sleep(0.2)
        await broadcast.leave(chat_id, page)  # the tab closed with a push in its hands
        await asyncio.wait_for(second, 2)
    finally:
        page.release.set()
    assert "step 3" in (await pushes(channel, quiet=0.3))[-1]["content"]
