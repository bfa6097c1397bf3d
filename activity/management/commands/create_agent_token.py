from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.text import slugify

from activity.models import AgentToken, Workspace


class Command(BaseCommand):
    help = "Create an agent token for a workspace (made if needed) and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace", help="the workspace's slug or name")
        parser.add_argument("--name", required=True, help="what the token is for, e.g. a laptop")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = slugify(options["workspace"])
        name = options["name"].strip()
        if not slug:
            raise CommandError("a workspace needs a name with letters or digits")
        if not name:
            raise CommandError("--name must not be empty")
        workspace, created = Workspace.objects.get_or_create(
            slug=slug, defaults={"name": options["workspace"].strip()}
        )
        _, token = AgentToken.issue(workspace, name[:100])
        if created:
            self.stderr.write(f"Created workspace {workspace.name!r} ({workspace.slug}).")
        self.stderr.write(f"Agent token {name!r} for {workspace.slug} (shown once, keep it safe):")
        self.stdout.write(token)
