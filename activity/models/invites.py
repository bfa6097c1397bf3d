"""An invite into a workspace: a one-time link's hash, its role and its state (the service is
``activity/people/invites.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from activity.models.accounts import Role


class InviteState(models.TextChoices):
    OPEN = "open", "open"
    USED = "used", "used"
    EXPIRED = "expired", "expired"
    REVOKED = "revoked", "revoked"


class Invite(models.Model):
    """A one-time link into a workspace, with the role it gives; only its hash is stored."""

    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, related_name="invites"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    note = models.CharField(max_length=100, blank=True)  # whom it is for, as the admin put it
    # An address the new member gets, unconfirmed: its link is mailed once they join (issue 31).
    email = models.EmailField(max_length=254, blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invite to {self.workspace_id} as {self.role}"

    @property
    def state(self) -> InviteState:
        if self.used_at is not None:
            return InviteState.USED
        if self.revoked_at is not None:
            return InviteState.REVOKED
        if self.expires_at <= timezone.now():
            return InviteState.EXPIRED
        return InviteState.OPEN

    @property
    def why_not(self) -> str:
        """Why the link no longer works, in words for the person holding it."""
        return {
            InviteState.USED: "This invite link was already used: each link works once. "
            "Ask an admin of the workspace for a new one.",
            InviteState.REVOKED: "This invite link was withdrawn by an admin of the workspace. "
            "Ask them for a new one if you still need it.",
            InviteState.EXPIRED: "This invite link has expired. Ask an admin of the workspace "
            "for a new one.",
            InviteState.OPEN: "",
        }[self.state]
