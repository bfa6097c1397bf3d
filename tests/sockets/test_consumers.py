"""The sockets: a runner's frames become rows, and every viewer of the chat is told."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from unittest.mock import ANY

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from redis.exceptions import ConnectionError as RedisConnectionError

from activity.core import groups
from activity.live import presence
from activity.models import AgentToken, Chat, ToolActivity, Workspace
from activity.push import broadcast, pushes
from activity.wire.frames import CLOSE_TOO_LARGE, CLOSE_UNAVAILABLE
from koruweb.asgi import application
from tests import frames
from tests.factories import HeldPage

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def workspace_with_token(slug: str = "acme") -> tuple[Workspace, str]:
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
    _, token = AgentToken.issue(workspace, "laptop")
    return workspace, token


async def runner(token: str, chat_id: uuid.UUID) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    connected, _ = await socket.connect()
    assert connected
    await socket.send_json_to(frames.hello(chat_id))
    assert await socket.receive_json_from() == {"type": "ack", "seq": 0}
    return socket


async def send_all(socket: WebsocketCommunicator, *sent: dict) -> list[dict]:
    """Send frames, then read replies until the last one is acknowledged."""
    for frame in sent:
        await socket.send_json_to(frame)
    last = sent[-1]["seq"]
    replies = []
    while True:
        reply = await socket.receive_json_from(timeout=5)
        replies.append(reply)
        if reply["type"] == "ack" and reply["seq"] >= last:
            return replies


def opening(attempt: uuid.UUID, reply: uuid.UUID) -> list[dict]:
    return [
        frames.turn_started(1, attempt, reply),
        frames.say(2, "Let me look. "),
        frames.tool_call(3, "call_1", "Read README.md", kind="read", status="pending"),
    ]


async def test_a_runner_without_a_valid_token_is_closed_with_4401():
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", b"Bearer koru_nope")]
    )
    connected, _ = await socket.connect()
    assert connected  # accepted, then closed: a client never retries in a loop
    assert (await socket.receive_output())["code"] == 4401


async def test_a_revoked_token_no_longer_connects():
    _, token = await workspace_with_token()
    await database_sync_to_async(
        lambda: AgentToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    )()
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4401


async def test_frames_become_rows_and_are_acknowledged_after_commit():
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    socket = await runner(token, chat_id)
    try:
        replies = await send_all(socket, *opening(attempt, reply))
        assert replies[-1] == {"type": "ack", "seq": 3}
        row = await ToolActivity.objects.aget(chat_id=chat_id, tool_call_id="call_1")
        assert row.agent_label == "Read README.md" and row.read_only
        assert row.text_offset == len(b"Let me look. ")
        assert row.attempt_id == attempt and row.assistant_message_id == reply
    finally:
        await socket.disconnect()


async def test_a_malformed_frame_gets_an_error_that_acknowledges_it_and_the_socket_stays_up():
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    socket = await runner(token, chat_id)
    try:
        bad = frames.tool_update(4, "call_1", status="completed")
        bad["message"]["params"]["update"]["toolCallId"] = 42  # not a string
        replies = await send_all(socket, *opening(attempt, reply), bad, frames.say(5, "Done."))
        errors = [r for r in replies if r["type"] == "error"]
        assert len(errors) == 1 and errors[0]["seq"] == 4
        assert "toolCallId" in errors[0]["error"]
        assert replies[-1] == {"type": "ack", "seq": 5}
        row = await ToolActivity.objects.aget(chat_id=chat_id, tool_call_id="call_1")
        assert row.status == "proposed"  # the bad frame changed nothing
    finally:
        await socket.disconnect()


async def test_a_frame_that_is_not_json_gets_an_error_and_the_socket_stays_up():
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    socket = await runner(token, chat_id)
    try:
        await socket.send_to(text_data="{not json")
        assert (await socket.receive_json_from())["type"] == "error"
        assert (await send_all(socket, *opening(attempt, reply)))[-1]["seq"] == 3
    finally:
        await socket.disconnect()


async def test_frames_resent_after_a_reconnect_are_applied_once():
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    first = await runner(token, chat_id)
    await send_all(first, *opening(attempt, reply))
    await first.disconnect()

    second = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    await second.connect()
    try:
        await second.send_json_to(frames.hello(chat_id, acked=1))
        assert await second.receive_json_from() == {"type": "ack", "seq": 3}  # what it has
        replies = await send_all(second, *opening(attempt, reply), frames.say(4, "More."))
        assert not [r for r in replies if r["type"] == "error"]
        chat = await Chat.objects.aget(pk=chat_id)
        assert chat.tool_count == 1 and chat.last_seq == 4
        assert await ToolActivity.objects.filter(chat_id=chat_id).acount() == 1
    finally:
        await second.disconnect()


async def test_a_gap_in_the_frames_closes_the_socket_so_the_runner_resends():
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    socket = await runner(token, chat_id)
    await socket.send_json_to(frames.turn_started(2, attempt, reply))
    assert (await socket.receive_json_from())["type"] == "error"
    assert (await socket.receive_output())["code"] == 4400
    assert not await Chat.objects.filter(pk=chat_id, attempts__isnull=False).aexists()


async def test_an_oversized_frame_is_refused_with_a_close_code_daphne_can_send():
    _, token = await workspace_with_token()
    socket = await runner(token, uuid.uuid4())
    await socket.send_to(text_data=json.dumps({"type": "acp", "pad": "x" * (1024 * 1024 + 1)}))
    assert (await socket.receive_output())["code"] == CLOSE_TOO_LARGE


async def test_a_runner_cannot_write_to_another_workspaces_chat():
    _, token = await workspace_with_token("acme")
    _, other_token = await workspace_with_token("globex")
    chat_id = uuid.uuid4()
    socket = await runner(token, chat_id)
    await socket.disconnect()
    intruder = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {other_token}".encode())]
    )
    await intruder.connect()
    await intruder.send_json_to(frames.hello(chat_id))
    said = await intruder.receive_output()  # why (Daphne drops a close's reason), then the close
    assert json.loads(said["text"])["error"] == "this chat belongs to another workspace"
    assert (await intruder.receive_output())["code"] == 4403


# --- viewers ---------------------------------------------------------------------------------


async def viewer(user: User | None, chat_id: uuid.UUID, origin=ORIGIN) -> WebsocketCommunicator:
    headers = [(b"host", b"localhost"), origin]  # a browser always sends both
    if user is not None:
        client = Client()
        await database_sync_to_async(client.force_login)(user)
        cookie = f"sessionid={client.cookies['sessionid'].value}"
        headers.append((b"cookie", cookie.encode()))
    return WebsocketCommunicator(application, f"/ws/chats/{chat_id}/", headers=headers)


async def test_an_anonymous_viewer_is_accepted_then_closed_with_4401():
    socket = await viewer(None, uuid.uuid4())
    connected, _ = await socket.connect()
    assert connected
    assert (await socket.receive_output())["code"] == 4401


async def test_a_viewer_outside_the_workspace_is_closed_with_4403(outsider):
    _, token = await workspace_with_token("acme")
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    socket = await viewer(outsider, chat_id)
    await socket.connect()
    assert (await socket.receive_output())["code"] == 4403


async def test_a_socket_from_another_site_is_refused(acme_viewer):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    socket = await viewer(acme_viewer, chat_id, origin=(b"origin", b"https://evil.example"))
    connected, _ = await socket.connect()
    assert not connected


async def test_a_viewer_sees_rows_appear_and_change_and_catches_up_by_version(acme_viewer):
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        await watch.send_json_to({"since": 0})
        catch_up = await watch.receive_json_from(timeout=5)
        assert catch_up["from"] == 0 and 'data-runner="online"' in catch_up["content"]

        await send_all(agent, *opening(attempt, reply))
        seen = catch_up["to"]
        content = ""
        while "Read README.md" not in content:
            push = await watch.receive_json_from(timeout=5)
            assert push["from"] == seen  # pushes form a chain: no gap, no overlap
            seen, content = push["to"], content + push["content"]
        row = await ToolActivity.objects.aget(chat_id=chat_id)
        assert f'id="tool-{row.id}"' in content and "Read README.md" in content

        await send_all(agent, frames.tool_update(4, "call_1", status="completed"))
        push = await watch.receive_json_from(timeout=5)
        assert push["from"] == seen
        assert (
            f'id="tool-{row.id}"' in push["content"]
            and 'hx-swap-oob="outerMorph"' in push["content"]
        )
        assert "Succeeded" in push["content"]

        await watch.send_json_to({"since": 0})  # a page that missed everything
        full = await watch.receive_json_from(timeout=5)
        assert full["to"] == push["to"] and "Succeeded" in full["content"]
    finally:
        await watch.disconnect()
        await agent.disconnect()


async def test_a_page_ahead_of_the_chat_is_told_the_chats_real_version_and_to_fetch_it(
    acme_viewer,
):
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    await send_all(agent, *opening(attempt, reply))
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        await watch.send_json_to({"since": 0})
        version = (await watch.receive_json_from(timeout=5))["to"]
        await watch.send_json_to({"since": version + 1000})  # a version the chat never had
        answer = await watch.receive_json_from(timeout=5)
        assert answer == {"from": version + 1000, "to": version, "reload": True}
    finally:
        await watch.disconnect()
        await agent.disconnect()


async def test_a_page_back_after_more_calls_than_a_page_shows_is_told_to_fetch_its_page(
    acme_viewer,
):
    from activity.review.reads import LIVE_ROWS

    async def pushed_up_to_now(watch: WebsocketCommunicator) -> int:
        """Read the live pushes until the page would show the chat's version."""
        version = (await Chat.objects.aget(pk=chat_id)).version
        while (await watch.receive_json_from(timeout=5))["to"] < version:
            pass
        return version

    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    await send_all(agent, frames.turn_started(1, attempt, reply))
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        await watch.send_json_to({"since": 0})
        left = (await watch.receive_json_from(timeout=5))["to"]
        few = [frames.tool_call(n, f"c{n}", f"Read f{n}.py", kind="read") for n in range(2, 5)]
        await send_all(agent, *few)
        now = await pushed_up_to_now(watch)
        await watch.send_json_to({"since": left})  # back after three calls: they come pushed
        back = await watch.receive_json_from(timeout=5)
        assert (back["from"], back["to"]) == (left, now)
        assert back["content"].count('<tr id="tool-') == 3
        many = [
            frames.tool_call(n, f"c{n}", f"Read f{n}.py", kind="read")
            for n in range(5, 5 + LIVE_ROWS + 1)
        ]
        await send_all(agent, *many)
        later = await pushed_up_to_now(watch)
        await watch.send_json_to({"since": now})  # back after more calls than a page shows
        answer = await watch.receive_json_from(timeout=5)
        assert answer == {"from": now, "to": later, "reload": True}
    finally:
        await watch.disconnect()
        await agent.disconnect()


