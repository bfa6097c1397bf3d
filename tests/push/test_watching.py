"""Who is watching a run: one entry per open page, one name per person, gone when the page
closes or its process dies, and every page of the chat told when the set changes.

Each test runs twice: with the entries in this process's memory (the embedded mode) and in
Redis (team mode; ``KORUWEB_TEST_REDIS_URL``). Heartbeats are 1 s, so an entry nobody renews
is gone 2.5 s after its last renewal.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

import pytest
import redis
import redis.connection
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.cache.backends.locmem import LocMemCache
from django.db import connections
from django.test import Client

from activity.models import Chat, Workspace
from activity.push import broadcast, watching
from activity.sockets import beats
from activity.sockets.browsers import ViewerConsumer
from koruweb.asgi import application
from tests import frames
from tests.factories import run
from tests.liveserver import REDIS_URL

# Watching lives in the cache and the channel layer: the database is not what these test.
pytestmark = [pytest.mark.once, pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://localhost")


# A heartbeat for the tests that count entries rather than wait for one to expire: on a busy
# machine a renewal a second late would let an open page's entry expire under them.
UNHURRIED = 10


@pytest.fixture(autouse=True, params=["memory", "redis"])
def kept_in(request: pytest.FixtureRequest, settings: Any) -> str:
    """Where the entries are kept: this process's memory, or Redis under a prefix of its own."""
    settings.WATCHING_HEARTBEAT_SECONDS = 1
    if request.param == "redis":
        settings.CACHES = {
            **settings.CACHES,
            "watching": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": REDIS_URL,
                "KEY_PREFIX": f"koruweb-test-{uuid.uuid4().hex[:8]}",
                "OPTIONS": settings.REDIS_CLIENT,
            },
        }
    return str(request.param)


