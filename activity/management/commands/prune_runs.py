"""Delete runs older than the retention period: ``manage.py prune_runs [--days N]``.

Meant for a scheduler (cron, a systemd timer) to call daily. A run's age is its chat's
``created_at``; deleting a chat deletes everything under it. A chat whose runner is connected
is kept whatever its age (its running turn, or the next one, would find its chat gone), and is
deleted by a later call once its runner has left.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from activity.models import Chat


class Command(BaseCommand):
    help = "Delete runs created more than RETENTION_DAYS (or --days) days ago; print how many."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, help="override RETENTION_DAYS for this call")
        parser.add_argument(
            "--dry-run", action="store_true", help="only say how many runs would be deleted"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = settings.RETENTION_DAYS if options["days"] is None else options["days"]
        if options["days"] is not None and days < 1:
            raise CommandError("--days must be 1 or more")
        if days == 0:
            self.stdout.write("RETENTION_DAYS is 0: runs are kept forever; nothing deleted.")
            return
        cutoff = timezone.now() - timedelta(days=days)
        old = Chat.objects.filter(created_at__lt=cutoff)
        live = old.filter(runner_connected=True).count()
        ids = list(old.filter(runner_connected=False).values_list("pk", flat=True))
        if options["dry_run"]:
            deleted, verb = len(ids), "Would delete"
        else:
            deleted, verb = sum(delete_one(pk, cutoff) for pk in ids), "Deleted"
        when = cutoff.strftime("%Y-%m-%d %H:%M %Z")
        self.stdout.write(f"{verb} {deleted} run(s) created before {when} ({days} days).")
        if live:
            self.stdout.write(f"Kept {live} older run(s) whose runner is connected.")


def delete_one(chat_id: uuid.UUID, cutoff: datetime) -> int:
    """One chat per transaction: locks stay short, and a runner that connected meanwhile
    keeps its chat."""
    with transaction.atomic():
        chat = (
            Chat.objects.select_for_update()
            .filter(pk=chat_id, created_at__lt=cutoff, runner_connected=False)
            .first()
        )
        if chat is None:
            return 0
        chat.delete()
        return 1
