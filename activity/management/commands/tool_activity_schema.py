from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from activity.core.contract import tool_activity_json_schema


class Command(BaseCommand):
    help = "Print the JSON Schema of one ToolActivity row, generated from the contract model."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps(tool_activity_json_schema(), indent=2))
