from __future__ import annotations

from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "activity"
    verbose_name = "Agent activity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from activity.sockets import revoke  # noqa: F401  its receivers revoke sockets (issue 22)
