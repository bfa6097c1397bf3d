"""What a webhook says: one event as koruweb's JSON (kept on the delivery, the same for every
webhook told) and, for a Slack-compatible webhook, that JSON as an incoming-webhook message
(docs/webhooks.md#the-json-format, docs/webhooks.md#the-slack-format).

Made only of stored fields, which hold what the agent and people said already masked
(docs/secrets.md); every string is masked again on the way out all the same. Never the
webhook's secret, a token, or the answer to a question marked secret.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from activity.core.contract import bound
from activity.core.masking import mask
from activity.models import (
    Chat,
    HookEvent,
    HookFormat,
    InferenceAttempt,
    Mention,
    Prompt,
    Webhook,
)
from activity.notify import says
from activity.show import statuses

PING = "ping"  # a test event an admin sends from the workspace page
TEXT_CHARS = 1000  # a turn's prompt, a comment, what a prompt asks
SLACK_CHARS = 2900  # a Slack section's text takes 3,000
# A turn that ended this way failed (run.failed); any other end is run.finished.
FAILED_TONES = frozenset({statuses.FAILED, statuses.CRASHED, statuses.REFUSED, statuses.LOST})


def link(path: str) -> str:
    return settings.KORUWEB_BASE_URL + path


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _runner_ms(ms: int | None) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms is not None else timezone.now()


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _event(
    event: str, key: str, chat: Chat | None, when: datetime, text: str, **more: Any
) -> dict[str, Any]:
    """The fields every event has, and its own."""
    workspace = chat.workspace if chat is not None else more.pop("workspace")
    run = None
    if chat is not None:
        url = link(reverse("chat", args=[chat.pk]))
        run = {
            "id": str(chat.pk),
            "title": says.run_name(chat),
            "agent": chat.agent_name,
            "url": url,
        }
    payload = {
        "event": event,
        "id": key,
        "occurred_at": _when(when),
        "workspace": {"slug": workspace.slug, "name": workspace.name},
        "run": run,
        "text": text,
        **more,
    }
    masked: dict[str, Any] = _masked(payload)
    return masked


def _prompt(prompt: Prompt) -> dict[str, Any]:
    return {
        "id": str(prompt.pk),
        "kind": prompt.kind,
        "asks": bound(says.asked(prompt), TEXT_CHARS),
        "secret": prompt.secret,
        "url": link(reverse("answer", args=[prompt.pk])),
    }


def waiting(prompt: Prompt) -> dict[str, Any]:
    """A prompt opened: the agent waits for a person's answer."""
    key = f"{HookEvent.PROMPT_WAITING}:{prompt.pk}"
    name = says.run_name(prompt.chat)
    text = f"{name} is waiting for an answer: {says.asked(prompt)}"
    return _event(
        HookEvent.PROMPT_WAITING, key, prompt.chat, prompt.created_at, text, prompt=_prompt(prompt)
    )


def answered(prompt: Prompt) -> dict[str, Any]:
    """A prompt answered from the web (the decision, and by whom: the team's own channel), or
    closed without one. A secret question's decision is only "Answered"."""
    key = f"{HookEvent.PROMPT_ANSWERED}:{prompt.pk}"
    name = says.run_name(prompt.chat)
    fields = _prompt(prompt)
    if prompt.answered_at is not None:
        who = prompt.answered_by.get_username() if prompt.answered_by else "a former member"
        decision = "Answered" if prompt.secret else (prompt.decision or "Answered")
        fields.update(outcome="answered", decision=decision, answered_by=who)
        text, when = f"{name}: {who} answered — {decision}", prompt.answered_at
    else:
        fields.update(outcome="closed", decision=None, answered_by=None)
        text = f"{name} no longer waits: the agent went on without an answer from the web."
        when = _runner_ms(prompt.closed_at)
    return _event(HookEvent.PROMPT_ANSWERED, key, prompt.chat, when, text, prompt=fields)


def started(chat: Chat) -> dict[str, Any]:
    """A run started (a runner's hello made it)."""
    key = f"{HookEvent.RUN_STARTED}:{chat.pk}"
    turn = chat.current_attempt
    asked = bound(turn.prompt, TEXT_CHARS) if turn and not turn.before_any_prompt else None
    text = f"{says.run_name(chat)} started" + (f": {asked}" if asked else ".")
    return _event(HookEvent.RUN_STARTED, key, chat, chat.created_at, text, asked=asked)


def ended_event(turn: InferenceAttempt) -> HookEvent:
    shown = statuses.turn_status(turn)
    return HookEvent.RUN_FAILED if shown.tone in FAILED_TONES else HookEvent.RUN_FINISHED


def ended(turn: InferenceAttempt) -> dict[str, Any]:
    """A turn of a run ended: failed (an error, a crash, a refusal, the runner lost) or
    finished (any other end, a cancel or a limit included)."""
    event = ended_event(turn)
    shown = statuses.turn_status(turn, statuses.canceller(turn))
    key = f"{event}:{turn.pk}"
    fields = {
        "id": str(turn.pk),
        "asked": None if turn.before_any_prompt else bound(turn.prompt, TEXT_CHARS),
        "stop_reason": turn.stop_reason,
        "status": shown.words,
        "url": link(reverse("turn", args=[turn.chat_id, turn.pk])),
    }
    text = f"{says.run_name(turn.chat)}: {shown.words}. {shown.title}"
    return _event(event, key, turn.chat, _runner_ms(turn.ended_at), text, turn=fields)


def mentioned(mention: Mention) -> dict[str, Any]:
    """A comment mentioned a member: who, by whom, and what it says."""
    comment = mention.comment
    chat = comment.tool.chat
    author = comment.author.get_username() if comment.author else "a former member"
    fields = {
        "id": str(mention.pk),
        "mentioned": mention.name,
        "by": author,
        "comment": bound(comment.text, TEXT_CHARS),
        "url": link(reverse("tool", args=[comment.tool_id])),
    }
    text = f"{author} mentioned @{mention.name} in {says.run_name(chat)}: {fields['comment']}"
    key = f"{HookEvent.MENTION}:{mention.pk}"
    return _event(HookEvent.MENTION, key, chat, mention.created_at, text, mention=fields)


def ping(webhook: Webhook, key: str, by: str) -> dict[str, Any]:
    """The test event an admin sends: nothing happened, it only shows the webhook works."""
    text = f"A test event from koruweb for the webhook “{webhook.name}”, sent by {by}."
    return _event(
        PING,
        key,
        None,
        timezone.now(),
        text,
        workspace=webhook.workspace,
        webhook={"name": webhook.name},
    )


# --- the Slack-compatible format -----------------------------------------------------------


def _slack_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(payload: dict[str, Any]) -> dict[str, Any]:
    """An incoming-webhook message: the event's sentence, a link to the run, and where from."""
    text = _slack_escaped(payload.get("text", ""))
    run = payload.get("run")
    head = f"*<{run['url']}|{_slack_escaped(run['title'])}>*\n" if run else ""
    where = f"koruweb · {_slack_escaped(payload['workspace']['name'])} · `{payload['event']}`"
    return {
        "text": bound(text, SLACK_CHARS),
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": bound(head + text, SLACK_CHARS)},
            },
            {"type": "context", "elements": [{"type": "mrkdwn", "text": where}]},
        ],
    }


def body(format: str, payload: dict[str, Any]) -> dict[str, Any]:
    """What is posted to a webhook of this format."""
    return slack(payload) if format == HookFormat.SLACK else payload
