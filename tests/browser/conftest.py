"""Real-browser tests: Debian's Chromium (through Playwright) against a real Daphne child.

The browser and the runner socket both talk to the child server, because the in-memory channel
layer lives in one process. The child and this process share one database: the session's test
database (a SQLite file, see tests/conftest.py, or PostgreSQL), which pytest-django creates,
migrates, flushes and destroys; the child opens it through ``DATABASE_URL``.

Playwright's sync API runs an event loop in this thread, so the ORM here needs
``DJANGO_ALLOW_ASYNC_UNSAFE`` — set only while these tests run and never passed to the server.
Nothing here uses pytest-asyncio (STACK.md G9).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connections

from activity.models import AgentToken, Role, Workspace
from tests.browser.helpers import Live, Team, member, watch
from tests.browser.runner import Runner

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
BASE_DIR = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    """The URL of the test database this process uses, for the child server."""
    db = connections["default"].settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(db["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise RuntimeError(f"the test database is in memory ({name}); a child cannot open it")
        return f"sqlite:///{name}"
    if db["ENGINE"] == "django.db.backends.postgresql":
        auth = quote(db["USER"] or "", safe="")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"], safe="")
        host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        return f"postgres://{auth}@{host}/{db['NAME']}"
    raise RuntimeError(f"no browser tests on {db['ENGINE']}")


def _die_with_parent() -> None:
    """In the child: get SIGKILL if pytest itself dies, so no server outlives a run (Linux)."""
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``daphne koruweb.asgi:application`` in a child process, on a fixed port."""

    def __init__(self, database_url: str, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
        self.env = {
            **env,
            "DJANGO_SETTINGS_MODULE": "koruweb.settings",
            "DATABASE_URL": database_url,
            "SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(BASE_DIR),  # this checkout's code, whatever is installed
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        daphne = Path(sys.executable).with_name("daphne")
        command = [str(daphne), "-b", "127.0.0.1", "-p", str(self.port)]
        command += ["--websocket_timeout", "-1", "koruweb.asgi:application"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def wait_ready(self, within: float = 20) -> None:
        """Until the server answers HTTP; raises with its output if it exits or never does."""
        deadline = time.monotonic() + within
        while self.process is not None:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.output}")
            try:
                with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer within {within} s:\n{self.output}")
            time.sleep(0.05)
        raise RuntimeError("the server was not started")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no close frames, no cleanup, as when a machine dies."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


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
    the browser launches; always stopped, even after a failure."""
    running = Server(_database_url(), tmp_path_factory.mktemp("daphne") / "daphne.log")
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
