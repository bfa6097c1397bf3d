"""What a person answering an agent in a real browser relies on.

The test plays the agent's runner on a real socket to a real Daphne child: it asks, the person
answers in headless Chromium, and the test checks that the runner was told exactly that answer
— the agent's own words back — before it reports how the agent went on. Every viewer sees who
decided, live.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Prompt, Role, ToolActivity
from tests import frames
from tests.browser.helpers import (
    Live,
    Team,
    answer_heard,
    answers_heard,
    badge,
    member,
    open_chat,
    reload_marker,
    row_of,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

ASKED = "rm -rf build"
REQUEST = 7  # the agent's JSON-RPC id of its permission request
ALLOW_ONCE = {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"}
ALLOW_ALWAYS = {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"}
REJECT = {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}
# --- the agent's side ------------------------------------------------------------------------


def ask_permission(runner: Runner, options: list[dict[str, str]] | None = None) -> ToolActivity:
    """A turn whose agent proposes ``rm -rf build`` and asks whether it may run it (seq 1–3)."""
    request = frames.permission(3, REQUEST, "call_1", ASKED)
    if options is not None:
        request["message"]["params"]["options"] = options
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.tool_call(
            2, "call_1", ASKED, kind="delete", status="pending", rawInput={"command": ASKED}
        ),
        request,
    )
    return row_of(runner, "call_1")


def selected(option_id: str, request_id: int = REQUEST) -> dict[str, Any]:
    """The answer frame a runner gets for a chosen permission option."""
    return {
        "type": "answer",
        "request_id": request_id,
        "outcome": {"outcome": "selected", "optionId": option_id},
    }


# --- the people ------------------------------------------------------------------------------


def approver_on_chat(
    new_page: Callable[..., Page], team: Team, runner: Runner, name: str, **options: Any
) -> tuple[Page, Live]:
    """Another approver of the workspace, in a browser of their own, watching the chat live."""
    page = new_page(**options)
    live = watch(page)
    sign_in(page, member(team.workspace, name, Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    return page, live


def choices(page: Page, row: ToolActivity) -> Any:
    return page.locator(f"#tool-{row.id} button.choice")


def decision(page: Page, row: ToolActivity) -> Any:
    return page.locator(f"#tool-{row.id} .decision")


def settled(words: str) -> re.Pattern[str]:
    """The decision a row keeps once the agent heard it: words, who, and when (a <time> that
    static/koruweb/page/times.js says relatively, "just now" or "12 s ago")."""
    return re.compile(rf"^{re.escape(words)} · (just now|\d+ s ago|\d+ min ago)$")


# --- the tests -------------------------------------------------------------------------------


def test_an_approver_allows_once_the_agent_hears_it_and_another_member_sees_who_without_reload(
    page: Page, page_errors: list[str], live: Live, new_page: Callable[..., Page], team: Team,
    runner: Runner,
):  # fmt: skip
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    carol, _ = approver_on_chat(new_page, team, runner, "carol")
    carols_document = reload_marker(carol)

    row = ask_permission(runner)  # arrives live on both pages
    expect(choices(page, row)).to_have_text(["Allow once", "Reject"])  # the agent's order
    expect(page.locator(f"#tool-{row.id} .prompt-box .asked")).to_contain_text(ASKED)
    expect(choices(carol, row)).to_have_count(2)
    expect(badge(page, row)).to_have_text("Waiting for you", use_inner_text=True)

    page.get_by_role("button", name="Allow once").click()
    assert answer_heard(runner) == selected("allow-once")  # exactly what the agent offered
    for viewer in (page, carol):  # the buttons are gone for everyone, the decision shown
        expect(decision(viewer, row)).to_contain_text("Allowed once by bob")
        expect(choices(viewer, row)).to_have_count(0)

    runner.send(  # the agent heard it and goes on
        frames.outcome(4, REQUEST, "allow-once"),
        frames.tool_update(5, "call_1", status="completed"),
    )
    for viewer in (page, carol):
        expect(badge(viewer, row)).to_have_text("Succeeded")
        expect(decision(viewer, row)).to_have_text(settled("Allowed once by bob"))
    assert carols_document(), "carol's page was reloaded"
    prompt = Prompt.objects.select_related("answered_by").get(chat_id=runner.chat_id)
    assert prompt.answered_by is not None and prompt.answered_by.username == "bob"
    assert prompt.decision == "Allowed once"
    assert answers_heard(runner, within=0.3) == []  # told once, not once per viewer
    assert page_errors == []


def test_a_rejected_call_says_rejected_and_who_rejected_it(
    page: Page, live: Live, new_page: Callable[..., Page], team: Team, runner: Runner
):
    row = ask_permission(runner)  # already waiting when the page opens
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    carol, _ = approver_on_chat(new_page, team, runner, "carol")

    page.get_by_role("button", name="Reject").click()
    assert answer_heard(runner) == selected("reject")
    runner.send(
        frames.outcome(4, REQUEST, "reject"),
        frames.tool_update(5, "call_1", status="failed"),
    )
    for viewer in (page, carol):
        expect(badge(viewer, row)).to_have_text("Rejected")
        expect(decision(viewer, row)).to_have_text(settled("Rejected by bob"))
        expect(choices(viewer, row)).to_have_count(0)
    assert ToolActivity.objects.get(pk=row.pk).approval == "denied"


def test_a_question_answered_in_its_other_box_reaches_the_agent_as_its_custom_answer(
    page: Page, live: Live, team: Team, runner: Runner
):
    runner.send(frames.turn_started(1, attempt := uuid.uuid4(), uuid.uuid4()))
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    open_chat(page, live, runner.chat_id)

    runner.send(frames.elicitation(2, 8, frames.CLAUDE_QUESTION))
    question = page.locator(f"#turn-head-{attempt} .standalone .prompt-box")
    expect(question.locator("legend")).to_have_text("Database Which database should I use?")
    expect(question.locator("label.option")).to_have_text(
        ["Postgres Relational, robust", "SQLite Single file"]
    )
    question.get_by_label("Other").fill("DuckDB, embedded")
    question.get_by_role("button", name="Send answer").click()

    assert answer_heard(runner) == {
        "type": "answer",
        "request_id": 8,
        "outcome": {"action": "accept", "content": {"question_0_custom": "DuckDB, embedded"}},
    }
    runner.send(
        {
            "type": "prompt_outcome",
            "seq": 3,
            "at": frames.T0 + 3,
            "request_id": 8,
            "outcome": {"action": "accept", "content": {"question_0_custom": "DuckDB, embedded"}},
        }
    )
    expect(question.locator(".decision")).to_have_text(settled("Answered: DuckDB, embedded by bob"))
    expect(question.locator("input, button")).to_have_count(0)


def test_the_inbox_shows_a_new_prompt_in_its_title_and_answering_it_there_clears_both(
    page: Page, page_errors: list[str], team: Team, runner: Runner
):
    inbox = watch(page, "/ws/inbox/")
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    page.goto("/inbox/")
    expect(page).to_have_title("Inbox · koruweb")
    inbox.connected()  # the inbox's socket sent its first list

    row = ask_permission(runner)
    expect(page).to_have_title("(1) Inbox · koruweb")
    item = page.locator(".inbox-item")
    expect(item).to_have_count(1)
    expect(item.locator(".tool-label")).to_have_text(ASKED)
    expect(item.locator("pre.input")).to_contain_text(ASKED)  # what would run
    expect(item.locator(".where a")).to_have_attribute(
        "href", f"/chats/{runner.chat_id}/#tool-{row.id}"
    )
    # Rendered once for every inbox, the form carries no token: htmx sends the page's, and the
    # link to a page of its own that has one is there only for when htmx is not running.
    own_page = item.locator("a.own-page")
    expect(own_page).to_have_attribute("href", f"/prompts/{row.prompts.get().pk}/answer")
    expect(own_page).to_be_hidden()

    item.get_by_role("button", name="Allow once").click()
    assert answer_heard(runner) == selected("allow-once")
    expect(page).to_have_title("Inbox · koruweb")
    expect(item).to_have_count(0)
    expect(page.locator("#inbox-list .empty")).to_have_text("Nothing is waiting for an answer.")
    assert page_errors == []


def test_a_prompt_that_opens_while_the_inbox_page_loads_is_shown_once_its_socket_is_up(
    page: Page, team: Team, runner: Runner
):
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))

    def ask_meanwhile(route: Any) -> None:
        ask_permission(runner)  # the page was rendered with nothing waiting; its socket is not up
        route.continue_()

    page.route("**/static/vendor/htmax-*.js", ask_meanwhile)  # what opens the socket
    page.goto("/inbox/")
    expect(page.locator(".inbox-item")).to_have_count(1)
    expect(page).to_have_title("(1) Inbox · koruweb")


def test_an_approver_on_a_phone_taps_allow_and_the_row_completes(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    phone, _ = approver_on_chat(new_page, team, runner, "bob", **PHONE)
    row = ask_permission(runner)
    allow = phone.get_by_role("button", name="Allow once")
    expect(allow).to_be_visible()
    box = allow.bounding_box()
    assert box is not None
    assert box["width"] >= 300 and box["height"] >= 40, f"too small to tap: {box}"
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, f"off the screen: {box}"
    overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px on a phone"

    allow.tap()
    assert answer_heard(runner) == selected("allow-once")
    runner.send(
        frames.outcome(4, REQUEST, "allow-once"),
        frames.tool_update(5, "call_1", status="completed"),
    )
    expect(badge(phone, row)).to_have_text("Succeeded")
    expect(decision(phone, row)).to_have_text(settled("Allowed once by bob"))
    expect(decision(phone, row)).to_be_in_viewport()


def test_a_click_on_a_prompt_that_just_appeared_and_a_first_click_on_always_send_nothing(
    page: Page, live: Live, team: Team, runner: Runner
):
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    cdp = page.context.new_cdp_session(page)  # slow time down: "just appeared" lasts 8 s
    cdp.send("Animation.enable")
    cdp.send("Animation.setPlaybackRate", {"playbackRate": 0.1})

    row = ask_permission(runner, [ALLOW_ONCE, ALLOW_ALWAYS, REJECT])
    always = page.get_by_role("button", name="Always allow")
    expect(choices(page, row)).to_have_text(["Allow once", "Always allow", "Reject"])
    allow = page.get_by_role("button", name="Allow once").bounding_box()
    assert allow is not None  # a click meant for something else, as the prompt appears
    page.mouse.click(allow["x"] + allow["width"] / 2, allow["y"] + allow["height"] / 2)
    assert answers_heard(runner, within=0.5) == []

    cdp.send("Animation.setPlaybackRate", {"playbackRate": 1})
    page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
    always.click()  # an "always" option asks to be confirmed first
    expect(always).to_have_text("Click again: Always allow")
    assert answers_heard(runner, within=0.5) == []
    assert Prompt.objects.get(chat_id=runner.chat_id).answered_at is None

    always.click()
    assert answer_heard(runner) == selected("allow-always")
    expect(decision(page, row)).to_contain_text("Always allowed by bob")
