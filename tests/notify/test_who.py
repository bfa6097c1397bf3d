"""Who is told (activity/notify/who.py): what a person wants to hear of, their quiet hours in
their own time zone, nobody already looking at the run; and a comment's mention told to the
person it names."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.utils import timezone

from activity.models import (
    AgentHost,
    AgentToken,
    Chat,
    HostRun,
    Membership,
    Notice,
    NotifyPrefs,
    PushDevice,
    TokenKind,
    ToolActivity,
)
from activity.notify import queue, worker
from activity.push import watching
from activity.review import mentions
from koruweb.asgi import application
from tests import frames
from tests.factories import apply
from tests.members import logged_in
from tests.notify.pushservice import PushService, running
from tests.notify.test_notifications import device, waiting_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def service() -> Any:
    yield from running()


@pytest.fixture(autouse=True)
def at_once(settings: Any, tmp_path: Any) -> None:
    settings.NOTIFY_DELAY_SECONDS = 0
    settings.VAR_DIR = tmp_path
    settings.PUSH_ALLOW_HTTP = True


def tick() -> None:
    async_to_sync(worker.tick)()


def test_quiet_hours_are_in_the_persons_own_time_zone_and_may_run_past_midnight():
    night = NotifyPrefs(quiet_from=clock(22), quiet_until=clock(7), time_zone="Asia/Tokyo")
    assert night.quiet(datetime(2026, 12, 5, 14, 0, tzinfo=UTC))  # 23:00 in Tokyo
    assert night.quiet(datetime(2026, 12, 5, 21, 30, tzinfo=UTC))  # 06:30 the next day there
    assert not night.quiet(datetime(2026, 12, 5, 3, 0, tzinfo=UTC))  # noon there
    lunch = NotifyPrefs(quiet_from=clock(12), quiet_until=clock(13), time_zone="UTC")
    assert lunch.quiet(datetime(2026, 12, 5, 12, 30, tzinfo=UTC))
    assert not lunch.quiet(datetime(2026, 12, 5, 13, 0, tzinfo=UTC))
    assert not NotifyPrefs().quiet(datetime(2026, 12, 5, 3, 0, tzinfo=UTC))  # none set


def test_a_person_who_wants_no_prompts_or_is_in_quiet_hours_is_not_told(
    acme, acme_approver, acme_admin, service: PushService
):
    alices, carols = service.subscription(), service.subscription()
    device(acme_approver, alices)
    device(acme_admin, carols)
    NotifyPrefs.objects.create(user=acme_approver, prompts=False)
    now = datetime.now(UTC).replace(microsecond=0)
    start, end = now - timedelta(minutes=5), now + timedelta(minutes=5)  # quiet now
    NotifyPrefs.objects.create(user=acme_admin, quiet_from=start.time(), quiet_until=end.time())
    waiting_run(acme)
    tick()
    assert service.to(alices) == [] and service.to(carols) == []


def test_a_person_looking_at_the_run_is_not_buzzed_about_it(acme, acme_approver, service):
    alices = service.subscription()
    device(acme_approver, alices)
    chat = waiting_run(acme)
    entry = watching.entry(acme_approver.pk, uuid.uuid4().hex)
    watching.store(watching.LOOKING).put(chat.pk, entry, time.time() + 60)
    tick()
    assert service.to(alices) == []


def test_a_comment_tells_the_person_it_mentions(acme, acme_approver, acme_viewer, service):
    bobs = service.subscription()
    device(acme_viewer, bobs)
    chat = waiting_run(acme)
    row = ToolActivity.objects.get(chat=chat)
    mentions.add_comment(row, acme_approver, "@bob is this safe to delete?")
    tick()
    tick()
    (push,) = service.to(bobs)
    said = bobs.read(push)
    assert said["title"] == "alice mentioned you in Clean the build"
    assert said["body"] == "@bob is this safe to delete?" and said["actions"] == []
    assert logged_in(acme_viewer).get(said["url"]).status_code == 302  # to the call


def test_a_mention_of_someone_who_left_the_workspace_is_not_told(
    acme, acme_approver, acme_viewer, service
):
    bobs = service.subscription()
    device(acme_viewer, bobs)
    row = ToolActivity.objects.get(chat=waiting_run(acme))
    mentions.add_comment(row, acme_approver, "@bob look")
    Membership.objects.filter(user=acme_viewer).delete()
    tick()
    assert service.to(bobs) == []


def test_what_to_be_told_is_saved_and_a_wrong_time_zone_is_named(acme_approver):
    client = logged_in(acme_approver)
    wrong = {
        "prompts": "on",
        "quiet_from": "22:00",
        "quiet_until": "07:00",
        "time_zone": "Mars/Olympus",
    }
    refused = client.post("/settings/notifications/", wrong)
    assert refused.status_code == 400
    assert "“Mars/Olympus” is not a time zone" in refused.content.decode()
    assert not NotifyPrefs.objects.exists()
    saved = client.post("/settings/notifications/", {**wrong, "time_zone": "Europe/Berlin"})
    assert saved.status_code == 302 and saved["Location"].endswith("?saved=1")
    prefs = NotifyPrefs.objects.get(user=acme_approver)
    assert prefs.prompts and not prefs.mentions and prefs.time_zone == "Europe/Berlin"
    assert (prefs.quiet_from, prefs.quiet_until) == (clock(22), clock(7))
    assert PushDevice.objects.count() == 0


# --- runs followed ------------------------------------------------------------------------------


def end_turn(chat: Chat, reason: str = "end_turn") -> None:
    assert chat.current_attempt_id is not None
    apply(chat.pk, frames.turn_ended(4, chat.current_attempt_id, reason))


def test_the_followers_of_a_run_are_told_how_each_turn_ended(
    acme, acme_approver, acme_viewer, service
):
    alices, bobs = service.subscription(), service.subscription()
    device(acme_approver, alices)
    device(acme_viewer, bobs)
    chat = waiting_run(acme)
    following = logged_in(acme_viewer).post(f"/chats/{chat.pk}/follow", {"following": "1"})
    assert following.status_code == 302
    page = logged_in(acme_viewer).get(f"/chats/{chat.pk}/").content.decode()
    assert "Stop telling me when a turn ends" in page
    end_turn(chat, "refusal")
    tick()
    said = [bobs.read(push) for push in service.to(bobs)]
    assert [s["title"] for s in said] == ["Clean the build: Refused"]
    assert said[0]["body"].startswith("The agent refused to go on.")
    assert said[0]["url"] == f"/chats/{chat.pk}/"
    assert all(not alices.read(p).get("tag", "").startswith("turn-") for p in service.to(alices))


def test_whoever_started_a_run_from_the_web_follows_it_until_they_stop(
    acme, acme_approver, service
):
    alices = service.subscription()
    device(acme_approver, alices)
    chat = waiting_run(acme)
    token, _ = AgentToken.issue(acme, "host", kind=TokenKind.HOST)
    host = AgentHost.objects.create(workspace=acme, token=token, name="build-box")
    HostRun.objects.create(host=host, agent="demo", requested_by=acme_approver, chat_id=chat.pk)
    client = logged_in(acme_approver)
    assert "Stop telling me when a turn ends" in client.get(f"/chats/{chat.pk}/").content.decode()
    client.post(f"/chats/{chat.pk}/follow", {"following": "0"})
    end_turn(chat)
    tick()
    turns = [
        s for s in (alices.read(p) for p in service.to(alices)) if s["tag"].startswith("turn-")
    ]
    assert turns == []
    assert "Tell me when a turn ends" in client.get(f"/chats/{chat.pk}/").content.decode()


# --- where no runner is connected, and what is kept -------------------------------------------


async def test_a_mention_is_told_by_a_process_where_only_pages_are_open(
    acme, acme_approver, acme_viewer, service, settings
):
    settings.NOTIFY_POLL_MS = 50
    bobs = service.subscription()
    await database_sync_to_async(device)(acme_viewer, bobs)
    chat = await database_sync_to_async(waiting_run)(acme)  # no runner's socket anywhere
    client = await database_sync_to_async(logged_in)(acme_approver)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost"), (b"cookie", cookie)]
    page = WebsocketCommunicator(application, "/ws/needs/", headers=headers)
    assert (await page.connect())[0]
    try:
        row = await database_sync_to_async(ToolActivity.objects.get)(chat=chat)
        await database_sync_to_async(mentions.add_comment)(row, acme_approver, "@bob see this")
        async with asyncio.timeout(10):
            while not service.to(bobs):
                await asyncio.sleep(0.05)
        assert bobs.read(service.to(bobs)[0])["body"] == "@bob see this"
    finally:
        await page.disconnect()
        await database_sync_to_async(connections.close_all)()


def test_notices_sent_or_given_up_are_kept_a_week_then_removed(acme, acme_approver, service):
    device(acme_approver, service.subscription())
    waiting_run(acme)
    tick()
    (sent,) = Notice.objects.all()
    assert sent.sent_at is not None
    Notice.objects.update(created_at=timezone.now() - timedelta(hours=queue.KEEP_HOURS - 1))
    tick()
    assert Notice.objects.count() == 1  # a replacement may still need to find it
    Notice.objects.update(created_at=timezone.now() - timedelta(hours=queue.KEEP_HOURS + 1))
    tick()
    assert not Notice.objects.exists()
