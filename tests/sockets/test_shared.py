"""A share link's socket (activity/sockets/shared.py): live without an account, drawn without
the team's own, ended at once when the link is revoked, expires or its run is deleted, and
bounded per link. Revocation travels on a channel-layer group, so those tests run on the
in-memory layer and on Redis (team mode)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.utils import timezone

from activity.models import Chat, ShareLink, Workspace
from activity.push import broadcast
from activity.review import shares
from activity.wire.frames import CLOSE_GONE, CLOSE_RATE
from koruweb.asgi import application
from tests import factories, frames
from tests.sockets.talk import closed_with, heard

pytestmark = [pytest.mark.django_db(transaction=True)]
HOST = (b"host", b"localhost")
ORIGIN = (b"origin", b"http://localhost")
BEAT = 0.2  # seconds between heartbeats where a test waits for one
QUIET = 0.5  # how long a socket that must hear nothing more is listened to
HIDDEN = ("comment-form", "copy-link", "watching", 'class="answer"', "alice", "drive-control")


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


@database_sync_to_async
def shared_run(workspace: Workspace, admin: User, hours: int = 24) -> tuple[Chat, str]:
    """A run alice answered a prompt of, and a link to it; the link's token."""
    chat = factories.run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Tidy the build"),
        frames.tool_call(2, "c1", "rm -rf build", kind="delete"),
    )
    return chat, shares.make(chat, admin, hours).token


@database_sync_to_async
def another_link(chat: Chat, admin: User) -> str:
    return shares.make(chat, admin, 1).token


@database_sync_to_async
def change(chat_id: uuid.UUID, *raw: dict[str, Any]) -> None:
    broadcast.announce_sync(factories.apply(chat_id, *raw).change)


async def opened(token: str, origin: tuple[bytes, bytes] = ORIGIN) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, f"/ws/shared/{token}/", headers=[HOST, origin])
    connected, _ = await socket.connect()
    assert connected
    return socket


async def joined(token: str) -> WebsocketCommunicator:
    """A link's page once its socket is in the run's room: it asks what it missed, as live.js
    does on every connect, and the answer comes only once the socket has joined."""
    socket = await opened(token)
    await socket.send_to(text_data=json.dumps({"since": 0}))
    await heard(socket, lambda m: m.get("from") == 0)
    return socket


async def member_page(user: User, chat_id: uuid.UUID) -> WebsocketCommunicator:
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    path = f"/ws/chats/{chat_id}/?watching=1"
    socket = WebsocketCommunicator(application, path, headers=[HOST, ORIGIN, (b"cookie", cookie)])
    assert (await socket.connect())[0]
    return socket


async def test_a_link_page_hears_the_run_live_drawn_without_the_teams_own(
    acme, acme_admin, acme_approver
):
    chat, token = await shared_run(acme, acme_admin)
    visitor, member = await joined(token), await member_page(acme_approver, chat.pk)
    try:
        await heard(member, lambda m: "watching" in m)  # the member's page is listed …
        await change(
            chat.pk,
            frames.tool_call(3, "c2", "make test", kind="execute"),
            frames.say(4, "All green."),
        )
        push = await heard(visitor, lambda m: "All green." in m.get("content", ""))
        assert "make test" in push["content"]
        for hidden in HIDDEN:
            assert hidden not in push["content"], hidden
        drawn_for_member = await heard(member, lambda m: "All green." in m.get("content", ""))
        assert "comment-form" in drawn_for_member["content"]  # … the team's page has its own
        assert push["to"] == drawn_for_member["to"]
        await visitor.send_to(text_data=json.dumps({"since": 0}))  # a catch-up, drawn alike
        caught = await heard(visitor, lambda m: m.get("from") == 0)
        assert "Tidy the build" in caught["content"] and "All green." in caught["content"]
        for hidden in HIDDEN:
            assert hidden not in caught["content"], hidden
        assert await visitor.receive_nothing(timeout=QUIET)  # never who is watching
    finally:
        await visitor.disconnect()
        await member.disconnect()


async def test_revoking_a_link_closes_its_open_pages_at_once_and_no_others(layer, acme, acme_admin):
    chat, token = await shared_run(acme, acme_admin)
    other = await another_link(chat, acme_admin)
    pages, elsewhere = [await joined(token), await joined(token)], await joined(other)
    try:
        link = await database_sync_to_async(ShareLink.objects.get)(token_hash=shares.digest(token))
        await database_sync_to_async(shares.revoke)(link, acme_admin)
        for page in pages:
            assert await closed_with(page) == CLOSE_GONE
        await change(chat.pk, frames.say(3, "Still here."))
        assert await heard(elsewhere, lambda m: "Still here." in m.get("content", ""))
        assert await closed_with(await opened(token)) == CLOSE_GONE  # and it opens nothing
    finally:
        for socket in (*pages, elsewhere):
            await socket.disconnect()


