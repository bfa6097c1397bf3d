"""Settings come from the environment; a setting koruweb cannot run with stops it at start."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.liveserver import BASE_DIR


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "koruweb.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


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


PRODUCTION = {
    "KORUWEB_ENV": "production",
    "SECRET_KEY": "k7#Qv2!pX9zR4mW8tY1uB6nC3eF5gH0jL-sD_aZ@xV+oI&yE%rT^wU*iP(lK)mN",
    "ALLOWED_HOSTS": "koruweb.example.com",
}


def test_check_deploy_prints_nothing_in_production_with_only_the_required_variables():
    checked = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "DEBUG"))},
            "DATABASE_URL": "sqlite:///:memory:",
            **PRODUCTION,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == ""
    assert checked.stdout.strip() == "System check identified no issues (0 silenced)."


def test_https_settings_and_the_proxys_header_come_from_the_environment():
    shown = run(
        "import django; django.setup(); from django.conf import settings as s; print("
        "s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD,"
        " s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SECURE_PROXY_SSL_HEADER)",
        **PRODUCTION,
        SECURE_HSTS_SECONDS="3600",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="0",
        SECURE_HSTS_PRELOAD="no",
        SECURE_SSL_REDIRECT="false",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [
        "3600", "False", "False", "False", "True", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')"
    ]  # fmt: skip
