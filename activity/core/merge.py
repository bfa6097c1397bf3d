"""The merge: the state of one tool call + one event → its new state. Pure: no I/O, no clock.

Implements the merge rules (docs/architecture.md#merge-rules) for the columns of the contract:

1. ``tool_call`` and ``tool_call_update`` are both upserts keyed by (chat, ``toolCallId``); an
   update whose opening never arrived still makes a row (``opened`` stays False).
2. Only the fields present are patched: an absent or null field never blanks a stored one, an
   empty title never replaces a title, an empty ``{}`` input never replaces a real one.
   ``content`` replaces the whole output when present; ``[]`` empties it.
3. Status is not a ladder: any order is accepted, but a final call (completed, failed,
   cancelled) never goes back to proposed or running. A cancelled call stays cancelled,
   whatever status word the agent sends after (issue 11: gemini says "completed").
4. Unknown kinds and statuses are kept raw in helper columns; an unknown status leaves the
   contract's ``status`` as it was.
5. A permission request or a question may be the first sight of a call: it creates or patches
   the row without moving its status back or replacing a title it carries an older copy of,
   and opens its approval.
6. A ``tool_call`` that arrives after updates of its call (out of order) fills in what is
   missing but never sends the call back to proposed.

The caller supplies the time (the runner's stamp on the frame, so a resend never shifts a time),
the reply's Markdown length in bytes and the bounds, in a ``MergeContext``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from activity.core import exits, prompts
from activity.core.callstate import (
    AgentExited,
    CallState,
    Event,
    MergeContext,
    PromptClosed,
    TurnCancelled,
    TurnEnded,
)
from activity.core.contract import (
    ACP_STATUS,
    ERROR_MESSAGES,
    FINAL_STATUSES,
    READ_ONLY_KINDS,
    UINT32_MAX,
    ChoiceIntent,
    ToolApproval,
    ToolErrorCode,
    ToolStatus,
    bound,
    bound_append,
    clean_text,
)
from activity.core.masking import mask_junction
from activity.core.render import (
    is_empty_input,
    render_content,
    render_content_item,
    render_input,
    render_locations,
    render_raw,
)
from activity.wire.acp import (
    CreateElicitation,
    RequestPermission,
    ToolCallContentChunk,
    ToolCallFields,
    ToolCallUpdate,
)

__all__ = [
    "AgentExited",
    "CallState",
    "Event",
    "MergeContext",
    "PromptClosed",
    "TurnCancelled",
    "TurnEnded",
    "merge",
]

RAW_WORD_CHARS = 64  # agent_kind / agent_status
TOOL_NAME_CHARS = 200


def event_call_id(event: Event) -> str | None:
    """The ``toolCallId`` an ACP event is about, or None when it names no call."""
    match event:
        case ToolCallFields() | ToolCallContentChunk():
            return event.tool_call_id
        case RequestPermission():
            call = event.call
            return call.tool_call_id if call else None
        case CreateElicitation():
            return event.tool_call_id
    return None


def merge(state: CallState | None, event: Event, ctx: MergeContext) -> CallState:
    """Apply one event to a call. ``state`` is None the first time the call is seen."""
    match event:
        case ToolCallFields():
            return apply_update(state, event, ctx)
        case ToolCallContentChunk():
            return append_content(state, event, ctx)
        case RequestPermission():
            return ask_permission(state, event, ctx)
        case CreateElicitation():
            return ask_question(state, event, ctx)
    if state is None:
        raise ValueError(f"{type(event).__name__} needs a call that has been seen")
    match event:
        case PromptClosed():
            return close_prompt(state, event.approval, ctx)
        case TurnCancelled():
            return cancel(state, ctx)
        case TurnEnded():
            return close_prompt(state, ToolApproval.CANCELLED, ctx)
        case AgentExited():
            return agent_exited(state, ctx)
    raise TypeError(f"not a merge event: {event!r}")


def first_sight(tool_call_id: str, ctx: MergeContext) -> CallState:
    return CallState(
        tool_call_id=tool_call_id,
        proposed_at=ctx.at,
        text_offset=min(max(ctx.reply_bytes, 0), UINT32_MAX),
    )


def apply_update(
    state: CallState | None, update: ToolCallFields, ctx: MergeContext, *, prompt: bool = False
) -> CallState:
    """Patch a call with the fields an update carries (rules 1–4).

    With ``prompt`` (the toolCall embedded in a permission request) the update never moves the
    status and never empties the output: it is a snapshot, not news.
    """
    s = state or first_sight(update.tool_call_id, ctx)
    limits = ctx.limits
    changes: dict[str, Any] = {}
    opening = isinstance(update, ToolCallUpdate) and update.session_update == "tool_call"
    late_opening = opening and state is not None and not state.opened
    if opening:
        changes["opened"] = True
    # A permission request's snapshot, or an opening that comes late, may be older than a
    # title an update already gave.
    older = prompt or late_opening
    if update.title and clean_text(update.title).strip() and not (older and s.retitled):
        changes["agent_label"] = bound(update.title, limits.short_chars)
        changes["retitled"] = s.retitled or not (opening or prompt)
    if update.kind:
        changes["agent_kind"] = bound(update.kind, RAW_WORD_CHARS)
    tool = update.name or _meta_tool_name(update.meta)
    if tool:
        changes["agent_tool"] = bound(tool, TOOL_NAME_CHARS)
    kind = changes.get("agent_kind", s.agent_kind)
    if not is_empty_input(update.raw_input):
        changes["agent_input"] = bound(render_input(update.raw_input, kind), limits.content_chars)
        changes["input_seen"] = True
    elif update.locations and not s.input_seen:
        changes["agent_input"] = bound(render_locations(update.locations), limits.content_chars)
    output = _output(update, s.content_seen, prompt=prompt)
    if update.content is not None and not prompt:
        changes["content_seen"] = bool(output)
    if output is not None:
        text = output or None
        changes["agent_output"] = bound(text, limits.content_chars)
        size = len(text.encode("utf-8", "surrogatepass")) + ctx.cut_bytes if text else None
        changes["result_bytes"] = size
    s = _with_identity(replace(s, **changes))
    if update.status:
        s = replace(s, agent_status=bound(update.status, RAW_WORD_CHARS))
        status = ACP_STATUS.get(update.status)
        # An opening that arrives after updates of the call is old news: never back to proposed.
        backwards = late_opening and status is ToolStatus.PROPOSED
        if status is not None and not prompt and not backwards:
            s = set_status(s, status, ctx)
    return _with_exit_code(s, update, ctx) if not prompt else s


def _with_exit_code(s: CallState, update: ToolCallFields, ctx: MergeContext) -> CallState:
    """A failed command that reports its exit code (in ``rawOutput``) keeps it in
    error_message, the contract's bounded public summary: the page shows "Failed · exit 3"."""
    code = exits.reported_exit_code(update.raw_output)
    if code is None or s.status is not ToolStatus.FAILED:
        return s
    if s.error_code is not ToolErrorCode.TOOL_FAILED:
        return s
    return replace(s, error_message=bound(exits.exit_message(code), ctx.limits.short_chars))


