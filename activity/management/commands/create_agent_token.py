from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.text import slugify

from activity.models import AgentToken, Membership, Role, Workspace
from activity.models.accounts import TokenKind


class Command(BaseCommand):
    help = "Create an agent token for a workspace (made if needed) and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace", help="the workspace's slug or name")
        parser.add_argument("--name", required=True, help="what the token is for, e.g. a laptop")
        parser.add_argument(
            "--host", action="store_true", help="a host token, for `manage.py agent host`"
        )
        parser.add_argument(
            "--admin",
            metavar="USERNAME",
            help="make this user an admin of the workspace (if not a member yet), so they see "
            "its runs",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = slugify(options["workspace"])
        name = options["name"].strip()
        if not slug:
            raise CommandError("a workspace needs a name with letters or digits")
        if not name:
            raise CommandError("--name must not be empty")
        admin = None
        if options["admin"]:
            model = get_user_model()
            admin = model._default_manager.filter(username=options["admin"]).first()
            if admin is None:
                raise CommandError(f"there is no user named {options['admin']!r}")
        workspace, created = Workspace.objects.get_or_create(
            slug=slug, defaults={"name": options["workspace"].strip()}
        )
        kind = TokenKind.HOST if options["host"] else TokenKind.AGENT
        _, token = AgentToken.issue(workspace, name[:100], kind)
        if created:
            self.stderr.write(f"Created workspace {workspace.name!r} ({workspace.slug}).")
        if admin is not None:
            _, added = Membership.objects.get_or_create(
                workspace=workspace, user=admin, defaults={"role": Role.ADMIN}
            )
            if added:
                self.stderr.write(f"{admin.get_username()} is an admin of {workspace.slug}.")
        if not workspace.memberships.exists():
            self.stderr.write(
                f"Nobody is a member of {workspace.slug} yet, so only superusers see its runs: "
                "give --admin USERNAME to make someone its admin."
            )
        what = "Host token" if options["host"] else "Agent token"
        self.stderr.write(f"{what} {name!r} for {workspace.slug} (shown once, keep it safe):")
        self.stdout.write(token)
