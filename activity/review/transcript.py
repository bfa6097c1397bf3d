"""A turn as it happened: the reply's Markdown with the tool rows where they were made, and the
same turn as a Markdown document to download (its timeline: activity/show/timeline.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from activity.core import prompts
from activity.models import Chat, InferenceAttempt, Prompt, PromptKind, ToolActivity


@dataclass
class Segment:
    """The calls made when the reply had ``offset`` bytes, then the reply's text from there to
    the next calls. A page draws a turn as its segments in order, each with ids from its turn
    and its offset (``reply-<turn>-<offset>``, ``tools-<turn>-<offset>``), so a live push can
    morph a segment's text, append calls to its table, or append new segments
    (docs/architecture.md#a-turn-on-the-live-page)."""

    offset: int
    rows: list[ToolActivity] = field(default_factory=list)
    text: str = ""


def interleave(
    markdown: str, rows: Sequence[ToolActivity], start: int = 0, end: int | None = None
) -> list[Segment]:
    """Cut the reply (its UTF-8 bytes ``start``..``end``) at each row's ``text_offset``: the
    first segment starts at ``start`` (with or without calls or text), each later one where
    calls were made after more text had come."""
    data = markdown.encode()
    end = len(data) if end is None else min(end, len(data))
    segments = [Segment(offset=min(start, end))]
    for row in rows:
        offset = placed(row, segments[-1].offset, end)
        if offset > segments[-1].offset:
            segments.append(Segment(offset=offset))
        segments[-1].rows.append(row)
    for segment, after in zip(segments, [*segments[1:], None], strict=True):
        segment.text = _decode(data[segment.offset : end if after is None else after.offset])
    return segments


def placed(row: ToolActivity, after: int, end: int) -> int:
    """Where a call stands in the reply: its ``text_offset``, never before the call before it
    (``after``) nor past the reply's ``end``."""
    return min(max(row.text_offset or 0, after), end)


def _decode(chunk: bytes) -> str:
    # An offset may fall inside a character only if an agent miscounted; never fail on it.
    return chunk.decode("utf-8", "replace")


# --- Markdown ---------------------------------------------------------------------------------


def fence(text: str, info: str = "") -> str:
    """A code block that no backticks inside can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def row_markdown(row: ToolActivity) -> str:
    took = f", {row.duration_ms} ms" if row.duration_ms is not None else ""
    lines = [f"- **{row.agent_label or row.tool_name}** — `{row.tool_name}`, {row.status}{took}"]
    prompt = getattr(row, "prompt", None)
    if prompt is not None and prompt.answered_at is not None:
        who = prompt.answered_by.get_username() if prompt.answered_by else "someone"
        lines.append(f"  - {prompt.decision} by {who} at {prompt.answered_at:%Y-%m-%d %H:%M} UTC")
    elif prompt is not None and prompt.closed_at is not None:
        lines.append(f"  - The prompt closed: {prompt.get_outcome_display().lower()}")
    if row.error_message:
        lines.append(f"  - {row.error_message}")
    if prompt is not None:  # what was asked stays, even once a refusal replaced the output
        lines.append(
            f"\n  {ASKED_HEADINGS[prompts.verdict(prompt)]}:\n\n" + _indent(asked(row, prompt))
        )
    for title, body, info in (("Input", row.agent_input, ""), ("Output", row.agent_output, "")):
        if body:
            kind = "diff" if body.startswith("--- ") else info
            lines.append(f"\n  {title}:\n\n" + _indent(fence(body, kind)))
    for note in getattr(row, "notes", []):  # what the team said of it, in their own Markdown
        who = note.author.get_username() if note.author else "a former member"
        said = "\n".join(f"> {line}".rstrip() for line in note.text.split("\n"))
        lines.append(
            f"\n  {who} commented at {note.created_at:%Y-%m-%d %H:%M} UTC:\n\n" + _indent(said)
        )
    return "\n".join(lines)


ASKED_HEADINGS = {"refused": "What was refused", "allowed": "What was allowed", "asked": "Asked"}


def asked(row: ToolActivity, prompt: Prompt) -> str:
    text = prompts.asked_markdown(prompts.asked(row.agent_summary or prompt.summary))
    if prompt.kind == PromptKind.QUESTION:
        text = "\n\n".join(t for t in (text, prompts.questions_markdown(prompt.questions)) if t)
    return text


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.split("\n"))


def chat_markdown(
    chat: Chat,
    turns: Iterable[tuple[InferenceAttempt, str, list[ToolActivity]]],
    review: Iterable[str] = (),
) -> str:
    """The run as Markdown; ``review``: what its review says (``reviews.markdown``)."""
    parts = [
        f"# {chat.display_name}",
        "",
        f"Agent: {chat.agent_name} {chat.agent_version}".rstrip(),
        "",
        *review,
    ]
    for number, (attempt, markdown, rows) in enumerate(turns, start=1):
        parts += [f"## Turn {number}", "", "**Prompt:**", "", fence(attempt.prompt, "text"), ""]
        for segment in interleave(markdown, rows):
            parts += [row_markdown(row) for row in segment.rows]
            if segment.rows:
                parts.append("")
            if segment.text:
                parts += [segment.text.strip("\n"), ""]
        ended = f"ended: {attempt.stop_reason}" if attempt.ended_at else "still running"
        parts += [f"_Turn {ended}._", ""]
    return "\n".join(parts)
