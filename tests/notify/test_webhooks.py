"""Workspace webhooks (activity/notify/hook*.py), against a receiver on 127.0.0.1
(``hookreceiver.py``) that checks each post's signature and timestamp as docs/webhooks.md tells a
receiver to: which events are posted to which webhook, once; what a post says (and never says);
the address rules; redirects; retries with backoff."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.utils import timezone

from activity.live import boundary
from activity.models import Chat, Delivery, HookEvent, HookFormat, Prompt, Webhook, Workspace
from activity.notify import hookqueue, worker
from tests import factories, frames
from tests.members import logged_in
from tests.notify.hookreceiver import Receiver, running, verified

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "https://koruweb.acme.test"
KEY = "AKIAIOSFODNN7EXAMPLE"  # a secret of a known shape: stored masked, never posted


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    yield from running()


@pytest.fixture(autouse=True)
def quick(settings: Any) -> None:
    settings.NOTIFY_DELAY_SECONDS = 0
    settings.KORUWEB_BASE_URL = BASE
    settings.WEBHOOKS_ALLOW_PRIVATE = True  # the receiver is on 127.0.0.1
    settings.WEBHOOK_RETRY_SECONDS = 0.05
    settings.WEBHOOK_MAX_TRIES = 3
    settings.WEBHOOK_TIMEOUT_SECONDS = 5


def hook(
    workspace: Workspace,
    url: str,
    events: Iterable[str] = HookEvent.values,
    format: str = HookFormat.JSON,
) -> Webhook:
    return Webhook.objects.create(
        workspace=workspace,
        name="ops",
        url=url,
        format=format,
        events=list(events),
        secret=f"kwh_{uuid.uuid4().hex}",
    )


def tick() -> None:
    async_to_sync(hookqueue.tick)()


def settle(done: Callable[[], bool], seconds: float = 10) -> None:
    """Run the notifier's webhook part until ``done`` (retries wait their backoff)."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not settled in time"
        tick()


def waiting_run(workspace: Workspace, turn: uuid.UUID | None = None) -> Chat:
    """A run whose first turn waits for a permission: the frames pass the server's boundary."""
    raw = [
        frames.turn_started(1, turn or uuid.uuid4(), uuid.uuid4(), title="Clean the build"),
        frames.tool_call(2, "call-1", "rm -rf build", kind="delete"),
        frames.permission(3, 7, "call-1", "rm -rf build"),
    ]
    return factories.run(workspace, *(boundary.load(json.dumps(f)) for f in raw))


def events(receiver: Receiver, url: str, secret: str) -> Counter[str]:
    return Counter(verified(p, secret).get("event", "slack") for p in receiver.to(url))


def bodies(receiver: Receiver, url: str, secret: str) -> dict[str, dict[str, Any]]:
    return {(b := verified(p, secret))["event"]: b for p in receiver.to(url)}


# --- which events, to which webhooks, once ---------------------------------------------------


def test_each_event_reaches_each_webhook_that_chose_it_once_and_no_other(
    acme, acme_approver, acme_admin, acme_viewer, globex, receiver
):
    everything = hook(acme, receiver.url())
    prompts_only = hook(acme, receiver.url(), [HookEvent.PROMPT_WAITING], HookFormat.SLACK)
    elsewhere = hook(globex, receiver.url())
    first = uuid.uuid4()
    chat = waiting_run(acme, first)
    tick()
    tick()  # again: nothing more
    prompt = Prompt.objects.get(chat=chat)
    logged_in(acme_approver).post(f"/prompts/{prompt.pk}/answer", {"choice": "allow-once"})
    logged_in(acme_admin).post(f"/tools/{prompt.tool_id}/comments", {"text": "@bob look at this"})
    second = uuid.uuid4()
    factories.apply(
        chat.pk,
        frames.turn_ended(4, first, "agent_error"),
        frames.turn_started(5, second, uuid.uuid4(), prompt="Try again"),
        frames.turn_ended(6, second, "end_turn"),
    )
    async_to_sync(worker.tick)()  # the process's notifier does it all
    tick()
    settle(lambda: len(receiver.to(everything.url)) >= 6)
    tick()
    assert events(receiver, everything.url, everything.secret) == Counter(
        [
            "run.started",
            "prompt.waiting",
            "prompt.answered",
            "mention",
            "run.failed",
            "run.finished",
        ]
    )
    assert len(receiver.to(prompts_only.url)) == 1 and receiver.to(elsewhere.url) == []
    assert Delivery.objects.filter(webhook=everything).count() == 6

    said = bodies(receiver, everything.url, everything.secret)
    run = {"id": str(chat.pk), "title": "Clean the build", "agent": "demo-agent"}
    run["url"] = f"{BASE}/chats/{chat.pk}/"
    for body in said.values():
        assert body["workspace"] == {"slug": "acme", "name": "Acme"} and body["run"] == run
        assert body["id"].startswith(body["event"] + ":") and body["occurred_at"].endswith("Z")
    assert said["prompt.waiting"]["prompt"] == {
        "id": str(prompt.pk),
        "kind": "permission",
        "asks": "rm -rf build",
        "secret": False,
        "url": f"{BASE}/prompts/{prompt.pk}/answer",
    }
    answered = said["prompt.answered"]["prompt"]
    assert answered["outcome"] == "answered" and answered["answered_by"] == "alice"
    assert answered["decision"] == "Allowed once"
    assert said["mention"]["mention"]["mentioned"] == "bob"
    assert said["mention"]["mention"]["by"] == "carol"
    assert said["mention"]["mention"]["comment"] == "@bob look at this"
    assert said["run.failed"]["turn"]["status"] == "Agent error"
    assert said["run.failed"]["turn"]["stop_reason"] == "agent_error"
    assert said["run.finished"]["turn"]["asked"] == "Try again"
    assert said["run.started"]["asked"] == "Fix the flaky test"

    (post,) = receiver.to(prompts_only.url)
    slack = verified(post, prompts_only.secret)
    assert post.headers["x-koruweb-event"] == "prompt.waiting"
    assert slack["text"] == "Clean the build is waiting for an answer: rm -rf build"
    assert f"<{BASE}/chats/{chat.pk}/|Clean the build>" in slack["blocks"][0]["text"]["text"]
    delivery = Delivery.objects.get(webhook=prompts_only)
    assert post.headers["x-koruweb-delivery"] == str(delivery.pk)
    assert delivery.status_code == 200 and delivery.attempts == 1 and delivery.delivered_at


