"""Test set-up shared by every test.

Tests mirror the parts of ``activity/`` (``tests/<part>/test_<module>.py``); ``tests/server`` holds
the project's own (settings, the proxy, the database), ``tests/browser`` the real-browser tests and
``tests/integration`` the ones with real processes, agents and servers.

``make test`` runs every test on SQLite, then again on PostgreSQL those not marked ``once``: the
browsers, the integration tests and the runner's (which has no database) are marked ``once`` here
by their folder, pure modules by their own ``pytestmark``; a test in those folders marked
``postgres`` runs on both.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

pytest_plugins = ["tests.agents.real.fixtures", "tests.members", "tests.notify.smtpserver"]

_tmp = Path(tempfile.mkdtemp(prefix="koruweb-tests-"))


ONCE_FOLDERS = {"browser", "integration", "runner"}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(item.path).relative_to(TESTS).parts[0]
        if folder in ONCE_FOLDERS and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.once)


def pytest_configure(config: pytest.Config) -> None:
    """Make the SQLite test database a file, in WAL mode like production.

    An in-memory database shared between threads fails concurrent writers with "database table
    is locked" instead of waiting for them, and a child process (a live server) cannot open it.
    """
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        test = db.setdefault("TEST", {})
        if not test.get("NAME"):
            test["NAME"] = str(_tmp / "test.sqlite3")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_tmp, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_counts_left() -> Iterator[None]:
    """No rate a test counted (activity/people/limits.py: comments, wrong passwords) limits the
    next one, whose people may have the same ids. The counts are in this process's memory here
    (no REDIS_URL in the tests' own settings): nothing else is cleared."""
    yield
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    from activity.people import limits

    if isinstance(caches[limits.CACHE], LocMemCache):
        caches[limits.CACHE].clear()
