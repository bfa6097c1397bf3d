"""Read-only links to one run for people without an account (issue 30; docs/architecture.md,
"Share links"). Only the token's hash is kept: the link is shown once, when it is made."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ShareLink(models.Model):
    """A link that shows one run, as it is now and live while it runs, to whoever holds it,
    until ``expires_at`` or until it is revoked (``revoked_at``)."""

    chat = models.ForeignKey("activity.Chat", on_delete=models.CASCADE, related_name="share_links")
    token_hash = models.CharField(max_length=64, unique=True)  # sha256 of the link's token
    hint = models.CharField(max_length=8)  # the token's first characters, to tell links apart
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    last_opened_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["chat", "expires_at"])]

    def __str__(self) -> str:
        return f"share link {self.hint}… of {self.chat_id}"

    @property
    def live(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()