def test_two_processes_at_once_make_and_post_each_delivery_once(acme, receiver):
    hooks = [hook(acme, receiver.url()) for _ in range(3)]
    waiting_run(acme)
    start = threading.Barrier(2)

    def process() -> None:
        try:
            start.wait(timeout=10)
            tick()
            tick()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=process) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    settle(lambda: all(len(receiver.to(h.url)) >= 2 for h in hooks))
    for each in hooks:
        assert events(receiver, each.url, each.secret) == Counter(["run.started", "prompt.waiting"])
    assert Delivery.objects.count() == 6


def test_a_post_holds_only_stored_masked_text_and_no_secret(
    acme, acme_approver, acme_admin, receiver
):
    everything = hook(acme, receiver.url())
    turn = uuid.uuid4()
    raw = [
        frames.turn_started(1, turn, uuid.uuid4(), prompt=f"Deploy with {KEY}", title=f"Use {KEY}"),
        frames.tool_call(2, "call-1", f"aws --key {KEY}", kind="execute"),
        frames.permission(3, 7, "call-1", f"aws --key {KEY}"),
        frames.elicitation(4, 9, {"token": {"type": "string", "title": "Token", "secret": True}}),
    ]
    chat = factories.run(acme, *(boundary.load(json.dumps(f)) for f in raw))
    question = Prompt.objects.get(chat=chat, kind="question")
    answered = logged_in(acme_approver).post(
        f"/prompts/{question.pk}/answer", {"token_other": "hunter2-the-deploy-token"}
    )
    assert answered.status_code == 302
    row = Prompt.objects.get(chat=chat, kind="permission").tool_id
    logged_in(acme_admin).post(f"/tools/{row}/comments", {"text": f"@alice {KEY} leaked"})
    factories.apply(chat.pk, boundary.load(json.dumps(frames.turn_ended(5, turn, "refusal"))))
    # started, two prompts waiting, both settled (the turn's end closed the permission),
    # the mention, the refusal
    settle(lambda: len(receiver.to(everything.url)) >= 7)
    posted = receiver.everything()
    assert KEY.encode() not in posted and b"hunter2" not in posted
    assert everything.secret.encode() not in posted
    said = bodies(receiver, everything.url, everything.secret)
    secret_answer = [
        b["prompt"] for b in said.values() if b.get("prompt", {}).get("kind") == "question"
    ]
    assert all(p.get("decision") in (None, "Answered") for p in secret_answer)
    assert said["run.failed"]["turn"]["status"] == "Refused"


# --- where a webhook may post ----------------------------------------------------------------


def test_a_loopback_address_is_refused_by_default_and_nothing_connects(acme, receiver, settings):
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    refused = hook(acme, receiver.url())
    waiting_run(acme)
    tick()
    assert receiver.to(refused.url) == []
    for row in Delivery.objects.filter(webhook=refused):
        assert row.failed_at and row.attempts == 1 and row.status_code is None
        assert (
            "127.0.0.1, a loopback address" in row.error and "WEBHOOKS_ALLOW_PRIVATE" in row.error
        )

    settings.WEBHOOKS_ALLOW_PRIVATE = True
    allowed = hook(acme, receiver.url())
    waiting_run(acme)
    settle(lambda: len(receiver.to(allowed.url)) == 2)


