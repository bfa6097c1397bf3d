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
