"""What the merge works on: one call's state, the context of an event, and the events.

The ACP events are the wire models of ``protocol.py``; the rest are koruweb's own (a prompt
closed, a turn cancelled or ended, the agent gone). ``merge.py`` is the function over them.
"""

from __future__ import annotations

from dataclasses import dataclass

from activity.core.contract import FINAL_STATUSES, Limits, ToolApproval, ToolErrorCode, ToolStatus
from activity.wire.acp import (
    CreateElicitation,
    RequestPermission,
    ToolCallContentChunk,
    ToolCallFields,
    ToolCallUpdate,
)


@dataclass(frozen=True)
class MergeContext:
    at: int  # epoch ms, the runner's stamp on the frame that carries the event
    reply_bytes: int = 0  # bytes of the reply's Markdown so far: a new call's text_offset
    limits: Limits = Limits()
    cut_bytes: int = 0  # bytes of the tool's output the runner cut before sending


@dataclass(frozen=True)
class CallState:
    """What the merge keeps of one tool call: the contract's columns and a few helpers."""

    tool_call_id: str
    proposed_at: int
    text_offset: int | None = None
    tool_name: str = "other"
    read_only: bool = False
    status: ToolStatus = ToolStatus.PROPOSED
    approval: ToolApproval = ToolApproval.NOT_REQUIRED
    started_at: int | None = None
    completed_at: int | None = None
    result_bytes: int | None = None
    error_code: ToolErrorCode | None = None
    error_message: str | None = None
    agent_label: str | None = None
    agent_summary: str | None = None
    agent_input: str | None = None
    agent_output: str | None = None
    # Helpers beside the contract: never raw payloads.
    agent_kind: str | None = None  # the ACP kind as sent, known or not
    agent_status: str | None = None  # the ACP status as sent, known or not
    agent_tool: str | None = None  # the tool's own name (`name` or _meta.claudeCode.toolName)
    input_seen: bool = False  # a real (non-empty) input arrived
    content_seen: bool = False  # the output comes from `content`, which rawOutput never replaces
    retitled: bool = False  # a `tool_call_update` set the title: newer than any snapshot
    opened: bool = False  # a `tool_call` arrived, not only updates

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES


# --- koruweb's own events, beside the ACP messages of protocol.py ---------------------------


@dataclass(frozen=True)
class PromptClosed:
    """A permission prompt or question on this call was answered, or closed unanswered.

    ``approval`` is what the agent was told: approved, denied or cancelled.
    """

    approval: ToolApproval


@dataclass(frozen=True)
class TurnCancelled:
    """The turn was cancelled: unfinished calls become cancelled, open prompts close."""


@dataclass(frozen=True)
class TurnEnded:
    """The turn's prompt returned: open prompts close; late updates still apply."""


@dataclass(frozen=True)
class AgentExited:
    """The agent process died: unfinished calls fail with ``agent_exited``."""


Event = (
    ToolCallUpdate
    | ToolCallFields
    | ToolCallContentChunk
    | RequestPermission
    | CreateElicitation
    | PromptClosed
    | TurnCancelled
    | TurnEnded
    | AgentExited
)
