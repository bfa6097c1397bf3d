from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from activity.models import AgentToken, Membership, Role, Workspace

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"


class Command(BaseCommand):
    help = "Development only: a demo workspace, a login and a fresh agent token (printed)."

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
        AgentToken.objects.filter(workspace=workspace, name="demo").update(revoked_at=None)
        _, token = AgentToken.issue(workspace, "demo")
        self.stdout.write(token)
