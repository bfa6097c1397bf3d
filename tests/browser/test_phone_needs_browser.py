"""On a phone, and on every page: nothing scrolls sideways, a call is a one-line card, and what
waits for you shows wherever you are — the count on Inbox, the tab title, the runs list.

The pages hold what real runs hold at their longest: labels and paths without a space to break
at, long names of people and workspaces, wide tables, output and a diff, a waiting prompt.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from activity.models import AgentToken, Chat, Role, ToolActivity, Workspace
from activity.models.accounts import AgentHost, TokenKind
from tests import factories, frames
from tests.browser.helpers import (
    DESKTOP,
    PHONE,
    Team,
    log_in,
    member,
    row_of,
    screenshot,
    sign_in,
)
from tests.browser.runner import Runner

pytestmark = [pytest.mark.django_db(transaction=True)]

SPACE = "Platform-Reliability-and-Continuous-Integration-Infrastructure-Team-Europe-West-2"
PERSON = "alexandra.konstantinopoulou-papadimitriou@infrastructure.example.org"
DEEP = "/".join(["a_rather_deeply_nested_directory_name"] * 4)
PATH = f"/home/runner/work/koruweb/{DEEP}/configuration_loader_with_a_long_name.py"
COMMAND = f"pytest --maxfail=1 --tb=long -k test_everything_together {PATH}::TestTheLoader"
OUTPUT = "FAILED " + "x" * 300 + "\n" + "\n".join(f"line {n}: all good" for n in range(20))
TITLE = "Refactor-the-configuration-loader-so-that-every-environment-variable-is-validated"


@dataclass
class World:
    workspace: Workspace
    person: User
    chat: Chat
    read: ToolActivity


def long_world() -> World:
    """A workspace, its admin and a run, every name as long as real ones get."""
    workspace = Workspace.objects.create(slug="platform-reliability-ci-infra-eu-west-2", name=SPACE)
    person = member(workspace, PERSON, Role.ADMIN)
    attempt = uuid.uuid4()
    diff = {"type": "diff", "path": PATH, "oldText": "a = 1\n" * 3, "newText": "a = 2\n" * 3}
    chat = factories.run(
        workspace,
        frames.turn_started(1, attempt, uuid.uuid4(), prompt=TITLE * 2, title=TITLE),
        frames.tool_call(2, "read", f"Read {PATH}", kind="read", status="pending"),
        frames.tool_update(
            3,
            "read",
            status="completed",
            content=[{"type": "content", "content": {"type": "text", "text": OUTPUT}}],
        ),
        frames.tool_call(4, "edit", f"Edit {PATH}", kind="edit", content=[diff]),
        frames.tool_update(5, "edit", status="completed"),
        frames.tool_call(6, "run", COMMAND, kind="execute", rawInput={"command": COMMAND}),
        frames.permission(7, 9, "run", COMMAND),
    )
    token, _ = AgentToken.issue(workspace, "build-box-" + "x" * 80, TokenKind.HOST)
    AgentHost.objects.create(
        workspace=workspace,
        token=token,
        name="build-box",
        agents=[{"name": "claude", "command": f"claude-agent-acp --config {PATH}"}],
        roots=[f"/srv/checkouts/{DEEP}"],
        online=False,  # an online host needs a live socket: /runs/new asks it for directories
        seen_at=timezone.now(),
    )
    read = ToolActivity.objects.get(chat=chat, tool_call_id="read")
    return World(workspace, person, chat, read)


def pages(world: World) -> dict[str, str]:
    chat = world.chat
    return {
        "runs": "/",
        "chat": f"/chats/{chat.pk}/",
        "inbox": "/inbox/",
        "workspaces": "/workspaces/",
        "workspace": f"/workspaces/{world.workspace.slug}/",
        "search": "/search/?q=configuration",
        "turn": f"/chats/{chat.pk}/turns/{chat.current_attempt_id}/",
        "call": f"/tools/{world.read.pk}/",
        "new-run": "/runs/new",
    }


def scrolls_sideways(page: Page) -> int:
    """How many CSS pixels the page is wider than the window (0: it fits)."""
    wide: int = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return max(0, wide)


def test_no_page_scrolls_sideways_on_a_phone_and_each_is_kept_at_both_sizes(
    new_page: Callable[..., Page],
) -> None:
    world = long_world()
    for size, options in (("phone", PHONE), ("desktop", DESKTOP)):
        page = new_page(**options)
        page.goto("/accounts/login/")
        screenshot(page, f"phone-needs-login-{size}")
        assert scrolls_sideways(page) == 0, "login"
        log_in(page, world.person)
        for name, path in pages(world).items():
            page.goto(path)
            expect(page.locator("main h1").first).to_be_visible()
            screenshot(page, f"phone-needs-{name}-{size}")
            if size == "phone":  # the desktop's are kept to look at
                assert scrolls_sideways(page) == 0, f"{name} scrolls sideways on a phone"
        page.goto(f"/workspaces/{world.workspace.slug}/")
        page.locator("#tokens form.add").first.get_by_label("Name").fill("laptop-" + "y" * 90)
        page.get_by_role("button", name="Create token", exact=True).click()
        expect(page.locator("#plain-token")).to_be_visible()
        screenshot(page, f"phone-needs-token-{size}")
        assert scrolls_sideways(page) == 0, f"the token page scrolls sideways at {size} size"


def test_a_call_on_a_phone_is_a_one_line_card_that_opens_on_tap_or_with_the_keyboard(
    new_page: Callable[..., Page],
) -> None:
    world = long_world()
    page = new_page(**PHONE)
    sign_in(page, world.person)
    page.goto(f"/chats/{world.chat.pk}/")
    card = page.locator(f"#tool-{world.read.pk}")
    summary = card.locator("summary").first
    box = card.bounding_box()
    assert box is not None and box["height"] <= 52, f"a closed card is {box} tall"
    label, status = summary.bounding_box(), card.locator("td.status").bounding_box()
    assert label and status and abs(label["y"] - status["y"]) < 12, "label and status share a line"
    output = card.locator("pre").first
    expect(output).to_be_hidden()

    summary.tap()
    expect(output).to_be_visible()
    opened = card.bounding_box()
    assert opened is not None and opened["height"] > 150
    assert opened["width"] <= 390
    screenshot(page, "phone-needs-card-open-phone")

    summary.focus()
    page.keyboard.press("Enter")
    expect(output).to_be_hidden()


def test_the_inbox_count_the_title_and_the_runs_list_follow_a_prompt_live(
    new_page: Callable[..., Page], team: Team, runner: Runner
) -> None:
    approver = member(team.workspace, "olga", Role.APPROVER)
    phone = new_page(**PHONE)
    sign_in(phone, approver)
    phone.goto("/")
    line = phone.locator(f"#chat-{runner.chat_id}")
    expect(line).to_be_visible()
    count = phone.locator("#needs-count")
    expect(count).to_be_hidden()
    expect(phone).to_have_title("Runs · koruweb")
    status_before = line.locator("td.run-status").inner_text()

    attempt = uuid.uuid4()
    runner.send(
        frames.turn_started(1, attempt, uuid.uuid4()),
        frames.tool_call(2, "c1", "rm -rf build", kind="delete", status="pending"),
        frames.permission(3, 7, "c1", "rm -rf build"),
    )
    expect(count).to_have_text("1")
    expect(phone).to_have_title("(1) Runs · koruweb")
    expect(line.locator(".needs-marker")).to_have_text("Needs you", use_inner_text=True)
    expect(line.locator("td.run-status")).not_to_have_text(status_before)
    expect(phone.locator("#needs-announcer")).to_have_text(
        "Agent in Fix the flaky test asks: rm -rf build"
    )
    screenshot(phone, "phone-needs-runs-waiting-phone")

    desk = new_page(**DESKTOP)
    sign_in(desk, approver)
    desk.goto("/workspaces/")
    expect(desk.locator("#needs-count")).to_have_text("1")
    expect(desk).to_have_title("(1) Workspaces · koruweb")
    screenshot(desk, "phone-needs-workspaces-waiting-desktop")
    desk.goto(f"/chats/{runner.chat_id}/")
    desk.locator(f"#tool-{row_of(runner, 'c1').pk} .prompt-box button").first.click()

    expect(count).to_be_hidden()
    expect(phone).to_have_title("Runs · koruweb")
    expect(line.locator(".needs-marker")).to_have_count(0)
    runner.send(frames.turn_ended(4, attempt))
    expect(line.locator("td.run-status")).not_to_have_text(status_before)


def test_a_viewer_sees_a_run_wait_for_an_answer_and_no_count(
    new_page: Callable[..., Page], team: Team, runner: Runner
) -> None:
    page: Any = new_page(**DESKTOP)
    sign_in(page, team.viewer)
    page.goto("/")
    runner.send(
        frames.turn_started(1, uuid.uuid4(), uuid.uuid4()),
        frames.tool_call(2, "c1", "rm -rf build", kind="delete", status="pending"),
        frames.permission(3, 7, "c1", "rm -rf build"),
    )
    line = page.locator(f"#chat-{runner.chat_id}")
    expect(line.locator(".needs-marker")).to_have_text("Waiting for an answer", use_inner_text=True)
    expect(page.locator("#needs-count")).to_be_hidden()
    expect(page).to_have_title("Runs · koruweb")
