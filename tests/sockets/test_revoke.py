"""Access revoked at once: a browser's sockets never outlive its person's access (issue 22).

Logging out closes that session's chat, inbox and needs sockets; removing a member closes their
chat pages of the workspace and moves their inbox and needs sockets to the workspaces they have
left; deleting a run closes its pages; a session that ends behind a socket's back is found on
the socket's next heartbeat. The revocations travel on channel-layer groups, so each test that
sends one runs on the in-memory layer and on Redis (team mode: every process hears them).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import connections
from django.test import Client

from activity.core import groups
from activity.live import presence
from activity.models import Chat, Membership, Role, Workspace
from activity.push import broadcast, watching
from activity.sockets import revoke
from activity.wire.frames import CLOSE_FORBIDDEN, CLOSE_GONE, CLOSE_UNAUTHORIZED
from koruweb.asgi import application
from tests import factories, frames
from tests.sockets.talk import closed_with, heard

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://localhost")
BEAT = 0.2  # seconds between heartbeats, in the tests of what a heartbeat finds
QUIET = 0.5  # how long a socket that must hear nothing more is listened to


@pytest.fixture(autouse=True)
async def close_connections():
    yield
    await database_sync_to_async(connections.close_all)()


# --- the people's browsers and what they hear ---------------------------------------------------


async def browser(user: User) -> Client:
    """A browser signed in as ``user``: one session of its own."""
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    return client


async def opened(client: Client, path: str) -> WebsocketCommunicator:
    """A socket of ``client``'s pages, with its session cookie."""
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"host", b"localhost"), ORIGIN, (b"cookie", cookie)]
    socket = WebsocketCommunicator(application, path, headers=headers)
    assert (await socket.connect())[0]
    return socket


def chat_page(chat_id: uuid.UUID) -> str:
    return f"/ws/chats/{chat_id}/?watching=1"


async def watchers_listed(socket: WebsocketCommunicator, names: list[str]) -> None:
    """Until the page is sent a list of exactly these watchers."""
    seen: list[list[str]] = []
    while not seen or seen[-1] != names:
        try:
            message = await heard(socket, lambda m: "watching" in m)
        except TimeoutError:
            raise AssertionError(f"never listed {names}; the lists sent: {seen}") from None
        seen.append(re.findall(r'data-name="([^"]*)"', message["watching"]))


async def watching_now(chat_id: uuid.UUID) -> set[int]:
    entries = await asyncio.to_thread(watching.store().members, [chat_id], time.time())
    return set(watching.people_in(entries[chat_id]))


async def close_all(*sockets: WebsocketCommunicator) -> None:
    for socket in sockets:
        await socket.disconnect()


# --- what happens in the workspace ----------------------------------------------------------


