"""Per-kind versions on the chat, so a push looks only for the kinds that changed."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import F


def from_version(apps: Any, schema_editor: Any) -> None:
    """Existing chats: every kind may have changed at any version up to the chat's."""
    chat = apps.get_model("activity", "Chat")
    version = F("version")
    chat.objects.update(turns_version=version, replies_version=version, rows_version=version)


class Migration(migrations.Migration):
    dependencies = [("activity", "0008_runner_heartbeat")]

    operations = [
        migrations.AddField(
            model_name="chat",
            name="turns_version",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="chat",
            name="replies_version",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="chat",
            name="rows_version",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(from_version, migrations.RunPython.noop),
    ]
