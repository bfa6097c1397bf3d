from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from activity.models import AgentToken, Membership, Role, Workspace
from activity.models.accounts import TokenKind

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"
TOKEN_NAME = "demo"


def token_file() -> Path:
    """Where ``make run`` keeps its demo token, readable by its owner alone: one file per
    database, so ``make run`` and ``make run-team`` (another database) each keep theirs."""
    where = connection.settings_dict
    key = f"{where['ENGINE']}|{where.get('HOST') or ''}|{where.get('PORT') or ''}|{where['NAME']}"
    return settings.VAR_DIR / f"demo-token-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def keep(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` with mode 0600 from the start (never readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(path.name + ".new")
    draft.unlink(missing_ok=True)
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    os.replace(draft, path)


def demo_token(workspace: Workspace) -> str:
    """The demo runner's token: the one kept under var/ while it still works, else a new one
    (and the demo tokens whose plain text is lost are revoked), so ``make run`` after ``make
    run`` leaves one active demo token, not one more each time."""
    path = token_file()
    stored = path.read_text().strip() if path.exists() else ""
    found = AgentToken.find(stored) if stored else None
    if found is not None and found.workspace_id == workspace.pk and found.name == TOKEN_NAME:
        return stored
    AgentToken.objects.active().filter(
        workspace=workspace, name=TOKEN_NAME, kind=TokenKind.AGENT, issued_by__isnull=True
    ).update(revoked_at=timezone.now())
    _, token = AgentToken.issue(workspace, TOKEN_NAME)
    keep(path, token)
    return token


class Command(BaseCommand):
    help = (
        "Development only: a demo workspace, a login and the demo runner's agent token "
        "(printed; kept under var/ and reused while it works)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("demo_setup makes a well-known login: not in production")
        workspace, _ = Workspace.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
        user, created = User.objects.get_or_create(username=DEMO_USER)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        Membership.objects.update_or_create(
            workspace=workspace, user=user, defaults={"role": Role.ADMIN}
        )
        self.stdout.write(demo_token(workspace))
