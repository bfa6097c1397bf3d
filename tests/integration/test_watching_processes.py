"""Who is watching, across server processes: two Daphne processes on one database and one Redis,
a chat page on each. Each page lists the person on the other process; a page closed on one
leaves the other's list at once; a process killed with SIGKILL (no close, no cleanup) takes its
pages off every list once their entries expire — 2.5 heartbeats, and the heartbeat is 1 s here.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from websockets.sync.client import ClientConnection, connect

from activity.models import Role, Workspace
from activity.push import watching
from tests import frames
from tests.factories import run
from tests.liveserver import REDIS_URL, Server
from tests.members import member

pytestmark = pytest.mark.django_db(transaction=True)
HEARTBEAT = 1
EXPIRY = watching.EXPIRY_BEATS * HEARTBEAT


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    env = {"WATCHING_HEARTBEAT_SECONDS": str(HEARTBEAT)}
    first, second = (Server(tmp_path / f"daphne-{n}.log", redis=True, env=env) for n in (1, 2))
    try:
        first.spawn()
        second.spawn()
        first.wait_ready()
        second.wait_ready()
        yield first, second
    finally:
        first.stop()
        second.stop()


@pytest.fixture
def shared_store(settings: Any) -> None:
    """This process reads the entries where the servers keep them."""
    settings.CACHES = {
        **settings.CACHES,
        "watching": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "koruweb",
            "OPTIONS": settings.REDIS_CLIENT,
        },
    }


def cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


class Page:
    """A chat page's socket to one server, showing who watches, as live.js opens it; open
    while in a ``with`` block."""

    def __init__(self, server: Server, user: User, chat_id: uuid.UUID) -> None:
        self.session = cookie(user)
        headers = {"Cookie": f"sessionid={self.session}", "Origin": server.url}
        url = f"{server.ws_url}/ws/chats/{chat_id}/?watching=1"
        self.connection = connect(url, additional_headers=headers, open_timeout=10)
        self.seen: list[list[str]] = []

    def __enter__(self) -> Page:
        self.socket: ClientConnection = self.connection.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.__exit__(None, None, None)

    def until_listed(self, names: list[str], within: float) -> None:
        """Until the page is sent a list of exactly ``names`` (pushes are passed over)."""
        deadline = time.monotonic() + within
        while not self.seen or self.seen[-1] != names:
            try:
                message = json.loads(self.socket.recv(max(0.01, deadline - time.monotonic())))
            except TimeoutError:
                raise AssertionError(f"never listed {names}; lists: {self.seen}") from None
            if "watching" in message:
                self.seen.append(re.findall(r'data-name="([^"]*)"', message["watching"]))


def runs_list(server: Server, session: str) -> str:
    request = urllib.request.Request(f"{server.url}/", headers={"Cookie": f"sessionid={session}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


def test_a_page_on_each_process_lists_the_other_and_a_killed_process_pages_go_within_the_expiry(
    servers: tuple[Server, Server], shared_store: None
):
    first, second = servers
    acme = Workspace.objects.create(slug="acme", name="Acme")
    alice, bob, carol = (member(acme, n, Role.VIEWER) for n in ("alice", "bob", "carol"))
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix it"))
    with Page(first, alice, chat.pk) as alices, Page(second, bob, chat.pk) as bobs:
        alices.until_listed(["alice", "bob"], within=5)
        bobs.until_listed(["alice", "bob"], within=5)
        with Page(second, carol, chat.pk):
            alices.until_listed(["alice", "bob", "carol"], within=5)
            row = runs_list(first, alices.session).split(f'id="chat-{chat.pk}"')[1]
            assert "3 watching" in row.split("</tr>")[0]
        alices.until_listed(["alice", "bob"], within=5)  # carol closed hers on the second

        second.kill()  # SIGKILL: bob's socket never closes, his entry is never removed
        alices.until_listed(["alice"], within=EXPIRY + 2 * HEARTBEAT + 2)
        assert [u.username for u in watching.watchers(chat.pk)] == ["alice"]
        assert watching.counts([chat.pk]) == {chat.pk: 1}
