"""A stalled server never tells a lie about its runners (issue 23): the real server, the real
runner with the SDK agent waiting on a permission prompt, and a person's Chromium on the run's
page, while the server process is stopped (SIGSTOP) for twice the grace period.

The grace is 2 s and the heartbeat 1 s here, so a stop of 4 s is longer than the silence after
which a sweep counts a runner gone (``presence.grace_silence``: 3 s). A MutationObserver on the
page logs every change of what it says of the runner (the head's ``data-runner``) and whether a
turn says "Runner lost". With a second server process, whose sweep cannot tell the stopped one
from a dead one, the runner's heartbeat puts back what that sweep ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from activity.models import AgentToken, Chat, InferenceAttempt, Role, WebPrompt, Workspace
from tests import frames
from tests.browser.helpers import open_chat, sign_in, watch
from tests.integration.test_drive import Person, runner, stopped, turns_ended
from tests.integration.test_runner import (  # noqa: F401  (a fixture: no runner outlives its test)
    _no_runner_outlives_its_test,
    eventually,
    open_prompt,
    socket,
)
from tests.liveserver import Server
from tests.members import member

pytestmark = pytest.mark.django_db(transaction=True)
GRACE, HEARTBEAT = 2, 1  # s: RUNNER_GRACE_SECONDS, RUNNER_HEARTBEAT_SECONDS of the servers
STALL = 2 * GRACE
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]

# Every change of what the page says of the runner, e.g. "online", "offline · Runner lost".
OBSERVE = """() => {
  const said = () => {
    const runner = document.querySelector("#chat-head [data-runner]")?.dataset.runner ?? "none";
    const lost = [...document.querySelectorAll(".turn-status")]
      .some((status) => status.textContent.includes("Runner lost"));
    return lost ? `${runner} · Runner lost` : runner;
  };
  window.runnerLog = [said()];
  new MutationObserver(() => {
    const now = said();
    if (now !== window.runnerLog.at(-1)) window.runnerLog.push(now);
  }).observe(document.body, {
    subtree: true, childList: true, characterData: true, attributes: true,
  });
}"""


@pytest.fixture(scope="module", autouse=True)
def async_unsafe() -> Iterator[None]:
    """The ORM beside Playwright's event loop in this thread, only while these tests run (and
    the database flush after each)."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(scope="module")
def browser(async_unsafe: None) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@contextlib.contextmanager
def servers(tmp_path: Path, count: int) -> Iterator[list[Server]]:
    """``count`` server processes on the test database and one Redis."""
    env = {"RUNNER_HEARTBEAT_SECONDS": str(HEARTBEAT)}
    started = [
        Server(tmp_path / f"daphne-{n}.log", redis=True, grace=GRACE, env=env) for n in range(count)
    ]
    try:
        for server in started:
            server.spawn()
        for server in started:
            server.wait_ready()
        yield started
    finally:
        for server in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.pid, signal.SIGCONT)  # a test that failed mid-stall
            server.stop()


@pytest.fixture
def alice() -> tuple[Workspace, User, str]:
    """Acme, its approver alice, and a token for its runner."""
    acme = Workspace.objects.create(slug="acme", name="Acme")
    return acme, member(acme, "alice", Role.APPROVER), AgentToken.issue(acme, "ci")[1]


def page_on(browser: Any, server: Server, user: User, chat_id: uuid.UUID) -> Page:
    """The run's page, live, in a browser of its own, with ``OBSERVE`` logging it."""
    page: Page = browser.new_context(base_url=server.url).new_page()
    sign_in(page, user)
    open_chat(page, watch(page), chat_id)
    expect(page.locator("#chat-head [data-runner]")).to_have_attribute("data-runner", "online")
    page.evaluate(OBSERVE)
    return page


def heartbeat_after(chat_id: uuid.UUID, since: datetime | None) -> datetime:
    """Until the runner's socket writes a heartbeat later than ``since``; its time."""

    def later() -> datetime | None:
        seen = Chat.objects.values_list("runner_seen_at", flat=True).get(pk=chat_id)
        return seen if seen is not None and (since is None or seen > since) else None

    return eventually(later)


def just_after_a_heartbeat(chat_id: uuid.UUID) -> datetime:
    """Until the runner's socket has just written its heartbeat: stopped now, the server's next
    sweep comes before its next heartbeat, which is when a sweep can get it wrong."""
    return heartbeat_after(chat_id, heartbeat_after(chat_id, None))


