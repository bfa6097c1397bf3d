"""Who may do what: membership roles in a workspace, the runners' agent tokens, and the agent
hosts that start runners from the web (with a host token)."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

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


class TokenKind(models.TextChoices):
    AGENT = "agent"  # a runner's: writes the chats it makes (``/ws/agent/``)
    HOST = "host"  # an agent host's (``/ws/host/``): starts runners, never writes a chat


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
    kind = models.CharField(max_length=8, choices=TokenKind.choices, default=TokenKind.AGENT)
    # The host token whose host was given this one for a run started from the web: revoking
    # the host's token revokes it too.
    issued_by = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="issued"
    )
    # A run token's one chat (the server makes its id when a host is asked to start the run):
    # its hello is refused for any other chat, and it exports no other. None: any of the
    # workspace's (a token made on the workspace's page).
    chat_id = models.UUIDField(null=True, blank=True, db_index=True)

    objects = AgentTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def issue(
        cls,
        workspace: Workspace,
        name: str,
        kind: TokenKind = TokenKind.AGENT,
        issued_by: AgentToken | None = None,
        chat_id: uuid.UUID | None = None,
    ) -> tuple[AgentToken, str]:
        """Create a token (``chat_id``: scoped to that chat); the plain token is returned once
        and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(
            workspace=workspace,
            name=name,
            digest=hash_token(token),
            hint=token[:10],
            kind=kind,
            issued_by=issued_by,
            chat_id=chat_id,
        )
        return row, token

    @staticmethod
    def bearer(authorization: str) -> str | None:
        """The token of an ``Authorization: Bearer <token>`` header; None for another scheme."""
        scheme, _, token = authorization.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None

    @classmethod
    def authenticate(
        cls, authorization: str, kind: TokenKind = TokenKind.AGENT
    ) -> AgentToken | None:
        """The valid, unrevoked token of ``kind`` an ``Authorization`` header carries, marked
        as used now (a host token is no agent token, and the other way round)."""
        found = cls.find(cls.bearer(authorization) or "", kind)
        if found is not None:
            cls.objects.filter(pk=found.pk).update(last_used_at=timezone.now())
        return found

    @classmethod
    def find(cls, token: str, kind: TokenKind = TokenKind.AGENT) -> AgentToken | None:
        if not token.startswith(TOKEN_PREFIX):
            return None
        return (
            cls.objects.active()
            .select_related("workspace")
            .filter(digest=hash_token(token), kind=kind)
            .first()
        )


def host_silence() -> float:
    """How long a host's socket may say nothing before the host counts as offline (its
    server died): three heartbeats."""
    return 3 * settings.RUNNER_HEARTBEAT_SECONDS + 1


class AgentHostQuerySet(models.QuerySet["AgentHost"]):
    def online(self) -> AgentHostQuerySet:
        """Hosts whose socket is up and was heard from lately."""
        heard = timezone.now() - timedelta(seconds=host_silence())
        return self.filter(online=True, seen_at__gte=heard, token__revoked_at__isnull=True)


class AgentHost(models.Model):
    """A machine that offers agents to start from the web (``manage.py agent host``): one per
    host token and name, online while its socket is up (``hosts.HostSession``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(
        "activity.Workspace", on_delete=models.CASCADE, related_name="hosts"
    )
    token = models.ForeignKey(AgentToken, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=100)
    # [{name, command, label, web_modes}] as its hello said (hostframes.HostAgent)
    agents: models.JSONField[Any] = models.JSONField(default=list)
    roots: models.JSONField[Any] = models.JSONField(default=list)  # [path]
    online = models.BooleanField(default=False)
    channel = models.CharField(max_length=200, blank=True)  # its latest socket's
    instance = models.CharField(max_length=64, blank=True)  # its latest process's (hello)
    max_runs = models.PositiveIntegerField(null=True, blank=True)  # its --max-runs (hello)
    seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = AgentHostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["token", "name"], name="one_host_per_token_and_name")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_online(self) -> bool:
        heard = timezone.now() - timedelta(seconds=host_silence())
        return self.online and self.seen_at is not None and self.seen_at >= heard

    @property
    def agent_names(self) -> list[str]:
        return [str(agent.get("name", "")) for agent in self.agents]

    @property
    def agent_labels(self) -> list[str]:
        """Its agents as people name them: each one's label, or its name (a host older than
        labels, or an agent given with ``--agent``)."""
        return [str(agent.get("label") or agent.get("name", "")) for agent in self.agents]

    def running(self) -> int:
        """Its runs starting or started: what counts against its ``max_runs``."""
        return self.runs.filter(status__in=RUNNING).count()


class HostRunStatus(models.TextChoices):
    STARTING = "starting"  # sent to the host; its runner has no chat yet
    STARTED = "started"  # the runner has its chat (``chat_id``)
    FAILED = "failed"  # the host refused it, or the runner did not start (``error``)
    EXITED = "exited"  # the runner ended (``code``)


RUNNING = (HostRunStatus.STARTING, HostRunStatus.STARTED)


class HostRun(models.Model):
    """A run a person asked a host to start (the *New run* form): ``chat_id`` is the chat the
    server made an id for, the only one its per-run agent ``token`` may say hello for; the
    token is revoked when the run ends (``activity/live/run_tokens.py`` says every way it does)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    host = models.ForeignKey(AgentHost, on_delete=models.CASCADE, related_name="runs")
    agent = models.CharField(max_length=64)
    token = models.ForeignKey(AgentToken, on_delete=models.SET_NULL, null=True, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=HostRunStatus.choices, default=HostRunStatus.STARTING
    )
    chat_id = models.UUIDField(null=True, blank=True)
    error = models.CharField(max_length=2000, blank=True)
    code = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Where it runs (one of the host's roots, and a directory under it): a Resume starts the
    # agent there again. Empty for a run started before koruweb kept it.
    root = models.CharField(max_length=4096, blank=True)
    path = models.CharField(max_length=4096, blank=True)
    resumes = models.BooleanField(default=False)  # it takes its chat's session up again

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent} on {self.host_id} ({self.status})"
