"""Needs you: the count on *Inbox* on every page, what a new prompt says, and the runs list's
lines, live — each workspace's only to its own members."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from activity.core import groups
from activity.models import AgentToken, Prompt, Workspace
from activity.push import inbox as needs
from activity.sockets import beats
from activity.sockets.inbox import GroupMember, NeedsConsumer
from koruweb.asgi import application
from tests import factories, frames
from tests.liveserver import REDIS_URL
from tests.members import logged_in

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


async def needs_socket(user: User, path: str = "/ws/needs/") -> WebsocketCommunicator:
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    headers = [
        (b"host", b"localhost"),
        ORIGIN,
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    socket = WebsocketCommunicator(application, path, headers=headers)
    assert (await socket.connect())[0]
    return socket


async def runner(token: str, chat_id: uuid.UUID) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to(frames.hello(chat_id))
    assert await socket.receive_json_from() == {"type": "ack", "seq": 0}
    return socket


async def send_all(socket: WebsocketCommunicator, *sent: dict) -> None:
    for frame in sent:
        await socket.send_json_to(frame)
    while True:
        reply = await socket.receive_json_from(timeout=5)
        if reply["type"] == "ack" and reply["seq"] >= sent[-1]["seq"]:
            return


def asking(title: str = "rm -rf build") -> list[dict]:
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    return [
        frames.turn_started(1, attempt, reply, prompt="Tidy the build"),
        frames.tool_call(2, "c1", title, kind="delete"),
        frames.permission(3, 7, "c1", title),
    ]


@database_sync_to_async
def token_of(workspace: Workspace) -> str:
    return AgentToken.issue(workspace, "laptop")[1]


def answer(person: User, prompt: Prompt) -> int:
    client = logged_in(person)
    return client.post(f"/prompts/{prompt.pk}/answer", {"choice": "allow-once"}).status_code


async def said(socket: WebsocketCommunicator, until: Any, timeout: float = 5) -> dict[str, Any]:
    """The first message the socket hears for which ``until`` holds, within ``timeout``."""
    async with asyncio.timeout(timeout):
        while True:
            message: dict[str, Any] = json.loads(await socket.receive_from(timeout=timeout))
            if until(message):
                return message


async def test_a_needs_socket_starts_from_the_count_of_each_workspace_where_its_person_answers(
    acme, acme_approver
):
    socket = await needs_socket(acme_approver)
    try:
        assert await socket.receive_json_from() == {
            "counts": {str(acme.pk): 0},
            "all": False,
            "mentions": 0,
            "reviews": 0,
        }
    finally:
        await socket.disconnect()


async def test_an_approver_hears_the_count_go_up_with_what_the_agent_asks_and_down_when_answered(
    acme, acme_approver
):
    socket = await needs_socket(acme_approver)
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        await socket.receive_json_from()  # the counts it starts from
        await send_all(agent, *asking())
        up = await said(socket, lambda m: m.get("workspace") == str(acme.pk))
        assert up["waiting"] == 1
        asks = [(ask["run"], ask["text"]) for ask in up["asks"]]
        assert asks == [("Fix the flaky test", "rm -rf build")]

        prompt = await database_sync_to_async(Prompt.objects.get)()
        answered = await database_sync_to_async(answer)(acme_approver, prompt)
        assert answered == 302
        down = await said(socket, lambda m: m.get("workspace") == str(acme.pk))
        assert down == {"workspace": str(acme.pk), "waiting": 0, "asks": []}
    finally:
        await agent.disconnect()
        await socket.disconnect()


async def test_a_viewer_and_a_member_of_another_workspace_hear_nothing_of_a_prompt(
    acme, acme_viewer, outsider
):
    watcher = await needs_socket(acme_viewer)
    stranger = await needs_socket(outsider)
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        assert (await watcher.receive_json_from())["counts"] == {}
        assert str(acme.pk) not in (await stranger.receive_json_from())["counts"]
        await send_all(agent, *asking())
        assert await watcher.receive_nothing(timeout=0.5)
        assert await stranger.receive_nothing(timeout=0.1)
    finally:
        await agent.disconnect()
        await watcher.disconnect()
        await stranger.disconnect()


async def test_a_runs_page_gets_its_lines_and_every_members_run_as_it_changes(acme, acme_viewer):
    socket = await needs_socket(acme_viewer)
    chat_id = uuid.uuid4()
    agent = await runner(await token_of(acme), chat_id)
    try:
        await socket.receive_json_from()
        await socket.send_to(text_data=json.dumps({"runs": [str(chat_id)]}))
        line = await said(socket, lambda m: m.get("run") == str(chat_id))
        assert f'id="chat-{chat_id}"' in line["html"] and "needs-marker" not in line["html"]
        await send_all(agent, *asking())
        waits = await said(socket, lambda m: "needs-marker" in m.get("html", ""))
        assert waits["run"] == str(chat_id) and waits["workspace"] == str(acme.pk)
        assert "Waiting for an answer" in waits["html"] and "data-yours" not in waits["html"]
    finally:
        await agent.disconnect()
        await socket.disconnect()


async def test_a_runs_page_of_another_workspace_hears_nothing_and_cannot_ask_for_its_lines(
    acme, outsider
):
    socket = await needs_socket(outsider)
    chat_id = uuid.uuid4()
    agent = await runner(await token_of(acme), chat_id)
    try:
        await socket.receive_json_from()
        await socket.send_to(text_data=json.dumps({"runs": [str(chat_id)]}))
        assert await socket.receive_json_from() == {"run": str(chat_id), "gone": True}
        await send_all(agent, *asking())
        assert await socket.receive_nothing(timeout=0.5)
    finally:
        await agent.disconnect()
        await socket.disconnect()


async def test_a_needs_socket_without_a_login_is_closed_with_4401():
    socket = WebsocketCommunicator(
        application, "/ws/needs/", headers=[(b"host", b"localhost"), ORIGIN]
    )
    assert (await socket.connect())[0]
    assert (await socket.receive_output(timeout=5))["code"] == 4401


def waiting_run(workspace: Workspace) -> uuid.UUID:
    return factories.run(workspace, *asking()).pk


def test_every_page_counts_on_inbox_the_prompts_waiting_for_its_person(acme, acme_approver):
    waiting_run(acme)
    for path in ("/", "/inbox/", "/workspaces/", "/search/?q=build"):
        page = logged_in(acme_approver).get(path).content.decode()
        assert 'aria-hidden="true">1</span>' in page, path
        assert ", 1 waiting for you" in page, path


def test_a_viewer_and_a_member_of_another_workspace_see_no_count(acme, acme_viewer, outsider):
    waiting_run(acme)
    for person in (acme_viewer, outsider):
        page = logged_in(person).get("/").content.decode()
        assert 'id="needs-count" aria-hidden="true" hidden>0</span>' in page


def test_the_runs_list_says_a_waiting_run_needs_an_approver_and_only_waits_for_a_viewer(
    acme, acme_approver, acme_viewer
):
    chat_id = waiting_run(acme)
    mine = logged_in(acme_approver).get("/").content.decode()
    theirs = logged_in(acme_viewer).get("/").content.decode()
    line = f'<tr id="chat-{chat_id}" class="run needs" data-workspace="{acme.pk}"'
    assert f"{line} data-yours>" in mine and "Needs you" in mine
    assert f"{line}>" in theirs and "Waiting for an answer" in theirs


def test_a_superuser_counts_every_workspace(acme):
    waiting_run(acme)
    boss = User.objects.create_superuser("boss")
    assert needs.counts(boss) == {
        "counts": {str(acme.pk): 1},
        "all": True,
        "mentions": 0,
        "reviews": 0,
    }


def test_a_page_asking_for_lines_is_heard_only_with_a_short_list_of_run_ids():
    ids = [uuid.uuid4() for _ in range(3)]
    assert needs.asked_runs(json.dumps({"runs": [str(i) for i in ids]})) == ids
    for text in ("", "[]", '{"runs": 5}', '{"runs": ["no"]}', "[" * 10_000, None):
        assert needs.asked_runs(text) is None
    assert needs.asked_runs(json.dumps({"runs": [str(uuid.uuid4()) for _ in range(51)]})) is None


# --- a Redis restarted under sockets that stay up ---------------------------------------------
# It forgets every group membership, and a socket's receive may go on without an error: each
# needs and inbox socket joins its groups again on every heartbeat, and in team mode (Redis) is
# sent its counts or its list again. Here a membership is dropped from the layer behind the
# socket's back, as such a restart does.

BEAT = 0.1  # seconds between heartbeats in these tests


@pytest.fixture
def in_memory(settings: Any) -> None:
    settings.WATCHING_HEARTBEAT_SECONDS = BEAT
    settings.REDIS_URL = ""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
async def on_redis(settings: Any):
    """Team mode: the Redis channel layer, under a prefix of its own."""
    settings.WATCHING_HEARTBEAT_SECONDS = BEAT
    settings.REDIS_URL = REDIS_URL
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "koruweb.layers.RedisLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, **settings.REDIS_CLIENT}],
                "prefix": f"koruweb-test-{uuid.uuid4().hex[:8]}",
                "brpop_timeout": 1,
            },
        }
    }
    yield
    layer = get_channel_layer()
    await layer.flush()
    await layer.close_pools()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[GroupMember]:
    """The needs and inbox consumers that join their groups from here on, in order."""
    found: list[GroupMember] = []
    join = GroupMember.join

    async def recorded(self: GroupMember, names: list[str]) -> None:
        if self not in found:
            found.append(self)
        await join(self, names)

    monkeypatch.setattr(GroupMember, "join", recorded)
    return found


async def forgotten(consumer: GroupMember, group: str) -> None:
    """Redis restarted: it no longer knows the socket is in ``group``, and nobody is told."""
    await get_channel_layer().group_discard(group, consumer.channel_name)


async def back_in(consumer: GroupMember, group: str) -> None:
    """Until the in-memory layer has the socket in ``group`` again."""
    layer = get_channel_layer()
    for _ in range(250):
        if consumer.channel_name in layer.groups.get(group, {}):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{consumer.channel_name} never joined {group} again")


async def test_a_needs_socket_whose_group_was_forgotten_joins_it_again_and_hears_the_next_prompt(
    acme, acme_approver, in_memory, opened
):
    socket = await needs_socket(acme_approver)
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        await socket.receive_json_from()  # the counts it starts from
        [consumer] = opened
        await forgotten(consumer, groups.inbox(acme.pk))
        await back_in(consumer, groups.inbox(acme.pk))
        await send_all(agent, *asking())
        heard = [await socket.receive_json_from(timeout=5)]
        while "workspace" not in heard[-1]:
            heard.append(await socket.receive_json_from(timeout=5))
        assert heard[-1]["waiting"] == 1
        assert not [m for m in heard if "counts" in m]  # the in-memory layer forgets nothing
        assert await socket.receive_nothing(timeout=3 * BEAT)  # so nothing is sent again
    finally:
        await agent.disconnect()
        await socket.disconnect()


async def test_in_team_mode_a_needs_socket_is_sent_its_counts_again_after_redis_forgot_its_group(
    acme, acme_approver, on_redis, opened
):
    socket = await needs_socket(acme_approver)
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        await socket.receive_json_from()  # the counts it starts from
        [consumer] = opened
        await forgotten(consumer, groups.inbox(acme.pk))
        await send_all(agent, *asking())  # its count goes to nobody, or to the group rejoined
        await said(socket, lambda m: m.get("counts") == {str(acme.pk): 1})

        prompt = await database_sync_to_async(Prompt.objects.get)()
        assert await database_sync_to_async(answer)(acme_approver, prompt) == 302
        # Heard through its group, which it is in again (the prompt's opening may come first,
        # if the group was joined again before it was announced).
        down = await said(
            socket, lambda m: m.get("workspace") == str(acme.pk) and m["waiting"] == 0
        )
        assert down["asks"] == []
    finally:
        await agent.disconnect()
        await socket.disconnect()


async def test_an_inbox_socket_whose_group_was_forgotten_joins_it_again_and_lists_the_next_prompt(
    acme, acme_approver, in_memory, opened
):
    inbox = await needs_socket(acme_approver, "/ws/inbox/")
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        assert 'data-count="0"' in (await inbox.receive_json_from(timeout=5))["content"]
        [consumer] = opened
        await forgotten(consumer, groups.inbox(acme.pk))
        await back_in(consumer, groups.inbox(acme.pk))
        await send_all(agent, *asking())
        listed = await said(inbox, lambda m: 'data-count="1"' in m["content"])
        assert "rm -rf build" in listed["content"]
        assert await inbox.receive_nothing(timeout=3 * BEAT)  # nothing is sent again
    finally:
        await agent.disconnect()
        await inbox.disconnect()


async def test_in_team_mode_an_inbox_socket_is_sent_its_list_again_only_when_it_changed(
    acme, acme_approver, on_redis, opened
):
    inbox = await needs_socket(acme_approver, "/ws/inbox/")
    agent = await runner(await token_of(acme), uuid.uuid4())
    try:
        assert 'data-count="0"' in (await inbox.receive_json_from(timeout=5))["content"]
        [consumer] = opened
        await forgotten(consumer, groups.inbox(acme.pk))
        await send_all(agent, *asking())  # announced to nobody, or to the group rejoined
        listed = await said(inbox, lambda m: 'data-count="1"' in m["content"])
        assert "rm -rf build" in listed["content"]
        assert await inbox.receive_nothing(timeout=3 * BEAT)  # the page has it: not again
    finally:
        await agent.disconnect()
        await inbox.disconnect()


async def test_the_heartbeats_of_a_needs_socket_end_with_it_even_one_whose_consumer_dies(
    acme_approver, in_memory, opened, monkeypatch
):
    async def broken(self: NeedsConsumer, **_: Any) -> None:
        raise RuntimeError("a bug in the receive loop")

    closing = await needs_socket(acme_approver)
    await closing.receive_json_from()
    await closing.disconnect()
    monkeypatch.setattr(NeedsConsumer, "receive", broken)
    dying = await needs_socket(acme_approver)
    await dying.receive_json_from()
    await dying.send_to(text_data="anything")
    with pytest.raises(RuntimeError):
        await dying.wait(timeout=5)
    assert len(opened) == 2
    assert not set(opened) & set(beats.registered()) and not beats.beating()


def test_sending_a_person_their_counts_again_reads_the_database_three_times(
    acme, acme_approver, django_assert_num_queries
):
    waiting_run(acme)
    with django_assert_num_queries(3):
        assert json.loads(needs.snapshot(acme_approver))["counts"] == {str(acme.pk): 1}
