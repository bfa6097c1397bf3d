"""Workspace webhooks (issue 31): where a workspace's events are posted, and each delivery with
its attempts (what makes and sends them is ``activity/notify/hooks*.py``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class HookFormat(models.TextChoices):
    SLACK = "slack", "Slack-compatible (incoming webhook)"
    JSON = "json", "koruweb JSON (signed)"


class HookEvent(models.TextChoices):
    PROMPT_WAITING = "prompt.waiting", "a prompt waits for an answer"
    PROMPT_ANSWERED = "prompt.answered", "a prompt was answered"
    RUN_STARTED = "run.started", "a run started"
    RUN_FAILED = "run.failed", "a run failed"
    RUN_FINISHED = "run.finished", "a run finished"
    MENTION = "mention", "a member was mentioned"


class Webhook(models.Model):
    """An outgoing webhook of a workspace: the events it is told of, in one format, signed with
    its ``secret`` (HMAC-SHA256 over the timestamp and the body)."""

    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, related_name="webhooks"
    )
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=2048)
    format = models.CharField(max_length=8, choices=HookFormat.choices, default=HookFormat.JSON)
    events: models.JSONField[Any] = models.JSONField(default=list)  # HookEvent values
    secret = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"webhook {self.name} of {self.workspace_id}"


class Delivery(models.Model):
    """One event owed to one webhook: made once (unique ``key``), sent by whichever process
    claims it, tried again with backoff (``next_try_at``) until it is delivered or has failed
    ``MAX_TRIES`` times. Its last response's status is kept for the delivery log."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    key = models.CharField(max_length=200)  # "prompt.waiting:<id>", "run.started:<id>", …
    event = models.CharField(max_length=32, choices=HookEvent.choices)
    payload: models.JSONField[Any] = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    next_try_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)  # gave up
    attempts = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["webhook", "key"], name="one_delivery_per_event")
        ]
        indexes = [models.Index(fields=["delivered_at", "failed_at", "next_try_at"])]

    def __str__(self) -> str:
        return f"{self.key} to {self.webhook_id}"
