"""What a person watching a chat in a real browser relies on.

Each test drives a real runner socket into a real Daphne child and watches the page in headless
Chromium. The page must follow the runner live, keep what the person opened open, survive a
server crash, and catch up on whatever it missed, ending equal to the database.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Role, ToolActivity
from tests import frames
from tests.browser.helpers import (
    RECONNECT_TIMEOUT,
    Live,
    Team,
    badge,
    expect_screen_equals_database,
    log_in,
    member,
    open_chat,
    reload_marker,
    row_of,
    screenshot,
    set_visibility,
)
from tests.browser.runner import Runner
from tests.liveserver import Server

pytestmark = [pytest.mark.django_db(transaction=True)]


# --- the tests -------------------------------------------------------------------------------


def test_a_viewer_sees_a_turn_its_tool_row_and_its_reply_arrive_live_with_agent_markup_as_text(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    # Untitled yet: named by its agent and start, on the page and in the tab alike.
    expect(page.locator("#chat-head h1")).to_have_text(
        re.compile(r"^\S+ run, \d+ \w+ \d{4}, \d\d:\d\d$")
    )
    expect(page).to_have_title(re.compile(r"^\S+ run, \d+ \w+ \d{4}, \d\d:\d\d · koruweb$"))
    expect(page.locator("#chat-head [data-runner]")).to_have_text("runner connected")

    runner.send(
        frames.turn_started(1, attempt, reply, prompt="Make the build green"),
        frames.tool_call(2, "call_1", "Read <b>README</b>.md", kind="read", status="pending"),
    )
    expect(page.locator("#chat-head h1")).to_have_text("Fix the flaky test")
    expect(page).to_have_title("Fix the flaky test · koruweb")  # the tab follows the push
    expect(page.locator(f"#turn-{attempt} .prompt-text")).to_contain_text("Make the build green")
    row = row_of(runner, "call_1")
    expect(page.locator(f"#details-{row.id} > summary")).to_have_text("Read <b>README</b>.md")
    expect(badge(page, row)).to_have_text("Running")  # a read the agent announced is under way

    runner.send(frames.tool_update(3, "call_1", status="completed"))
    expect(badge(page, row)).to_have_text("Succeeded")

    markdown = page.locator(f"#reply-{reply} .markdown")
    runner.send(frames.say(4, "Found it: **the clock** is "))
    expect(markdown.locator("strong")).to_have_text("the clock")
    runner.send(frames.say(5, "mocked twice.\n\n"))
    expect(markdown).to_contain_text("the clock is mocked twice.")
    attack = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
    runner.send(frames.say(6, f"Look: {attack}"))
    expect(markdown).to_contain_text(f"Look: {attack}")  # the text, as the agent wrote it

    expect(page.locator(f"#reply-{reply} :is(script, img), #tool-{row.id} b")).to_have_count(0)
    assert page.title() != "pwned"
    assert same_document(), "the page was reloaded"
    assert page_errors == []  # no exception, no CSP violation


# The reply's parts and calls in the order the page shows them: a text part by its words, a call
# by its row's id (activity/review/transcript.py, interleave; docs/architecture.md).
IN_ORDER = """(reply) => [...reply.querySelectorAll(".reply-part:not([hidden]), tr.tool")].map(
  (el) => el.matches("tr") ? el.id : el.textContent.replace(/\\s+/g, " ").trim())"""
# The reply's own parts: each table by its body's id and rows, each text part by id and words
# (a pushed row's words differ: it has no CSRF token, so it links to its own page).
PARTS = """(reply) => [...reply.children].map((el) => [
  el.tagName, el.id || el.querySelector("tbody")?.id, el.hidden,
  [...el.querySelectorAll("tr.tool")].map((row) => row.id),
  el.matches("table") ? "" : el.textContent.replace(/\\s+/g, " ")])"""


def test_the_reply_text_stands_between_the_calls_it_came_between_live_and_on_a_fresh_load(
    page: Page, page_errors: list[str], live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    ana = member(team.workspace, "ana", Role.APPROVER)  # she may answer: the buttons show
    log_in(page, ana, then=f"/chats/{runner.chat_id}/")
    page.set_viewport_size({"width": 1440, "height": 900})
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    command = {"command": "python3 test_greet.py"}
    runner.send(
        frames.turn_started(1, attempt, reply, prompt="Fix the failing test"),
        frames.say(2, "Let me run the test first."),
        frames.tool_call(
            3,
            "run",
            "Run python3 test_greet.py",
            kind="execute",
            status="in_progress",
            rawInput=command,
        ),
    )
    run = row_of(runner, "run")
    expect(badge(page, run)).to_have_text("Running")
    runner.send(
        frames.tool_update(4, "run", status="failed"),
        frames.say(5, "\n\nThe test expects a comma. I'll change `greet()`."),
    )
    expect(page.locator(f"#reply-{attempt}-{run.text_offset}")).to_contain_text("I'll change")
    runner.send(
        frames.tool_call(6, "edit", "Edit greet.py", kind="edit"),
        frames.permission(7, 1, "edit", "Edit greet.py"),
    )
    edit = row_of(runner, "edit")
    allow = page.locator(f"#tool-{edit.id} button.choice", has_text="Allow once")
    expect(allow).to_be_visible()
    said = [
        "Let me run the test first.",
        f"tool-{run.id}",
        "The test expects a comma. I'll change greet().",
        f"tool-{edit.id}",
    ]
    reply_box = page.locator(f"#reply-{reply}")
    assert reply_box.evaluate(IN_ORDER) == said
    # The calls' tables and the text parts are the reply's own children, in that order.
    assert page.locator(f"#reply-{reply} > table.tools tr.tool").count() == 2
    screenshot(page, "live-time-order-desktop")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(allow).to_be_visible()
    screenshot(page, "live-time-order-phone")

    fresh = page.context.new_page()
    fresh.goto(f"/chats/{runner.chat_id}/")
    assert fresh.locator(f"#reply-{reply}").evaluate(IN_ORDER) == said
    assert fresh.locator(f"#reply-{reply}").evaluate(PARTS) == reply_box.evaluate(PARTS)
    fresh.close()
    assert same_document(), "the page was reloaded"
    assert page_errors == []


def test_a_row_the_viewer_expanded_stays_expanded_when_the_row_updates(
    page: Page, live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, reply),
        frames.tool_call(
            2, "call_1", "Run the tests", kind="execute", status="pending",
            rawInput={"command": "pytest -q"},
        ),
    )  # fmt: skip
    row = row_of(runner, "call_1")
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    details = page.locator(f"#details-{row.id}")
    details.locator("> summary").click()
    expect(details).to_have_attribute("open", "")
    expect(details.locator("pre.input")).to_be_visible()

    runner.send(frames.tool_update(3, "call_1", status="in_progress"))
    expect(badge(page, row)).to_have_text("Running")
    expect(details).to_have_attribute("open", "")

    output = {"type": "content", "content": {"type": "text", "text": "3 passed in 0.2s"}}
    runner.send(frames.tool_update(4, "call_1", status="completed", content=[output]))
    expect(badge(page, row)).to_have_text("Succeeded")
    expect(details).to_have_attribute("open", "")
    expect(details.locator("pre.output")).to_have_text("3 passed in 0.2s")
    expect(details.locator("pre.output")).to_be_visible()


def test_after_the_server_is_killed_mid_turn_and_restarted_the_page_ends_equal_to_the_database(
    page: Page, live: Live, team: Team, runner: Runner, server: Server
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"),
    )
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    expect(badge(page, row_of(runner, "call_1"))).to_have_text("Running")

    # Mid-turn: frames on the wire, perhaps applied, perhaps not, when the server dies.
    runner.send(
        frames.tool_update(3, "call_1", status="in_progress"),
        frames.tool_call(4, "call_2", "Edit clock.py", kind="edit", status="pending"),
        wait=False,
    )
    server.kill()
    runner.close()
    live.disconnected()

    server.start()
    runner.connect()  # hello; resends whatever the server does not have
    runner.wait_acked()
    runner.send(
        frames.tool_update(5, "call_1", status="completed"),
        frames.tool_update(6, "call_2", status="failed"),
        frames.say(7, "Reading worked; the edit failed."),
        frames.turn_ended(8, attempt),
    )
    live.connected(timeout=RECONNECT_TIMEOUT)  # the page reconnected by itself

    expect(page.locator(f"#reply-{reply} .markdown")).to_have_text(
        "Reading worked; the edit failed."
    )
    expect(page.locator(f"#turn-head-{attempt} .turn-status")).to_contain_text("Finished")
    expect(page.locator("#chat-head [data-runner]")).to_have_text("runner connected")
    assert same_document(), "the page was reloaded instead of reconnecting"
    rows = ToolActivity.objects.filter(chat_id=runner.chat_id).order_by("position")
    assert [(r.tool_call_id, r.status) for r in rows] == [
        ("call_1", "completed"),
        ("call_2", "failed"),
    ]  # every frame applied once, resent or not
    expect_screen_equals_database(page, runner.chat_id, timeout=1_500)


def test_a_tab_in_the_background_catches_up_on_what_it_missed_when_shown_again(
    page: Page, live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"),
    )
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    same_document = reload_marker(page)
    first = row_of(runner, "call_1")

    set_visibility(page, hidden=True)  # hx-ws closes the socket of a hidden tab
    live.disconnected()
    runner.send(
        frames.tool_update(3, "call_1", status="completed"),
        frames.tool_call(4, "call_2", "Run the tests", kind="execute", status="pending"),
    )
    page.wait_for_timeout(200)
    expect(badge(page, first)).to_have_text("Running", timeout=1)  # it really missed them

    set_visibility(page, hidden=False)
    live.connected()
    expect_screen_equals_database(page, runner.chat_id)
    assert same_document()


def test_coming_back_to_a_chat_with_the_back_button_shows_what_happened_meanwhile(
    page: Page, live: Live, team: Team, runner: Runner, server: Server
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"),
    )
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    page.get_by_role("link", name="koruweb").click()
    expect(page).to_have_url(f"{server.url}/")

    runner.send(
        frames.tool_update(3, "call_1", status="completed"),
        frames.tool_call(4, "call_2", "Run the tests", kind="execute", status="pending"),
    )
    page.go_back()
    expect_screen_equals_database(page, runner.chat_id)
    runner.send(frames.tool_update(5, "call_2", status="completed"))  # and it is live again
    expect_screen_equals_database(page, runner.chat_id)


def test_a_page_that_lost_a_push_asks_for_what_it_missed(
    page: Page, live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(frames.turn_started(1, attempt, reply))
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    # A push can be lost on the way (a full channel-layer queue drops it silently,
    # docs/gotchas.md#channel-layers-drop-messages-silently): the page drops the next one that
    # changes something, as if it never came (a room's heartbeat, {"from": V, "to": V,
    # "content": ""}, is let through).
    page.evaluate(
        """() => {
          const live = document.getElementById("live");
          const drop = (event) => {
            if (!JSON.parse(event.detail.message.data).content) return;
            event.detail.cancelled = true;
            event.preventDefault();
            live.removeEventListener("htmx:ws:before:message:incoming", drop);
            document.body.dataset.dropped = "yes";
          };
          live.addEventListener("htmx:ws:before:message:incoming", drop);
        }"""
    )
    runner.send(frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"))
    expect(page.locator("body")).to_have_attribute("data-dropped", "yes")
    expect(page.locator("tr.tool")).to_have_count(0)

    runner.send(frames.tool_update(3, "call_1", status="completed"))  # a push with a gap
    expect_screen_equals_database(page, runner.chat_id, timeout=1_500)


def test_tool_rows_that_arrive_in_one_push_with_reply_text_are_shown(
    page: Page, live: Live, team: Team, runner: Runner
):
    attempt, reply = uuid.uuid4(), uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, reply),
        frames.tool_call(2, "call_1", "Read README.md", kind="read", status="pending"),
    )
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)
    set_visibility(page, hidden=True)
    live.disconnected()
    runner.send(
        frames.say(3, "Reading it now."),
        frames.tool_update(4, "call_1", status="completed"),
        frames.tool_call(5, "call_2", "Run the tests", kind="execute", status="pending"),
    )
    set_visibility(page, hidden=False)  # its catch-up is one push with all three changes
    live.connected()
    first, second = row_of(runner, "call_1"), row_of(runner, "call_2")
    expect(page.locator(f"#reply-{attempt}-0")).to_have_text("Reading it now.")
    said = [f"tool-{first.id}", "Reading it now.", f"tool-{second.id}"]  # as they happened
    assert page.locator(f"#reply-{reply}").evaluate(IN_ORDER) == said
    expect_screen_equals_database(page, runner.chat_id, timeout=1_500)


def test_a_chat_page_goes_live_even_when_its_websocket_script_arrives_late(
    page: Page, live: Live, team: Team, runner: Runner
):
    def late(route: Any) -> None:
        time.sleep(0.5)  # a slow network for this one file
        route.continue_()

    page.route("**/static/vendor/htmax-*.js", late)
    page.route("**/static/koruweb/live/live.js", late)
    log_in(page, team.viewer)
    page.goto(f"/chats/{runner.chat_id}/")
    runner.send(frames.turn_started(1, uuid.uuid4(), uuid.uuid4(), title="Live at last"))
    expect(page.locator("#chat-head h1")).to_have_text("Live at last", timeout=1_500)


def test_a_chat_page_whose_own_script_arrives_last_still_catches_up_once_connected(
    page: Page, live: Live, team: Team, runner: Runner
):
    def late(route: Any) -> None:
        time.sleep(0.5)  # htmx is here and its socket open before this script runs
        route.continue_()

    page.route("**/static/koruweb/live/live.js", late)
    log_in(page, team.viewer, then=f"/chats/{runner.chat_id}/")
    open_chat(page, live, runner.chat_id)  # the page asks what changed since it was rendered
