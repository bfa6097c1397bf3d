"""The benchmark's database: a migrated SQLite file in a temp dir, a member, an agent token, a
logged-in session; and the final check that every viewer's screen equals the database.

Django is set up in the benchmark's process only for this; the server reads the same file.
"""

from __future__ import annotations

import os
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.clients import TR


@dataclass(frozen=True)
class Fixtures:
    env: dict[str, str]  # what the server's process needs to share this database
    token: str  # an agent token of the workspace
    cookie: str  # a member's session cookie
    db_path: Path


def prepare(tmp: Path) -> Fixtures:
    """Point Django at a fresh SQLite file under ``tmp``, migrate it, make the fixtures."""
    db_path = tmp / "bench.sqlite3"
    env = {
        "DJANGO_SETTINGS_MODULE": "koruweb.settings",
        "DATABASE_URL": f"sqlite:///{db_path}",
        "KORUWEB_VAR_DIR": str(tmp),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    from activity.models import AgentToken, Membership, Role, Workspace

    call_command("migrate", verbosity=0)
    workspace = Workspace.objects.create(slug="bench", name="Bench")
    _, token = AgentToken.issue(workspace, "bench")
    user = User.objects.create_user("viewer", password=secrets.token_urlsafe(16))
    Membership.objects.create(workspace=workspace, user=user, role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    connections.close_all()
    return Fixtures(env=env, token=token, cookie=cookie, db_path=db_path)


def chat_version(chat_id: uuid.UUID) -> int:
    from django.db import connections

    from activity.models import Chat

    try:
        return Chat.objects.values_list("version", flat=True).get(pk=chat_id)
    finally:
        connections.close_all()


def screens_match(chat_id: uuid.UUID, screens: list[dict[str, str]]) -> list[str]:
    """Compare each viewer's rows (``<tr>`` id → its latest HTML) with the chat's rows in the
    database, rendered by the partial the page and the pushes use. Returns the differences."""
    from django.db import connections
    from django.template.loader import render_to_string

    from activity.models import ToolActivity
    from activity.reads import with_prompts

    rows = with_prompts(list(ToolActivity.objects.filter(chat_id=chat_id).order_by("position")))
    expected: dict[str, str] = {}
    for row in rows:
        html = render_to_string("activity/parts.html#tool-row", {"row": row})
        found = TR.search(html)
        assert found is not None, html
        expected[found.group(1)] = found.group(0)
    connections.close_all()
    problems: list[str] = []
    for n, screen in enumerate(screens):
        missing = expected.keys() - screen.keys()
        extra = screen.keys() - expected.keys()
        stale = [k for k in expected.keys() & screen.keys() if screen[k] != expected[k]]
        if missing or extra or stale:
            problems.append(
                f"viewer {n}: {len(missing)} rows missing, {len(extra)} extra, {len(stale)} stale"
            )
    if not expected:
        problems.append("the database has no rows")
    return problems