async def test_a_catch_up_many_times_the_push_bound_comes_in_parts_that_chain(
    settings, acme_viewer
):
    settings.PUSH_MAX_BYTES = 4_000
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    calls = [
        frames.tool_call(n, f"call_{n}", f"Read src/file_{n}.py", kind="read", status="pending")
        for n in range(2, 42)
    ]
    await send_all(agent, frames.turn_started(1, attempt, reply), *calls)
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        await watch.send_json_to({"since": 0})  # a page asleep through all of it
        parts = [await watch.receive_from(timeout=5)]
        while json.loads(parts[-1]).get("part") != json.loads(parts[-1]).get("parts"):
            parts.append(await watch.receive_from(timeout=5))
        version = (await Chat.objects.aget(pk=chat_id)).version
    finally:
        await watch.disconnect()
        await agent.disconnect()
    assert len(parts) > 5 and all(len(text) <= 4_000 for text in parts)
    pushes = [json.loads(text) for text in parts]
    assert [(p["from"], p["to"], p["part"]) for p in pushes] == [
        (0, version, k) for k in range(1, len(parts) + 1)
    ]
    shown = "".join(p["content"] for p in pushes)
    assert all(shown.count(f"Read src/file_{n}.py") == 1 for n in range(2, 42))


DEEP = '{"since": ' * 10_000 + "0" + "}" * 10_000


