"""Every page a person uses, checked as a keyboard and screen-reader user meets it (WCAG 2.2 AA).

axe-core (the copy ``axe-playwright-python`` ships; nothing is downloaded) runs in each page type
— login, runs, a live chat with rows, output, a diff and a waiting prompt, the inbox, workspaces,
a workspace, a new token, search, the turn as it happened, new run, a 404 — in the light and the
dark colour scheme at desktop size; the contexts bypass the CSP so axe's script can be injected.
The same visits leave screenshots of every page type in both schemes at desktop and phone size
under var/screenshots/ (a11y-<page>[-dark]-desktop|phone.png) for a person to look at.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.conf import settings
from playwright.sync_api import Page, expect

from activity.models import Prompt, Role, ToolActivity
from tests import frames
from tests.browser.helpers import (
    DESKTOP,
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
from tests.liveserver import Server

DOCS_SHOT = Path(settings.BASE_DIR) / "docs" / "live-run.png"

pytestmark = [pytest.mark.django_db(transaction=True)]

BLOCKING = {"serious", "critical"}
ASKED = "rm -rf build"
REQUEST = 41
STEP_MS = 850  # the runner's clock between two frames, so durations read like a real run's


def at(frame: dict[str, Any]) -> dict[str, Any]:
    """``frame`` stamped as if its runner sent one frame every ``STEP_MS``."""
    return {**frame, "at": frames.T0 + frame["seq"] * STEP_MS}


def first_turn(runner: Runner) -> uuid.UUID:
    """An ended turn: the agent read, edited (a diff), ran the tests (terminal output) and
    said what it did (seq 1–10)."""
    attempt = uuid.uuid4()
    diff = {
        "type": "diff",
        "path": "greet.py",
        "oldText": "def greet(name):\n    return 'Hello ' + name\n",
        "newText": "def greet(name):\n    return f'Hello, {name}!'\n",
    }
    output = "....\n4 passed in 0.12s\n"
    runner.send(
        *map(at, [
            frames.turn_started(1, attempt, uuid.uuid4(), prompt="Fix the failing greeting test",
                                title="Fix the failing greeting test"),
            frames.tool_call(2, "read", "Read greet.py", kind="read", status="in_progress",
                             locations=[{"path": "greet.py"}]),
            frames.tool_update(3, "read", status="completed", content=[
                {"type": "content", "content": {"type": "text", "text": diff["oldText"]}}]),
            frames.tool_call(4, "edit", "Edit greet.py", kind="edit", status="in_progress",
                             locations=[{"path": "greet.py"}]),
            frames.tool_update(5, "edit", status="completed", content=[diff]),
            frames.tool_call(6, "test", "pytest -q", kind="execute", status="in_progress",
                             rawInput={"command": "pytest -q"}),
            frames.tool_update(7, "test", status="completed", content=[
                {"type": "content", "content": {"type": "text", "text": output}}]),
            frames.say(8, "Fixed: `greet()` now says **Hello, Ada!**.\n\n"
                          "## What changed\n\n- the greeting's comma\n- the tests pass"),
            frames.turn_ended(9, attempt),
        ])
    )  # fmt: skip
    return attempt


def asking_turn(runner: Runner, first_seq: int = 10) -> ToolActivity:
    """A running turn whose agent proposes ``rm -rf build`` and waits for a person."""
    seq = first_seq
    runner.send(
        *map(at, [
            frames.turn_started(seq, uuid.uuid4(), uuid.uuid4(), prompt="Clean the build",
                                title="Fix the failing greeting test"),
            frames.tool_call(seq + 1, "ls", "List build/", kind="search", status="completed"),
            frames.tool_call(seq + 2, "rm", ASKED, kind="execute", status="pending",
                             rawInput={"command": ASKED}),
            frames.permission(seq + 3, REQUEST, "rm", ASKED),
        ])
    )  # fmt: skip
    return row_of(runner, "rm")


@dataclass
class Visit:
    """One page type: where it is, and how a person gets there when a link is not enough."""

    name: str
    path: str
    arrive: Callable[[Page], None] | None = None


def make_token(page: Page) -> None:
    """The token page: a new token, shown once, after the workspace's form."""
    page.goto("/workspaces/acme/")
    form = page.locator("#tokens form.add").first
    form.get_by_label("Name").fill("build-box")
    form.get_by_label("Name").press("Enter")
    expect(page.locator(".new-token")).to_be_visible()


def open_prompt(page: Page) -> None:
    """The waiting prompt on a page of its own."""
    prompt = Prompt.objects.get(tool__tool_call_id="rm")
    page.goto(f"/prompts/{prompt.pk}/answer")
    expect(page.get_by_role("button", name="Allow once")).to_be_visible()


def page_types(chat_id: uuid.UUID, attempt: uuid.UUID) -> list[Visit]:
    return [
        Visit("runs", "/"),
        Visit("chat", f"/chats/{chat_id}/"),
        Visit("inbox", "/inbox/"),
        Visit("prompt", "", open_prompt),
        Visit("workspaces", "/workspaces/"),
        Visit("workspace", "/workspaces/acme/"),
        Visit("token", "/workspaces/acme/", make_token),
        Visit("search", "/search/?q=greet"),  # calls and a reply of one run
        Visit("review", f"/chats/{chat_id}/turns/{attempt}/"),
        Visit("new-run", "/runs/new"),
        Visit("notifications", "/settings/notifications/"),
        Visit("offline", "/offline/"),
        Visit("not-found", f"/chats/{uuid.uuid4()}/"),
    ]