def asking() -> list[dict[str, Any]]:
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    return [
        frames.turn_started(1, attempt, reply, prompt="Tidy the build"),
        frames.tool_call(2, "c1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "c1", "rm -rf build"),
    ]


@database_sync_to_async
def new_run(workspace: Workspace) -> Chat:
    """A run whose runner has left (so its admin may delete it)."""
    chat = factories.run(workspace, frames.turn_started(1, uuid.uuid4(), uuid.uuid4()))
    presence.disconnect(chat.pk, "runner")
    return chat


@database_sync_to_async
def prompt_opens(workspace: Workspace) -> uuid.UUID:
    """A new run in ``workspace`` asks a person, and everyone who may hear of it is told."""
    chat = factories.run(workspace)
    broadcast.announce_sync(factories.apply(chat.pk, *asking()).change)
    return chat.pk


@database_sync_to_async
def say_in(chat_id: uuid.UUID, seq: int) -> None:
    """The agent says something in the run: its pages are pushed the new text."""
    broadcast.announce_sync(factories.apply(chat_id, frames.say(seq, "Done.")).change)


@database_sync_to_async
def post(client: Client, path: str, data: dict[str, str] | None = None) -> int:
    return client.post(path, data or {}).status_code


@database_sync_to_async
def membership_of(user: User, workspace: Workspace) -> Membership:
    return Membership.objects.get(user=user, workspace=workspace)


# --- logging out ------------------------------------------------------------------------------


async def test_logging_out_closes_that_sessions_chat_inbox_and_needs_sockets_and_no_others(
    layer, acme, acme_approver
):
    chat = await new_run(acme)
    alice, her_phone = await browser(acme_approver), await browser(acme_approver)
    page = await opened(alice, chat_page(chat.pk))
    inbox, needs = await opened(alice, "/ws/inbox/"), await opened(alice, "/ws/needs/")
    elsewhere = await opened(her_phone, "/ws/needs/")
    try:
        await heard(page, lambda m: "watching" in m)
        await heard(inbox, lambda m: "content" in m)
        await heard(needs, lambda m: "counts" in m)
        await heard(elsewhere, lambda m: "counts" in m)
        assert await post(alice, "/accounts/logout/") == 302
        for socket in (page, inbox, needs):
            assert await closed_with(socket) == CLOSE_UNAUTHORIZED
        await say_in(chat.pk, 2)
        await prompt_opens(acme)
        await page.send_json_to({"since": 0})  # the whole chat, asked for after the logout
        for socket in (page, inbox, needs):
            assert await socket.receive_nothing(timeout=QUIET)
        told = await heard(elsewhere, lambda m: "workspace" in m)  # her other session is kept
        assert told["waiting"] == 1
    finally:
        await close_all(page, inbox, needs, elsewhere)


def test_a_sessions_group_is_named_by_a_keyed_digest_never_by_the_session_key():
    key = "k3y0fas3ss10nth4tn0b0dysh0uldsee"
    name = groups.session(revoke.digest(key))
    assert key not in name and len(name) < 100  # the channel layer's limit on a group's name
    assert name != groups.session(revoke.digest(key[:-1] + "f"))


# --- a member removed, a role changed --------------------------------------------------------


async def test_a_member_removed_loses_the_run_page_and_their_inbox_and_count_leave_the_workspace(
    layer, acme, acme_admin, acme_approver, globex
):
    chat = await database_sync_to_async(factories.run)(acme, *asking())  # a prompt waits
    await database_sync_to_async(Membership.objects.create)(
        workspace=globex, user=acme_approver, role=Role.APPROVER
    )
    alice, carol = await browser(acme_approver), await browser(acme_admin)
    page = await opened(alice, chat_page(chat.pk))
    inbox, needs = await opened(alice, "/ws/inbox/"), await opened(alice, "/ws/needs/")
    try:
        assert "data-prompt-id" in (await heard(inbox, lambda m: "content" in m))["content"]
        counts = await heard(needs, lambda m: "counts" in m)
        assert counts["counts"] == {str(acme.pk): 1, str(globex.pk): 0}
        member = await membership_of(acme_approver, acme)
        assert await post(carol, f"/workspaces/acme/members/{member.pk}/remove") == 302
        assert await closed_with(page) == CLOSE_FORBIDDEN
        assert (await heard(needs, lambda m: "counts" in m))["counts"] == {str(globex.pk): 0}
        left = await heard(needs, lambda m: "left" in m)
        assert left == {"left": {"workspace": str(acme.pk), "name": "Acme"}}
        listed = await heard(inbox, lambda m: "content" in m)
        assert "data-prompt-id" not in listed["content"]  # Acme's prompt left her inbox
        await prompt_opens(acme)  # nothing of Acme reaches her any more …
        assert await inbox.receive_nothing(timeout=QUIET)
        assert await needs.receive_nothing(timeout=QUIET)
        await prompt_opens(globex)  # … and her other workspace is heard as before
        assert (await heard(needs, lambda m: "workspace" in m))["workspace"] == str(globex.pk)
        assert "data-prompt-id" in (await heard(inbox, lambda m: "content" in m))["content"]
    finally:
        await close_all(page, inbox, needs)


async def test_an_approver_made_a_viewer_keeps_the_run_page_and_is_no_longer_counted(
    layer, acme, acme_admin, acme_approver
):
    chat = await database_sync_to_async(factories.run)(acme, *asking())
    alice, carol = await browser(acme_approver), await browser(acme_admin)
    page = await opened(alice, chat_page(chat.pk))
    needs = await opened(alice, "/ws/needs/")
    try:
        await heard(page, lambda m: "watching" in m)
        assert (await heard(needs, lambda m: "counts" in m))["counts"] == {str(acme.pk): 1}
        member = await membership_of(acme_approver, acme)
        path = f"/workspaces/acme/members/{member.pk}/role"
        assert await post(carol, path, {"role": Role.VIEWER}) == 302
        assert (await heard(needs, lambda m: "counts" in m))["counts"] == {}
        await say_in(chat.pk, 4)
        pushed = await heard(page, lambda m: "to" in m)  # the page is still live
        await page.send_json_to({"since": 0})
        assert (await heard(page, lambda m: "to" in m))["to"] >= pushed["to"]
        assert await needs.receive_nothing(timeout=QUIET)  # no "left": she is still a member
    finally:
        await close_all(page, needs)


async def test_a_page_closed_for_a_removal_leaves_the_watchers_at_once_and_the_others_are_told(
    layer, acme, acme_admin, acme_approver, acme_viewer
):
    chat = await new_run(acme)
    alice, bob, carol = [await browser(p) for p in (acme_approver, acme_viewer, acme_admin)]
    hers, his = await opened(alice, chat_page(chat.pk)), await opened(bob, chat_page(chat.pk))
    try:
        await watchers_listed(his, ["alice", "bob"])
        member = await membership_of(acme_approver, acme)
        assert await post(carol, f"/workspaces/acme/members/{member.pk}/remove") == 302
        assert await closed_with(hers) == CLOSE_FORBIDDEN  # her browser has not let go yet
        await watchers_listed(his, ["bob"])
        assert await watching_now(chat.pk) == {acme_viewer.pk}
    finally:
        await close_all(hers, his)


# --- a run deleted ----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["its page", "the admin"])
async def test_deleting_a_run_closes_every_page_of_it_and_empties_its_watchers(
    layer, acme, acme_admin, acme_viewer, where
):
    chat = await new_run(acme)
    other = await new_run(acme)
    bob, carol = await browser(acme_viewer), await browser(acme_admin)
    pages = [await opened(bob, chat_page(chat.pk)), await opened(carol, chat_page(chat.pk))]
    elsewhere = await opened(bob, chat_page(other.pk))
    try:
        await watchers_listed(pages[0], ["bob", "carol"])
        if where == "its page":
            assert await post(carol, f"/chats/{chat.pk}/delete") == 302
        else:
            root = await database_sync_to_async(User.objects.create_superuser)("root")
            path = f"/admin/activity/chat/{chat.pk}/delete/"
            assert await post(await browser(root), path, {"post": "yes"}) == 302
        for page in pages:
            assert await closed_with(page) == CLOSE_GONE
        assert await watching_now(chat.pk) == set()
        await say_in(other.pk, 2)  # another run's page is left alone
        assert "to" in await heard(elsewhere, lambda m: "to" in m)
    finally:
        await close_all(*pages, elsewhere)


# --- a session that ends behind the sockets' back ------------------------------------------------


@database_sync_to_async
def flushed(client: Client, user: User) -> None:
    Session.objects.filter(session_key=client.cookies["sessionid"].value).delete()


@database_sync_to_async
def deactivated(client: Client, user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


@pytest.mark.parametrize("ended", [flushed, deactivated], ids=["flushed", "user made inactive"])
async def test_a_session_that_ended_without_a_logout_is_found_on_the_next_heartbeat(
    settings, acme, acme_approver, ended
):
    settings.WATCHING_HEARTBEAT_SECONDS = BEAT
    chat = await new_run(acme)
    alice = await browser(acme_approver)
    page = await opened(alice, chat_page(chat.pk))
    inbox, needs = await opened(alice, "/ws/inbox/"), await opened(alice, "/ws/needs/")
    try:
        await heard(needs, lambda m: "counts" in m)
        await ended(alice, acme_approver)
        for socket in (page, inbox, needs):
            assert await closed_with(socket) == CLOSE_UNAUTHORIZED
        await prompt_opens(acme)
        assert await needs.receive_nothing(timeout=QUIET)
    finally:
        await close_all(page, inbox, needs)


async def test_a_session_still_signed_in_is_kept_beat_after_beat(settings, acme, acme_approver):
    settings.WATCHING_HEARTBEAT_SECONDS = BEAT
    alice = await browser(acme_approver)
    needs = await opened(alice, "/ws/needs/")
    try:
        await heard(needs, lambda m: "counts" in m)
        assert await needs.receive_nothing(timeout=5 * BEAT)  # five heartbeats: not closed
        await prompt_opens(acme)
        assert (await heard(needs, lambda m: "workspace" in m))["waiting"] == 1
    finally:
        await needs.disconnect()
