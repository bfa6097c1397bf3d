"""Notifications you can answer (activity/notify/, activity/web/notifications.py), against a push
service on 127.0.0.1 (``pushservice.py``): what reaches each browser is decrypted with its keys
and its VAPID token checked, as a push service and a browser would."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from activity.models import AgentToken, Chat, Membership, Prompt, PushDevice, Role, Workspace
from activity.notify import queue, vapid, worker
from koruweb.asgi import application
from tests import frames
from tests.factories import run
from tests.members import logged_in
from tests.notify.pushservice import PushService, Subscription, running, vapid_claims

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def service() -> Iterator[PushService]:
    yield from running()


@pytest.fixture(autouse=True)
def at_once(settings: Any, tmp_path: Any) -> None:
    settings.NOTIFY_DELAY_SECONDS = 0
    settings.VAR_DIR = tmp_path  # a VAPID key pair of this test's own
    settings.PUSH_ALLOW_HTTP = True
    settings.VAPID_SUBJECT = "mailto:ops@acme.test"


def waiting_run(workspace: Workspace) -> Chat:
    return run(
        workspace,
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Clean the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
    )


def device(user: User, subscription: Subscription, name: str = "Firefox on a laptop") -> PushDevice:
    return PushDevice.objects.create(
        user=user,
        name=name,
        endpoint=subscription.endpoint,
        p256dh=subscription.p256dh,
        auth=subscription.auth,
    )


def tick() -> None:
    async_to_sync(worker.tick)()


def test_a_waiting_prompt_reaches_each_browser_of_each_person_who_may_answer_once(
    acme, acme_approver, acme_admin, acme_viewer, outsider, service
):
    mine, also_mine, admins = (service.subscription() for _ in range(3))
    viewers, outsiders = service.subscription(), service.subscription()
    device(acme_approver, mine)
    device(acme_approver, also_mine, "Chrome on Android")
    device(acme_admin, admins)
    device(acme_viewer, viewers)
    device(outsider, outsiders)
    chat = waiting_run(acme)
    tick()
    tick()  # again: nothing more
    for subscription in (mine, also_mine, admins):
        (push,) = service.to(subscription)
        said = subscription.read(push)
        assert said["title"] == "Clean the build needs you"
        assert said["body"] == "rm -rf build"
        assert said["actions"] == [
            {"action": "allow-once", "title": "Allow once"},
            {"action": "reject", "title": "Reject"},
        ]
        prompt = Prompt.objects.get(chat=chat)
        assert (
            said["tag"] == f"prompt-{prompt.pk}" and said["url"] == f"/prompts/{prompt.pk}/answer"
        )
        claims = vapid_claims(push, vapid.public_key())
        assert claims["aud"] == service.origin and claims["sub"] == "mailto:ops@acme.test"
        assert claims["exp"] > time.time()
        assert push.headers["ttl"] and push.headers["urgency"] == "high"
    assert service.to(viewers) == [] and service.to(outsiders) == []
    assert PushDevice.objects.get(endpoint=mine.endpoint).last_used_at is not None


def test_an_answer_replaces_the_notification_with_who_answered(acme, acme_approver, service):
    mine = service.subscription()
    device(acme_approver, mine)
    chat = waiting_run(acme)
    tick()
    prompt = Prompt.objects.get(chat=chat)
    answered = logged_in(acme_approver).post(
        f"/prompts/{prompt.pk}/answer", {"choice": "allow-once"}
    )
    assert answered.status_code == 302
    tick()
    first, then = service.to(mine)
    said = mine.read(then)
    assert said["tag"] == mine.read(first)["tag"] and said["actions"] == []
    assert said["body"] == "Answered by alice: Allowed once" and said["settled"] is True


def test_a_prompt_answered_before_its_notification_went_out_is_never_pushed(
    acme, acme_approver, service, settings
):
    settings.NOTIFY_DELAY_SECONDS = 3600  # a person on the page answers within the delay
    mine = service.subscription()
    device(acme_approver, mine)
    prompt = Prompt.objects.get(chat=waiting_run(acme))
    logged_in(acme_approver).post(f"/prompts/{prompt.pk}/answer", {"choice": "reject"})
    settings.NOTIFY_DELAY_SECONDS = 0
    tick()
    assert service.to(mine) == []


def test_a_browser_its_push_service_says_is_gone_is_forgotten(acme, acme_approver, service):
    gone, kept = service.subscription("/gone/"), service.subscription()
    device(acme_approver, gone)
    device(acme_approver, kept)
    waiting_run(acme)
    tick()
    assert len(service.to(gone)) == 1 and len(service.to(kept)) == 1
    assert list(PushDevice.objects.values_list("endpoint", flat=True)) == [kept.endpoint]


def test_notices_are_claimed_once_however_often_they_are_looked_for(acme, acme_approver, service):
    device(acme_approver, service.subscription())
    waiting_run(acme)
    assert queue.owe() == 1 and queue.owe() == 0
    taken = queue.take()
    assert len(taken) == 1 and queue.take() == []  # claimed: no other process takes it


# --- answering from the notification ---------------------------------------------------------


def notified(acme: Workspace, user: User, service: PushService) -> tuple[Prompt, dict[str, Any]]:
    """A prompt waiting, and what ``user``'s browser was told of it."""
    mine = service.subscription()
    device(user, mine)
    prompt = Prompt.objects.get(chat=waiting_run(acme))
    tick()
    (push,) = service.to(mine)
    return prompt, mine.read(push)


