"""The real claude-agent-acp asks, a person answers by clicking in Chromium.

The README's command line (``manage.py agent --mode default -- claude-agent-acp``) runs against
the fake Anthropic API and this module's own Daphne — the one the browser talks to, since the
in-memory channel layer lives in one process. The person opens the chat page first and then the
prompt is typed on the runner's standard input, so the permission prompt appears on a page that
is already live. One agent run per test.

Screenshots of the page while it asks and after the answer, at a desktop's size (1280×800) and
a phone's (390×844), go to ``var/screenshots/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from activity.models import InferenceAttempt, Prompt, Role, ToolActivity
from tests.agents.real import anthropic
from tests.agents.real.fakeapi import Call, FakeModels, Say
from tests.agents.real.harness import RealRun, eventually, isolated_env
from tests.browser.helpers import (
    Live,
    Team,
    badge,
    member,
    open_chat,
    reload_marker,
    sign_in,
    watch,
)
from tests.liveserver import BASE_DIR, Server

pytestmark = [pytest.mark.django_db(transaction=True)]

SCREENSHOTS = BASE_DIR / "var" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}
TURN_SECONDS = 30
NOTES = "first line\nsecond line\n"


@dataclass
class Claude:
    """The runner with claude-agent-acp on this module's server, reading prompts from stdin."""

    run: RealRun
    fake: FakeModels
    project: Path

    def ask(self, *steps: Call | Say, words: str) -> str:
        """Type a prompt whose model does ``steps``; returns the script's tag."""
        tag = self.fake.script(*steps)
        self.run.send(f"{words} {tag}")
        return tag

    def running(self) -> None:
        code = self.run.process.poll()
        assert code is None, f"the runner exited with {code}:\n{self.run.stderr[-4000:]}"

    def waiting(self) -> Prompt:
        """The permission prompt the turn waits on, once the server has it."""

        def found() -> Prompt | None:
            self.running()
            return Prompt.objects.filter(chat_id=self.run.chat_id, closed_at=None).first()

        return eventually(found, TURN_SECONDS, "a prompt from claude")

    def finished(self) -> InferenceAttempt:
        """The run's one turn, once the runner has ended it and exited."""
        code, err = self.run.finish(TURN_SECONDS)
        assert code == 0, f"the runner exited with {code}:\n{err[-4000:]}"
        return InferenceAttempt.objects.get(chat_id=self.run.chat_id)


@pytest.fixture
def claude(
    server: Server,
    team: Team,
    fake_models: FakeModels,
    real_agents: Path,
    tmp_path: Path,
) -> Iterator[Claude]:
    """``manage.py agent --mode default -- claude-agent-acp`` on the browser's server."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text(NOTES)
    home = tmp_path / "home"
    env = isolated_env(home, anthropic.environment(f"{fake_models.url}/anthropic", home))
    run = RealRun(
        server.ws_url,
        team.token,
        list(anthropic.COMMAND),
        env,
        "--cwd",
        str(project),
        "--mode",
        "default",
        stdin=True,
    )
    try:
        assert run.chat_id.int, f"the runner printed no page:\n{run.stderr[-4000:]}"
        yield Claude(run, fake_models, project)
    finally:
        if run.process.poll() is None:
            run.kill()


def approver(page: Page, team: Team, name: str, chat_id: uuid.UUID) -> Live:
    """``name``, an approver of the workspace, on the chat's page, live."""
    live = watch(page)
    sign_in(page, member(team.workspace, name, Role.APPROVER))
    open_chat(page, live, chat_id)
    return live


def edit_the_notes(claude: Claude, then: str) -> str:
    """The prompt whose model reads notes.txt, then edits it (claude asks before the edit), then
    says ``then``."""
    notes = claude.project / "notes.txt"
    return claude.ask(
        Call("Read", {"file_path": str(notes)}),
        Call(
            "Edit",
            {"file_path": str(notes), "old_string": "second line", "new_string": "second line!"},
        ),
        Say(then),
        words="Add an exclamation mark to the second line of the notes",
    )


def prompt_box(page: Page, row: ToolActivity) -> Any:
    return page.locator(f"#tool-{row.id} .prompt-box")


def settled(words: str) -> re.Pattern[str]:
    """The decision a row keeps once the agent heard it: words, who, and when (a <time> that
    static/koruweb/page/times.js says relatively, "just now" or "12 s ago")."""
    return re.compile(rf"^{re.escape(words)} · (just now|\d+ s ago|\d+ min ago)$")


