"""Floods on the live path (issue 25, point 7), written as the attacks: one agent token opening
new chats as fast as it can, sockets that authenticate and never say hello, one person or one
token opening socket after socket (``activity/sockets/floods.py``)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from activity.models import AgentToken, Chat, Workspace
from activity.models.accounts import TokenKind
from activity.push import watching
from activity.sockets import consumers, floods
from activity.wire.frames import CLOSE_PROTOCOL, CLOSE_RATE, retry_after
from koruweb.asgi import application
from tests import frames

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


async def plain_token(workspace: Workspace, kind: TokenKind = TokenKind.AGENT) -> str:
    issued: tuple[AgentToken, str] = await database_sync_to_async(AgentToken.issue)(
        workspace, "laptop", kind
    )
    return issued[1]


def agent_socket(token: str, path: str = "/ws/agent/") -> WebsocketCommunicator:
    headers = [(b"authorization", f"Bearer {token}".encode())]
    return WebsocketCommunicator(application, path, headers=headers)


async def hello(token: str, chat_id: uuid.UUID, acked: int = 0) -> WebsocketCommunicator:
    """A runner's socket that said hello for ``chat_id``; the test reads what came back."""
    socket = agent_socket(token)
    assert (await socket.connect())[0]
    await socket.send_json_to(frames.hello(chat_id, acked))
    return socket


async def closed_with(socket: WebsocketCommunicator) -> tuple[int, str]:
    """The close the socket is sent next (waited for, never slept on)."""
    output = await socket.receive_output(timeout=5)
    assert output["type"] == "websocket.close", output
    return output["code"], output.get("reason", "")


async def chat_exists(chat_id: uuid.UUID) -> bool:
    found: bool = await database_sync_to_async(Chat.objects.filter(pk=chat_id).exists)()
    return found


# --- new chats a minute -------------------------------------------------------------------------


async def test_a_token_flooding_new_chats_is_refused_past_its_rate_while_its_reconnects_still_work(
    settings, acme
):
    settings.AGENT_NEW_CHATS_PER_MINUTE = 3
    token = await plain_token(acme)
    made = [uuid.uuid4() for _ in range(3)]
    for chat_id in made:
        socket = await hello(token, chat_id)
        assert await socket.receive_json_from(timeout=5) == {"type": "ack", "seq": 0}
        await socket.disconnect()

    flood = uuid.uuid4()
    socket = await hello(token, flood)
    code, reason = await closed_with(socket)
    assert code == CLOSE_RATE == 4429
    assert reason.startswith("at most 3 new chats a minute per agent token; retry in ")
    wait = retry_after(reason)
    assert wait is not None and 0 <= wait <= 60
    assert not await chat_exists(flood)  # nothing was made

    # A runner that lost its socket says hello again, as a new runner (acked 0) or after acks:
    # its chat is there, so it is never counted, however many new chats were refused.
    for acked in (0, 0, 0):
        back = await hello(token, made[0], acked)
        assert await back.receive_json_from(timeout=5) == {"type": "ack", "seq": 0}
        await back.disconnect()


async def test_another_tokens_new_chats_are_not_limited_by_a_flooding_one(settings, acme):
    settings.AGENT_NEW_CHATS_PER_MINUTE = 1
    flooding, other = await plain_token(acme), await plain_token(acme)
    await (await hello(flooding, uuid.uuid4())).disconnect()
    code, _ = await closed_with(await hello(flooding, uuid.uuid4()))
    assert code == CLOSE_RATE
    socket = await hello(other, uuid.uuid4())
    assert await socket.receive_json_from(timeout=5) == {"type": "ack", "seq": 0}
    await socket.disconnect()


async def test_a_flood_of_refused_new_chats_is_one_log_line(settings, acme, caplog):
    settings.AGENT_NEW_CHATS_PER_MINUTE = 1
    token = await plain_token(acme)
    await (await hello(token, uuid.uuid4())).disconnect()
    caplog.set_level(logging.WARNING, logger="activity.sockets.floods")
    for _ in range(20):
        code, _ = await closed_with(await hello(token, uuid.uuid4()))
        assert code == CLOSE_RATE
    said = [r for r in caplog.records if r.name == "activity.sockets.floods"]
    assert len(said) == 1
    assert "refused new chats of agent token" in said[0].getMessage()


# --- the hello's deadline -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"), [("/ws/agent/", TokenKind.AGENT), ("/ws/host/", TokenKind.HOST)]
)
async def test_a_socket_that_authenticates_and_never_says_hello_is_closed_after_the_timeout(
    settings, acme, path, kind
):
    settings.HELLO_TIMEOUT_SECONDS = 0.2
    socket = agent_socket(await plain_token(acme, kind), path)
    assert (await socket.connect())[0]
    started = time.monotonic()
    code, reason = await closed_with(socket)  # silent: the server closes it
    assert time.monotonic() - started >= 0.2
    assert (code, reason) == (CLOSE_PROTOCOL, "no hello within 0.2 s")
    await socket.disconnect()


async def test_the_hello_timer_ends_with_the_hello_and_with_a_socket_that_closes_first(
    settings, acme, monkeypatch
):
    settings.HELLO_TIMEOUT_SECONDS = 30
    timers: list[asyncio.Task[Any]] = []
    real = consumers.TokenRelay.wait_for_hello

    async def recorded(self: consumers.TokenRelay[Any], whose: str) -> None:
        timers.append(asyncio.current_task())  # type: ignore[arg-type]
        await real(self, whose)

    monkeypatch.setattr(consumers.TokenRelay, "wait_for_hello", recorded)
    token = await plain_token(acme)
    said = await hello(token, uuid.uuid4())
    assert await said.receive_json_from(timeout=5) == {"type": "ack", "seq": 0}
    silent = agent_socket(token)
    assert (await silent.connect())[0]
    await silent.disconnect()  # gone before its hello: its timer goes with it
    await asyncio.sleep(0)  # one turn of the loop for the cancellations to land
    assert len(timers) == 2 and all(timer.cancelled() for timer in timers)
    await said.disconnect()


