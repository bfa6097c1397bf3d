"""Start a run on an agent host from *New run* in a real browser, and watch it.

A real host (``manage.py agent host`` offering ``tests/agents/sdk_agent.py``) on the module's
server; the person picks the host, an agent, a directory (listed by the host, one level at a
time) and the first prompt, and lands on the run's page as its rows arrive. The tests wait for
states, never for times. Screenshots at a desktop's size and a phone's go to
``var/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from activity.models import Role, Workspace
from activity.models.accounts import AgentHost, AgentToken, TokenKind
from tests.browser.helpers import member, sign_in
from tests.liveserver import BASE_DIR, Server, child_env

pytestmark = [pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
SDK_AGENT = f"sdk={shlex.quote(sys.executable)} {BASE_DIR / 'tests' / 'agents' / 'sdk_agent.py'}"


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("() => document.getAnimations().forEach((a) => a.finish())")
    page.screenshot(path=path, full_page=True)
    return path


def sideways(page: Page) -> int:
    return int(
        page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    for name in ("koruweb", "website", "notes"):
        (root / name / "src").mkdir(parents=True)
    (root / "koruweb" / "README.md").write_text("# koruweb\n")
    (root / "koruweb" / "notes.txt").write_text("hello\n")
    return root


@pytest.fixture
def running_host(server: Server, acme: Workspace, disk: Path) -> Iterator[AgentHost]:
    """``manage.py agent host`` on the server, online."""
    yield from host_process(server, acme, "--agent", SDK_AGENT, "--root", str(disk))


@pytest.fixture
def configured_host(
    server: Server, acme: Workspace, disk: Path, tmp_path: Path
) -> Iterator[AgentHost]:
    """``manage.py agent host --config host.toml`` offering the demo agent as "Demo agent",
    whose runs the web may switch between its modes default and auto."""
    demo = BASE_DIR / "activity" / "runner" / "demo_agent.py"
    config = tmp_path / "host.toml"
    config.write_text(
        f'roots = [{str(disk)!r}]\n[agents.demo]\nlabel = "Demo agent"\n'
        f'command = [{sys.executable!r}, {str(demo)!r}]\nweb_modes = ["default", "auto"]\n'
    )
    yield from host_process(server, acme, "--config", str(config), KORUWEB_DEMO_FAST="1")


def host_process(server: Server, acme: Workspace, *flags: str, **env: str) -> Iterator[AgentHost]:
    _, token = AgentToken.issue(acme, "build-box", TokenKind.HOST)
    words = [sys.executable, "manage.py", "agent", "host", "--server", server.ws_url]
    words += ["--token", token, *flags, "--name", "build-box"]
    process = subprocess.Popen(
        words,
        cwd=BASE_DIR,
        env=child_env(**env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip().endswith("/workspaces/acme/")
        yield AgentHost.objects.get(name="build-box")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_an_approver_starts_a_run_on_a_host_from_new_run_and_watches_it(
    page: Page,
    new_page: Callable[..., Page],
    acme: Workspace,
    running_host: AgentHost,
    disk: Path,
    page_errors: list[str],
) -> None:
    alice = member(acme, "alice", Role.APPROVER)
    sign_in(page, alice)
    page.goto("/")
    page.get_by_role("link", name="New run").click()
    expect(page.get_by_role("heading", name="New run")).to_be_visible()
    expect(page.locator(f"#host-{running_host.pk}")).to_have_attribute("aria-current", "true")
    expect(page.locator("#agent")).to_have_value("sdk")
    expect(page.locator("#chosen-dir")).to_have_text(str(disk))
    entries = page.locator("#entries")
    expect(entries.get_by_role("link", name="koruweb/")).to_be_visible()
    url = page.url
    # htmx takes over the page's links once it has loaded (a deferred script): a click before
    # that is a plain navigation, which a loaded machine made happen once.
    page.wait_for_function("() => document.readyState === 'complete' && !!window.htmx")
    entries.get_by_role("link", name="koruweb/").click()  # htmx: the listing alone is swapped
    expect(page.locator("#chosen-dir")).to_have_text(f"{disk}/koruweb")
    expect(page.locator("#entries")).to_contain_text("notes.txt")
    assert page.url == url  # the page stayed; only the listing changed
    page.locator("#prompt").fill("basic")
    screenshot(page, "hosts-desktop-new-run")
    page.get_by_role("button", name="Start").click()
    expect(page).to_have_url(re.compile(r"/chats/[0-9a-f-]{36}/$"), timeout=30_000)
    expect(page.get_by_text("Read notes.txt").first).to_be_visible(timeout=15_000)
    expect(page.get_by_text("Edit notes.txt").first).to_be_visible()
    screenshot(page, "hosts-desktop-run")
    assert page_errors == []

    phone = new_page(**PHONE)
    sign_in(phone, alice)
    phone.goto(f"/runs/new?host={running_host.pk}&path=koruweb")
    expect(phone.locator("#entries")).to_contain_text("src/")
    assert sideways(phone) == 0
    screenshot(phone, "hosts-phone-new-run")
    phone.goto(f"/runs/new?host={running_host.pk}&path=..")
    expect(phone.locator("#listing-error")).to_contain_text("is outside")
    screenshot(phone, "hosts-phone-outside")
    assert sideways(phone) == 0


def test_the_workspace_page_shows_its_hosts_and_a_viewer_gets_no_new_run(
    page: Page, acme: Workspace, running_host: AgentHost
) -> None:
    admin = member(acme, "carol", Role.ADMIN)
    sign_in(page, admin)
    page.goto("/workspaces/acme/")
    row = page.locator(f"#host-{running_host.pk}")
    expect(row).to_contain_text("online")
    expect(row).to_contain_text("sdk")
    screenshot(page, "hosts-desktop-workspace")
    bob = member(acme, "bob", Role.VIEWER)
    sign_in(page, bob)
    page.goto("/")
    expect(page.get_by_role("link", name="New run")).to_have_count(0)
    response = page.goto("/runs/new")
    assert response is not None and response.status == 403
    expect(page.locator("#refusal")).to_contain_text("approver or admin")


def test_a_run_started_on_a_configured_host_shows_the_agents_label_and_switches_its_mode(
    page: Page, acme: Workspace, configured_host: AgentHost, page_errors: list[str]
) -> None:
    sign_in(page, member(acme, "alice", Role.APPROVER))
    page.goto(f"/runs/new?host={configured_host.pk}")
    agent = page.get_by_role("combobox", name="2. Agent")
    expect(agent.locator("option")).to_have_text(["Demo agent"])  # the label, no command line
    expect(page.locator(f"#host-{configured_host.pk} + .meta")).to_contain_text("Demo agent")
    expect(page.get_by_text("demo_agent.py")).to_have_count(0)
    page.locator("#prompt").fill("Fix the failing test")
    screenshot(page, "host-modes-new-run")
    page.get_by_role("button", name="Start").click()
    expect(page).to_have_url(re.compile(r"/chats/[0-9a-f-]{36}/$"), timeout=30_000)
    modes = page.get_by_role("group", name="Mode", exact=True).get_by_role("button")
    expect(modes).to_have_text(["Default", "Auto"])  # the agent's modes its web_modes name
    expect(page.get_by_role("button", name="Default", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    page.get_by_role("button", name="Auto", exact=True).click()
    # The runner switched the agent and reported its mode back: the control follows.
    expect(page.get_by_role("button", name="Auto", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(page.get_by_role("button", name="Default", exact=True)).to_have_attribute(
        "aria-pressed", "false"
    )
    screenshot(page, "host-modes-run")
    assert page_errors == []
