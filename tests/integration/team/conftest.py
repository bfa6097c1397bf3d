"""Team mode as a team deploys it (issue 15), for the tests in this directory.

Two Daphne processes, A and B, on one private PostgreSQL database (``koruweb_team_test_<pid>``:
made, migrated and seeded here, dropped at the end) and one private ``redis-server`` on a free
port (private, so a test can kill and restart it), with the runner's heartbeat, its grace period
and the Redis timeouts short so faults show in seconds. ``koruweb.proxy`` stands in front of both
as nginx would: each new connection to the next server, skipping one that refuses.

Everything starts once for the module; before each test, whatever a test before it killed is
started again, so the tests pass in any order. This process stays on its own test database: it
sees the team's data only as a person does, through the servers' pages and exports (helpers.py).

Without PostgreSQL (``KORUWEB_TEAM_PG_URL``, by default postgres://postgres@127.0.0.1:5432) or
``redis-server``, every test here is skipped, saying which is missing; where ``CI`` is set, the
services are promised, and their absence fails the tests instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from koruweb.proxy import ProxyThread
from tests.integration.team.helpers import Visitor
from tests.integration.team.services import (
    PG_URL,
    SETTINGS,
    Database,
    Redis,
    Server,
    Team,
    seed,
    unavailable,
)
from tests.integration.test_runner import STARTED
from tests.liveserver import BASE_DIR, Child, child_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    why = unavailable()
    if why is not None:  # make test checks both first (scripts/need-services): never skipped
        pytest.fail(f"team mode needs PostgreSQL and Redis: {why}")
    log_dir = tmp_path_factory.mktemp("team")
    database = Database(PG_URL, os.getpid())
    redis = Redis(log_dir / "redis.log", child_env())
    started: list[Child] = []
    proxy: ProxyThread | None = None
    database.drop_orphans()  # those of test runs killed before their end
    database.drop()
    database.create()
    try:
        redis.start()
        started.append(redis)
        token = seed(database)
        env = child_env(
            DATABASE_URL=database.url,
            REDIS_URL=redis.location,
            PYTHONPATH=str(BASE_DIR),
            **SETTINGS,
        )
        a = Server("A", log_dir / "a.log", env)
        b = Server("B", log_dir / "b.log", env)
        started += [a, b]
        a.spawn()
        b.spawn()
        a.wait_ready()
        b.wait_ready()
        proxy = ProxyThread([("127.0.0.1", a.port), ("127.0.0.1", b.port)])
        proxy.start()
        running = Team(database, redis, a, b, proxy, token, log_dir)
        running.visitor = Visitor(proxy.url)
        running.visitor.log_in()  # through the proxy, as a person would
        yield running
    finally:
        if proxy is not None:
            proxy.stop()
        for child in started:
            child.stop()
        database.drop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report carries what both servers logged during it, and the chats'
    presence and turns as the team's database has them."""
    report = yield
    team = getattr(item, "funcargs", {}).get("team")
    if report.failed and call.when == "call" and isinstance(team, Team):
        report.sections.append(("the team's servers' logs", team.logs()))
        try:
            report.sections.append(("the team's chats and turns", team.database.state()))
        except psycopg.Error as error:
            report.sections.append(("the team's chats and turns", f"unreadable: {error}"))
    return report


@pytest.fixture(autouse=True)
def team_up(team: Team) -> Iterator[Team]:
    """Every process of the team up before each test; no runner outlives its test."""
    team.up()
    yield team
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def browser(team: Team) -> Iterator[Any]:
    """Debian's Chromium, for the tests that watch as a person does (started only for them)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
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


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[[str], Any]]:
    """``new_page(base_url)``: a page in a fresh browser context (no cookies) on that server."""
    contexts: list[Any] = []

    def open_page(base_url: str) -> Any:
        context = browser.new_context(base_url=base_url)
        contexts.append(context)
        return context.new_page()

    try:
        yield open_page
    finally:
        for context in contexts:
            context.close()