async def test_a_message_nested_ten_thousand_deep_is_ignored_and_the_page_still_catches_up(
    acme_viewer,
):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        for hostile in (DEEP, "[" * 10_000 + "]" * 10_000, '{"since": [' * 90 + "]}" * 90):
            await watch.send_to(text_data=hostile)
        assert await watch.receive_nothing(timeout=0.2)
        await watch.send_json_to({"since": 0})
        assert (await watch.receive_json_from(timeout=5))["from"] == 0
    finally:
        await watch.disconnect()


async def test_an_inbox_socket_ignores_a_message_nested_ten_thousand_deep(acme_approver):
    _, token = await workspace_with_token()
    headers = (await viewer(acme_approver, uuid.uuid4())).scope["headers"]
    inbox = WebsocketCommunicator(application, "/ws/inbox/", headers=headers)
    assert (await inbox.connect())[0]
    agent = await runner(token, uuid.uuid4())
    try:
        await inbox.receive_json_from(timeout=5)  # the list it starts from
        await inbox.send_to(text_data=DEEP)
        await send_all(agent, *asking(uuid.uuid4(), uuid.uuid4()))
        update = await inbox.receive_json_from(timeout=5)
        while "rm -rf build" not in update["content"]:
            update = await inbox.receive_json_from(timeout=5)
    finally:
        await inbox.disconnect()
        await agent.disconnect()


