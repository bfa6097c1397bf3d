"""Driving a run from its page in a real browser: send a message and see its turn run, queue one
during a turn and see it go after, cancel a running turn, switch a mode.

Two kinds of runner: the test's own (``tests/browser/runner.Runner``, a real socket that says
exactly what the test scripts, for what the page shows) and the real one (``manage.py agent
--allow-web`` with ``tests/agents/sdk_agent.py``, for what an agent does with it). The tests
wait for states, never for times. Screenshots at a desktop's size and a phone's go to
``var/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import InferenceAttempt, Role, WebPrompt
from tests import frames
from tests.browser.helpers import PHONE, Live, Team, member, open_chat, screenshot, sign_in, watch
from tests.browser.runner import Runner
from tests.liveserver import BASE_DIR, Server, child_env

pytestmark = [pytest.mark.django_db(transaction=True)]

MODES = [
    {"id": "default", "name": "Ask first", "description": "Asks before it acts"},
    {"id": "plan", "name": "Plan", "description": "Plans, changes nothing"},
    {"id": "bypassPermissions", "name": "Bypass", "description": "Runs anything"},
]
COMMANDS = [
    {"name": "review", "description": "Review the changes", "hint": ""},
    {"name": "release", "description": "Cut a release", "hint": "version"},
    {"name": "init", "description": "Write an AGENTS.md", "hint": ""},
]


def sideways(page: Page) -> int:
    return int(
        page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


# --- the test's own runner -------------------------------------------------------------------


class Scripted:
    """The test's runner, numbering its frames, and what the server sent it."""

    def __init__(self, runner: Runner) -> None:
        self.runner, self.seq = runner, 0

    def send(self, *made: Callable[[int], dict[str, Any]]) -> None:
        sent = []
        for make in made:
            self.seq += 1
            sent.append(make(self.seq))
        self.runner.send(*sent)

    def session_info(self, **info: Any) -> None:
        fields = {
            "allow_web": True,
            "web_modes": ["default", "plan"],
            "modes": MODES,
            "mode": "default",
            "commands": COMMANDS,
            "stays": True,
        }
        fields.update(info)
        self.send(lambda seq: {"type": "session_info", "seq": seq, "at": frames.T0 + seq, **fields})

    def heard(self, kind: str, within: float = 5) -> dict[str, Any]:
        """The next frame of ``kind`` the server sent this runner (acks taken as they pass)."""
        runner = self.runner
        assert runner.socket is not None
        deadline = time.monotonic() + within
        while True:
            found = next((m for m in runner.received if m.get("type") == kind), None)
            if found is not None:
                runner.received.remove(found)
                return found
            left = deadline - time.monotonic()
            assert left > 0, f"the runner heard no {kind}: {runner.received}"
            message = runner.socket.receive_json(timeout=max(0.05, left))
            if message.get("type") == "ack":
                runner._acknowledged(message["seq"])
            else:
                runner.received.append(message)

    def start(self, web_prompt: dict[str, Any] | None = None, prompt: str = "Fix it") -> uuid.UUID:
        attempt = uuid.uuid4()
        text = web_prompt["text"] if web_prompt else prompt

        def started(seq: int) -> dict[str, Any]:
            frame = frames.turn_started(seq, attempt, uuid.uuid4(), prompt=text, title="Tidy up")
            return {**frame, "web_prompt_id": web_prompt["id"]} if web_prompt else frame

        self.send(started)
        return attempt

    def end(self, attempt: uuid.UUID, reason: str = "end_turn") -> None:
        self.send(lambda seq: frames.turn_ended(seq, attempt, reason))


@pytest.fixture
def scripted(runner: Runner) -> Scripted:
    agent = Scripted(runner)
    agent.session_info()
    return agent


