"""A member named in a comment, in their inbox until they open or dismiss it (what finds and
shows mentions is ``activity/review/mentions.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Mention(models.Model):
    """A member named in a comment; in their inbox until they open or dismiss it."""

    comment = models.ForeignKey(
        "activity.Comment", on_delete=models.CASCADE, related_name="mentions"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=150)  # the username as it was when mentioned
    created_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(null=True, blank=True)  # opened or dismissed
    notified_at = models.DateTimeField(null=True, blank=True)  # their browsers told (notify/)
    mailed_at = models.DateTimeField(null=True, blank=True)  # mailed (notify/mail)
    hooked_at = models.DateTimeField(null=True, blank=True)  # webhooks told (notify/hooks)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["comment", "user"], name="one_mention_per_comment")
        ]
        indexes = [
            models.Index(fields=["user", "seen_at"], name="mentions_waiting"),
            models.Index(  # mentions the webhooks are still owed (notify/hooks)
                fields=["hooked_at"],
                condition=models.Q(hooked_at__isnull=True),
                name="mentions_hook_owed",
            ),
        ]

    def __str__(self) -> str:
        return f"@{self.name} in {self.comment_id}"