def _meta_tool_name(meta: dict[str, Any] | None) -> str | None:
    claude = (meta or {}).get("claudeCode")
    name = claude.get("toolName") if isinstance(claude, dict) else None
    return name if isinstance(name, str) and name else None


def _output(update: ToolCallFields, content_seen: bool, *, prompt: bool) -> str | None:
    """The new output text, "" to empty it, or None to leave it as it is.

    ``content`` is what the agent shows; ``rawOutput`` stands in only while there is none. A
    permission request's content is what it asked: it stands in for the output only until the
    call's own content or ``rawOutput`` arrives, and never replaces either.
    """
    raw_output = None if update.raw_output == "" else update.raw_output
    if prompt:
        text = render_content(update.content) if update.content else ""
        return text or None if not content_seen else None
    if update.content is not None:
        text = render_content(update.content)
        if text or (not prompt and raw_output is None):
            return text
    elif content_seen:
        return None
    return None if raw_output is None else render_raw(raw_output)


def _with_identity(s: CallState) -> CallState:
    """tool_name: the tool's own name, else the ACP kind; read_only from the kind."""
    return replace(
        s,
        tool_name=s.agent_tool or s.agent_kind or "other",
        read_only=s.agent_kind in READ_ONLY_KINDS,
    )


def set_status(s: CallState, status: ToolStatus, ctx: MergeContext) -> CallState:
    """Move a call to ``status`` unless that would take a finished call back (rule 3).

    A cancelled call stays cancelled whatever the agent says next: gemini reports a command it
    stopped as ``completed``, claude as ``failed`` (the word is kept in ``agent_status``).
    """
    if s.is_final and status not in FINAL_STATUSES or s.status is ToolStatus.CANCELLED:
        return s
    changes: dict[str, Any] = {"status": status}
    if status is ToolStatus.RUNNING and s.started_at is None:
        changes["started_at"] = ctx.at
    if status in FINAL_STATUSES and s.completed_at is None:
        changes["completed_at"] = ctx.at
    code = _error_code(s, status)
    changes["error_code"] = code
    same = code is not None and code is s.error_code and s.error_message  # an exit code kept
    changes["error_message"] = s.error_message if same else _error_message(code, ctx)
    return replace(s, **changes)


def _error_message(code: ToolErrorCode | None, ctx: MergeContext) -> str | None:
    return bound(ERROR_MESSAGES[code], ctx.limits.short_chars) if code else None