async def test_viewers_in_one_process_share_one_member_of_the_chats_group(acme_viewer):
    from channels.layers import InMemoryChannelLayer

    layer = get_channel_layer()
    if not isinstance(layer, InMemoryChannelLayer):
        pytest.skip("reads the in-memory layer's groups")
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    watchers = [await viewer(acme_viewer, chat_id) for _ in range(3)]
    try:
        for watch in watchers:
            assert (await watch.connect())[0]
            await watch.send_json_to({"since": 0})
            await watch.receive_json_from(timeout=5)
        assert len(layer.groups[groups.chat(chat_id)]) == 1
        await send_all(agent, *opening(attempt, reply))
        for watch in watchers:  # every viewer gets every push
            content = ""
            while "Read README.md" not in content:
                content = (await watch.receive_json_from(timeout=5))["content"]
    finally:
        for watch in watchers:
            await watch.disconnect()
        await agent.disconnect()
    assert groups.chat(chat_id) not in layer.groups  # the last one out leaves the group


async def test_pushes_during_a_catch_up_reach_the_page_after_it_in_order(monkeypatch, acme_viewer):
    import threading

    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    rendering, go = threading.Event(), threading.Event()
    render = pushes.render_push

    def slow_render(chat_id: uuid.UUID, since: int, catch_up: bool = False) -> list[str]:
        rendering.set()
        go.wait(10)  # the catch-up is still being rendered while a push arrives
        return render(chat_id, since, catch_up)

    monkeypatch.setattr(pushes, "render_push", slow_render)
    try:
        await watch.send_json_to({"since": 0})
        assert await asyncio.to_thread(rendering.wait, 10)  # the catch-up is under way
        text = pushes.push_text(1000, 1001, "<p>later</p>")
        await get_channel_layer().group_send(
            groups.chat(chat_id), {"type": "chat.push", "text": text}
        )
        assert await watch.receive_nothing(timeout=0.1)  # held until the catch-up is out
        go.set()
        assert (await watch.receive_json_from(timeout=5))["from"] == 0
        assert (await watch.receive_json_from(timeout=5))["from"] == 1000
    finally:
        go.set()
        await watch.disconnect()


