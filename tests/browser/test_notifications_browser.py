"""Notifications you can answer, in Chromium (issue 28): the page turns them on in this browser,
the server pushes a waiting prompt to its push service (a fake one on 127.0.0.1: Debian's
Chromium has no keys for Google's), and the service worker shows what it is handed and answers
from its buttons.

Debian's Chromium cannot subscribe to a real push service, so the page's ``PushManager`` is
stubbed with the fake service's subscription (its keys are the test's: it decrypts what the
server sends, as the browser would), and what the server pushed is delivered to the worker by
the DevTools protocol (``ServiceWorker.deliverPushMessage``). Push needs a persistent context:
Playwright's usual contexts have no Push API."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import expect, sync_playwright

from activity.models import AgentToken, Prompt, PushDevice, Role, Workspace
from tests import frames
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.helpers import answer_heard, member, screenshot, sign_in
from tests.browser.runner import Runner
from tests.liveserver import Server
from tests.notify.pushservice import PushService, Received, Subscription, running, vapid_claims

STUB = """
(() => {
  const sub = %s;
  const made = () => ({ endpoint: sub.endpoint, toJSON: () => sub });
  PushManager.prototype.subscribe = async function () {
    localStorage.setItem("subscribed", "1");
    return made();
  };
  PushManager.prototype.getSubscription = async function () {
    return localStorage.getItem("subscribed") ? made() : null;
  };
})();
"""


@pytest.fixture(scope="module")
def service() -> Iterator[PushService]:
    yield from running()


@pytest.fixture(scope="module", autouse=True)
def module_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server that pushes at once: no delay, a short poll, the fake service's http://."""
    home = tmp_path_factory.mktemp("var")
    env = {
        "NOTIFY_DELAY_SECONDS": "0",
        "NOTIFY_POLL_MS": "100",
        "PUSH_ALLOW_HTTP": "1",
        "KORUWEB_VAR_DIR": str(home),
    }
    running_server = Server(home / "daphne.log", env=env)
    try:
        running_server.spawn()
        yield running_server
    finally:
        running_server.stop()


@pytest.fixture
def server(module_server: Server, transactional_db: None) -> Server:
    module_server.wait_ready()
    return module_server


@pytest.fixture
def phone(
    server: Server, tmp_path: Path, service: PushService
) -> Iterator[tuple[Any, Subscription]]:
    """A persistent Chromium profile on the server, notifications allowed, its PushManager
    answering with a subscription of the fake service's."""
    subscription = service.subscription()
    keys = {
        "endpoint": subscription.endpoint,
        "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
    }
    playwright = sync_playwright().start()
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            base_url=server.url,
        )
        context.grant_permissions(["notifications"], origin=server.url)
        context.add_init_script(STUB % json.dumps(keys))
        try:
            yield context, subscription
        finally:
            context.close()
    finally:
        playwright.stop()


def pushed(service: PushService, subscription: Subscription, count: int) -> list[Received]:
    """The pushes the server sent this browser, once there are ``count`` of them."""
    deadline = time.monotonic() + 10
    while len(found := service.to(subscription)) < count:
        assert time.monotonic() < deadline, f"{len(found)} pushes, not {count}"
        time.sleep(0.05)
    return found


def told(
    service: PushService, subscription: Subscription, tag: str, settled: bool = False
) -> dict[str, Any]:
    """What the server pushed this browser about ``tag`` (its replacement with ``settled``),
    decrypted, once it came."""
    deadline = time.monotonic() + 10
    while True:
        for push in service.to(subscription):
            said = subscription.read(push)
            if said["tag"] == tag and bool(said.get("settled")) == settled:
                return said
        assert time.monotonic() < deadline, f"nothing pushed about {tag}"
        time.sleep(0.05)


