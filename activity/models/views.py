"""Saved views: a filter of the runs list, of one run's calls, or a search, kept under a name
with a stable address (``/views/<id>/``), private to its owner or shared with a workspace
(activity/review/saved.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ViewKind(models.TextChoices):
    RUNS = "runs", "Runs"
    CALLS = "calls", "A run's calls"
    SEARCH = "search", "Search"


class SavedView(models.Model):
    """``query``: the filter's own query string, with only the keys its page reads, in a fixed
    order. ``workspace``: who may open a shared view (its members), and whose runs a private
    one was made among; a view of one run's calls names the run (``chat``)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views"
    )
    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, null=True, blank=True, related_name="views"
    )
    chat = models.ForeignKey(
        "activity.Chat", on_delete=models.CASCADE, null=True, blank=True, related_name="views"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=8, choices=ViewKind.choices)
    query = models.CharField(max_length=2000, blank=True)
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class ReviewOutcome(models.TextChoices):
    GOOD = "good", "Good"
    NEEDS_CHANGES = "needs_changes", "Needs changes"
    BAD = "bad", "Bad"


class RunReview(models.Model):
    """A run's review (issue 30): asked for (``requested_*``), then done with an outcome and a
    note (``reviewed_*``). One per run; asking again after a review starts it over."""

    chat = models.OneToOneField("activity.Chat", on_delete=models.CASCADE, related_name="review")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    outcome = models.CharField(max_length=16, choices=ReviewOutcome.choices, blank=True)
    note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"review of {self.chat_id}"

    @property
    def done(self) -> bool:
        return self.reviewed_at is not None


class ReviewAssignment(models.Model):
    """A member asked to give a run's review (the review queue: activity/review/queue.py).
    In their inbox until they open the run from it (``seen_at``) or the review is given; kept
    after that, for the queue's progress. ``notified_at``: their browsers were told (notify/).
    Asking for the review again clears both, so they are told again."""

    review = models.ForeignKey(RunReview, on_delete=models.CASCADE, related_name="assignments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    assigned_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(null=True, blank=True)  # opened from the inbox
    notified_at = models.DateTimeField(null=True, blank=True)  # their browsers told (notify/)

    class Meta:
        ordering = ["assigned_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="one_assignment_per_person")
        ]
        indexes = [models.Index(fields=["user", "seen_at"], name="assignments_waiting")]

    def __str__(self) -> str:
        return f"{self.user_id} reviews {self.review_id}"
