"""Who may do what: membership roles in a workspace, and the runners' agent tokens."""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from activity.models import Workspace


class Role(models.TextChoices):
    VIEWER = "viewer"  # may watch and review
    APPROVER = "approver"  # may also answer prompts
    ADMIN = "admin"  # may also manage members, tokens and runs


class Membership(models.Model):
    """A user's role in a workspace."""

    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="one_role_per_workspace")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} as {self.role}"


TOKEN_PREFIX = "koru_"


def hash_token(token: str) -> str:
    # Tokens are 256 random bits: a fast hash is enough, and lookups stay one indexed query.
    return hashlib.sha256(token.encode()).hexdigest()


class AgentTokenQuerySet(models.QuerySet["AgentToken"]):
    def active(self) -> AgentTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class AgentToken(models.Model):
    """A runner's credential for one workspace; only its hash is stored."""

    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, related_name="tokens"
    )
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False)  # the first characters, to tell apart
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = AgentTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def issue(cls, workspace: Workspace, name: str) -> tuple[AgentToken, str]:
        """Create a token; the plain token is returned once and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(
            workspace=workspace, name=name, digest=hash_token(token), hint=token[:10]
        )
        return row, token

    @staticmethod
    def bearer(authorization: str) -> str | None:
        """The token of an ``Authorization: Bearer <token>`` header; None for another scheme."""
        scheme, _, token = authorization.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None

    @classmethod
    def authenticate(cls, authorization: str) -> AgentToken | None:
        """The valid, unrevoked token an ``Authorization`` header carries, marked as used now."""
        found = cls.find(cls.bearer(authorization) or "")
        if found is not None:
            cls.objects.filter(pk=found.pk).update(last_used_at=timezone.now())
        return found

    @classmethod
    def find(cls, token: str) -> AgentToken | None:
        if not token.startswith(TOKEN_PREFIX):
            return None
        return (
            cls.objects.active()
            .select_related("workspace")
            .filter(digest=hash_token(token))
            .first()
        )