def press(client: Client, said: dict[str, Any], choice: str, **more: Any) -> Any:
    """What the service worker sends when a button of the notification is chosen."""
    body = {"choice": choice, "token": said["answer"]["token"]}
    return client.post(said["answer"]["url"], body, **more)


def test_the_allow_button_answers_as_the_page_does(acme, acme_approver, service):
    prompt, said = notified(acme, acme_approver, service)
    client = logged_in(acme_approver)
    pressed = press(client, said, "allow-once", HTTP_ORIGIN="http://testserver")
    assert pressed.status_code == 200 and pressed.json()["decision"] == "Allowed once"
    prompt.refresh_from_db()
    assert prompt.answered_by == acme_approver and prompt.decision == "Allowed once"
    again = press(client, said, "reject")
    assert again.status_code == 409 and "Already answered by alice" in again.json()["error"]


def test_a_notifications_button_is_refused_without_its_persons_session(
    acme, acme_approver, acme_admin, service
):
    prompt, said = notified(acme, acme_approver, service)
    assert press(Client(), said, "allow-once").status_code == 401
    not_theirs = press(logged_in(acme_admin), said, "allow-once")  # a token made for alice
    assert not_theirs.status_code == 403
    forged = dict(said, answer={**said["answer"], "token": said["answer"]["token"][:-2] + "xx"})
    assert press(logged_in(acme_approver), forged, "allow-once").status_code == 403
    elsewhere = press(logged_in(acme_approver), said, "allow-once", HTTP_ORIGIN="https://evil.test")
    assert elsewhere.status_code == 403
    prompt.refresh_from_db()
    assert prompt.answered_by is None


def test_a_person_who_lost_the_role_cannot_answer_from_an_old_notification(
    acme, acme_approver, service
):
    prompt, said = notified(acme, acme_approver, service)
    Membership.objects.filter(user=acme_approver).update(role=Role.VIEWER)
    refused = press(logged_in(acme_approver), said, "allow-once")
    assert refused.status_code == 403 and "may answer" in refused.json()["error"]
    prompt.refresh_from_db()
    assert prompt.answered_by is None


def test_only_allow_once_and_reject_are_answered_from_a_notification(acme, acme_approver, service):
    prompt, said = notified(acme, acme_approver, service)
    Prompt.objects.filter(pk=prompt.pk).update(
        choices=[
            *prompt.choices,
            {"id": "always", "label": "Always allow", "intent": "allow_always"},
        ]
    )
    refused = press(logged_in(acme_approver), said, "always")
    assert refused.status_code == 400 and "Open the prompt" in refused.json()["error"]


# --- a person's browsers ------------------------------------------------------------------------