def resolving(monkeypatch: Any, host: str, address: str) -> list[str]:
    """``host`` resolves to ``address`` (its every lookup is counted)."""
    real = socket.getaddrinfo
    looked: list[str] = []

    def fake(name: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if name != host:
            return real(name, port, *args, **kwargs)
        looked.append(name)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return looked


def test_a_name_that_resolves_to_a_private_address_is_refused(
    acme, receiver, settings, monkeypatch
):
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    resolving(monkeypatch, "hooks.acme.test", "10.1.2.3")
    refused = hook(acme, f"https://hooks.acme.test/{uuid.uuid4().hex}")
    waiting_run(acme)
    tick()
    (row, _) = Delivery.objects.filter(webhook=refused)
    assert row.failed_at and "hooks.acme.test is 10.1.2.3, a private address" in row.error


def test_the_post_goes_to_the_address_checked_with_the_urls_host(
    acme, receiver, settings, monkeypatch
):
    looked = resolving(monkeypatch, "hooks.acme.test", "127.0.0.1")
    named = hook(acme, receiver.url(host="hooks.acme.test"), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    settle(lambda: len(receiver.to(named.url)) == 1)
    (post,) = receiver.to(named.url)
    assert post.headers["host"] == f"hooks.acme.test:{receiver.port}"
    assert looked == ["hooks.acme.test"]  # resolved once, checked, and connected to as checked


def test_a_redirect_is_not_followed(acme, receiver):
    moved = hook(acme, receiver.url("redirect"), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    tick()
    row = Delivery.objects.get(webhook=moved)
    assert row.attempts == 1 and row.status_code == 302 and row.next_try_at > timezone.now()
    assert "Redirect to /target/" in row.error and "not followed" in row.error
    settle(lambda: Delivery.objects.filter(webhook=moved, failed_at__isnull=False).exists())
    assert len(receiver.to(moved.url)) == 3
    assert receiver.to(moved.url.replace("/redirect/", "/target/")) == []


# --- retries ------------------------------------------------------------------------------------


def test_a_failed_post_is_tried_again_with_backoff_until_it_is_delivered(acme, receiver, settings):
    flaky = hook(acme, receiver.url("flaky/2"), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    for attempt in (1, 2):
        before = timezone.now()
        tried = Delivery.objects.filter(webhook=flaky, attempts=attempt)
        settle(tried.exists)
        row = Delivery.objects.get(webhook=flaky)
        assert row.status_code == 500 and row.delivered_at is None and row.failed_at is None
        wait = timedelta(seconds=0.05 * 2 ** (attempt - 1))
        assert before + wait <= row.next_try_at <= timezone.now() + wait
    settle(lambda: Delivery.objects.filter(webhook=flaky, delivered_at__isnull=False).exists())
    row = Delivery.objects.get(webhook=flaky)
    assert row.attempts == 3 and row.status_code == 200 and row.error == ""
    assert len(receiver.to(flaky.url)) == 3
    posted = {p.headers["x-koruweb-delivery"] for p in receiver.to(flaky.url)}
    assert posted == {str(row.pk)}  # one delivery, the same id each time


def test_a_post_that_keeps_failing_fails_after_the_last_try(acme, receiver):
    down = hook(acme, receiver.url("down"), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    settle(lambda: Delivery.objects.filter(webhook=down, failed_at__isnull=False).exists())
    row = Delivery.objects.get(webhook=down)
    assert row.attempts == 3 and row.status_code == 500 and row.error.startswith("HTTP 500")
    for _ in range(3):
        tick()
    assert len(receiver.to(down.url)) == 3


def test_a_delivery_claimed_by_a_process_that_died_is_taken_again(acme, receiver):
    taken = hook(acme, receiver.url(), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    tick()
    long_ago = timezone.now() - timedelta(hours=1)
    Delivery.objects.update(claimed_at=long_ago, delivered_at=None, attempts=1)
    assert hookqueue.take() != []
    Delivery.objects.update(claimed_at=long_ago)
    settle(lambda: Delivery.objects.get(webhook=taken).delivered_at is not None)
    assert Delivery.objects.get(webhook=taken).attempts == 3


def test_a_slow_receiver_holds_up_neither_the_notifier_nor_the_other_posts(
    acme, receiver, settings
):
    settings.NOTIFY_POLL_MS = 50  # the notifier waits for its posts one poll at most
    receiver.gate.clear()
    slow = hook(acme, receiver.url("slow"), [HookEvent.PROMPT_WAITING])
    quick = hook(acme, receiver.url(), [HookEvent.PROMPT_WAITING])
    waiting_run(acme)
    started = time.monotonic()
    settle(lambda: len(receiver.to(quick.url)) == 1)
    assert time.monotonic() - started < 5
    sending = Delivery.objects.get(webhook=slow)
    assert sending.claimed_at and sending.delivered_at is None and sending.attempts == 1
    assert hookqueue.take() == []  # claimed while its post is under way: no one takes it
    receiver.gate.set()
    settle(lambda: Delivery.objects.filter(webhook=slow, delivered_at__isnull=False).exists())
    assert Delivery.objects.get(webhook=slow).attempts == 1