class Worker:
    """The page's service worker, and the DevTools protocol to hand it a push."""

    def __init__(self, page: Any, origin: str) -> None:
        self.page, self.origin = page, origin
        self.cdp = page.context.new_cdp_session(page)
        self.registrations: list[dict[str, Any]] = []
        self.cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda event: self.registrations.extend(event["registrations"]),
        )
        self.cdp.send("ServiceWorker.enable")
        page.wait_for_function("navigator.serviceWorker.ready.then(() => true)")
        deadline = time.monotonic() + 5
        while not self.registrations:
            assert time.monotonic() < deadline, "no service worker registered"
            page.wait_for_timeout(50)

    def deliver(self, said: dict[str, Any]) -> None:
        (registration,) = {
            r["registrationId"]
            for r in self.registrations
            if isinstance(r, dict) and "registrationId" in r
        }
        self.cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": self.origin, "registrationId": registration, "data": json.dumps(said)},
        )

    def shown(self, until: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """The notifications the worker shows, once ``until`` holds for them."""
        deadline = time.monotonic() + 15  # a loaded machine: the worker may take a while
        while True:
            found = self.page.evaluate(
                """navigator.serviceWorker.ready
                     .then(r => r.getNotifications())
                     .then(ns => ns.map(n => ({title: n.title, body: n.body, tag: n.tag,
                                               actions: n.actions.map(a => a.action)})))"""
            )
            if until(found) or time.monotonic() > deadline:
                return list(found)
            self.page.wait_for_timeout(50)

    def press(self, tag: str, action: str) -> bool:
        """The worker's own click handler, as if ``action`` was chosen on the notification."""
        return bool(
            self.page.context.service_workers[0].evaluate(
                """([tag, action]) => self.registration.getNotifications({tag})
                     .then(ns => self.answerFrom(ns[0], action))""",
                [tag, action],
            )
        )


def waiting(runner: Runner, request_id: int, call: str, title: str, seq: int) -> None:
    runner.send(
        frames.tool_call(seq, call, title, kind="delete"),
        frames.permission(seq + 1, request_id, call, title),
    )


def test_a_person_turns_notifications_on_and_answers_a_prompt_from_one(server, phone, service):
    context, subscription = phone
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    alice = member(workspace, "alice", Role.APPROVER)
    carol = member(workspace, "carol", Role.ADMIN)
    _, token = AgentToken.issue(workspace, "laptop")
    page = context.new_page()
    sign_in(page, alice)
    page.goto("/settings/notifications/")
    expect(page.get_by_text("No browser of yours gets notifications yet.")).to_be_visible()
    page.get_by_role("button", name="Turn on notifications in this browser").click()
    expect(page.locator(".push-devices .name")).to_have_text("Chrome on Linux")
    expect(page.get_by_text("Notifications are on in this browser.")).to_be_visible()
    (kept,) = PushDevice.objects.filter(user=alice)
    assert kept.endpoint == subscription.endpoint
    screenshot(page, "notifications-desktop")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "notifications-phone")
    page.set_viewport_size({"width": 1440, "height": 900})
    worker = Worker(page, server.url)

    runner = Runner(server.port, token, uuid.uuid4())
    runner.connect()
    try:
        runner.send(frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Clean the build"))
        waiting(runner, 7, "call-1", "rm -rf build", 2)
        (push,) = pushed(service, subscription, 1)
        key = page.locator("#push-here").get_attribute("data-key")
        assert vapid_claims(push, key or "")["aud"] == service.origin
        said = subscription.read(push)
        worker.deliver(said)
        (shown,) = worker.shown(lambda found: len(found) == 1)
        assert shown["title"] == "Clean the build needs you" and shown["body"] == "rm -rf build"
        assert shown["actions"] == ["allow-once", "reject"]

        assert worker.press(shown["tag"], "allow-once")  # the person chose "Allow once"
        heard = answer_heard(runner)
        assert heard["request_id"] == 7
        assert heard["outcome"] == {"outcome": "selected", "optionId": "allow-once"}
        assert Prompt.objects.get(request_id="n:7").answered_by == alice
        (sent,) = worker.shown(lambda found: bool(found) and found[0]["body"] != "rm -rf build")
        assert sent["body"] == "Allowed once: sent." and sent["actions"] == []

        # Another person answers first: the notification says who, under the same tag.
        waiting(runner, 8, "call-2", "git push --force", 4)
        prompt = Prompt.objects.get(request_id="n:8")
        second = told(service, subscription, f"prompt-{prompt.pk}")
        worker.deliver(second)
        worker.shown(lambda found: any(n["tag"] == second["tag"] for n in found))
        carols = Client()
        carols.force_login(carol)
        with ThreadPoolExecutor(1) as other:  # Playwright's loop runs in this thread
            answer = other.submit(carols.post, f"/prompts/{prompt.pk}/answer", {"choice": "reject"})
            assert answer.result().status_code == 302
        settled = told(service, subscription, second["tag"], settled=True)
        worker.deliver(settled)
        now = worker.shown(lambda found: any("carol" in n["body"] for n in found))
        (replaced,) = [n for n in now if n["tag"] == second["tag"]]
        assert replaced["body"] == "Answered by carol: Rejected" and replaced["actions"] == []
    finally:
        runner.close()

    # The worker keeps one page, the offline one: never a logged-in page.
    cached = page.evaluate(
        """caches.keys().then(names => Promise.all(names.map(name => caches.open(name)
             .then(cache => cache.keys()).then(keys => keys.map(k => new URL(k.url).pathname)))))
             .then(lists => lists.flat())"""
    )
    assert cached == ["/offline/"]
    context.set_offline(True)
    page.goto("/runs/")
    expect(page.get_by_role("heading", name="koruweb cannot be reached")).to_be_visible()
    context.set_offline(False)


def test_the_app_passes_chromiums_installability_check(server, phone):
    context, _ = phone
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    page = context.new_page()
    sign_in(page, member(workspace, "alice", Role.APPROVER))
    page.goto("/inbox/")  # the app's start page
    page.wait_for_function("navigator.serviceWorker.ready.then(() => true)")
    cdp = context.new_cdp_session(page)
    manifest = cdp.send("Page.getAppManifest")
    assert manifest["url"].endswith("/manifest.webmanifest") and not manifest["errors"]
    errors = [
        e["errorId"] for e in cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]
    ]
    assert errors == [] or set(errors) <= {"in-incognito"}, errors