@pytest.fixture
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def new_chat(workspace: Workspace) -> Chat:
    return run(workspace, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix it"))


async def page_socket(user: User, chat_id: uuid.UUID, asked: bool = True) -> WebsocketCommunicator:
    """A chat page's socket, logged in as ``user``; ``asked``: it shows who is watching."""
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    path = f"/ws/chats/{chat_id}/" + ("?watching=1" if asked else "")
    headers = [(b"host", b"localhost"), ORIGIN, (b"cookie", cookie)]
    return WebsocketCommunicator(application, path, headers=headers)


async def opened(user: User, chat_id: uuid.UUID, asked: bool = True) -> WebsocketCommunicator:
    socket = await page_socket(user, chat_id, asked)
    connected, _ = await socket.connect()
    assert connected
    return socket


async def listed(socket: WebsocketCommunicator, within: float = 5) -> list[str]:
    """The names in the next list of watchers the page is sent (pushes are passed over)."""
    deadline = time.monotonic() + within
    while True:
        message = await socket.receive_json_from(timeout=max(0.01, deadline - time.monotonic()))
        if "watching" in message:
            assert set(message) == {"watching"}  # no version: the chain is left alone
            return re.findall(r'data-name="([^"]*)"', message["watching"])


async def until_listed(socket: WebsocketCommunicator, names: list[str], within: float = 5) -> None:
    """Until the page is sent a list of exactly ``names``, in that order."""
    deadline = time.monotonic() + within
    seen: list[list[str]] = []
    while not seen or seen[-1] != names:
        try:
            seen.append(await listed(socket, deadline - time.monotonic()))
        except TimeoutError:
            raise AssertionError(f"never listed {names}; the lists sent: {seen}") from None


async def names(chat_id: uuid.UUID) -> list[str]:
    users = await database_sync_to_async(watching.watchers)(chat_id)
    return [u.username for u in users]


async def entries(chat_id: uuid.UUID) -> list[str]:
    found = await asyncio.to_thread(watching.store().members, [chat_id], time.time())
    return found[chat_id]


async def until_entries(chat_id: uuid.UUID, count: int, within: float = 5) -> None:
    """Until the chat has ``count`` entries: one per open page, each written once its socket
    has joined (a busy machine may write one after the list that named its person)."""
    deadline = time.monotonic() + within
    while len(found := await entries(chat_id)) != count:
        assert time.monotonic() < deadline, f"{len(found)} entries, never {count}"
        await asyncio.sleep(0.02)


async def closed(*sockets: WebsocketCommunicator) -> None:
    for socket in sockets:
        await socket.disconnect(timeout=10)  # its consumer done, however busy the machine


# --- the sockets -------------------------------------------------------------------------------


async def test_two_pages_of_one_person_count_once(acme, acme_viewer, close_connections, settings):
    settings.WATCHING_HEARTBEAT_SECONDS = UNHURRIED  # no entry expires while it counts
    chat = await new_chat(acme)
    first = await opened(acme_viewer, chat.pk)
    second = await opened(acme_viewer, chat.pk)
    try:
        assert await listed(first) == ["bob"]
        assert await listed(second) == ["bob"]  # sent once its own entry was in
        assert len(await entries(chat.pk)) == 2
        assert await names(chat.pk) == ["bob"]
        assert await asyncio.to_thread(watching.counts, [chat.pk]) == {chat.pk: 1}
    finally:
        await closed(first, second)


async def test_a_second_person_opening_the_page_is_shown_to_the_first(
    acme, acme_viewer, acme_approver, close_connections
):
    chat = await new_chat(acme)
    alices = await opened(acme_approver, chat.pk)
    try:
        assert await listed(alices) == ["alice"]
        bobs = await opened(acme_viewer, chat.pk)
        await until_listed(alices, ["alice", "bob"])  # ordered by name
        assert await listed(bobs) == ["alice", "bob"]
        await bobs.disconnect()
    finally:
        await closed(alices)


async def test_a_closed_page_leaves_and_a_person_goes_with_their_last_page(
    acme, acme_viewer, acme_approver, close_connections, settings
):
    settings.WATCHING_HEARTBEAT_SECONDS = UNHURRIED  # only a closed page may leave here
    chat = await new_chat(acme)
    alices = await opened(acme_approver, chat.pk)
    bobs = [await opened(acme_viewer, chat.pk) for _ in range(2)]
    try:
        await until_listed(alices, ["alice", "bob"])
        await until_entries(chat.pk, 3)  # bob's second page may be listed after his first
        await bobs[0].disconnect(timeout=10)  # returns once the consumer is done: its entry is gone
        assert len(await entries(chat.pk)) == 2
        assert await names(chat.pk) == ["alice", "bob"]  # bob still has a page open
        await bobs[1].disconnect(timeout=10)
        await until_listed(alices, ["alice"])
        assert await names(chat.pk) == ["alice"] and len(await entries(chat.pk)) == 1
    finally:
        await closed(alices)
    assert await entries(chat.pk) == []


async def test_a_page_on_a_process_that_died_leaves_every_list_when_its_entry_expires(
    acme, acme_viewer, acme_approver, close_connections
):
    chat = await new_chat(acme)
    bob = acme_viewer
    alices = await opened(acme_approver, chat.pk)
    try:
        assert await listed(alices) == ["alice"]
        # bob's page on a process killed since: an entry that nobody renews or removes
        ghost = watching.entry(bob.pk, "killed")
        written = time.time()
        await asyncio.to_thread(watching.store().put, chat.pk, ghost, written + watching.expiry())
        await until_listed(alices, ["alice", "bob"])  # alice's process looks on its heartbeat
        await until_listed(alices, ["alice"], within=watching.expiry() + 3)
        assert time.time() >= written + watching.expiry()
        # … by then alice's own first entry would have expired too: her socket renews it
        assert await names(chat.pk) == ["alice"]
        assert ghost not in await entries(chat.pk)
    finally:
        await closed(alices)


async def test_an_outsiders_page_is_refused_and_never_counted(
    acme, acme_viewer, outsider, close_connections
):
    chat = await new_chat(acme)
    bobs = await opened(acme_viewer, chat.pk)
    try:
        assert await listed(bobs) == ["bob"]
        intruder = await page_socket(outsider, chat.pk)
        await intruder.connect()
        assert (await intruder.receive_output(timeout=5))["code"] == 4403
        assert await names(chat.pk) == ["bob"] and len(await entries(chat.pk)) == 1
    finally:
        await closed(bobs)


async def test_a_socket_that_did_not_ask_for_the_list_is_counted_but_never_sent_it(
    acme, acme_viewer, acme_approver, close_connections
):
    chat = await new_chat(acme)
    bobs = await opened(acme_viewer, chat.pk, asked=False)  # bench/, a test's bare socket
    alices = await opened(acme_approver, chat.pk)
    try:
        await until_listed(alices, ["alice", "bob"])  # the room handed it to bob's socket too
        version = await database_sync_to_async(lambda: Chat.objects.get(pk=chat.pk).version)()
        await broadcast.changed(chat.pk, 0, version)
        push = await bobs.receive_json_from(timeout=5)
        while push.get("content") == "" and push["from"] == push["to"]:  # a room's heartbeat
            push = await bobs.receive_json_from(timeout=5)
        assert push["from"] == 0 and push["to"] == version  # the push, the list never came
    finally:
        await closed(bobs, alices)


async def test_a_pages_renewals_end_with_its_consumer_even_one_that_dies(
    acme, acme_viewer, monkeypatch, close_connections
):
    chat = await new_chat(acme)
    started: list[watching.Watch] = []
    start = watching.Watch.start

    async def recorded(self: watching.Watch) -> None:
        started.append(self)
        await start(self)

    async def broken(self: ViewerConsumer, **_: Any) -> None:
        raise RuntimeError("a bug in the receive loop")

    monkeypatch.setattr(watching.Watch, "start", recorded)
    monkeypatch.setattr(ViewerConsumer, "receive", broken)
    bobs = await opened(acme_viewer, chat.pk)
    assert await listed(bobs) == ["bob"]
    await bobs.send_to(text_data="anything")
    with pytest.raises(RuntimeError):
        await bobs.wait(timeout=5)
    [watch] = started
    assert id(watch.viewer) not in {id(s) for s in beats.registered()} and not beats.beating()
    assert await entries(chat.pk) == []


# --- the store and the pages -------------------------------------------------------------------


def test_counts_for_a_page_of_runs_take_one_round_trip(kept_in, monkeypatch):
    chats = [uuid.uuid4() for _ in range(50)]
    store = watching.store()
    expires = time.time() + 60
    for n, chat_id in enumerate(chats[:10]):
        for user_id in range(n + 1):
            store.put(chat_id, watching.entry(user_id, "a"), expires)
    store.put(chats[0], watching.entry(0, "second-tab"), expires)
    store.put(chats[1], watching.entry(7, "expired"), time.time() - 1)
    trips: list[str] = []
    if kept_in == "redis":
        send: Any = redis.connection.Connection.send_packed_command

        def sent(self: Any, command: Any, check_health: bool = True) -> None:
            trips.append("redis")
            send(self, command, check_health)

        monkeypatch.setattr(redis.connection.Connection, "send_packed_command", sent)
    else:
        get_many = LocMemCache.get_many

        def got(self: Any, keys: Any, version: Any = None) -> Any:
            trips.append("cache")
            return get_many(self, keys, version)

        monkeypatch.setattr(LocMemCache, "get_many", got)
    counted = watching.counts(chats)
    assert len(trips) == 1
    assert counted == {c: (n + 1 if n < 10 else 0) for n, c in enumerate(chats)}


def test_the_chat_page_lists_its_reader_and_whoever_else_watches(acme, as_viewer, acme_approver):
    chat = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Fix it"))
    html = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    region = html[html.index('id="watching"') :]
    assert "aria-live" not in html[html.index('<section id="watching"') :][:200]  # never on load
    assert re.search(r'id="watching-said"[^>]*aria-live="polite"', html)  # who comes and goes
    assert re.findall(r'data-name="([^"]*)"', region) == ["bob"]  # about to watch: listed
    assert f'/ws/chats/{chat.pk}/?watching=1"' in html
    watching.store().put(chat.pk, watching.entry(acme_approver.pk, "x"), time.time() + 60)
    html = as_viewer.get(f"/chats/{chat.pk}/").content.decode()
    region = html[html.index('id="watching"') :]
    assert re.findall(r'data-name="([^"]*)"', region) == ["alice", "bob"]
    assert "<ul" in region and 'role="list"' in region and "Watching:" in region


def test_the_runs_list_counts_the_people_watching_each_run(acme, as_viewer, acme_approver):
    watched = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Watched"))
    alone = run(acme, frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Alone"))
    bob = User.objects.get(username="bob")
    expires = time.time() + 60
    for user, socket in [(acme_approver, "a"), (bob, "b"), (bob, "c")]:
        watching.store().put(watched.pk, watching.entry(user.pk, socket), expires)
    html = as_viewer.get("/").content.decode()
    row = html[html.index(f'id="chat-{watched.pk}"') :]
    assert "2 watching" in row[: row.index("</tr>")]
    row = html[html.index(f'id="chat-{alone.pk}"') :]
    assert "watching" not in row[: row.index("</tr>")]


# --- one store per process --------------------------------------------------------------------


async def test_every_socket_of_a_process_uses_one_instance_of_the_store(kept_in: str):
    """Django's ``caches[alias]`` is one instance per async context — per socket — and each
    ``RedisCache`` instance keeps its own connection pool."""

    async def cache_seen() -> object:
        return watching.store().cache

    seen = await asyncio.gather(*(asyncio.create_task(cache_seen()) for _ in range(3)))
    assert seen[0] is seen[1] is seen[2]


async def test_open_pages_share_the_processes_connections_to_redis(
    acme, acme_viewer, settings, close_connections
):
    name = f"koruweb-test-{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        **settings.CACHES,
        "watching": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": name,
            "OPTIONS": {**settings.REDIS_CLIENT, "client_name": name},
        },
    }
    chat = await new_chat(acme)
    pages = [await opened(acme_viewer, chat.pk) for _ in range(16)]
    await until_entries(chat.pk, 16)
    clients = await asyncio.to_thread(redis.Redis.from_url(REDIS_URL).client_list)
    # a connection per thread writing at once, at most: never one per page
    assert 1 <= sum(client["name"] == name for client in clients) < len(pages) // 2
    for page in pages:
        await page.disconnect()


async def test_a_page_says_whether_it_is_looking_and_stops_when_it_closes(acme, acme_viewer):
    chat = await new_chat(acme)
    page = await opened(acme_viewer, chat.pk)
    await until_entries(chat.pk, 1)

    async def looking() -> frozenset[int]:
        return await asyncio.to_thread(watching.looking, chat.pk)

    async def until_looking(people: frozenset[int]) -> None:
        async with asyncio.timeout(5):
            while await looking() != people:
                await asyncio.sleep(0.02)

    await page.send_to(text_data='{"looking": true}')
    await until_looking(frozenset({acme_viewer.pk}))
    await page.send_to(text_data='{"looking": false}')
    await until_looking(frozenset())
    await page.send_to(text_data='{"looking": true}')
    await until_looking(frozenset({acme_viewer.pk}))
    await page.send_to(text_data='{"looking": "yes"}')  # not a boolean: ignored
    await page.disconnect()
    await until_looking(frozenset())