async def test_updates_that_arrive_while_a_push_goes_out_are_carried_by_one_more_push():
    from activity.push import broadcast

    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    await send_all(agent, frames.turn_started(1, attempt, reply))
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(groups.chat(chat_id), channel)
    page = HeldPage()
    await broadcast.join(chat_id, page)
    try:
        await send_all(agent, frames.tool_call(2, "c1", "step 2", status="pending"))
        burst = [frames.tool_call(n, f"n{n}", f"new {n}", status="pending") for n in range(3, 13)]
        burst += [frames.tool_update(n, "c1", title=f"step {n}") for n in range(13, 53)]
        for frame in burst:  # while the first push is still being handed on here
            await agent.send_json_to(frame)
        await asyncio.sleep(0.3)
        page.release.set()
        replies = await send_all(agent, frames.tool_update(53, "c1", title="step 53"))
        assert replies[-1] == {"type": "ack", "seq": 53}
        received: list[dict] = []
        while not received or "step 53" not in received[-1]["content"]:
            received.append(json.loads((await asyncio.wait_for(layer.receive(channel), 5))["text"]))
    finally:
        page.release.set()
        await broadcast.leave(chat_id, page)
        await agent.disconnect()
    assert 2 <= len(received) <= 4  # 51 updates: the first alone, the rest in at most 3 pushes
    assert all(b["from"] == a["to"] for a, b in zip(received, received[1:], strict=False))
    shown = "".join(p["content"] for p in received[1:])
    rows = re.findall(r'id="(tool-[0-9a-f-]+)"', shown)
    assert len(set(rows)) == 11  # the ten new calls and c1
    assert "step 53" in received[-1]["content"]
    assert shown.count("new 7") == 1  # a new row is appended exactly once


async def test_a_push_that_fails_to_render_leaves_the_runner_connected_and_the_next_goes_out(
    monkeypatch,
):

    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(groups.chat(chat_id), channel)
    render = pushes.render_push

    def broken(chat_id: uuid.UUID, since: int) -> list[str]:
        raise RuntimeError("a template bug")

    try:
        monkeypatch.setattr(pushes, "render_push", broken)
        assert (await send_all(agent, *opening(attempt, reply)))[-1] == {"type": "ack", "seq": 3}
        monkeypatch.setattr(pushes, "render_push", render)
        await send_all(agent, frames.tool_update(4, "call_1", status="completed"))
        content = ""
        while "Succeeded" not in content:  # the runner's hello was pushed before the failure
            content = json.loads((await asyncio.wait_for(layer.receive(channel), 5))["text"])[
                "content"
            ]
    finally:
        await agent.disconnect()


def is_beacon(push: dict) -> bool:
    """A room's heartbeat: the chat's version, as a push that changes nothing."""
    return push.get("content") == "" and push["from"] == push["to"]


async def next_change(watch: WebsocketCommunicator) -> dict:
    """The next push that changes the page (heartbeats are passed over)."""
    while True:
        push: dict = await watch.receive_json_from(timeout=5)
        if not is_beacon(push):
            return push


