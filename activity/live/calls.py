"""A call's row and the pure merge: its state, events applied to it, a turn's end settling it.

The row (``models.ToolActivity``) keeps the merge's ``CallState`` field for field; these
functions copy one into the other, so neither the models nor the merge know of each other.
"""

from __future__ import annotations

import dataclasses

from django.db.models import Q

from activity.core.contract import FINAL_STATUSES, ToolApproval, ToolErrorCode, ToolStatus
from activity.core.merge import (
    AgentExited,
    CallState,
    Event,
    MergeContext,
    PromptClosed,
    TurnCancelled,
    merge,
)
from activity.core.merge import TurnEnded as TurnEndedEvent
from activity.live.work import Work
from activity.models import InferenceAttempt, Prompt, ToolActivity

FIELDS = tuple(f.name for f in dataclasses.fields(CallState))


def state_of(row: ToolActivity) -> CallState:
    values = {name: getattr(row, name) for name in FIELDS}
    values["status"] = ToolStatus(row.status)
    values["approval"] = ToolApproval(row.approval)
    values["error_code"] = ToolErrorCode(row.error_code) if row.error_code else None
    return CallState(**values)


def set_state(row: ToolActivity, state: CallState) -> list[str]:
    """Copy a merged state onto the row; returns the names of the fields that changed."""
    changed = []
    for name in FIELDS:
        value = getattr(state, name)
        if getattr(row, name) != value:
            setattr(row, name, value)
            changed.append(name)
    return changed


def apply(work: Work, row: ToolActivity, event: Event, ctx: MergeContext) -> None:
    """Merge one event into a row of the working set."""
    work.touch(row, *set_state(row, merge(state_of(row), event, ctx)))


def close(work: Work, prompt: Prompt, approval: ToolApproval, at: int) -> None:
    prompt.closed_at, prompt.outcome = at, approval
    work.touch(prompt, "closed_at", "outcome")
    row = row_of(work, prompt)
    if row is not None:
        apply(work, row, PromptClosed(approval), MergeContext(at=at, limits=work.limits))


def row_of(work: Work, prompt: Prompt) -> ToolActivity | None:
    """The call a prompt is about, in the working set; None for a prompt about no call (its
    turn's head shows it: touched here)."""
    if prompt.tool_id is None:
        work.touch(work.attempt_of(prompt), "version")
        return None
    row = next((r for r in work.rows.values() if r.pk == prompt.tool_id), None)
    if row is None:
        row = ToolActivity.objects.get(pk=prompt.tool_id)
        work.rows[row.tool_call_id] = row
    return row


def finish_turn(work: Work, attempt: InferenceAttempt, stop_reason: str, at: int) -> None:
    """Close the turn's open prompts; cancelled or dead turns also settle unfinished rows."""
    for open_prompt_ in Prompt.objects.filter(attempt=attempt, closed_at__isnull=True):
        work.prompts.setdefault(open_prompt_.request_id, open_prompt_)
    for prompt in list(work.prompts.values()):
        if prompt.attempt_id == attempt.pk and prompt.is_open:
            close(work, prompt, ToolApproval.CANCELLED, at)
    event: TurnCancelled | AgentExited | TurnEndedEvent
    if stop_reason == "cancelled":
        event = TurnCancelled()
    elif stop_reason == "agent_exited":
        event = AgentExited()
    else:
        event = TurnEndedEvent()
    unsettled = ~Q(status__in=FINAL_STATUSES) | Q(approval=ToolApproval.PENDING)
    for found in ToolActivity.objects.filter(unsettled, attempt=attempt):
        work.rows.setdefault(found.tool_call_id, found)
    for row in list(work.rows.values()):
        if row.attempt_id == attempt.pk:
            apply(work, row, event, MergeContext(at=at, limits=work.limits))


def unfinish_turn(work: Work, attempt: InferenceAttempt, at: int) -> None:
    """Undo ``finish_turn`` for a turn the server ended at ``at`` while its runner still ran it
    (``turns.reopen``): the prompts it closed then are open again, and their calls wait for the
    answer again. That is all it did to a turn that was not cancelled: the merge's
    ``TurnEnded`` only cancels an open approval (``merge.close_prompt``), so every call goes on
    as the agent's updates come."""
    closed = Prompt.objects.filter(attempt=attempt, closed_at=at, outcome=ToolApproval.CANCELLED)
    for found in closed:
        prompt = work.prompts.setdefault(found.request_id, found)
        if prompt.closed_at != at:
            continue  # closed again in this working set: that stays
        prompt.closed_at, prompt.outcome = None, ""
        work.touch(prompt, "closed_at", "outcome")
        row = row_of(work, prompt)
        if row is not None and row.approval == ToolApproval.CANCELLED:
            row.approval = ToolApproval.PENDING
            work.touch(row, "approval")
