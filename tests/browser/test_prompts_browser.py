"""Approving with the change in view, in a real browser, on a desktop (1280×800) and a phone
(390×844): the prompt shows the diff before anyone answers, and the row still shows it — with
who refused it — after *Reject*, when the agent's refusal has replaced the call's output; the
inbox shows a command with the directory it runs in and a question as its form.

The test plays the agent's runner on a real socket to a real Daphne child. Screenshots go to
``var/screenshots/prompts-*.png`` for a person to look at.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from activity.models import Role, ToolActivity
from activity.wire.acp import META_CWD
from tests import frames
from tests.browser.helpers import (
    DESKTOP,
    PHONE,
    Team,
    answer_heard,
    badge,
    log_in,
    member,
    open_chat,
    row_of,
    screenshot,
    sign_in,
    watch,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

NOTES = "/home/ana/project/notes.txt"
REFUSED = "User refused permission to run tool"
OPTIONS = [
    {"optionId": "allow-once", "name": "Yes", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Yes, and don't ask again", "kind": "allow_always"},
    {"optionId": "reject", "name": "No", "kind": "reject_once"},
]


def asks(seq: int, request_id: int, call: dict[str, Any], **params: Any) -> dict[str, Any]:
    """A ``session/request_permission`` about ``call``, as claude-agent-acp sends it."""
    return frames.acp(
        seq,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "session/request_permission",
            "params": {"sessionId": "s1", "toolCall": call, "options": OPTIONS, **params},
        },
    )


def ask_to_edit(runner: Runner) -> ToolActivity:
    old = "".join(f"line {n}\n" for n in range(1, 9)) + "second line\n"
    call = {
        "toolCallId": "edit-1",
        "title": "Edit notes.txt",
        "kind": "edit",
        "status": "pending",
        "rawInput": {"file_path": NOTES, "old_string": "second line", "new_string": "second line!"},
        "content": [
            {"type": "diff", "path": NOTES, "oldText": old, "newText": old + "second line!\n"}
        ],
    }
    runner.send(frames.turn_started(1, uuid.uuid4(), uuid.uuid4()), asks(2, 7, call))
    return row_of(runner, "edit-1")


def approver(page: Page, team: Team, name: str, runner: Runner) -> Page:
    live = watch(page)
    sign_in(page, member(team.workspace, name, Role.APPROVER))
    open_chat(page, live, runner.chat_id)
    return page


def overflowing(page: Page, selector: str) -> list[str]:
    """What in the prompts reaches past the screen's right edge (a page that scrolls sideways).
    A long line scrolls inside its own block, which stays on the screen."""
    return list(
        page.evaluate(
            """(selector) => {
                const edge = document.documentElement.clientWidth + 1;
                const scrolls = ".diff-scroll, pre";
                return [...document.querySelectorAll(selector)]
                    .flatMap((box) => [box, ...box.querySelectorAll("*")])
                    .filter((e) => !e.closest(scrolls) || e.matches(scrolls))
                    .filter((e) => e.getBoundingClientRect().right > edge)
                    .map((e) => `${e.tagName}.${e.className}`);
            }""",
            selector,
        )
    )


def test_the_diff_is_in_the_prompt_before_answering_and_on_the_row_after_reject_at_both_sizes(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    desktop = approver(new_page(**DESKTOP), team, "bob", runner)
    phone = approver(new_page(**PHONE), team, "carol", runner)
    row = ask_to_edit(runner)  # arrives live on both pages

    for viewer, size in ((desktop, "desktop"), (phone, "phone")):
        box = viewer.locator(f"#tool-{row.id} .prompt-box")
        expect(box.locator(".asked-title")).to_have_text("The agent asks: Edit notes.txt")
        if size == "phone":  # pinned, a phone folds the change: one tap away
            viewer.get_by_role("button", name="Show the change").click()
        expect(box.locator(".asked .diff-path")).to_have_text("home/ana/project/notes.txt")
        expect(box.locator(".asked .diff-counts")).to_have_text("+1 −0")
        expect(box.locator(".asked tr.add")).to_contain_text("second line!")
        expect(box.locator(".asked tr.add")).to_be_in_viewport()  # pinned in view
        expect(box.get_by_role("button", name="No")).to_be_in_viewport()
        expect(badge(viewer, row)).to_have_text("Waiting for you", use_inner_text=True)
        assert overflowing(viewer, f"#tool-{row.id} .prompt-box") == []
        screenshot(viewer, f"prompts-chat-asking-{size}")
    watcher = new_page(**DESKTOP)  # a viewer sees it wait, for someone else
    log_in(watcher, team.viewer, then=f"/chats/{runner.chat_id}/")
    expect(badge(watcher, row)).to_have_text("Waiting for an answer", use_inner_text=True)
    expect(watcher.locator(f"#tool-{row.id} .prompt-box .asked tr.add")).to_be_visible()
    expect(watcher.get_by_role("button", name="No")).to_have_count(0)

    desktop.locator(f"#tool-{row.id}").get_by_role("button", name="No").click()
    assert answer_heard(runner)["outcome"] == {"outcome": "selected", "optionId": "reject"}
    refusal = {"type": "content", "content": {"type": "text", "text": REFUSED}}
    runner.send(
        frames.outcome(3, 7, "reject"),
        frames.tool_update(4, "edit-1", status="failed", content=[refusal]),
    )

    for viewer, size in ((desktop, "desktop"), (phone, "phone")):
        box = viewer.locator(f"#tool-{row.id} .prompt-box")
        expect(box.locator(".decision")).to_have_text(
            re.compile(r"^Rejected by bob · (just now|\d+ s ago|\d+ min ago|\d\d:\d\d)$")
        )
        expect(badge(viewer, row)).to_have_text("Rejected")
        refused = box.locator("details.asked-after.refused")
        expect(refused.locator("> summary")).to_have_text("What was refused")
        expect(refused.locator("tr.add")).to_contain_text("second line!")
        expect(refused.locator("tr.add")).to_be_visible()  # open: the output no longer shows it
        expect(box.get_by_role("button", name="No")).to_have_count(0)
        assert overflowing(viewer, f"#tool-{row.id} .prompt-box") == []
        screenshot(viewer, f"prompts-chat-refused-{size}")
    assert ToolActivity.objects.get(pk=row.pk).agent_output == REFUSED


def test_the_inbox_shows_a_command_with_its_directory_and_a_question_as_its_form_at_both_sizes(
    new_page: Callable[..., Page], team: Team, runner: Runner
):
    command = "pytest -x tests/ && git commit -am 'Fix the flaky test'"
    bash = {
        "toolCallId": "bash-1",
        "title": command,
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": command, "description": "Run the tests, then commit"},
        "content": [
            {"type": "content", "content": {"type": "text", "text": "Run the tests, then commit"}}
        ],
    }
    questions = [{"question": "Which database should I use?", "header": "Database"}]
    question = frames.elicitation(6, 8, frames.CLAUDE_QUESTION)
    question["message"]["params"]["toolCallId"] = "ask-1"
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        asks(2, 7, bash, _meta={META_CWD: "/home/ana/project"}),
        frames.tool_call(3, "ask-1", "Asking for your input", kind="other"),
        frames.tool_update(4, "ask-1", rawInput={"questions": questions}),
        frames.say(5, "I need to know one thing first."),
        question,
    )
    dana = member(team.workspace, "dana", Role.APPROVER)

    for options, size in ((DESKTOP, "desktop"), (PHONE, "phone")):
        inbox = new_page(**options)
        sign_in(inbox, dana)
        inbox.goto("/inbox/")
        items = inbox.locator(".inbox-item")
        expect(items).to_have_count(2)
        run = items.nth(0)
        expect(run.locator(".asked-title")).to_have_text("The agent asks: Run this command")
        expect(run.locator("pre.command")).to_have_text(command)
        expect(run.locator(".cwd")).to_have_text("in /home/ana/project")
        expect(run.locator(".asked-text")).to_have_text("Run the tests, then commit")
        ask = items.nth(1)
        expect(ask.locator(".asked-title")).to_have_text(
            "The agent asks: Which database should I use?"
        )
        expect(ask.get_by_role("radio")).to_have_count(2)
        expect(ask.get_by_label("Postgres")).to_be_visible()
        expect(ask.get_by_label("Other")).to_be_visible()
        expect(inbox.locator("body")).not_to_contain_text("questions: [")  # never the JSON
        assert overflowing(inbox, ".inbox-item") == []
        screenshot(inbox, f"prompts-inbox-{size}")

    inbox.locator(".inbox-item").nth(1).get_by_label("Postgres").check()
    inbox.get_by_role("button", name="Send answer").click()
    heard = answer_heard(runner)
    assert heard["outcome"] == {"action": "accept", "content": {"question_0": "Postgres"}}