async def test_a_push_lost_without_a_disconnect_reaches_the_page_within_a_heartbeat(
    acme_viewer, settings, monkeypatch
):
    """Redis restarts just as a push goes out: it has forgotten the room's membership of the
    chat's group, so the push reaches no one, and the page's socket stays up. The room's next
    heartbeat joins the group again and tells the page the chat's version: the page, behind it,
    asks for what it missed and gets it, and the next push reaches it as before."""
    from channels.layers import InMemoryChannelLayer

    layer = get_channel_layer()
    # The unit tests' layer is the in-memory one: this test forgets its groups directly.
    assert isinstance(layer, InMemoryChannelLayer), "unit tests run on the in-memory layer"
    settings.WATCHING_HEARTBEAT_SECONDS = 0.2
    _, token = await workspace_with_token()
    chat_id, attempt, reply = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent = await runner(token, chat_id)
    await send_all(agent, frames.turn_started(1, attempt, reply))
    group, forgotten = groups.chat(chat_id), asyncio.Event()
    group_send = layer.group_send

    async def redis_restarted_first(name: str, message: dict) -> None:
        if name == group and message["type"] == "chat.push" and not forgotten.is_set():
            layer.groups.pop(group, None)  # the room's socket stays up: nobody is told
            forgotten.set()
        await group_send(name, message)

    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    try:
        await watch.send_json_to({"since": 0})
        shown = (await watch.receive_json_from(timeout=5))["to"]
        room = broadcast._rooms[chat_id]
        monkeypatch.setattr(layer, "group_send", redis_restarted_first)
        await send_all(agent, frames.tool_call(2, "c1", "Read README.md", status="pending"))
        await asyncio.wait_for(forgotten.wait(), 5)  # its push went out to no one
        version = (await Chat.objects.aget(pk=chat_id)).version
        assert version > shown

        told = await watch.receive_json_from(timeout=5)
        while told["to"] <= shown:  # heartbeats from before the change: nothing new
            told = await watch.receive_json_from(timeout=5)
        assert told == {"from": version, "to": version, "content": ""}
        await watch.send_json_to({"since": shown})  # a gap, as live.js sees it: it asks
        caught_up = await next_change(watch)
        assert caught_up["from"] == shown and caught_up["to"] == version
        assert "Read README.md" in caught_up["content"]

        for _ in range(250):  # the room is in the chat's group again
            if room.channel in layer.groups.get(group, {}):
                break
            await asyncio.sleep(0.02)
        await send_all(agent, frames.tool_update(3, "c1", status="completed"))
        push = await next_change(watch)  # a push: the page asked for nothing this time
        assert push["from"] == version and "Succeeded" in push["content"]
    finally:
        await watch.disconnect()
        await agent.disconnect()


# --- answers on their way to the runner ------------------------------------------------------


@database_sync_to_async
def answer_as(client: Client, chat_id: uuid.UUID, choice: str) -> int:
    from activity.models import Prompt

    prompt = Prompt.objects.get(chat_id=chat_id)
    return client.post(f"/prompts/{prompt.pk}/answer", {"choice": choice}).status_code


def asking(attempt: uuid.UUID, reply: uuid.UUID) -> list[dict]:
    return [
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "c1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "c1", "rm -rf build"),
    ]


async def test_an_answer_from_the_web_reaches_the_runner_that_owns_the_agent(as_approver):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    agent = await runner(token, chat_id)
    try:
        await send_all(agent, *asking(uuid.uuid4(), uuid.uuid4()))
        assert await answer_as(as_approver, chat_id, "allow-once") == 302
        assert await agent.receive_json_from(timeout=5) == {
            "type": "answer",
            "request_id": 7,
            "outcome": {"outcome": "selected", "optionId": "allow-once"},
        }
    finally:
        await agent.disconnect()


async def test_an_answer_given_while_the_runner_was_away_is_delivered_when_it_comes_back(
    as_approver,
):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    agent = await runner(token, chat_id)
    await send_all(agent, *asking(uuid.uuid4(), uuid.uuid4()))
    await agent.disconnect()
    assert await answer_as(as_approver, chat_id, "reject") == 302

    back = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    await back.connect()
    try:
        await back.send_json_to(frames.hello(chat_id, acked=3))
        assert await back.receive_json_from() == {"type": "ack", "seq": 3}
        assert await back.receive_json_from(timeout=5) == {
            "type": "answer",
            "request_id": 7,
            "outcome": {"outcome": "selected", "optionId": "reject"},
        }
    finally:
        await back.disconnect()


async def test_an_inbox_socket_hears_of_a_new_prompt_in_its_workspace(acme_approver):
    _, token = await workspace_with_token()
    inbox = await viewer(acme_approver, uuid.uuid4())
    inbox.scope["path"] = "/ws/inbox/"  # same headers, the inbox route
    inbox = WebsocketCommunicator(application, "/ws/inbox/", headers=inbox.scope["headers"])
    assert (await inbox.connect())[0]
    agent = await runner(token, uuid.uuid4())
    try:
        await send_all(agent, *asking(uuid.uuid4(), uuid.uuid4()))
        update = await inbox.receive_json_from(timeout=5)
        while "rm -rf build" not in update["content"]:
            update = await inbox.receive_json_from(timeout=5)
        assert 'data-count="1"' in update["content"]
    finally:
        await inbox.disconnect()
        await agent.disconnect()


