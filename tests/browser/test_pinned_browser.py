"""The waiting prompt in reach (docs/architecture.md#the-waiting-prompt-in-reach), in a real
browser at 1440×900 and 390×844: prompts that wait when the page loads are pinned to the bottom
of the window with their buttons in view, "1 of 2" goes to the other, the agent's words that led
to it are quoted, a phone's change is one tap away, answering one (here or on another page)
takes it out of the pin; the run's head stays short and its exports and delete sit in a menu.

Screenshots go to ``var/screenshots/pinned-prompt-*.png`` (light and dark) for a person to look at.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Role
from tests import frames
from tests.browser.helpers import (
    PHONE,
    Team,
    answer_heard,
    member,
    open_chat,
    row_of,
    screenshot,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

WIDE: dict[str, Any] = {"viewport": {"width": 1440, "height": 900}}
NOTES = "/home/ana/project/greet.py"
OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
LED_TO = "The test expects a comma, so I will change greet()."


def asks(seq: int, request_id: int, call: dict[str, Any]) -> dict[str, Any]:
    params = {"sessionId": "s1", "toolCall": call, "options": OPTIONS}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission"}
    return frames.acp(seq, {**message, "params": params})


def two_prompts(runner: Runner) -> tuple[Any, Any]:
    """The agent says why, asks to edit greet.py (a diff), then to run the tests."""
    old = "".join(f"line {n}\n" for n in range(1, 30))
    edit = {
        "toolCallId": "edit-1",
        "title": "Edit greet.py",
        "kind": "edit",
        "status": "pending",
        "content": [{"type": "diff", "path": NOTES, "oldText": old, "newText": old + "comma,\n"}],
    }
    run = {
        "toolCallId": "run-1",
        "title": "python3 test_greet.py",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "python3 test_greet.py"},
    }
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.say(2, "Let me look at the failing test first.\n\n" + LED_TO),
        asks(3, 7, edit),
        asks(4, 8, run),
    )
    return row_of(runner, "edit-1"), row_of(runner, "run-1")


def box_of(row: Any) -> str:
    return f"prompt-{row.prompts.get().id}"


def opened(page: Page, team: Team, name: str, runner: Runner) -> Page:
    live = watch(page)
    sign_in(page, member(team.workspace, name, Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    return page


def test_waiting_prompts_are_pinned_in_view_at_both_sizes_and_leave_when_answered(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    edit, run = two_prompts(runner)  # waiting before anyone opens the page
    desktop = opened(new_page(**WIDE), team, "bob", runner)
    phone = opened(new_page(**PHONE), team, "carol", runner)

    watcher = new_page(**WIDE)  # a viewer may not answer: nothing is pinned on their page
    watch_live = watch(watcher)
    sign_in(watcher, team.viewer)
    open_chat(watcher, watch_live, runner.chat_id)
    expect(watcher.locator(f"#{box_of(edit)}")).to_be_attached()
    expect(watcher.locator("#pinned-bar, .prompt-box[data-pinned]")).to_have_count(0)
    watcher.close()

    for viewer, size in ((desktop, "desktop"), (phone, "phone")):
        bar = viewer.locator("#pinned-bar")
        pinned = viewer.locator(".prompt-box[data-pinned]")
        expect(pinned).to_have_count(1)
        expect(pinned).to_have_id(box_of(edit))
        expect(bar.locator(".pinned-count")).to_have_text("Waiting for you · 1 of 2")
        expect(bar.locator(".pinned-said")).to_have_text(f"The agent: “{LED_TO}”")
        for name in ("Allow once", "Reject"):  # on load, without scrolling
            expect(pinned.get_by_role("button", name=name)).to_be_in_viewport(ratio=1)
        expect(bar).to_be_in_viewport(ratio=1)
        assert viewer.evaluate("window.scrollY") == 0
        expect(viewer.locator(f"#tool-{edit.id} td.label")).to_be_visible()
        screenshot(viewer, f"pinned-prompt-{size}")
        viewer.emulate_media(color_scheme="dark")
        screenshot(viewer, f"pinned-prompt-{size}-dark")
        viewer.emulate_media(color_scheme="light")

    # A wide screen shows the change whole (scrolling in the prompt); a phone folds it, a tap away.
    expect(desktop.locator(".prompt-box[data-pinned] .asked-diff")).to_be_visible()
    expect(phone.locator(".prompt-box[data-pinned] .asked-diff")).to_be_hidden()
    phone.get_by_role("button", name="Show the change").click()
    expect(phone.locator(".prompt-box[data-pinned] .asked-diff")).to_be_visible()
    expect(phone.get_by_role("button", name="Hide the change")).to_have_attribute(
        "aria-expanded", "true"
    )
    screenshot(phone, "pinned-prompt-change-phone")

    # The run's head is short on a phone: the site's header in two lines, then the run's title
    # (beside the connection pill), its facts, and who watches beside the run's menu.
    site = phone.locator("header.top").evaluate("(e) => e.getBoundingClientRect().bottom")
    content = phone.locator("#run-filter").evaluate("(e) => e.getBoundingClientRect().top")
    assert site <= 60, site
    assert content - site <= 100, (site, content)
    phone.locator(".run-menu > summary").click()
    expect(phone.get_by_role("link", name="Download the transcript (Markdown)")).to_be_visible()

    # "1 of 2" goes to the next one, which then has the focus and its number keys.
    desktop.get_by_role("button", name="The next waiting prompt").click()
    expect(desktop.locator(".pinned-count")).to_have_text("Waiting for you · 2 of 2")
    pinned = desktop.locator(".prompt-box[data-pinned]")
    expect(pinned).to_have_id(box_of(run))
    expect(pinned.locator("pre.command")).to_have_text("python3 test_greet.py")
    expect(pinned).to_be_focused()
    desktop.keyboard.press("1")  # Allow once, for the pinned prompt
    assert answer_heard(runner)["outcome"] == {"outcome": "selected", "optionId": "allow-once"}
    runner.send(frames.outcome(5, 8, "allow-once"))

    # Answered here, it leaves the pin on both pages; the edit stays pinned, alone.
    for viewer in (desktop, phone):
        expect(viewer.locator(".pinned-count")).to_have_text("Waiting for you")
        expect(viewer.locator(".prompt-box[data-pinned]")).to_have_id(box_of(edit))
        expect(viewer.get_by_role("button", name="The next waiting prompt")).to_be_hidden()
    phone.locator(".prompt-box[data-pinned]").get_by_role("button", name="Reject").click()
    assert answer_heard(runner)["outcome"] == {"outcome": "selected", "optionId": "reject"}
    runner.send(frames.outcome(6, 7, "reject"))
    for viewer in (desktop, phone):
        expect(viewer.locator("#pinned-bar")).to_be_hidden()
        expect(viewer.locator(".prompt-box[data-pinned]")).to_have_count(0)
