"""Test set-up shared by every test."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

pytest_plugins = ["tests.agents.real.fixtures", "tests.people"]

_tmp = Path(tempfile.mkdtemp(prefix="koruweb-tests-"))


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