async def test_an_inbox_list_too_big_for_a_push_tells_the_page_to_fetch_it(settings, acme_approver):
    settings.PUSH_MAX_BYTES = 1_024
    _, token = await workspace_with_token()
    headers = (await viewer(acme_approver, uuid.uuid4())).scope["headers"]
    inbox = WebsocketCommunicator(application, "/ws/inbox/", headers=headers)
    assert (await inbox.connect())[0]
    agent = await runner(token, uuid.uuid4())
    try:
        first = await inbox.receive_from(timeout=5)  # empty: it fits
        assert "content" in json.loads(first)
        await send_all(agent, *asking(uuid.uuid4(), uuid.uuid4()))
        update = await inbox.receive_from(timeout=5)
        assert json.loads(update) == {"reload": True} and len(update) <= 1_024
    finally:
        await inbox.disconnect()
        await agent.disconnect()


async def test_revoking_a_token_cuts_off_the_runner_that_uses_it():
    _, token = await workspace_with_token()
    agent = await runner(token, uuid.uuid4())
    found = await database_sync_to_async(AgentToken.find)(token)
    assert found is not None
    await presence.token_revoked(found.pk)
    closed = await agent.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4401


async def test_a_runner_resuming_a_deleted_chat_is_refused_rather_than_given_an_empty_one():
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    await Chat.objects.filter(pk=chat_id).adelete()
    again = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    await again.connect()
    await again.send_json_to(frames.hello(chat_id, acked=12))
    said = await again.receive_output()
    assert "deleted" in json.loads(said["text"])["error"]
    closed = await again.receive_output()
    assert closed["code"] == 4403 and "deleted" in closed["reason"]
    assert not await Chat.objects.filter(pk=chat_id).aexists()


# --- the channel layer (Redis) fails under a socket ------------------------------------------


def failing_layer(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set the event returned, and every receive on the channel layer raises as redis-py does
    when Redis goes away (those already waiting too). Installed before the sockets connect."""
    layer = get_channel_layer()
    real = layer.receive
    away = asyncio.Event()

    async def receive(channel: str) -> dict:
        message = asyncio.ensure_future(real(channel))
        gone = asyncio.ensure_future(away.wait())
        await asyncio.wait({message, gone}, return_when=asyncio.FIRST_COMPLETED)
        if message.done():
            gone.cancel()
            received: dict = message.result()
            return received
        message.cancel()
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(layer, "receive", receive)
    return away


async def test_a_page_whose_channel_layer_fails_is_closed_to_reconnect_and_leaves_no_room(
    acme_viewer, monkeypatch
):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    await (await runner(token, chat_id)).disconnect()
    away = failing_layer(monkeypatch)
    watch = await viewer(acme_viewer, chat_id)
    assert (await watch.connect())[0]
    await watch.send_json_to({"since": 0})
    await watch.receive_json_from(timeout=5)  # its catch-up: it is in the chat's room
    assert chat_id in broadcast._rooms
    away.set()
    closed = await watch.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAVAILABLE, "reason": ANY}
    await watch.wait(timeout=5)
    assert chat_id not in broadcast._rooms  # a page that reconnects opens a new one


async def test_a_runner_socket_whose_channel_layer_fails_closes_to_reconnect_and_shows_it_gone(
    monkeypatch,
):
    _, token = await workspace_with_token()
    chat_id = uuid.uuid4()
    away = failing_layer(monkeypatch)
    agent = await runner(token, chat_id)
    away.set()
    closed = await agent.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == CLOSE_UNAVAILABLE
    await agent.wait(timeout=5)
    chat = await database_sync_to_async(Chat.objects.get)(pk=chat_id)
    assert not chat.runner_connected  # what disconnect does was done, though it never ran
