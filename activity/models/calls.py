"""koruweb's durable records of what a turn does: the ToolActivity rows, the prompts that ask a
person about them, and the comments people leave on them.

ToolActivity follows the ToolActivity contract field for field
(docs/architecture.md#the-toolactivity-contract; activity/core/contract.py has the enums and
bounds). Nothing raw is persisted: what a local agent did lives only in the four bounded
``agent_*`` strings, beside a few named helper columns the merge keeps.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from activity.core.contract import (
    ACP_STATUS,
    ToolActivityRecord,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
)
from activity.models.chats import Chat, InferenceAttempt, Message


class ToolActivity(models.Model):
    """Durable and public tool activity (docs/architecture.md#the-toolactivity-contract)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    attempt = models.ForeignKey(
        InferenceAttempt, on_delete=models.CASCADE, related_name="tool_activities"
    )
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="tool_activities")
    assistant_message = models.ForeignKey(
        Message, on_delete=models.CASCADE, related_name="tool_activities"
    )
    tool_name = models.CharField(max_length=200)
    read_only = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=ToolStatus.choices)
    approval = models.CharField(max_length=16, choices=ToolApproval.choices)
    proposed_at = models.BigIntegerField()
    started_at = models.BigIntegerField(null=True, blank=True)
    completed_at = models.BigIntegerField(null=True, blank=True)
    result_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    error_code = models.CharField(
        max_length=32, choices=ToolErrorCode.choices, null=True, blank=True
    )
    target_workspace_id = models.UUIDField(null=True, blank=True)
    target_document_id = models.UUIDField(null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    agent_label = models.TextField(null=True, blank=True)
    agent_summary = models.TextField(null=True, blank=True)
    agent_input = models.TextField(null=True, blank=True)
    agent_output = models.TextField(null=True, blank=True)
    text_offset = models.PositiveIntegerField(null=True, blank=True)

    # Helpers the merge keeps beside the contract (never raw payloads).
    tool_call_id = models.CharField(max_length=512)  # the agent's own id for the call
    agent_kind = models.CharField(max_length=64, null=True, blank=True)
    agent_status = models.CharField(max_length=64, null=True, blank=True)
    agent_tool = models.CharField(max_length=200, null=True, blank=True)
    input_seen = models.BooleanField(default=False)
    content_seen = models.BooleanField(default=False)
    retitled = models.BooleanField(default=False)
    opened = models.BooleanField(default=False)
    # Where the row stands in its chat, and the chat version that last changed it.
    position = models.PositiveIntegerField()
    version = models.PositiveBigIntegerField(default=0)
    created_version = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        verbose_name_plural = "tool activities"
        constraints = [
            models.UniqueConstraint(fields=["chat", "tool_call_id"], name="one_row_per_call"),
            models.UniqueConstraint(fields=["chat", "position"], name="one_row_per_position"),
        ]
        indexes = [models.Index(fields=["chat", "version"])]

    def __str__(self) -> str:
        return self.agent_label or self.tool_name

    @property
    def duration_ms(self) -> int | None:
        """How long the call ran: from its start (or proposal) to its end."""
        if self.completed_at is None:
            return None
        return self.completed_at - (self.started_at or self.proposed_at)

    @property
    def unknown_status(self) -> str | None:
        """The agent's own status word, when ACP does not know it (shown beside the status)."""
        return self.agent_status if self.agent_status not in ACP_STATUS else None

    def to_record(self) -> ToolActivityRecord:
        """The contract's shape; ``live`` is null on every repository read."""
        return ToolActivityRecord(
            id=self.id,
            attempt_id=self.attempt_id,
            chat_id=self.chat_id,
            assistant_message_id=self.assistant_message_id,
            tool_name=self.tool_name,
            read_only=self.read_only,
            status=ToolStatus(self.status),
            approval=ToolApproval(self.approval),
            proposed_at=self.proposed_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            result_bytes=self.result_bytes,
            error_code=ToolErrorCode(self.error_code) if self.error_code else None,
            target_workspace_id=self.target_workspace_id,
            target_document_id=self.target_document_id,
            error_message=self.error_message,
            agent_label=self.agent_label,
            agent_summary=self.agent_summary,
            agent_input=self.agent_input,
            agent_output=self.agent_output,
            text_offset=self.text_offset,
            live=None,
        )


class PromptKind(models.TextChoices):
    PERMISSION = "permission"  # session/request_permission
    QUESTION = "question"  # elicitation/create


class Prompt(models.Model):
    """A request the agent is blocked on, mirrored from the runner's live turn table.

    While open (``closed_at`` is null) its choices and questions are the row's ``live`` state;
    once closed it keeps the decision for good.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="prompts")
    attempt = models.ForeignKey(InferenceAttempt, on_delete=models.CASCADE, related_name="prompts")
    tool = models.ForeignKey(
        ToolActivity, on_delete=models.CASCADE, null=True, blank=True, related_name="prompts"
    )
    request_id = models.CharField(max_length=200)  # the JSON-RPC id, as JSON text
    kind = models.CharField(max_length=16, choices=PromptKind.choices)
    summary = models.TextField(blank=True)  # what was asked, bounded
    choices: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    questions: models.JSONField[Any] = models.JSONField(default=list, blank=True)
    opened_at = models.BigIntegerField()  # epoch ms, the runner's clock
    closed_at = models.BigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=ToolApproval.choices, blank=True)
    # The decision a person made on the web, kept for good (the first answer wins).
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_from = models.CharField(max_length=200, blank=True)  # the browser's address
    decision = models.CharField(max_length=512, blank=True)  # "Allow once", the option chosen
    # What the runner must tell the agent, kept until it has; never for a secret answer.
    answer: models.JSONField[Any] = models.JSONField(null=True, blank=True)
    secret = models.BooleanField(default=False)  # a question asks for a secret
    # When the server heard of it (its own clock: ``opened_at`` is the runner's), when the people
    # who may answer were told of it (activity/notify/), and when told it settled.
    created_at = models.DateTimeField(default=timezone.now)
    notified_at = models.DateTimeField(null=True, blank=True)
    settled_told_at = models.DateTimeField(null=True, blank=True)
    # When the workspace's webhooks were told it waits, and that it was answered (notify/hooks).
    hooked_at = models.DateTimeField(null=True, blank=True)
    answer_hooked_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveBigIntegerField(default=0)
    created_version = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["opened_at"]
        constraints = [
            models.UniqueConstraint(fields=["chat", "request_id"], name="one_prompt_per_request")
        ]
        # What the webhooks are still owed, found without reading every prompt (notify/hooks).
        indexes = [
            models.Index(
                fields=["hooked_at"],
                condition=models.Q(hooked_at__isnull=True),
                name="prompts_hook_owed",
            ),
            models.Index(
                fields=["answer_hooked_at"],
                condition=models.Q(answer_hooked_at__isnull=True),
                name="prompts_answer_hook_owed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.request_id} in {self.chat_id}"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    @property
    def awaits_answer(self) -> bool:
        """Open and not yet answered by anyone: what the buttons and the inbox offer."""
        return self.closed_at is None and self.answered_at is None

    @property
    def jsonrpc_id(self) -> str | int:
        """The agent's own JSON-RPC id, from the stored key (``n:5`` or ``s:abc``)."""
        kind, _, value = self.request_id.partition(":")
        return int(value) if kind == "n" else value


class Comment(models.Model):
    """A workspace member's note on a tool row, for reviewing a turn together."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool = models.ForeignKey(ToolActivity, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"comment by {self.author} on {self.tool_id}"