def log(page: Page) -> list[str]:
    said: list[str] = page.evaluate("() => window.runnerLog")
    return said


def test_a_server_stopped_for_twice_the_grace_never_says_its_runner_is_lost(
    browser: Any, tmp_path: Path, alice: tuple[Workspace, User, str]
) -> None:
    _, user, token = alice
    with servers(tmp_path, 1) as (server,):
        run = runner(server, token, "--allow-web", "--stay", "--prompt", "permission")
        request = open_prompt(run.chat_id)  # the agent waits for a person
        page = page_on(browser, server, user, run.chat_id)
        last = just_after_a_heartbeat(run.chat_id)
        os.kill(server.pid, signal.SIGSTOP)
        time.sleep(STALL)  # the one deliberate wait: the server stopped, as a paused machine is
        os.kill(server.pid, signal.SIGCONT)
        heartbeat_after(run.chat_id, heartbeat_after(run.chat_id, last))  # two, since it resumed
        assert Chat.objects.get(pk=run.chat_id).runner_connected
        expect(page.locator("#chat-head [data-runner]")).to_have_attribute("data-runner", "online")

        person = Person(server, user)
        status, _ = person.send(run.chat_id, "basic")
        assert status == 302
        assert WebPrompt.objects.get(chat_id=run.chat_id).status == "queued"  # a turn runs
        person.allow(request)
        first, second = turns_ended(run, 2)  # the runner's turn went on; then the message's
        assert first.stop_reason == "end_turn" and first.ended_at is not None
        assert (second.prompt, second.sent_by, second.stop_reason) == ("basic", user, "end_turn")
        assert second.started_at >= first.ended_at
        assert log(page) == ["online"]  # not once "offline", nor a turn "Runner lost"
        stopped(run)  # Ctrl-C: the runner, too, has no turn running (it quits)


def test_a_runner_another_process_counted_lost_while_its_server_stalled_comes_back_whole(
    browser: Any, tmp_path: Path, alice: tuple[Workspace, User, str]
) -> None:
    """The runner's server is stopped until the other process's sweep gives up on it (it cannot
    tell a stalled process from a dead one); then the runner's heartbeat, the only witness,
    puts everything back: the page, the turn, its prompt, the queue."""
    _, user, token = alice
    with servers(tmp_path, 2) as (holder, other), contextlib.ExitStack() as sockets:
        # Another runner on the other process: its watchdog sweeps (it starts with a runner).
        neighbour = socket(sockets, other, token, frames.hello(uuid.uuid4()))
        assert json.loads(neighbour.recv(10)) == {"type": "ack", "seq": 0}
        run = runner(holder, token, "--allow-web", "--stay", "--prompt", "permission")
        request = open_prompt(run.chat_id)
        page = page_on(browser, other, user, run.chat_id)
        just_after_a_heartbeat(run.chat_id)
        os.kill(holder.pid, signal.SIGSTOP)
        given_up = InferenceAttempt.objects.filter(chat_id=run.chat_id, stop_reason="runner_lost")
        [reopened] = eventually(lambda: list(given_up.all()))  # by the other process's sweep
        expect(page.locator(".turn-status", has_text="Runner lost")).to_have_count(1)
        os.kill(holder.pid, signal.SIGCONT)

        eventually(lambda: Chat.objects.get(pk=run.chat_id).runner_connected)
        expect(page.locator("#chat-head [data-runner]")).to_have_attribute("data-runner", "online")
        expect(page.locator(".turn-status", has_text="Runner lost")).to_have_count(0)
        reopened.refresh_from_db()
        assert (reopened.ended_at, reopened.stop_reason) == (None, "")
        back = len(log(page))  # the heartbeats resumed: from here on it is "online"

        person = Person(other, user)
        status, _ = person.send(run.chat_id, "basic")
        assert status == 302
        assert WebPrompt.objects.get(chat_id=run.chat_id).status == "queued"
        person.allow(request)  # answerable again, and the runner still waits for it
        first, second = turns_ended(run, 2)
        assert first.pk == reopened.pk and first.stop_reason == "end_turn"
        assert (second.prompt, second.sent_by, second.stop_reason) == ("basic", user, "end_turn")
        said = log(page)
        assert said[0] == "online" and "offline · Runner lost" in said[:back]
        assert said[back - 1 :] == ["online"], said
        stopped(run)  # the runner agrees: no turn runs
