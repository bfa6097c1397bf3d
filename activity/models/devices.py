"""The browsers that tell a person when a run needs them (Web Push), what is owed to each, what
each person wants to be told, and the runs they follow (what decides and sends it is
``activity/notify/``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import models
from django.utils import timezone


class PushDevice(models.Model):
    """One browser of a person's that turned notifications on: its push subscription. Deleted
    by its person, or when its push service says it is gone."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_devices"
    )
    name = models.CharField(max_length=120)  # "Chrome on Android", as its person knows it
    endpoint = models.URLField(max_length=2048, unique=True)
    p256dh = models.CharField(max_length=200)  # the browser's public key, base64url
    auth = models.CharField(max_length=100)  # its authentication secret, base64url
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)  # last notification delivered

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} of {self.user_id}"


class Notice(models.Model):
    """A notification owed to one device, sent once whichever process claims it first
    (``claimed_at``), off the request and ingest paths. ``key`` names what it is about: one
    device is never told the same thing twice."""

    device = models.ForeignKey(PushDevice, on_delete=models.CASCADE, related_name="notices")
    key = models.CharField(max_length=200)  # "prompt:<id>", "prompt:<id>:settled"
    payload: models.JSONField[Any] = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    tries = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["device", "key"], name="one_notice_per_device")
        ]
        indexes = [models.Index(fields=["sent_at", "claimed_at"], name="notices_owed")]

    def __str__(self) -> str:
        return f"{self.key} to {self.device_id}"


class NotifyPrefs(models.Model):
    """What a person wants to be told on their browsers, and when not to be (their quiet hours,
    in their own time zone). A person with none is told everything, at any hour."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_prefs"
    )
    prompts = models.BooleanField(default=True)  # prompts waiting for their answer
    mentions = models.BooleanField(default=True)  # comments that mention them
    follows = models.BooleanField(default=True)  # a turn of a run they follow ended
    quiet_from = models.TimeField(null=True, blank=True)
    quiet_until = models.TimeField(null=True, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")

    def __str__(self) -> str:
        return f"notifications of {self.user_id}"

    def quiet(self, moment: datetime) -> bool:
        """Whether ``moment`` falls in the quiet hours (which may run past midnight)."""
        start, end = self.quiet_from, self.quiet_until
        if start is None or end is None or start == end:
            return False
        try:
            zone = ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            zone = ZoneInfo("UTC")
        local = moment.astimezone(zone).time()
        return start <= local < end if start < end else local >= start or local < end


class Follow(models.Model):
    """A person following a run, or (``following`` false) having stopped: whoever started a run
    from the web follows it until they say otherwise; anyone who may see it can follow it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("activity.Chat", on_delete=models.CASCADE, related_name="follows")
    following = models.BooleanField(default=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "chat"], name="one_follow_per_run")]

    def __str__(self) -> str:
        return f"{self.user_id} {'follows' if self.following else 'left'} {self.chat_id}"
