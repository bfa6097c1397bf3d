"""The benchmark's databases and the final check that every viewer's screen equals the database.

The embedded mode's is a migrated SQLite file in a temp dir; team mode's (``--targets team``) a
PostgreSQL database created for the run and dropped after (``manage.py migrate`` in a
subprocess), with Redis db 3 as the channel layer, flushed before and after. Each gets a
member, an agent token and a logged-in session. Django is set up in the benchmark's process
only for this, with team mode's database as the alias ``team``: ``using`` routes the ORM to it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.clients import TR
from tests.liveserver import BASE_DIR

POSTGRES = "postgres://postgres@127.0.0.1:5432"  # trust auth
REDIS = "redis://127.0.0.1:6379/3"  # not db 0: the tests' and a dev server's
TEAM_DB = f"koruweb_bench_{os.getpid()}"
TEAM = "team"  # team mode's database alias in this process
FLOOD_LIMITS = ("SOCKETS_PER_PERSON", "SOCKETS_PER_TOKEN", "AGENT_NEW_CHATS_PER_MINUTE")

ALIAS: ContextVar[str] = ContextVar("alias", default="default")


class Router:
    """Every query of this process to the database ``using`` chose (SQLite's by default)."""

    def db_for_read(self, model: type, **hints: Any) -> str:
        return ALIAS.get()

    def db_for_write(self, model: type, **hints: Any) -> str:
        return ALIAS.get()


@contextlib.contextmanager
def using(alias: str) -> Iterator[None]:
    from django.db import connections

    token = ALIAS.set(alias)
    try:
        yield
    finally:
        ALIAS.reset(token)
        connections.close_all()


@dataclass(frozen=True)
class Fixtures:
    env: dict[str, str]  # what a server's process needs to share this database
    token: str  # an agent token of the workspace
    cookie: str  # a member's session cookie
    alias: str  # this database's alias in this process


def prepare(tmp: Path, team: bool) -> dict[str, Fixtures]:
    """The embedded mode's fixtures (``default``) and, with ``team``, team mode's (``TEAM``)."""
    common = {
        "DJANGO_SETTINGS_MODULE": "koruweb.settings",
        "KORUWEB_VAR_DIR": str(tmp),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        # The bench measures the live path, not the flood limits (docs/protocol.md#floods): its
        # one member watches with hundreds of sockets, its one agent token runs a hundred chats.
        **dict.fromkeys(FLOOD_LIMITS, "1000000"),
    }
    embedded = {**common, "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}", "REDIS_URL": ""}
    os.environ.update(embedded)
    import dj_database_url
    from django.conf import settings

    envs = {"default": embedded}
    if team:
        envs[TEAM] = {**common, "DATABASE_URL": f"{POSTGRES}/{TEAM_DB}", "REDIS_URL": REDIS}
        create_team_database(envs[TEAM])
        settings.DATABASES[TEAM] = dict(dj_database_url.parse(envs[TEAM]["DATABASE_URL"]))
        settings.DATABASE_ROUTERS = [Router()]
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    fixtures = {}
    for alias, env in envs.items():
        with using(alias):
            token, cookie = member()
        fixtures[alias] = Fixtures(env=env, token=token, cookie=cookie, alias=alias)
    return fixtures


def member() -> tuple[str, str]:
    """A workspace, its agent token and a logged-in viewer's session cookie."""
    from django.contrib.auth.models import User
    from django.test import Client

    from activity.models import AgentToken, Membership, Role, Workspace

    workspace = Workspace.objects.create(slug="bench", name="Bench")
    _, token = AgentToken.issue(workspace, "bench")
    user = User.objects.create_user("viewer", password=secrets.token_urlsafe(16))
    Membership.objects.create(workspace=workspace, user=user, role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    return token, f"sessionid={client.cookies['sessionid'].value}"


def create_team_database(env: dict[str, str]) -> None:
    """Team mode's PostgreSQL database, migrated by ``manage.py migrate``; Redis db 3 flushed."""
    import psycopg

    try:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{TEAM_DB}"')
    except psycopg.OperationalError as e:
        raise SystemExit(f"team mode needs PostgreSQL at {POSTGRES}: {e}") from e
    flush_redis()
    migrate = [sys.executable, "manage.py", "migrate", "--verbosity", "0"]
    done = subprocess.run(
        migrate, cwd=BASE_DIR, env={**os.environ, **env}, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"migrating {TEAM_DB} failed:\n{done.stdout}{done.stderr}")


def drop_team_database() -> None:
    """After the run: team mode's database dropped, Redis db 3 flushed."""
    import psycopg
    import redis
    from django.db import connections

    connections.close_all()
    try:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{TEAM_DB}" WITH (FORCE)')
        flush_redis()
    except (psycopg.Error, redis.RedisError) as e:
        print(f"team mode's database {TEAM_DB} or Redis db 3 left as is: {e}", file=sys.stderr)


def flush_redis() -> None:
    import redis

    with redis.Redis.from_url(REDIS) as client:
        client.flushdb()


def chat_version(chat_id: uuid.UUID, alias: str) -> int:
    from activity.models import Chat

    with using(alias):
        return Chat.objects.values_list("version", flat=True).get(pk=chat_id)


def screens_match(
    chat_id: uuid.UUID,
    screens: list[dict[str, str]],
    alias: str,
    windowed: list[bool] | None = None,
) -> list[str]:
    """Compare each viewer's rows (``<tr>`` id → its latest HTML) with the chat's rows in the
    database, rendered by the partial the page and the pushes use. Returns the differences. A
    ``windowed`` viewer fetched its page (a catch-up past a page's calls): it may lack the rows
    before the latest ``reads.LIVE_ROWS``, as a fresh page does."""
    from django.template.loader import render_to_string

    from activity.models import ToolActivity
    from activity.review.reads import with_prompts

    expected: dict[str, str] = {}
    with using(alias):
        rows = ToolActivity.objects.filter(chat_id=chat_id).order_by("position")
        for row in with_prompts(list(rows)):
            html = render_to_string("activity/pushed/parts.html#tool-row", {"row": row})
            found = TR.search(html)
            assert found is not None, html
            expected[found.group(1)] = found.group(0)
    from activity.review.reads import LIVE_ROWS

    latest = set(list(expected)[-LIVE_ROWS:])
    problems: list[str] = []
    for n, screen in enumerate(screens):
        missing = expected.keys() - screen.keys()
        if windowed and windowed[n]:
            missing &= latest
        extra = screen.keys() - expected.keys()
        stale = [k for k in expected.keys() & screen.keys() if screen[k] != expected[k]]
        if missing or extra or stale:
            problems.append(
                f"viewer {n}: {len(missing)} rows missing, {len(extra)} extra, {len(stale)} stale"
            )
    if not expected:
        problems.append("the database has no rows")
    return problems
