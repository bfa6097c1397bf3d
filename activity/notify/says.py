"""What a notification says: the run, what the agent wants (the command, the file, the question,
as the prompt's stored and masked summary has it), and for a permission prompt its allow-once
and reject choices as actions. Its ``tag`` is the prompt's, so that when the prompt is answered
or closes the same notification is replaced by one that says so."""

from __future__ import annotations

from typing import Any

from django.core import signing
from django.urls import reverse

from activity.core.contract import ChoiceIntent, bound
from activity.models import (
    Chat,
    InferenceAttempt,
    Mention,
    Prompt,
    PromptKind,
    ReviewAssignment,
)
from activity.show import statuses

SALT = "koruweb.notify.answer"
ACTED = (ChoiceIntent.ALLOW_ONCE, ChoiceIntent.REJECT_ONCE)  # answered from the notification
BODY_CHARS = 240  # push services take ~4 KB; a phone shows two or three lines
TITLE_CHARS = 120


def run_name(chat: Chat) -> str:
    """The run's name as a notification's title holds it (push services take ~4 KB in all)."""
    return bound(chat.display_name, TITLE_CHARS) or "A run"


def tag(prompt: Prompt) -> str:
    return f"prompt-{prompt.pk}"


def asked(prompt: Prompt) -> str:
    """What the agent wants, in a line or two."""
    if prompt.kind == PromptKind.PERMISSION:
        call = prompt.tool
        said = [call.agent_label or call.tool_name, call.agent_summary] if call else []
        text = " — ".join(dict.fromkeys(t.strip() for t in said if t and t.strip()))
        return bound(text or prompt.summary, BODY_CHARS) or "The agent asks for permission."
    questions = [q.get("question", "") for q in prompt.questions if q.get("question")]
    return bound(" · ".join(questions) or prompt.summary, BODY_CHARS) or "The agent asks you."


def token(prompt: Prompt, user_id: int) -> str:
    """What lets this person's notification answer this prompt (with their session)."""
    return signing.dumps({"p": str(prompt.pk), "u": user_id}, salt=SALT, compress=True)


def read_token(text: str, max_age: int) -> tuple[str, int] | None:
    """The prompt and person a token was made for; None if it is forged or too old."""
    try:
        found = signing.loads(text, salt=SALT, max_age=max_age)
    except signing.BadSignature:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("u"), int):
        return None
    return str(found.get("p", "")), found["u"]


def waiting(prompt: Prompt, user_id: int) -> dict[str, Any]:
    """A prompt waiting for this person (who may answer it)."""
    actions = []
    if prompt.kind == PromptKind.PERMISSION:
        actions = [
            {"action": c["id"], "title": c["label"]}
            for c in prompt.choices
            if c.get("intent") in ACTED
        ]
    return {
        "title": f"{run_name(prompt.chat)} needs you",
        "body": asked(prompt),
        "tag": tag(prompt),
        "url": reverse("answer", args=[prompt.pk]),
        "actions": actions,
        "answer": {
            "url": reverse("notify-answer", args=[prompt.pk]),
            "token": token(prompt, user_id),
        },
    }


def settled(prompt: Prompt) -> dict[str, Any]:
    """The same notification, once someone answered the prompt or it closed."""
    if prompt.answered_by_id is not None:
        who = prompt.answered_by.get_username() if prompt.answered_by else "someone"
        body = f"Answered by {who}: {prompt.decision}" if prompt.decision else f"Answered by {who}"
    else:
        body = "No longer waiting: the agent went on without an answer."
    return {
        "title": run_name(prompt.chat),
        "body": bound(body, BODY_CHARS),
        "tag": tag(prompt),
        "url": reverse("answer", args=[prompt.pk]),
        "actions": [],
        "settled": True,
    }


def mentioned(mention: Mention) -> dict[str, Any]:
    """A comment that mentions its person: who wrote it, where, and what it says."""
    comment = mention.comment
    author = comment.author.get_username() if comment.author else "someone"
    return {
        "title": f"{author} mentioned you in {run_name(comment.tool.chat)}",
        "body": bound(comment.text, BODY_CHARS) or "",
        "tag": f"mention-{mention.pk}",
        "url": reverse("open-mention", args=[mention.pk]),
        "actions": [],
    }


def assigned(assignment: ReviewAssignment) -> dict[str, Any]:
    """A run's review asked of its person (the review queue): who asked, which run."""
    chat = assignment.review.chat
    who = assignment.assigned_by.get_username() if assignment.assigned_by else "someone"
    return {
        "title": f"{who} asked you to review {run_name(chat)}",
        "body": bound(f"In {chat.workspace.name}: open the run to review it.", BODY_CHARS) or "",
        "tag": f"review-{assignment.pk}",
        "url": reverse("chat", args=[chat.pk]),
        "actions": [],
    }


def ended(turn: InferenceAttempt) -> dict[str, Any]:
    """A turn of a run the person follows ended: how, and what it was asked."""
    shown = statuses.turn_status(turn, statuses.canceller(turn))
    asked = bound(turn.prompt, BODY_CHARS // 2)
    return {
        "title": f"{run_name(turn.chat)}: {shown.words}",
        "body": f"{shown.title} {f'It was asked: {asked}' if asked else ''}".strip(),
        "tag": f"turn-{turn.pk}",
        "url": reverse("chat", args=[turn.chat_id]),
        "actions": [],
    }
