"""The durable ToolActivity contract: its enums, bounds and JSON shape
(docs/architecture.md#the-toolactivity-contract).

Everything the contract names is defined here once; models, the merge and the export use it.

Enums and where they come from in ACP (docs/architecture.md#the-toolactivity-contract):

- ``ToolStatus``: ``pending``→proposed, ``in_progress``→running, ``completed``, ``failed``,
  v2 ``cancelled``. An unknown ACP status leaves the status as it was; the raw word is kept in
  the ``agent_status`` helper column and shown.
- ``ToolApproval``: no prompt → not_required; prompt open → pending; answered allow_* →
  approved, reject_* → denied; closed unanswered (turn cancelled or ended) → cancelled.
- ``ToolErrorCode``: set with failed/cancelled. Denied by a person → permission_denied; turn
  cancelled → cancelled; the agent reported a failure → tool_failed; the agent process died
  mid-call → agent_exited.
- ``ChoiceIntent``: a permission option's ``kind``; anything else → other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import EnumType, StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class _ChoicesType(EnumType):
    @property
    def values(cls) -> list[str]:
        members: list[Any] = list(cls)
        return [member.value for member in members]

    @property
    def choices(cls) -> list[tuple[str, str]]:
        """``(value, label)`` pairs for a model field's ``choices``."""
        members: list[Any] = list(cls)
        return [(member.value, member.label) for member in members]


class Choices(StrEnum, metaclass=_ChoicesType):
    """A string enum with Django's ``TextChoices`` surface (``values``, ``choices``, ``label``)
    and none of Django: the runner imports this module, and it installs without Django."""

    @property
    def label(self) -> str:
        return self.name.replace("_", " ").title()


class ToolStatus(Choices):
    PROPOSED = "proposed"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATUSES = frozenset({ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED})

ACP_STATUS = {
    "pending": ToolStatus.PROPOSED,
    "in_progress": ToolStatus.RUNNING,
    "completed": ToolStatus.COMPLETED,
    "failed": ToolStatus.FAILED,
    "cancelled": ToolStatus.CANCELLED,
}


class ToolApproval(Choices):
    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    CANCELLED = "cancelled"


class ToolErrorCode(Choices):
    PERMISSION_DENIED = "permission_denied"
    CANCELLED = "cancelled"
    TOOL_FAILED = "tool_failed"
    AGENT_EXITED = "agent_exited"


class ChoiceIntent(Choices):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"
    OTHER = "other"

    @classmethod
    def from_kind(cls, kind: str | None) -> ChoiceIntent:
        return cls(kind) if kind in cls.values else cls.OTHER


# ACP kinds whose tools only look: read, search, think, fetch.
READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch"})

# Public summaries kept in error_message; never the agent's raw words.
ERROR_MESSAGES = {
    ToolErrorCode.PERMISSION_DENIED: "A person denied permission to run this tool.",
    ToolErrorCode.CANCELLED: "The turn was cancelled before this tool finished.",
    ToolErrorCode.TOOL_FAILED: "The agent reported that this tool failed.",
    ToolErrorCode.AGENT_EXITED: "The agent process exited before this tool finished.",
}

UINT32_MAX = 2**32 - 1


@dataclass(frozen=True)
class Limits:
    """The bounds on what a local agent's row keeps, in characters (code points)."""

    # agent_input / agent_output, and an agent_summary holding the command a permission request
    # would run or the change it showed (a useful diff does not fit 512): AGENT_CONTENT_CHARS
    content_chars: int = 16_384
    # agent_label / error_message, and an agent_summary of the request's words alone
    short_chars: int = 512


def clean_text(text: str) -> str:
    """Text any database can store: lone surrogates become U+FFFD, NUL characters are dropped."""
    if text.isascii():
        return text.replace("\x00", "")
    text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text.replace("\x00", "")


def bound(text: str | None, limit: int) -> str | None:
    """Cut ``text`` to at most ``limit`` characters, the visible cut marker included.

    Cuts fall between characters (code points), never inside a multi-byte one.
    """
    if text is None:
        return None
    text = clean_text(text)
    if len(text) <= limit:
        return text
    # The marker's own length depends on the count it shows; two rounds settle it.
    removed = len(text) - limit
    for _ in range(3):
        marker = f"…[{removed:,} more characters cut]"
        keep = max(limit - len(marker), 0)
        removed = len(text) - keep
    return (text[:keep] + marker)[:limit]


CUT_MARKER = re.compile(r"…\[([\d,]+) more characters cut\]$")


def bound_append(text: str | None, addition: str, limit: int) -> str | None:
    """``text`` + a new line + ``addition``, bounded; a cut already made stays truthful."""
    if not text:
        return bound(addition, limit)
    cut = CUT_MARKER.search(text)
    if cut is None or len(text) < limit:  # a cut fills the bound; shorter text only says so
        return bound(f"{text}\n{addition}", limit)
    # Everything appended after a cut is cut too: only the marker's count grows.
    removed = int(cut.group(1).replace(",", "")) + 1 + len(clean_text(addition))
    kept = text[: cut.start()]
    marker = f"…[{removed:,} more characters cut]"
    return (kept[: max(limit - len(marker), 0)] + marker)[:limit]


# --- the contract's JSON shape --------------------------------------------------------------


class LiveChoice(BaseModel):
    id: str
    intent: ChoiceIntent
    label: str


class LiveQuestionOption(BaseModel):
    label: str
    description: str | None = None


class LiveQuestion(BaseModel):
    id: str
    header: str | None = None
    question: str
    options: list[LiveQuestionOption]
    allow_other: bool
    secret: bool
    # koruweb's one extension: the answer is a list of option labels.
    multi_select: bool = False


class AgentActivityLive(BaseModel):
    choices: list[LiveChoice]
    questions: list[LiveQuestion]


Timestamp = int  # epoch milliseconds, UTC, signed


class ToolActivityRecord(BaseModel):
    """Durable and public tool activity: the contract, field for field, in its order."""

    model_config = ConfigDict(title="ToolActivity", use_enum_values=True)

    id: UUID
    attempt_id: UUID
    chat_id: UUID
    assistant_message_id: UUID
    tool_name: str
    read_only: bool
    status: ToolStatus
    approval: ToolApproval
    proposed_at: Timestamp = Field(ge=-(2**63), le=2**63 - 1)
    started_at: Timestamp | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    completed_at: Timestamp | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    result_bytes: int | None = Field(default=None, ge=0, le=2**64 - 1)
    error_code: ToolErrorCode | None = None
    target_workspace_id: UUID | None = None
    target_document_id: UUID | None = None
    error_message: str | None = None
    agent_label: str | None = None
    agent_summary: str | None = None
    agent_input: str | None = None
    agent_output: str | None = None
    text_offset: int | None = Field(default=None, ge=0, le=UINT32_MAX)
    live: AgentActivityLive | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def tool_activity_json_schema() -> dict[str, Any]:
    """The JSON Schema of one ToolActivity, generated from the model above."""
    return ToolActivityRecord.model_json_schema(mode="serialization")
