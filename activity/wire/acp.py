"""Pydantic models of every ACP message the runner forwards to the server.

Tolerant where agents differ: unknown fields are ignored, unknown kinds, statuses, content
types and update types are kept as raw strings (``UnknownUpdate`` for an update type we do not
know). Strict where the protocol is: a tool call's ``toolCallId`` must be a non-empty string.

In ACP v1 an absent field and ``null`` both mean "unchanged"; both parse to ``None`` here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictStr,
    Tag,
    ValidationError,
)
from pydantic.alias_generators import to_camel

__all__ = ["ValidationError"]

ToolCallId = Annotated[StrictStr, Field(min_length=1, max_length=512)]
Meta = Annotated[dict[str, Any] | None, Field(alias="_meta")]
# The key under which koruweb's runner adds the session's directory to a permission request's
# ``_meta``: claude runs commands there without naming it.
META_CWD = "koruweb/cwd"


class Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


# --- content ---------------------------------------------------------------------------------


class ContentBlock(Wire):
    """text, image, audio, resource_link, resource, or a type we do not know."""

    type: str
    text: str | None = None
    mime_type: str | None = None
    uri: str | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    resource: dict[str, Any] | None = None


class ToolCallContent(Wire):
    """content, diff, terminal, or a type we do not know."""

    type: str
    content: ContentBlock | None = None
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    terminal_id: str | None = None


class Location(Wire):
    path: str
    line: int | None = None


# --- session/update --------------------------------------------------------------------------


class ToolCallFields(Wire):
    """The fields of a ToolCall / ToolCallUpdate; only ``toolCallId`` is required."""

    tool_call_id: ToolCallId
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[Location] | None = None
    raw_input: Any = None
    raw_output: Any = None
    name: str | None = None  # unstable in v1: the tool's programmatic name
    meta: Meta = None


class ToolCallUpdate(ToolCallFields):
    session_update: Literal["tool_call", "tool_call_update"]


class ToolCallContentChunk(Wire):
    """v2: append one content item to a call."""

    session_update: Literal["tool_call_content_chunk"]
    tool_call_id: ToolCallId
    content: ToolCallContent


class MessageChunk(Wire):
    session_update: Literal["user_message_chunk", "agent_message_chunk", "agent_thought_chunk"]
    content: ContentBlock
    message_id: str | None = None


class PlanEntry(Wire):
    content: str
    priority: str = "medium"
    status: str = "pending"


class Plan(Wire):
    session_update: Literal["plan", "plan_update"]
    entries: list[PlanEntry] = []


class PlanRemoved(Wire):
    session_update: Literal["plan_removed"]


class AvailableCommand(Wire):
    name: str
    description: str = ""


class AvailableCommandsUpdate(Wire):
    session_update: Literal["available_commands_update"]
    available_commands: list[AvailableCommand]


class CurrentModeUpdate(Wire):
    session_update: Literal["current_mode_update"]
    current_mode_id: str


class ConfigOptionUpdate(Wire):
    session_update: Literal["config_option_update"]
    config_options: list[dict[str, Any]]


class SessionInfoUpdate(Wire):
    session_update: Literal["session_info_update"]
    title: str | None = None
    updated_at: str | None = None


class Cost(Wire):
    amount: float
    currency: str


class UsageUpdate(Wire):
    session_update: Literal["usage_update"]
    used: int
    size: int
    cost: Cost | None = None


class Notice(Wire):
    session_update: Literal["notice"]
    severity: str = "info"
    title: str = ""
    description: str | None = None


class Compaction(Wire):
    session_update: Literal["compaction_update", "compaction_summary_chunk"]


class UnknownUpdate(Wire):
    """An update type this version of koruweb does not know: kept, shown generically."""

    session_update: str


KNOWN_UPDATES: dict[str, type[Wire]] = {
    "tool_call": ToolCallUpdate,
    "tool_call_update": ToolCallUpdate,
    "tool_call_content_chunk": ToolCallContentChunk,
    "user_message_chunk": MessageChunk,
    "agent_message_chunk": MessageChunk,
    "agent_thought_chunk": MessageChunk,
    "plan": Plan,
    "plan_update": Plan,
    "plan_removed": PlanRemoved,
    "available_commands_update": AvailableCommandsUpdate,
    "current_mode_update": CurrentModeUpdate,
    "config_option_update": ConfigOptionUpdate,
    "session_info_update": SessionInfoUpdate,
    "usage_update": UsageUpdate,
    "notice": Notice,
    "compaction_update": Compaction,
    "compaction_summary_chunk": Compaction,
}


def _update_tag(value: Any) -> str:
    kind = value.get("sessionUpdate") if isinstance(value, dict) else None
    if kind is None and not isinstance(value, dict):
        kind = getattr(value, "session_update", None)
    if kind in KNOWN_UPDATES:
        return KNOWN_UPDATES[kind].__name__
    return UnknownUpdate.__name__


SessionUpdate = Annotated[
    Annotated[ToolCallUpdate, Tag("ToolCallUpdate")]
    | Annotated[ToolCallContentChunk, Tag("ToolCallContentChunk")]
    | Annotated[MessageChunk, Tag("MessageChunk")]
    | Annotated[Plan, Tag("Plan")]
    | Annotated[PlanRemoved, Tag("PlanRemoved")]
    | Annotated[AvailableCommandsUpdate, Tag("AvailableCommandsUpdate")]
    | Annotated[CurrentModeUpdate, Tag("CurrentModeUpdate")]
    | Annotated[ConfigOptionUpdate, Tag("ConfigOptionUpdate")]
    | Annotated[SessionInfoUpdate, Tag("SessionInfoUpdate")]
    | Annotated[UsageUpdate, Tag("UsageUpdate")]
    | Annotated[Notice, Tag("Notice")]
    | Annotated[Compaction, Tag("Compaction")]
    | Annotated[UnknownUpdate, Tag("UnknownUpdate")],
    Discriminator(_update_tag),
]


class SessionNotification(Wire):
    """The params of ``session/update``."""

    session_id: str
    update: SessionUpdate


# --- requests from the agent -----------------------------------------------------------------


class PermissionOption(Wire):
    option_id: str
    name: str
    kind: str


class RequestPermission(Wire):
    """The params of ``session/request_permission`` (v1, and v2's title/description)."""

    session_id: str
    tool_call: ToolCallFields | None = None
    options: list[PermissionOption]
    title: str | None = None  # v2
    description: str | None = None  # v2
    subject: dict[str, Any] | None = None  # v2
    meta: Meta = None  # koruweb's runner adds the session's directory (``META_CWD``)

    @property
    def call(self) -> ToolCallFields | None:
        """The tool call this prompt is about, from v1's toolCall or v2's subject."""
        if self.tool_call is not None:
            return self.tool_call
        subject = self.subject or {}
        if subject.get("type") == "tool_call" and isinstance(subject.get("toolCall"), dict):
            return ToolCallFields.model_validate(subject["toolCall"])
        if subject.get("type") == "command" and isinstance(subject.get("toolCallId"), str):
            return ToolCallFields(tool_call_id=subject["toolCallId"])
        return None


class ElicitationSchema(Wire):
    type: str = "object"
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    title: str | None = None
    description: str | None = None


class CreateElicitation(Wire):
    """The params of ``elicitation/create`` (form or url mode)."""

    mode: Literal["form", "url"] = "form"  # the runner refuses any other (told so)
    session_id: str | None = None
    tool_call_id: ToolCallId | None = None
    request_id: str | int | None = None
    message: str = ""
    requested_schema: ElicitationSchema | None = None
    elicitation_id: str | None = None
    url: str | None = None


# --- the JSON-RPC envelope -------------------------------------------------------------------


class RpcMessage(Wire):
    """One JSON-RPC 2.0 message, request, notification or response."""

    jsonrpc: str = "2.0"
    id: StrictStr | int | None = None
    method: str | None = None
    params: dict[str, Any] | list[Any] | None = None  # by-name or by-position
    result: Any = None
    error: dict[str, Any] | None = None


AgentMessage = SessionNotification | RequestPermission | CreateElicitation | RpcMessage

REQUEST_MODELS: dict[str, type[Wire]] = {
    "session/update": SessionNotification,
    "session/request_permission": RequestPermission,
    "elicitation/create": CreateElicitation,
}


def parse_agent_message(raw: Any) -> tuple[RpcMessage, AgentMessage]:
    """Parse one raw JSON-RPC message from the agent.

    Returns the envelope and the typed params where the method is one koruweb interprets;
    any other message comes back as the envelope alone. Raises ``ValidationError`` on a
    message that breaks the protocol (for example a tool call without a ``toolCallId``).
    """
    envelope = RpcMessage.model_validate(raw)
    model = REQUEST_MODELS.get(envelope.method or "")
    if model is None:
        return envelope, envelope
    return envelope, model.model_validate(envelope.params or {})  # type: ignore[return-value]