def _error_code(s: CallState, status: ToolStatus) -> ToolErrorCode | None:
    if s.approval is ToolApproval.DENIED and status in (ToolStatus.FAILED, ToolStatus.CANCELLED):
        return ToolErrorCode.PERMISSION_DENIED  # denied by a person, however the agent ends it
    if status is ToolStatus.CANCELLED:
        return ToolErrorCode.CANCELLED
    if status is not ToolStatus.FAILED:
        return None
    if s.status is ToolStatus.CANCELLED:
        return ToolErrorCode.CANCELLED  # claude fails the calls of a cancelled turn
    if s.approval is ToolApproval.DENIED:
        return ToolErrorCode.PERMISSION_DENIED
    if s.status is ToolStatus.FAILED and s.error_code is not None:
        return s.error_code
    return ToolErrorCode.TOOL_FAILED


def append_content(
    state: CallState | None, chunk: ToolCallContentChunk, ctx: MergeContext
) -> CallState:
    """v2 ``tool_call_content_chunk``: one more item at the end of the output."""
    s = state or first_sight(chunk.tool_call_id, ctx)
    text = render_content_item(chunk.content)
    if not text:
        return s
    size = len(text.encode("utf-8", "surrogatepass")) + (1 if s.agent_output else 0)
    output, text = mask_junction(s.agent_output or "", text)  # a secret split across chunks
    return replace(
        s,
        agent_output=bound_append(output or s.agent_output, text, ctx.limits.content_chars),
        result_bytes=(s.result_bytes or 0) + size,
    )


def ask_permission(
    state: CallState | None, request: RequestPermission, ctx: MergeContext
) -> CallState:
    """A permission request: patch the call from its snapshot and open its approval."""
    call = request.call
    if call is None:
        raise ValueError("a permission request without a tool call is a standalone prompt")
    s = apply_update(state, call, ctx, prompt=True)
    # What it asked, the command and its directory, the change it showed (prompts.summary).
    summary = prompts.summary(request, s.agent_label or s.tool_name, ctx.limits)
    return replace(s, agent_summary=summary, approval=ToolApproval.PENDING)


def ask_question(
    state: CallState | None, request: CreateElicitation, ctx: MergeContext
) -> CallState:
    """A question (``elicitation/create``) about a call: it waits for a person's answer."""
    if request.tool_call_id is None:
        raise ValueError("a question without a tool call is a standalone prompt")
    s = state or first_sight(request.tool_call_id, ctx)
    asked = request.message or (request.requested_schema and request.requested_schema.title)
    return replace(
        s,
        agent_summary=bound(asked or s.agent_label, ctx.limits.short_chars),
        approval=ToolApproval.PENDING,
    )


def close_prompt(s: CallState, approval: ToolApproval, ctx: MergeContext) -> CallState:
    """Record what the agent was told; only an open prompt can be closed."""
    if s.approval is not ToolApproval.PENDING:
        return s
    s = replace(s, approval=approval)
    if approval is ToolApproval.APPROVED and s.started_at is None and not s.is_final:
        s = replace(s, started_at=ctx.at)
    if approval is ToolApproval.DENIED:
        # A call a person denied never runs, whatever the agent does next: it fails now, and a
        # later failure or cancellation from the agent keeps the reason (see _error_code).
        s = set_status(s, ToolStatus.FAILED, ctx) if not s.is_final else s
        if s.status in (ToolStatus.FAILED, ToolStatus.CANCELLED):
            s = replace(
                s,
                error_code=ToolErrorCode.PERMISSION_DENIED,
                error_message=_error_message(ToolErrorCode.PERMISSION_DENIED, ctx),
            )
    return s


def intent_approval(intent: ChoiceIntent | None) -> ToolApproval:
    """What choosing an option of this intent means for the row (None: cancelled)."""
    if intent is None:
        return ToolApproval.CANCELLED
    if intent in (ChoiceIntent.REJECT_ONCE, ChoiceIntent.REJECT_ALWAYS):
        return ToolApproval.DENIED
    return ToolApproval.APPROVED


def cancel(s: CallState, ctx: MergeContext) -> CallState:
    s = close_prompt(s, ToolApproval.CANCELLED, ctx)
    return s if s.is_final else set_status(s, ToolStatus.CANCELLED, ctx)


def agent_exited(s: CallState, ctx: MergeContext) -> CallState:
    s = close_prompt(s, ToolApproval.CANCELLED, ctx)
    if s.is_final:
        return s
    s = set_status(s, ToolStatus.FAILED, ctx)
    return replace(
        s,
        error_code=ToolErrorCode.AGENT_EXITED,
        error_message=_error_message(ToolErrorCode.AGENT_EXITED, ctx),
    )
