"""A frame that is slow to mask holds up nobody but its own runner.

Masking is linear (docs/secrets.md), but a long frame still takes a while, and it used to run on
the server's event loop: every socket and page of the process waited. The server here masks a
marked string in ``SLOW_MASK_SECONDS`` and notes when it starts and ends
(tests/slow_mask_asgi.py); while it masks, a page of another chat is served and another
runner's frame is acknowledged; the slow frame is acknowledged after, with its text stored.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from websockets.sync.client import ClientConnection, connect

from activity.models import AgentToken, Role, ToolActivity, Workspace
from activity.sockets.pipeline import INLINE_CHARS
from tests import frames
from tests.factories import run
from tests.liveserver import Server
from tests.members import member
from tests.slow_mask_asgi import SLOW_MARKER

pytestmark = pytest.mark.django_db(transaction=True)
SLOW_SECONDS = 5


@pytest.fixture
def said(tmp_path: Path) -> Path:
    """Where the server notes when it starts and ends masking the slow frame."""
    return tmp_path / "masking.log"


@pytest.fixture
def server(tmp_path: Path, said: Path) -> Iterator[Server]:
    running = Server(
        tmp_path / "daphne.log",
        env={"SLOW_MASK_SECONDS": str(SLOW_SECONDS), "SLOW_MASK_LOG": str(said)},
        app="tests.slow_mask_asgi:application",
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def runner(server: Server, token: str, chat_id: uuid.UUID) -> Iterator[ClientConnection]:
    """A runner's socket, its hello acknowledged."""
    with connect(
        f"{server.ws_url}/ws/agent/",
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=None,
        open_timeout=10,
    ) as socket:
        socket.send(json.dumps(frames.hello(chat_id)))
        assert json.loads(socket.recv(timeout=10))["type"] == "ack"
        yield socket


def acked(socket: ClientConnection, seq: int, within: float) -> None:
    while True:
        reply = json.loads(socket.recv(timeout=within))
        assert reply["type"] == "ack", reply
        if reply["seq"] >= seq:
            return


def masking(said: Path) -> list[str]:
    return said.read_text().split() if said.exists() else []


def until_masking_started(said: Path, within: float = 10) -> None:
    deadline = time.monotonic() + within
    while "started" not in masking(said):
        assert time.monotonic() < deadline, "the server never started masking the slow frame"
        time.sleep(0.01)


def page(server: Server, user: User, path: str) -> str:
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    request = urllib.request.Request(f"{server.url}{path}", headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=SLOW_SECONDS * 4) as answer:
        return str(answer.read().decode())


def test_a_frame_slow_to_mask_holds_up_neither_another_chats_page_nor_another_runner(
    server: Server, said: Path
):
    acme = Workspace.objects.create(slug="acme", name="Acme")
    alice = member(acme, "alice", Role.APPROVER)
    token = AgentToken.issue(acme, "slow")[1]
    other = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Other run"))
    slow_chat, quick_chat = uuid.uuid4(), uuid.uuid4()
    output = SLOW_MARKER + " " + "x" * (INLINE_CHARS * 2)  # long: masked off the event loop
    call = frames.tool_call(2, "call-1", "Read a huge file", status="completed", rawOutput=output)

    with runner(server, token, slow_chat) as slow, runner(server, token, quick_chat) as quick:
        slow.send(json.dumps(frames.turn_started(1, uuid.uuid4(), uuid.uuid4())))
        acked(slow, 1, within=10)
        slow.send(json.dumps(call))
        until_masking_started(said)

        assert "Other run" in page(server, alice, f"/chats/{other.pk}/")
        assert masking(said) == ["started"], "the page waited for the slow frame"
        quick.send(json.dumps(frames.turn_started(1, uuid.uuid4(), uuid.uuid4())))
        acked(quick, 1, within=SLOW_SECONDS * 4)
        assert masking(said) == ["started"], "the other runner waited for the slow frame"

        acked(slow, 2, within=SLOW_SECONDS * 4)
    assert masking(said) == ["started", "ended"]
    stored = ToolActivity.objects.get(chat_id=slow_chat).agent_output
    assert stored is not None and stored.startswith(SLOW_MARKER)
