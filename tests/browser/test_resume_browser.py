"""A run that outlives its runner, in a real browser: a run a host started is stopped from its
page, resumed there, and goes on in place; its *Changes* show what changed in its git working
tree, for the whole run and per turn, at a desktop's size and a phone's
(docs/protocol.md#resuming-a-run, #the-whole-change).

A real host (``manage.py agent host``) offers ``tests/agents/sdk_agent.py``, whose sessions are
kept on disk and can be resumed and closed. The tests wait for states, never for times.
Screenshots go to ``var/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from activity.models import Role, Workspace
from activity.models.accounts import AgentHost
from tests.browser.helpers import member, sign_in
from tests.browser.test_accessibility_browser import blocking
from tests.browser.test_hosts_browser import PHONE, SDK_AGENT, host_process, screenshot, sideways
from tests.liveserver import Server

pytestmark = [pytest.mark.django_db(transaction=True)]
RUN_SECONDS = 30_000  # ms: a runner starting, a turn of the scripted agent


def git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Ann", "-c", "user.email=ann@example.com", *args],
        cwd=project,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    """A root with one project in it, under git."""
    project = tmp_path / "code" / "koruweb"
    (project / "src").mkdir(parents=True)
    (project / "notes.txt").write_text("hello\n")
    (project / "src" / "app.py").write_text('print("hello")\n')
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "start")
    return tmp_path / "code"


@pytest.fixture
def resuming_host(
    server: Server, acme: Workspace, disk: Path, tmp_path: Path
) -> Iterator[AgentHost]:
    """``manage.py agent host`` offering an agent that can resume and close its sessions."""
    yield from host_process(
        server,
        acme,
        "--agent",
        SDK_AGENT,
        "--root",
        str(disk),
        SDK_AGENT_CAN="resume,close",
        SDK_AGENT_SESSIONS=str(tmp_path / "sessions"),
    )


def send(page: Page, text: str) -> None:
    page.locator("#compose-text").fill(text)
    page.get_by_role("button", name="Send").click()


def test_a_host_run_is_stopped_resumed_and_its_changes_read_in_a_browser(
    page: Page,
    new_page: Callable[..., Page],
    acme: Workspace,
    resuming_host: AgentHost,
    disk: Path,
    page_errors: list[str],
) -> None:
    alice = member(acme, "alice", Role.APPROVER)
    sign_in(page, alice)
    page.goto(f"/runs/new?host={resuming_host.pk}&path=koruweb")
    page.locator("#prompt").fill("basic")
    page.get_by_role("button", name="Start").click()
    expect(page).to_have_url(re.compile(r"/chats/[0-9a-f-]{36}/$"), timeout=RUN_SECONDS)
    run_page = page.url
    changes = page.locator(".run-changes")
    expect(changes).to_contain_text("Changes since the run started: 0 files", timeout=RUN_SECONDS)

    # Someone edits the project between turns; the next turn ends: the run's change shows it.
    project = disk / "koruweb"
    (project / "notes.txt").write_text("hello, world\n")
    (project / "src" / "util.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "src" / "app.py").unlink()
    send(page, "basic")
    expect(changes).to_contain_text("3 files +3 −2", timeout=RUN_SECONDS)
    turn_links = page.locator("a.turn-changes")
    expect(turn_links).to_have_count(2)

    changes.get_by_role("link").click()
    expect(page.get_by_role("heading", name="What the run changed")).to_be_visible()
    listed = page.locator(".changes-files li")
    expect(listed).to_have_count(3)
    expect(page.locator(".diff-file")).to_have_count(3)
    expect(page.locator(".diff-file", has_text="src/app.py")).to_contain_text("deleted")
    expect(page.locator(".diff-file", has_text="src/util.py")).to_contain_text("new file")
    screenshot(page, "changes-desktop-run")
    assert blocking_on(new_page, alice, page.url) == []
    page.get_by_role("link", name=re.compile(r"^1\. basic")).click()  # the first turn
    expect(page.get_by_role("heading", name="What one turn changed")).to_be_visible()
    expect(
        page.get_by_text("Nothing changed in the working tree during this turn.")
    ).to_be_visible()

    page.goto(run_page)
    page.get_by_role("button", name="Stop run").click()
    expect(page.locator(".run-history")).to_contain_text("Stopped by alice", timeout=RUN_SECONDS)
    expect(page.locator("#chat-head [data-runner=offline]")).to_be_visible(timeout=RUN_SECONDS)
    resume = page.get_by_role("button", name="Resume")
    expect(resume).to_be_visible(timeout=RUN_SECONDS)  # once the host says its runner ended
    expect(page.get_by_role("button", name="Stop run")).to_have_count(0)
    screenshot(page, "resume-desktop-stopped")

    resume.click()
    expect(page.locator(".run-history")).to_contain_text("Resumed by alice", timeout=RUN_SECONDS)
    expect(page.locator("#chat-head [data-runner=online]")).to_be_visible(timeout=RUN_SECONDS)
    expect(page.get_by_role("button", name="Stop run")).to_be_visible()
    send(page, "basic")
    # the same agent session, the same page: its third turn's calls join the first two's
    expect(page.locator("tr.tool", has_text="Edit notes.txt")).to_have_count(3, timeout=RUN_SECONDS)
    screenshot(page, "resume-desktop-resumed")
    assert page_errors == []

    phone = new_page(**PHONE)
    sign_in(phone, alice)
    phone.goto(run_page)
    expect(phone.get_by_role("button", name="Stop run")).to_be_visible()
    assert sideways(phone) == 0
    screenshot(phone, "resume-phone-run")
    phone.goto(f"{run_page}changes/")
    expect(phone.locator(".diff-file")).to_have_count(3)
    assert sideways(phone) == 0
    screenshot(phone, "changes-phone-run")


def blocking_on(new_page: Callable[..., Page], who: object, url: str) -> list[str]:
    """axe-core's serious and critical violations of ``url``, light and dark (a page that lets
    axe's script in)."""
    checked = new_page(bypass_csp=True)
    sign_in(checked, who)  # type: ignore[arg-type]
    checked.goto(url)
    found = []
    for scheme in ("light", "dark"):
        checked.emulate_media(color_scheme=scheme)
        found += blocking(checked)
    return found
