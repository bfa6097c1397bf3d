"""Settings come from the environment; a setting koruweb cannot run with stops it at start."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.liveserver import BASE_DIR


def start(**env: str) -> subprocess.CompletedProcess[str]:
    """Set Django up in a fresh process with these environment variables."""
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "koruweb.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_database_other_than_sqlite_or_postgresql_is_refused_at_start_with_a_clear_error():
    started = start(DATABASE_URL="mysql://koruweb@127.0.0.1:3306/koruweb")
    assert started.returncode != 0
    assert "koruweb runs on SQLite or PostgreSQL" in started.stderr


def test_the_default_database_starts():
    assert start().returncode == 0