def screenshot(page: Page, name: str) -> Path:
    """What the person sees now, kept as var/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
    page.screenshot(path=path)
    return path


def sideways(page: Page) -> int:
    """By how many CSS pixels the page is wider than the screen. Not ``innerWidth``: a mobile
    browser widens its layout viewport to fit the content; ``clientWidth`` is the screen's."""
    return int(
        page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


def expect_asking(page: Page, row: ToolActivity) -> None:
    """The prompt is on the page with claude's choices and the change it wants to make."""
    box = prompt_box(page, row)
    choices = box.locator("button.choice")
    expect(choices).to_have_count(3, timeout=TURN_SECONDS * 1000)
    expect(choices).to_have_text(["Yes", re.compile(r"^Yes, .+"), "No"])  # claude's own words
    expect(box).to_be_visible()
    expect(box.locator(".asked tr.del")).to_have_text(re.compile(r"second line$"))  # the diff
    expect(box.locator(".asked tr.add")).to_contain_text("second line!")
    expect(badge(page, row)).to_have_text("Waiting for you", use_inner_text=True)


def test_an_approver_clicks_yes_on_claudes_edit_and_the_file_changes_and_the_row_completes(
    page: Page, new_page: Callable[..., Page], team: Team, claude: Claude
):
    notes = claude.project / "notes.txt"
    page.set_viewport_size(DESKTOP)
    approver(page, team, "bob", claude.run.chat_id)
    phone = new_page(**PHONE)
    approver(phone, team, "carol", claude.run.chat_id)
    same_document = reload_marker(page)
    expect(page.locator("tr.tool")).to_have_count(0)  # nothing yet: the prompt comes live

    edit_the_notes(claude, then="Edited the notes.")
    row = claude.waiting().tool
    assert row is not None and row.tool_name == "Edit"
    for viewer in (page, phone):
        expect_asking(viewer, row)
    screenshot(page, "claude-allow-desktop-asking")
    screenshot(phone, "claude-allow-phone-asking")
    assert notes.read_text() == NOTES  # nothing happens before the answer

    prompt_box(page, row).get_by_role("button", name="Yes", exact=True).click()
    for viewer in (page, phone):
        expect(badge(viewer, row)).to_have_text("Succeeded", timeout=TURN_SECONDS * 1000)
        expect(viewer.locator(f"#tool-{row.id} .approval")).to_have_text("Allowed")
        expect(prompt_box(viewer, row).locator(".decision")).to_have_text(
            settled("Allowed once by bob")
        )
        expect(prompt_box(viewer, row).locator("button.choice")).to_have_count(0)  # copy stays
        expect(viewer.locator(".reply .reply-part:not([hidden])")).to_have_text("Edited the notes.")
    assert notes.read_text() == "first line\nsecond line!\n"
    screenshot(page, "claude-allow-desktop-after")
    screenshot(phone, "claude-allow-phone-after")
    assert same_document(), "the page was reloaded"

    turn = claude.finished()
    assert turn.stop_reason == "end_turn"
    row.refresh_from_db()
    assert (row.status, row.approval, row.error_code) == ("completed", "approved", None)


def test_an_approver_clicks_no_on_claudes_edit_and_the_file_stays_and_the_row_ends_denied(
    page: Page, new_page: Callable[..., Page], team: Team, claude: Claude
):
    notes = claude.project / "notes.txt"
    page.set_viewport_size(DESKTOP)
    approver(page, team, "bob", claude.run.chat_id)
    phone = new_page(**PHONE)
    approver(phone, team, "carol", claude.run.chat_id)
    same_document = reload_marker(page)

    edit_the_notes(claude, then="You did not want that edit.")
    row = claude.waiting().tool
    assert row is not None and row.tool_name == "Edit"
    for viewer in (page, phone):
        expect_asking(viewer, row)
    screenshot(page, "claude-reject-desktop-asking")
    screenshot(phone, "claude-reject-phone-asking")

    prompt_box(page, row).get_by_role("button", name="No", exact=True).click()
    for viewer in (page, phone):
        expect(badge(viewer, row)).to_have_text("Rejected", timeout=TURN_SECONDS * 1000)
        expect(viewer.locator(f"#tool-{row.id} .approval")).to_have_count(0)  # the badge said it
        expect(prompt_box(viewer, row).locator(".decision")).to_have_text(
            settled("Rejected by bob")
        )
        expect(prompt_box(viewer, row).locator("button.choice")).to_have_count(0)  # copy stays
        expect(viewer.locator(".reply .reply-part:not([hidden])")).to_have_text(
            "You did not want that edit."
        )
    screenshot(page, "claude-reject-desktop-after")
    screenshot(phone, "claude-reject-phone-after")
    assert same_document(), "the page was reloaded"

    turn = claude.finished()
    assert notes.read_text() == NOTES  # the turn is over and the agent never wrote it
    assert turn.stop_reason == "end_turn"
    row.refresh_from_db()
    assert (row.status, row.approval, row.error_code) == ("failed", "denied", "permission_denied")


def test_on_a_phone_claudes_edit_prompt_fits_the_screen_and_its_no_can_be_tapped(
    new_page: Callable[..., Page], team: Team, claude: Claude
):
    phone = new_page(**PHONE)
    approver(phone, team, "carol", claude.run.chat_id)

    edit_the_notes(claude, then="You did not want that edit.")
    row = claude.waiting().tool
    assert row is not None
    expect_asking(phone, row)  # the file's full path is in the diff: a long unbroken word
    too_wide = sideways(phone)
    assert too_wide <= 0, f"the page is {too_wide}px wider than the phone: it scrolls sideways"

    prompt_box(phone, row).get_by_role("button", name="No", exact=True).tap()
    expect(prompt_box(phone, row).locator(".decision")).to_have_text(
        settled("Rejected by carol"), timeout=TURN_SECONDS * 1000
    )
    expect(badge(phone, row)).to_have_text("Rejected")
    assert claude.finished().stop_reason == "end_turn"
    assert (claude.project / "notes.txt").read_text() == NOTES
