"""Real-browser tests: Debian's Chromium (through Playwright) against a real Daphne child.

The browser and the runner socket both talk to the child server, because the in-memory channel
layer lives in one process. The child and this process share one database: the session's test
database (a SQLite file, see tests/conftest.py, or PostgreSQL), which pytest-django creates,
migrates, flushes and destroys; the child opens it through ``DATABASE_URL``.

Playwright's sync API runs an event loop in this thread, so the ORM here needs
``DJANGO_ALLOW_ASYNC_UNSAFE`` — set only while these tests run and never passed to the server.
Nothing here uses pytest-asyncio (docs/gotchas.md#playwrights-sync-api-and-pytest-asyncio).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from activity.models import AgentToken, Role, Workspace
from tests.browser.helpers import Live, Team, member, watch
from tests.browser.runner import Runner
from tests.liveserver import Server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def async_unsafe() -> Iterator[None]:
    """Let the ORM run beside Playwright's event loop, only while these tests run."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(autouse=True)
def _async_unsafe(async_unsafe: None) -> None:
    """Every test here, and the database flush after it, runs with ``async_unsafe``."""


@pytest.fixture(scope="module")
def browser(async_unsafe: None) -> Iterator[Any]:
    """Headless Debian Chromium; module-scoped so its event loop is gone before other modules."""
    from playwright.sync_api import expect, sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
    expect.set_options(timeout=5_000)
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="module", autouse=True)
def module_server(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One server for the module (a start costs a second), spawned first so that it boots while
    the browser launches; always stopped, even after a failure. Its comments per minute are not
    limited: its tests' people comment far more (tests/review/test_mentions.py tests the limit)."""
    unlimited = {"COMMENTS_PER_MINUTE": "1000000"}
    running = Server(tmp_path_factory.mktemp("daphne") / "daphne.log", env=unlimited)
    try:
        running.spawn()
        yield running
    finally:
        running.stop()


@pytest.fixture
def server(module_server: Server, transactional_db: None) -> Server:
    """The module's server, on this test's data (flushed afterwards); started again if a test
    left it down."""
    if not module_server.running:
        module_server.spawn()
    module_server.wait_ready()
    return module_server


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    """A fresh browser context (no cookies) on the server."""
    context = browser.new_context(base_url=server.url)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def new_page(browser: Any, server: Server) -> Iterator[Callable[..., Any]]:
    """More people, each in a browser of their own: ``new_page(**context_options)``, e.g. a
    phone's ``viewport``, ``is_mobile`` and ``has_touch``."""
    contexts: list[Any] = []

    def open_page(**options: Any) -> Any:
        context = browser.new_context(base_url=server.url, **options)
        contexts.append(context)
        return context.new_page()

    try:
        yield open_page
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def live(page: Any) -> Live:
    """The chat page's sockets to /ws/chats/, as ``page`` opens them."""
    return watch(page)


@pytest.fixture
def team() -> Team:
    """Workspace "acme", its viewer alice, and an agent token for its runner."""
    workspace = Workspace.objects.create(slug="acme", name="Acme")
    alice = member(workspace, "alice", Role.VIEWER)
    _, token = AgentToken.issue(workspace, "laptop")
    return Team(workspace, alice, token)


@pytest.fixture
def runner(server: Server, team: Team) -> Iterator[Runner]:
    """A runner connected to the server: its hello created a chat in ``team``'s workspace."""
    agent = Runner(server.port, team.token, uuid.uuid4())
    agent.connect()  # the hello creates the chat
    yield agent
    agent.close()


@pytest.fixture
def page_errors(page: Any) -> list[str]:
    """Uncaught exceptions and console errors (CSP violations among them) the page reports."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))

    def console(message: Any) -> None:
        where = message.location.get("url", "")
        if message.type == "error" and not where.endswith("/favicon.ico"):
            errors.append(f"{message.text} ({where})")

    page.on("console", console)
    return errors