# --- sockets at once ----------------------------------------------------------------------------


async def browser_headers(user: User) -> list[tuple[bytes, bytes]]:
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    return [(b"host", b"localhost"), ORIGIN, (b"cookie", cookie.encode())]


async def needs_socket(headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, "/ws/needs/", headers=headers)
    assert (await socket.connect())[0]
    return socket


async def test_the_socket_of_one_person_past_the_limit_is_refused_and_one_closing_frees_a_slot(
    settings, acme, acme_approver
):
    settings.SOCKETS_PER_PERSON = 3
    token = await plain_token(acme)
    chat_id = uuid.uuid4()
    agent = await hello(token, chat_id)
    await agent.receive_json_from(timeout=5)
    headers = await browser_headers(acme_approver)

    page = WebsocketCommunicator(application, f"/ws/chats/{chat_id}/", headers=headers)
    assert (await page.connect())[0]
    await page.send_json_to({"since": 0})
    assert "to" in await page.receive_json_from(timeout=5)  # a chat page
    inbox = WebsocketCommunicator(application, "/ws/inbox/", headers=headers)
    assert (await inbox.connect())[0]
    assert "content" in await inbox.receive_json_from(timeout=5)  # the inbox
    needs = await needs_socket(headers)
    assert "counts" in await needs.receive_json_from(timeout=5)  # every page's needs socket

    one_more = await needs_socket(headers)  # the fourth of one person's sockets
    code, reason = await closed_with(one_more)
    assert code == CLOSE_RATE
    assert reason == "at most 3 sockets open at once per person; retry later"
    await one_more.disconnect()

    await inbox.disconnect()  # a tab closed: its slot is free
    again = await needs_socket(headers)
    assert "counts" in await again.receive_json_from(timeout=5)
    for socket in (again, needs, page, agent):
        await socket.disconnect()


async def test_another_persons_sockets_are_not_limited_by_one_who_opened_too_many(
    settings, acme_approver, acme_viewer
):
    settings.SOCKETS_PER_PERSON = 1
    flooder, other = await browser_headers(acme_approver), await browser_headers(acme_viewer)
    first = await needs_socket(flooder)
    await first.receive_json_from(timeout=5)
    code, _ = await closed_with(await needs_socket(flooder))
    assert code == CLOSE_RATE
    theirs = await needs_socket(other)
    assert "counts" in await theirs.receive_json_from(timeout=5)
    await theirs.disconnect()
    await first.disconnect()


@pytest.mark.parametrize(
    ("path", "kind", "limit"),
    [
        ("/ws/agent/", TokenKind.AGENT, "SOCKETS_PER_TOKEN"),
        ("/ws/host/", TokenKind.HOST, "HOST_SOCKETS_PER_TOKEN"),
    ],
)
async def test_a_tokens_socket_past_the_limit_is_refused_and_one_closing_frees_a_slot(
    settings, acme, caplog, path, kind, limit
):
    setattr(settings, limit, 2)
    issued: tuple[AgentToken, str] = await database_sync_to_async(AgentToken.issue)(
        acme, "laptop", kind
    )
    token = issued[1]
    opened = []
    for n in (1, 2):
        socket = agent_socket(token, path)
        assert (await socket.connect())[0]  # accepted first, then authenticated
        await slots_taken(f"{kind.value}-token:{issued[0].pk}", n)
        opened.append(socket)
    caplog.set_level(logging.WARNING, logger="activity.sockets.floods")
    for _ in range(5):  # a flood: each refused, one line said
        refused = agent_socket(token, path)
        assert (await refused.connect())[0]
        code, reason = await closed_with(refused)
        assert code == CLOSE_RATE
        assert reason == f"at most 2 sockets open at once per {kind.value} token; retry later"
        await refused.disconnect()
    assert len([r for r in caplog.records if r.name == "activity.sockets.floods"]) == 1

    await opened.pop().disconnect()
    if kind == TokenKind.AGENT:  # the freed slot takes a runner that says hello
        back = await hello(token, uuid.uuid4())
        assert await back.receive_json_from(timeout=5) == {"type": "ack", "seq": 0}
    else:
        back = agent_socket(token, path)
        assert (await back.connect())[0]
        await back.send_json_to({"type": "nonsense"})  # no hello: closed as such, not as too many
        assert (await closed_with(back))[0] == CLOSE_PROTOCOL
    for socket in (back, *opened):
        await socket.disconnect()


async def slots_taken(whose: str, n: int) -> None:
    """Wait until ``whose`` has ``n`` sockets counted (a socket is accepted before its token is
    looked at and its slot taken)."""
    async with asyncio.timeout(5):
        while True:
            found = watching.store(floods.SLOTS).members([whose], time.time())[whose]
            if len(found) == n:
                return
            await asyncio.sleep(0.01)


async def test_the_slots_of_a_process_that_died_expire(settings, monkeypatch):
    settings.SOCKETS_PER_PERSON = 2
    for _ in range(2):  # two sockets of a process that was killed: never freed nor renewed
        slot = floods.person_slot(4242)
        assert await slot.take()
    assert not await floods.person_slot(4242).take()
    later = time.time() + watching.expiry() + 1
    monkeypatch.setattr(time, "time", lambda: later)  # the store's clock, and the cache's
    slot = floods.person_slot(4242)
    assert await slot.take()
    await slot.free()