def approver(page: Page, live: Live, team: Team, runner: Runner, name: str = "bob") -> Page:
    sign_in(page, member(team.workspace, name, Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    return page


def box(page: Page) -> Any:
    return page.get_by_label("Message the agent")


def queue(page: Page) -> Any:
    return page.locator("#drive .web-prompt")


def waiting(page: Page) -> Any:
    """The messages on their way (the queue also shows the last ones that did not go)."""
    return page.locator("#drive .web-prompt.queued, #drive .web-prompt.sent")


def turns(page: Page) -> Any:
    return page.locator("#turns section.turn")


# --- the page, with the test's runner --------------------------------------------------------


def test_enter_sends_a_message_the_runner_gets_it_and_its_turn_says_who_sent_it(
    page: Page, page_errors: list[str], live: Live, new_page: Callable[..., Page], team: Team,
    runner: Runner, scripted: Scripted,
):  # fmt: skip
    approver(page, live, team, runner)
    alices = new_page()  # a viewer watching: sees the message and the turn, no controls
    alices_live = watch(alices)
    sign_in(alices, team.viewer)
    open_chat(alices, alices_live, runner.chat_id)
    expect(page.locator("#drive .allows")).to_have_text("This run takes prompts from the web.")
    expect(box(alices)).to_have_count(0)
    box(page).fill("Rename the helper")
    box(page).press("Shift+Enter")
    box(page).type("and **update** its callers")
    box(page).press("Enter")
    heard = scripted.heard("prompt")
    assert heard["text"] == "Rename the helper\nand **update** its callers" and heard["by"] == "bob"
    expect(box(page)).to_have_value("")
    for person in (page, alices):  # shown at once as on its way, to everyone
        expect(queue(person)).to_have_count(1)
        expect(queue(person).locator(".badge")).to_have_text("Sent")
    expect(alices.locator("#drive .drive-control:visible")).to_have_count(0)
    screenshot(page, "drive-desktop-sent")
    screenshot(alices, "drive-desktop-viewer")
    attempt = scripted.start(heard)
    for person in (page, alices):
        expect(queue(person)).to_have_count(0)
        expect(turns(person).last.locator(".sent-by")).to_have_text("from bob, on the web")
    expect(page.get_by_role("button", name="Cancel turn")).to_be_visible()
    expect(alices.get_by_role("button", name="Cancel turn")).to_be_hidden()
    scripted.end(attempt)
    expect(page.get_by_role("button", name="Cancel turn")).to_have_count(0)
    assert page_errors == []


def test_the_next_message_typed_before_the_last_ones_answer_comes_is_kept_in_the_box(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
    scripted: Scripted,
):  # fmt: skip
    """The push that shows a sent message often reaches the page before the answer to its
    POST does; what the person has typed meanwhile is theirs, not cleared with the box."""
    approver(page, live, team, runner)
    attempt = scripted.start(prompt="Run the migrations")
    held: list[Any] = []
    page.route(f"**/chats/{runner.chat_id}/messages", lambda route: held.append(route))
    box(page).fill("Then the docs")
    page.get_by_role("button", name="Send").click()
    while not held:  # the POST, held back before it reaches the server
        page.wait_for_timeout(20)
    answer = held[0].fetch()  # the server queues it and pushes the queue
    expect(queue(page).filter(has_text="Then the docs").locator(".badge")).to_have_text("Queued")
    box(page).fill("And the changelog")
    held[0].fulfill(response=answer)  # the answer comes last
    expect(page.locator("#compose-said")).to_contain_text("Queued")
    expect(box(page)).to_have_value("And the changelog")
    page.unroute(f"**/chats/{runner.chat_id}/messages")
    page.get_by_role("button", name="Send").click()
    expect(queue(page)).to_have_count(2)
    expect(box(page)).to_have_value("")
    scripted.end(attempt)
    assert page_errors == []


def test_a_message_sent_during_a_turn_is_queued_editable_removable_and_goes_after(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
    scripted: Scripted,
):  # fmt: skip
    approver(page, live, team, runner)
    attempt = scripted.start(prompt="Run the migrations")
    expect(turns(page)).to_have_count(1)
    for text in ("Then the docs", "And a typo"):
        box(page).fill(text)
        page.get_by_role("button", name="Send").click()
        expect(queue(page).filter(has_text=text).locator(".badge")).to_have_text("Queued")
    expect(page.locator("#compose-said")).to_contain_text("Queued")
    first = queue(page).filter(has_text="Then the docs")
    first.get_by_text("Edit").click()
    first.get_by_label("Edit this queued message").fill("Then the docs, briefly")
    first.get_by_role("button", name="Save").click()
    expect(first.locator(".web-prompt-text")).to_have_text("Then the docs, briefly")
    expect(first.locator("details.edit")).not_to_have_attribute("open", "")
    queue(page).filter(has_text="And a typo").get_by_role("button", name="Remove").click()
    expect(waiting(page)).to_have_count(1)
    expect(queue(page).locator(".removed-by")).to_contain_text("removed by bob")
    screenshot(page, "drive-desktop-queued")
    scripted.end(attempt)  # the turn ends: the queued message goes
    heard = scripted.heard("prompt")
    assert heard["text"] == "Then the docs, briefly"
    expect(waiting(page).locator(".badge")).to_have_text("Sent")
    scripted.start(heard)
    expect(waiting(page)).to_have_count(0)
    expect(turns(page)).to_have_count(2)
    assert [p.status for p in WebPrompt.objects.order_by("created_at")] == ["started", "removed"]
    assert page_errors == []


def test_only_its_author_sees_edit_an_admin_may_remove_it_and_the_queue_says_who_did(
    page: Page, page_errors: list[str], live: Live, new_page: Callable[..., Page], team: Team,
    runner: Runner, scripted: Scripted,
):  # fmt: skip
    """The queue is pushed once for every viewer; each page shows a message's Edit only to its
    author, and Remove to its author or an admin (the server refuses anyone else anyway)."""
    approver(page, live, team, runner)  # bob writes the message
    attempt = scripted.start(prompt="Run the migrations")
    dave = new_page()  # another approver: may drive the run, not bob's message
    approver(dave, watch(dave), team, runner, "dave")
    carol = new_page()  # an admin of the workspace
    carols_live = watch(carol)
    sign_in(carol, member(team.workspace, "carol", Role.ADMIN))
    open_chat(carol, carols_live, runner.chat_id)
    box(page).fill("Then the docs")
    page.get_by_role("button", name="Send").click()
    for person in (page, dave, carol):
        expect(queue(person).locator(".badge")).to_have_text("Queued")
    expect(queue(page).get_by_text("Edit")).to_be_visible()  # bob's own
    expect(queue(page).get_by_role("button", name="Remove")).to_be_visible()
    expect(queue(dave).get_by_text("Edit")).to_be_hidden()
    expect(queue(dave).get_by_role("button", name="Remove")).to_be_hidden()
    expect(queue(carol).get_by_text("Edit")).to_be_hidden()
    remove = queue(carol).filter(has_text="Then the docs").get_by_role("button", name="Remove")
    expect(remove).to_be_visible()
    screenshot(dave, "drive-desktop-others-message")
    box(dave).fill("And the changelog")  # a push of dave's own message keeps bob's marks
    dave.get_by_role("button", name="Send").click()
    daves = queue(dave).filter(has_text="And the changelog")
    expect(daves.locator(".badge")).to_have_text("Queued")
    expect(daves.get_by_text("Edit")).to_be_visible()
    expect(queue(dave).filter(has_text="Then the docs").get_by_text("Edit")).to_be_hidden()
    remove.click()
    for person in (page, dave, carol):
        removed = queue(person).filter(has=person.locator(".badge.removed"))
        expect(removed.locator(".removed-by")).to_contain_text("removed by carol")
        expect(removed.locator(".web-prompt-text")).to_have_count(0)
    screenshot(page, "drive-desktop-removed-by")
    scripted.end(attempt)
    assert scripted.heard("prompt")["text"] == "And the changelog"  # bob's never goes
    assert page_errors == []


def test_cancel_asks_the_runner_and_the_turn_says_who_cancelled_it(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
    scripted: Scripted,
):  # fmt: skip
    approver(page, live, team, runner)
    attempt = scripted.start(prompt="Wait for the build")
    page.get_by_role("button", name="Cancel turn").click()
    heard = scripted.heard("cancel")
    assert heard["attempt_id"] == str(attempt) and heard["by"] == "bob"
    head = turns(page).last.locator(".turn-status")
    expect(head.locator(".cancelled-by")).to_have_text("cancel asked by bob")
    scripted.end(attempt, "cancelled")
    expect(head.locator(".badge")).to_have_text("Cancelled by bob")
    expect(head.locator(".cancelled-by")).to_have_count(0)  # the badge says who
    assert InferenceAttempt.objects.get(pk=attempt).cancelled_by is not None
    assert page_errors == []


def test_the_mode_switch_offers_the_web_modes_and_follows_the_agent(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
    scripted: Scripted,
):  # fmt: skip
    approver(page, live, team, runner)
    modes = page.locator("#drive .segmented button")
    expect(modes).to_have_text(["Ask first", "Plan"])  # not Bypass: not in --web-modes
    expect(page.get_by_role("button", name="Ask first")).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Plan").click()
    assert scripted.heard("set_mode")["mode"] == "plan"
    switched = {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
    scripted.send(lambda seq: frames.update(seq, switched))
    expect(page.get_by_role("button", name="Plan")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_role("button", name="Ask first")).to_have_attribute("aria-pressed", "false")
    assert page_errors == []


def test_slash_offers_the_agents_commands_in_a_list_the_keyboard_can_choose_from(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
    scripted: Scripted,
):  # fmt: skip
    approver(page, live, team, runner)
    box(page).press("/")
    options = page.get_by_role("listbox", name="The agent's commands").get_by_role("option")
    expect(options).to_have_count(3)
    box(page).type("re")
    expect(options).to_have_count(2)
    expect(options.first).to_have_attribute("aria-selected", "true")
    box(page).press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    screenshot(page, "drive-desktop-commands")
    box(page).press("Enter")  # takes the command; does not send
    expect(box(page)).to_have_value("/release ")
    expect(options).to_have_count(0)
    box(page).type("2.1")
    box(page).press("Enter")
    assert scripted.heard("prompt")["text"] == "/release 2.1"
    assert page_errors == []


def test_a_run_that_only_reports_says_so_and_shows_no_controls(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner,
):  # fmt: skip
    scripted = Scripted(runner)
    scripted.session_info(allow_web=False)
    approver(page, live, team, runner)
    scripted.start(prompt="Work alone")
    expect(page.locator("#drive .allows")).to_have_text(
        "This run only reports: start it with --allow-web to prompt it from here."
    )
    expect(box(page)).to_be_hidden()
    expect(page.get_by_role("button", name="Cancel turn")).to_have_count(0)
    scripted.session_info(allow_web=True)  # a run may start to allow it: the page follows
    expect(box(page)).to_be_visible()
    expect(page.get_by_role("button", name="Cancel turn")).to_be_visible()
    assert page_errors == []


def test_on_a_phone_the_controls_fit_the_screen(
    new_page: Callable[..., Page], team: Team, runner: Runner, scripted: Scripted,
):  # fmt: skip
    phone = new_page(**PHONE)
    page_errors: list[str] = []
    phone.on("pageerror", lambda error: page_errors.append(str(error)))
    phone_live = watch(phone)
    approver(phone, phone_live, team, runner)
    attempt = scripted.start(prompt="Make the tests pass on CI, not just on my laptop")
    box(phone).fill("Then open a pull request with a summary of what changed")
    phone.get_by_role("button", name="Send").click()
    expect(queue(phone).locator(".badge")).to_have_text("Queued")
    expect(phone.get_by_role("button", name="Cancel turn")).to_be_visible()
    assert sideways(phone) == 0
    screenshot(phone, "drive-phone-queued")
    scripted.end(attempt)
    scripted.heard("prompt")
    expect(queue(phone).locator(".badge")).to_have_text("Sent")
    assert page_errors == []


# --- the real runner and an agent -----------------------------------------------------------

SDK_AGENT = [sys.executable, str(BASE_DIR / "tests" / "agents" / "sdk_agent.py")]


class Agent:
    """``manage.py agent --allow-web … -- tests/agents/sdk_agent.py`` in a child process, with
    no prompt of its own (its standard input is empty): it serves the web's prompts."""

    def __init__(self, server: Server, token: str, log: Path, *flags: str) -> None:
        command = [sys.executable, "manage.py", "agent", "--server", server.ws_url]
        command += ["--token", token, "--allow-web", *flags, "--", *SDK_AGENT]
        self.log = log
        self.process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the run's page, once the server has the chat
        found = re.search(r"/chats/([0-9a-f-]{36})/", line)
        assert found, f"the runner printed no page: {line!r}\n{log.read_text()}"
        self.chat_id = uuid.UUID(found.group(1))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def agent(server: Server, team: Team, tmp_path: Path) -> Iterator[Agent]:
    """A real runner that takes prompts from the web and may switch to modes default and auto."""
    running = Agent(server, team.token, tmp_path / "runner.log", "--web-modes", "default,auto")
    try:
        yield running
    finally:
        running.stop()


def on_real_run(page: Page, live: Live, team: Team, agent: Agent) -> Page:
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    open_chat(page, live, agent.chat_id)
    expect(page.locator("#drive .allows")).to_have_text("This run takes prompts from the web.")
    return page


def send(page: Page, text: str) -> None:
    box(page).fill(text)
    box(page).press("Enter")


def test_a_real_agent_runs_the_message_sent_from_the_page(
    page: Page, page_errors: list[str], live: Live, new_page: Callable[..., Page], team: Team,
    agent: Agent,
):  # fmt: skip
    on_real_run(page, live, team, agent)
    send(page, "basic")
    turn = turns(page).last
    expect(turn.locator(".sent-by")).to_have_text("from bob, on the web")
    expect(turn.locator("tr.tool")).to_have_count(2)
    expect(turn.locator(".turn-status .badge")).to_have_text("Finished")
    expect(turn.locator(".reply")).to_contain_text("Done: edited notes.txt.")
    expect(queue(page)).to_have_count(0)
    screenshot(page, "drive-real-desktop-ran")
    phone = new_page(**PHONE)
    phone_live = watch(phone)
    sign_in(phone, member(team.workspace, "carol", Role.APPROVER))
    open_chat(phone, phone_live, agent.chat_id)
    expect(turns(phone).last.locator(".sent-by")).to_have_text("from bob, on the web")
    assert sideways(phone) == 0
    screenshot(phone, "drive-real-phone-ran")
    assert page_errors == []


def test_a_message_sent_while_the_agent_waits_for_a_person_goes_after_that_turn(
    page: Page, page_errors: list[str], live: Live, team: Team, agent: Agent,
):  # fmt: skip
    on_real_run(page, live, team, agent)
    send(page, "permission")
    asking = turns(page).last
    expect(asking.get_by_role("button", name="Allow once")).to_be_visible()
    send(page, "basic")  # the agent is busy: queued
    expect(queue(page).locator(".badge")).to_have_text("Queued")
    screenshot(page, "drive-real-desktop-queued")
    asking.get_by_role("button", name="Allow once").click()
    expect(asking.locator(".turn-status .badge")).to_have_text("Finished")
    expect(turns(page)).to_have_count(2)
    after = turns(page).last
    expect(after.locator(".prompt-text")).to_contain_text("basic")
    expect(after.locator(".turn-status .badge")).to_have_text("Finished")
    expect(queue(page)).to_have_count(0)
    assert page_errors == []


def test_cancel_stops_a_real_agents_running_turn(
    page: Page, page_errors: list[str], live: Live, team: Team, agent: Agent,
):  # fmt: skip
    on_real_run(page, live, team, agent)
    send(page, "slow 60")
    turn = turns(page).last
    expect(turn.locator("tr.tool .badge")).to_have_text("Running")
    turn.get_by_role("button", name="Cancel turn").click()
    expect(turn.locator(".turn-status .badge")).to_have_text("Cancelled by bob")
    expect(turn.locator("tr.tool .badge")).not_to_have_text("Running")
    screenshot(page, "drive-real-desktop-cancelled")
    assert page_errors == []


def test_a_real_agent_switches_to_a_mode_chosen_on_the_page(
    page: Page, page_errors: list[str], live: Live, team: Team, agent: Agent,
):  # fmt: skip
    on_real_run(page, live, team, agent)
    expect(page.locator("#drive .segmented button")).to_have_text(["Default", "Auto"])
    expect(page.get_by_role("button", name="Default")).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Auto").click()
    expect(page.get_by_role("button", name="Auto")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#chat-head .mode")).to_have_text("mode auto")
    send(page, "basic")  # and the agent goes on in it
    expect(turns(page).last.locator(".turn-status .badge")).to_have_text("Finished")
    assert page_errors == []
