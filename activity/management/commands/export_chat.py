from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from activity.models import Chat


class Command(BaseCommand):
    help = "Print a chat's ToolActivity rows as a JSON list in the contract's shape."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("chat_id", help="the chat's UUID")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            chat_id = uuid.UUID(options["chat_id"])
        except ValueError:
            raise CommandError(f"{options['chat_id']!r} is not a chat id (a UUID)") from None
        chat = Chat.objects.filter(pk=chat_id).first()
        if chat is None:
            raise CommandError(f"no chat {chat_id}")
        rows = [row.to_record().to_json() for row in chat.tool_activities.order_by("position")]
        self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))
