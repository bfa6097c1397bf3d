"""One heartbeat per process renews every open socket (activity/sockets/beats.py), and who a
browser's socket belongs to is read once from its session cookie (activity/sockets/signin.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from activity.push import watching
from activity.sockets import beats, signin
from activity.wire.frames import CLOSE_UNAUTHORIZED
from koruweb.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
BEAT = 0.05


class Socket:
    """What the heartbeat renews: counts its renewals, or fails them."""

    def __init__(self, fails: bool = False) -> None:
        self.renewed = 0
        self.fails = fails

    async def renew(self) -> None:
        self.renewed += 1
        if self.fails:
            raise RuntimeError("Redis is away")


@pytest.fixture(autouse=True)
def fast_beat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watching, "heartbeat", lambda: BEAT)


def beat_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "run"]  # type: ignore[union-attr]


async def until(condition: Any) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(BEAT / 5)


async def test_every_socket_is_renewed_on_one_heartbeat_task_and_a_failing_one_stops_none():
    sockets = [Socket(), Socket(fails=True), *(Socket() for _ in range(beats.AT_ONCE + 5))]
    for socket in sockets:
        beats.add(socket)
    await until(lambda: all(s.renewed >= 2 for s in sockets))
    assert len(beat_tasks()) == 1 and beats.registered() == sockets
    for socket in sockets:
        beats.discard(socket)
    assert not beats.beating() and beats.registered() == []
    await until(lambda: not beat_tasks())


async def test_a_socket_taken_off_is_renewed_no_more_and_a_new_one_starts_the_heartbeat_again():
    gone, staying = Socket(), Socket()
    beats.add(gone)
    beats.add(staying)
    beats.discard(gone)
    await until(lambda: staying.renewed >= 2)
    assert gone.renewed == 0
    beats.discard(staying)
    assert not beats.beating()
    again = Socket()
    beats.add(again)
    assert beats.beating()
    await until(lambda: again.renewed >= 1)
    beats.discard(again)


@pytest.mark.parametrize(
    "cookie", [b"sessionid=", b"sessionid=not-a-session", b'sessionid="\\\x00;;', b"\xff\xfe=1"]
)
async def test_a_socket_whose_cookie_signs_nobody_in_is_closed_as_unauthorized(cookie: bytes):
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost"), (b"cookie", cookie)]
    socket = WebsocketCommunicator(application, f"/ws/chats/{uuid.uuid4()}/", headers=headers)
    connected, _ = await socket.connect()
    assert connected
    output = await socket.receive_output(timeout=5)
    assert output["type"] == "websocket.close" and output["code"] == CLOSE_UNAUTHORIZED
    await socket.disconnect()


async def test_a_signed_in_socket_knows_its_person_and_its_sessions_key(acme_viewer: Any):
    client = Client()
    await database_sync_to_async(client.force_login)(acme_viewer)
    key = client.cookies["sessionid"].value
    scope = {"headers": [(b"cookie", f"other=1; sessionid={key}".encode())]}
    assert signin.cookie(scope, "sessionid") == key
    user = await database_sync_to_async(signin.person)(key)
    assert user.pk == acme_viewer.pk


def test_a_sessions_cookie_is_found_beside_another_sites_malformed_one():
    scope = {"headers": [(b"cookie", b'theme="dark; x=1; weird=a"b; sessionid=abc123')]}
    assert signin.cookie(scope, "sessionid") == "abc123"
    assert signin.cookie({"headers": []}, "sessionid") == ""
