"""A person's message to a run's agent, sent from its page (the queue is
``activity/live/drive.py``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class WebPromptStatus(models.TextChoices):
    QUEUED = "queued"  # waits for the running turn to end (or the runner to come back)
    SENT = "sent"  # on its way to the runner, resent on every hello until its turn starts
    STARTED = "started"  # its turn started (``attempt``)
    REFUSED = "refused"  # the runner would not run it (``refused_reason``)
    REMOVED = "removed"  # taken back by a person before it was sent


class WebPrompt(models.Model):
    """A person's message to the agent, sent from the run's page (issue 16): kept until the
    runner has started its turn, like an answer until the runner has it (``drive.py``)."""

    # Waiting: counted against ``DRIVE_QUEUE_PER_RUN`` and ``DRIVE_QUEUE_PER_PERSON``, all shown.
    WAITING = (WebPromptStatus.QUEUED, WebPromptStatus.SENT)
    # Did not go (refused, removed): the page shows the last ``HISTORY_SHOWN``, and counts the rest.
    ENDED = (WebPromptStatus.REFUSED, WebPromptStatus.REMOVED)
    HISTORY_SHOWN = 5

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey("Chat", on_delete=models.CASCADE, related_name="web_prompts")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    # As typed while it may still go to the agent (queued, sent); masked once it cannot
    # (started, refused, removed: ``drive.py``, issue 22).
    text = models.TextField()
    status = models.CharField(
        max_length=16, choices=WebPromptStatus.choices, default=WebPromptStatus.QUEUED
    )
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    attempt = models.ForeignKey(
        "InferenceAttempt",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="web_prompts",
    )
    refused_reason = models.CharField(max_length=500, blank=True)
    # Who took it back (its author, or an admin of the workspace), and when.
    removed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["chat", "status", "created_at"])]

    def __str__(self) -> str:
        return f"web prompt {self.id} ({self.status})"

    @property
    def author_name(self) -> str:
        return self.author.get_username() if self.author else "a former member"

    @property
    def removed_by_name(self) -> str:
        return self.removed_by.get_username() if self.removed_by else "a former member"