async def test_a_link_that_expires_while_open_closes_its_page(acme, acme_admin):
    chat, token = await shared_run(acme, acme_admin)
    soon = timezone.now() + timedelta(seconds=0.5)
    await database_sync_to_async(ShareLink.objects.update)(expires_at=soon)
    page = await opened(token)
    try:
        assert await closed_with(page) == CLOSE_GONE
    finally:
        await page.disconnect()


async def test_a_revocation_whose_message_was_lost_is_found_on_the_next_heartbeat(
    settings, acme, acme_admin
):
    settings.WATCHING_HEARTBEAT_SECONDS = BEAT
    chat, token = await shared_run(acme, acme_admin)
    page = await opened(token)
    try:
        await database_sync_to_async(ShareLink.objects.update)(revoked_at=timezone.now())
        assert await closed_with(page) == CLOSE_GONE
    finally:
        await page.disconnect()


async def test_a_link_holds_at_most_its_number_of_open_pages(settings, acme, acme_admin):
    settings.SHARE_SOCKETS_PER_LINK = 2
    chat, token = await shared_run(acme, acme_admin)
    first, second = await joined(token), await joined(token)
    third = await opened(token)
    try:
        assert await closed_with(third) == CLOSE_RATE
        await first.disconnect()
        again = await joined(token)  # a page closed frees its place
        await change(chat.pk, frames.say(3, "Room again."))
        assert await heard(again, lambda m: "Room again." in m.get("content", ""))
        await again.disconnect()
    finally:
        await second.disconnect()
        await third.disconnect()


async def test_a_link_that_does_not_work_or_another_sites_page_gets_no_socket(acme, acme_admin):
    chat, token = await shared_run(acme, acme_admin)
    assert await closed_with(await opened("not-a-link")) == CLOSE_GONE
    foreign = WebsocketCommunicator(
        application, f"/ws/shared/{token}/", headers=[HOST, (b"origin", b"http://evil.test")]
    )
    connected, _ = await foreign.connect()
    assert not connected


async def test_deleting_a_run_closes_the_pages_open_on_its_links(layer, acme, acme_admin):
    chat, token = await shared_run(acme, acme_admin)
    page = await opened(token)
    try:
        await database_sync_to_async(
            lambda: Chat.objects.filter(pk=chat.pk).update(runner_connected=False)
        )()
        admin = Client()
        await database_sync_to_async(admin.force_login)(acme_admin)
        deleted = await database_sync_to_async(admin.post)(f"/chats/{chat.pk}/delete")
        assert deleted.status_code == 302
        assert await closed_with(page) == CLOSE_GONE
        assert not await database_sync_to_async(ShareLink.objects.exists)()
    finally:
        await page.disconnect()


@database_sync_to_async
def version_of(chat_id: uuid.UUID) -> int:
    return int(Chat.objects.get(pk=chat_id).version)


async def test_a_link_page_open_during_a_burst_ends_at_the_runs_version_with_every_change(
    acme, acme_admin
):
    """A page follows the push chain as live.js does (applies a push that starts where it
    stands, asks for what it missed on a gap); a burst of changes, each pushed at once, while
    two pages of the link are open, leaves both at the run's version, with every change's
    text drawn for them."""
    chat, token = await shared_run(acme, acme_admin)
    pages = [await joined(token), await joined(token)]
    shown = [await version_of(chat.pk)] * len(pages)
    texts: list[list[str]] = [[], []]
    try:
        for seq in range(3, 43):
            await change(chat.pk, frames.tool_call(seq, f"burst-{seq}", f"step {seq}"))
        final = await version_of(chat.pk)
        for n, page in enumerate(pages):
            async with asyncio.timeout(10):
                while shown[n] < final:
                    push = json.loads((await page.receive_output(timeout=5))["text"])
                    if push.get("from") == shown[n] and push["to"] > shown[n]:
                        assert "reload" not in push and push.get("parts", 1) == 1
                        shown[n] = push["to"]
                        texts[n].append(push["content"])
                    elif push["to"] > shown[n]:  # a gap: ask, as live.js does
                        await page.send_to(text_data=json.dumps({"since": shown[n]}))
        for n in range(len(pages)):
            drawn = "".join(texts[n])
            assert all(f"step {seq}" in drawn for seq in range(3, 43))
            assert "comment-form" not in drawn
    finally:
        for page in pages:
            await page.disconnect()
