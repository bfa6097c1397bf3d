"""Answers from the web to the agent's requests: the first answer wins, and it reaches the
runner that owns the agent.

1. ``parse`` turns a submitted form into what the agent will be told, checked against what
   was offered.
2. ``record`` makes it the decision with a conditional update — exactly one answer wins — and
   bumps the chat's version so every viewer sees the buttons replaced.
3. ``send_answer`` hands it to the runner through the channel layer: the runner's socket joins
   group ``runner-<chat id>`` and receives ``{"type": "runner.answer", "text": <answer frame>}``.
   Only the socket whose hello proved the chat is its runner's is in that group (``presence``).
   A runner that is reconnecting gets it on its hello (``pending``). A secret answer is never
   stored: it is relayed in memory only, so it is refused while the runner is offline.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.contrib.auth.models import AbstractBaseUser
from django.http import QueryDict
from django.utils import timezone

from activity.core import groups
from activity.core.contract import ChoiceIntent, bound
from activity.core.refusals import Refusal
from activity.live import chats
from activity.live.work import ChatChange, Work
from activity.models import InferenceAttempt, Prompt, PromptKind, ToolActivity
from activity.wire.orders import Answer

DECISION_WORDS = {
    ChoiceIntent.ALLOW_ONCE: "Allowed once",
    ChoiceIntent.ALLOW_ALWAYS: "Always allowed",
    ChoiceIntent.REJECT_ONCE: "Rejected",
    ChoiceIntent.REJECT_ALWAYS: "Always rejected",
}


@dataclass(frozen=True)
class Recorded:
    change: ChatChange  # the decision shows on the chat, and leaves the inboxes
    request_id: str | int  # the agent's request it answers


def parse(prompt: Prompt, data: QueryDict) -> tuple[dict[str, Any], str]:
    """What the agent will be told, and the decision as a person reads it."""
    if prompt.kind == PromptKind.PERMISSION:
        chosen = next((c for c in prompt.choices if c["id"] == data.get("choice")), None)
        if chosen is None:
            raise Refusal("Choose one of the options the agent offered.", 400)
        word = DECISION_WORDS.get(ChoiceIntent(chosen["intent"]), chosen["label"])
        return {"outcome": "selected", "optionId": chosen["id"]}, word
    if data.get("action") == "decline":
        return {"action": "decline"}, "Declined"
    content: dict[str, Any] = {}
    said: list[str] = []
    for question in prompt.questions:
        labels = [option["label"] for option in question["options"]]
        picked = data.getlist(question["id"]) if question["multi_select"] else []
        if not question["multi_select"] and data.get(question["id"]):
            picked = [data.get(question["id"], "")]
        if any(label not in labels for label in picked):
            raise Refusal(f"{question['question']}: choose one of the options offered.", 400)
        other = (data.get(f"{question['id']}_other") or "").strip()
        if other and not question["allow_other"]:
            raise Refusal(f"{question['question']}: this question takes no free text.", 400)
        if picked:
            content[question["id"]] = picked if question["multi_select"] else picked[0]
        if other:
            # A free-text question takes the text itself; an option question its "_custom" box.
            content[f"{question['id']}_custom" if labels else question["id"]] = other
        said += picked + ([other] if other and not question["secret"] else [])
    if not content:
        raise Refusal("Answer the question, or decline it.", 400)
    words = "Answered" if prompt.secret else f"Answered: {', '.join(said)}"
    return {"action": "accept", "content": content}, bound(words, 512) or "Answered"


def record(
    prompt_id: uuid.UUID, user: AbstractBaseUser, decision: str, answer: dict[str, Any], source: str
) -> Recorded:
    """Make this the prompt's decision, if nobody answered first and it is still open."""
    prompt = Prompt.objects.get(pk=prompt_id)
    with chats.change(prompt.chat_id) as work:
        if prompt.secret and not work.chat.runner_connected:
            raise Refusal(
                "The agent's runner is offline. A secret answer is never stored, "
                "so it can only be given while the runner is connected."
            )
        won = Prompt.objects.filter(
            pk=prompt_id, answered_at__isnull=True, closed_at__isnull=True
        ).update(
            answered_by=user,
            answered_at=timezone.now(),
            answered_from=source[:200],
            decision=decision,
            answer=None if prompt.secret else answer,
        )
        if won != 1:
            raise Refusal(why_not(prompt_id))
        touch_prompt(work, prompt)
    return Recorded(work.done, prompt.jsonrpc_id)


def why_not(prompt_id: uuid.UUID) -> str:
    prompt = Prompt.objects.select_related("answered_by").get(pk=prompt_id)
    if prompt.answered_at is not None:
        who = prompt.answered_by.get_username() if prompt.answered_by else "someone"
        when = timezone.localtime(prompt.answered_at).strftime("%H:%M:%S")
        return f"Already answered by {who} at {when}."
    return "This prompt is closed: the turn ended or the agent stopped waiting."


def touch_prompt(work: Work, prompt: Prompt) -> None:
    """Mark a prompt and where it shows (its row, or its turn's head) as changed."""
    work.touch(prompt, "version")
    if prompt.tool_id is not None:
        work.touch(ToolActivity.objects.get(pk=prompt.tool_id), "version")
    else:
        work.touch(InferenceAttempt.objects.get(pk=prompt.attempt_id), "version")


def pending(chat_id: uuid.UUID) -> tuple[list[Answer], ChatChange]:
    """Answers given while the runner was away, to send when it says hello.

    A secret answer was never stored; if it may not have reached the runner, the prompt is
    offered again so that a person can answer it now that the runner is back.
    """
    with chats.change(chat_id) as work:
        waiting = list(
            Prompt.objects.filter(chat=work.chat, answered_at__isnull=False, closed_at__isnull=True)
        )
        answers = [Answer(request_id=p.jsonrpc_id, outcome=p.answer) for p in waiting if p.answer]
        for prompt in (p for p in waiting if p.answer is None):
            prompt.answered_by, prompt.answered_at, prompt.decision = None, None, ""
            work.touch(prompt, "answered_by", "answered_at", "decision")
            touch_prompt(work, prompt)
    return answers, work.done


async def send_answer(
    chat_id: uuid.UUID, request_id: str | int, outcome: dict[str, Any], layer: Any = None
) -> None:
    """Send the answer to a JSON-RPC request of the agent to the chat's runner."""
    frame = Answer(request_id=request_id, outcome=outcome)
    await (layer or get_channel_layer()).group_send(
        groups.runner(chat_id), {"type": "runner.answer", "text": frame.model_dump_json()}
    )