def test_a_browser_turns_notifications_on_and_its_person_can_forget_it(
    acme_approver, acme_viewer, service, settings
):
    mine = service.subscription()
    client = logged_in(acme_approver)
    body = {
        "subscription": {
            "endpoint": mine.endpoint,
            "keys": {"p256dh": mine.p256dh, "auth": mine.auth},
        },
        "name": "Chrome on Android",
    }
    made = client.post("/notifications/devices", body, content_type="application/json")
    assert made.status_code == 201
    (kept,) = PushDevice.objects.filter(user=acme_approver)
    assert kept.name == "Chrome on Android" and kept.endpoint == mine.endpoint
    assert (
        logged_in(acme_viewer).post(f"/notifications/devices/{kept.pk}/forget").status_code == 404
    )
    removed = client.post(f"/notifications/devices/{kept.pk}/forget")  # the page's form
    assert removed.status_code == 302 and removed["Location"] == "/settings/notifications/"
    assert not PushDevice.objects.exists()
    settings.PUSH_ALLOW_HTTP = False
    refused = client.post("/notifications/devices", body, content_type="application/json")
    assert refused.status_code == 400 and "https://" in refused.json()["error"]
    for bad in ({}, {"subscription": {"endpoint": "https://x"}}, "nonsense"):
        sent = client.post("/notifications/devices", bad, content_type="application/json")
        assert sent.status_code == 400


# --- end to end: a runner's socket, the process's notifier, the runner told ----------------------


async def test_a_runners_prompt_is_pushed_by_the_process_and_its_button_reaches_the_runner(
    acme, acme_approver, service, settings
):
    settings.NOTIFY_POLL_MS = 50
    mine = service.subscription()
    await database_sync_to_async(device)(acme_approver, mine)
    _, token = await database_sync_to_async(AgentToken.issue)(acme, "laptop")
    chat_id = uuid.uuid4()
    socket = WebsocketCommunicator(
        application, "/ws/agent/", headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    assert (await socket.connect())[0]
    try:
        await socket.send_json_to(frames.hello(chat_id))
        assert await socket.receive_json_from() == {"type": "ack", "seq": 0}
        for frame in (
            frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Clean the build"),
            frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
            frames.permission(3, 7, "call-1", "rm -rf build"),
        ):
            await socket.send_json_to(frame)
        async with asyncio.timeout(10):  # nobody calls the notifier: the process's own does
            while not service.to(mine):
                await asyncio.sleep(0.05)
        said = mine.read(service.to(mine)[0])
        client = await database_sync_to_async(logged_in)(acme_approver)
        pressed = await database_sync_to_async(press)(client, said, "allow-once")
        assert pressed.status_code == 200
        async with asyncio.timeout(10):
            while True:
                frame = await socket.receive_json_from(timeout=10)
                if frame.get("type") == "answer":
                    break
        assert frame["request_id"] == 7
        assert frame["outcome"] == {"outcome": "selected", "optionId": "allow-once"}
    finally:
        await socket.disconnect()
        await database_sync_to_async(connections.close_all)()


def test_the_app_can_be_installed_and_its_worker_is_served_from_the_root(client, as_approver):
    app = client.get("/manifest.webmanifest")
    assert app["Content-Type"] == "application/manifest+json"
    manifest = app.json()
    assert manifest["start_url"] == "/inbox/" and manifest["display"] == "standalone"
    for icon in manifest["icons"]:
        assert client.get(icon["src"]).status_code == 200  # served, as the manifest says
    assert {"192x192", "512x512"} <= {icon["sizes"] for icon in manifest["icons"]}
    worker = client.get("/sw.js")
    assert worker["Content-Type"].startswith("text/javascript")
    assert b'addEventListener("push"' in worker.content and worker["Cache-Control"] == "no-cache"
    offline = client.get("/offline/")  # no login: the worker keeps it for when nothing answers
    assert offline.status_code == 200 and b"cannot be reached" in offline.content
    page = as_approver.get("/settings/notifications/").content.decode()
    assert "Turn on notifications in this browser" in page and vapid.public_key() in page