def blocking(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now."""
    found = Axe().run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(", ".join(node["target"]) for node in v["nodes"][:4])
        for v in found
        if v["impact"] in BLOCKING
    ]


OUTLINE = """() => [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")]
  .map((h) => [Number(h.tagName[1]), h.textContent.trim().slice(0, 60)])"""


def outline_faults(page: Page) -> list[str]:
    """What breaks a heading outline: no h1 or more than one, a first heading below h1, a
    level skipped on the way down."""
    headings = page.evaluate(OUTLINE)
    faults = []
    if [level for level, _ in headings].count(1) != 1:
        faults.append(f"one h1 expected: {headings}")
    previous = 0
    for level, text in headings:
        if level > previous + 1:
            faults.append(f"h{previous} → h{level} ({text!r})")
        previous = level
    return faults


def look(page: Page, name: str, size: str, problems: dict[str, list[str]]) -> None:
    """The page as it is now in each scheme: a screenshot, and what axe finds at desktop size."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        screenshot(page, f"a11y-{name}{'' if scheme == 'light' else '-dark'}-{size}")
        if size == "desktop":
            problems[f"{name}, {scheme}"] = blocking(page) + outline_faults(page)


@pytest.fixture
def contexts(browser: Any, server: Server) -> Iterator[Callable[..., Any]]:
    opened: list[Any] = []

    def open_context(**options: Any) -> Any:
        context = browser.new_context(base_url=server.url, bypass_csp=True, **options)
        opened.append(context)
        return context

    yield open_context
    for context in opened:
        context.close()


def test_every_page_type_has_no_serious_or_critical_violations_in_light_and_dark(
    contexts: Callable[..., Any], team: Team, runner: Runner
):
    ada = member(team.workspace, "ada", Role.ADMIN)
    attempt = first_turn(runner)
    opened = [f"details-{row_of(runner, call).id}" for call in ("edit", "test")]
    problems: dict[str, list[str]] = {}
    for size, options in (("desktop", DESKTOP), ("phone", PHONE)):
        page = contexts(**options).new_page()

        page.goto("/accounts/login/")
        expect(page.get_by_label("Username")).to_be_visible()
        look(page, "login", size, problems)
        sign_in(page, ada)
        for visit in page_types(runner.chat_id, attempt):
            if visit.name == "chat" and size == "desktop":  # live: more arrives on the open page
                live = watch(page)
                open_chat(page, live, runner.chat_id)
                asking_turn(runner)
                expect(page.locator(".prompt-box.awaiting")).to_be_visible()
            elif visit.arrive is not None:
                visit.arrive(page)
            else:
                page.goto(visit.path)
            if visit.name == "chat":  # a diff and a command's output in view, checked too
                expect(page.locator("#connection")).to_have_attribute("data-state", "live")
                page.evaluate(
                    "(ids) => ids.forEach((id) => { document.getElementById(id).open = true; })",
                    opened,
                )
            if visit.name == "chat" and size == "desktop" and os.environ.get("KORUWEB_WRITE_DOCS"):
                page.emulate_media(
                    color_scheme="light"
                )  # the README's picture: KORUWEB_WRITE_DOCS=1
                page.locator(".prompt-box.awaiting").scroll_into_view_if_needed()
                page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
                page.screenshot(path=DOCS_SHOT)  # the buttons armed, as a person sees them
            look(page, visit.name, size, problems)
        page.context.close()
    failing = {where: found for where, found in problems.items() if found}
    assert not failing, "\n".join(f"{where}:\n  " + "\n  ".join(f) for where, f in failing.items())


def test_a_waiting_prompt_is_two_keys_away_is_read_out_and_rows_are_named(
    contexts: Callable[..., Any], team: Team, runner: Runner
):
    page = contexts(**DESKTOP).new_page()
    sign_in(page, member(team.workspace, "ada", Role.APPROVER))
    live = watch(page)
    first_turn(runner)
    open_chat(page, live, runner.chat_id)

    page.keyboard.press("Tab")  # nothing waits: the first stop skips to the content
    expect(page.locator(":focus")).to_have_text("Skip to main content")
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    # A row says what it is, how it went and how long it took.
    expect(
        page.get_by_role("row", name=re.compile(r"^Edit greet\.py Succeeded 850 ms$"))
    ).to_be_visible()

    row = asking_turn(runner)  # arrives live
    expect(page.locator("#prompt-announcer")).to_have_text(  # one sentence, never the table
        f"New prompt on “Fix the failing greeting test”: the agent asks: {ASKED}."
        " Alt+Shift+W goes to it, then 1 answers “Allow once”."
    )
    prompt = page.locator(f"#tool-{row.id} .prompt-box")
    page.keyboard.press("Alt+Shift+KeyW")  # its shortcut, from wherever the focus is
    expect(prompt).to_be_focused()

    page.goto(f"/chats/{runner.chat_id}/")  # arriving where a prompt waits: the first stop
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Jump to the waiting prompt")
    page.keyboard.press("Enter")
    expect(prompt).to_be_focused()
    page.wait_for_timeout(900)  # a prompt that just appeared ignores clicks for a moment
    page.keyboard.press("1")  # the prompt's first option: Allow once
    assert answer_heard(runner)["outcome"] == {"outcome": "selected", "optionId": "allow-once"}
    expect(page.locator("#jump-waiting")).to_be_hidden()
