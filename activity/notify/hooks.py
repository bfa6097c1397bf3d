"""Which events the workspaces' webhooks are owed, each claimed once (docs/webhooks.md#events).

Like the notifications' ``queue.owe``: an event not yet told (its ``hooked_at`` null) is claimed
with a conditional update, so that of every process that sees it one wins, and the winner makes
one ``Delivery`` per active webhook of the run's workspace that chose the event; the unique
(webhook, key) pair makes each delivery once whatever happens twice. Nothing here runs on a
request or the ingest path: each process's notifier calls ``owe`` every ``NOTIFY_POLL_MS``.

- ``prompt.waiting``: a prompt opened (``Prompt.hooked_at``); at once, no delay.
- ``prompt.answered``: a prompt told waiting was answered from the web, or closed
  (``Prompt.answer_hooked_at``).
- ``run.started``: a chat a runner's hello made, once its first turn started (its title and
  what it was asked are known) or ``NOTIFY_DELAY_SECONDS`` after it was made (``Chat.hooked_at``).
- ``run.failed`` / ``run.finished``: a turn ended (``InferenceAttempt.hooked_at``), failed or
  not as ``hookbody.ended_event`` says.
- ``mention``: a comment mentioned a member (``Mention.hooked_at``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db.models import Model, Q
from django.utils import timezone

from activity.models import Chat, Delivery, InferenceAttempt, Mention, Prompt, Webhook
from activity.notify import hookbody

BATCH = 50  # events of each kind claimed in one pass


def _claim(model: type[Model], pk: object, field: str) -> bool:
    """Take ``model`` row ``pk`` to tell of: one process wins (``field`` is null until then)."""
    unclaimed = model._default_manager.filter(pk=pk, **{f"{field}__isnull": True})
    return unclaimed.update(**{field: timezone.now()}) == 1


def fan_out(workspace_id: UUID, event: str, payload: dict[str, Any]) -> int:
    """One delivery of ``payload`` to each active webhook of the workspace that chose ``event``."""
    hooks = Webhook.objects.filter(workspace_id=workspace_id, active=True)
    chosen = [h for h in hooks.only("pk", "events") if event in h.events]
    made = [Delivery(webhook=h, key=payload["id"], event=event, payload=payload) for h in chosen]
    return len(Delivery.objects.bulk_create(made, ignore_conflicts=True))


def _each(
    rows: Any, model: type[Model], field: str, told: Callable[[Any], tuple[UUID, dict[str, Any]]]
) -> int:
    """Claim each of ``rows`` by ``field`` and fan out what ``told`` makes of it."""
    made = 0
    for row in rows[:BATCH]:
        if _claim(model, row.pk, field):
            workspace_id, payload = told(row)
            made += fan_out(workspace_id, payload["event"], payload)
    return made


def owe() -> int:
    """Make the deliveries that are due; how many were made."""
    made = 0
    waiting = Prompt.objects.filter(hooked_at__isnull=True).select_related(
        "chat__workspace", "tool"
    )
    made += _each(
        waiting, Prompt, "hooked_at", lambda p: (p.chat.workspace_id, hookbody.waiting(p))
    )
    settled = Prompt.objects.filter(hooked_at__isnull=False, answer_hooked_at__isnull=True)
    settled = settled.filter(Q(closed_at__isnull=False) | Q(answered_at__isnull=False))
    made += _each(
        settled.select_related("chat__workspace", "tool", "answered_by"),
        Prompt,
        "answer_hooked_at",
        lambda p: (p.chat.workspace_id, hookbody.answered(p)),
    )
    quiet = timezone.now() - timedelta(seconds=settings.NOTIFY_DELAY_SECONDS)
    begun = Chat.objects.filter(hooked_at__isnull=True).filter(
        Q(current_attempt__isnull=False) | Q(created_at__lte=quiet)
    )
    made += _each(
        begun.select_related("workspace", "current_attempt"),
        Chat,
        "hooked_at",
        lambda c: (c.workspace_id, hookbody.started(c)),
    )
    ended = InferenceAttempt.objects.filter(ended_at__isnull=False, hooked_at__isnull=True)
    made += _each(
        ended.select_related("chat__workspace"),
        InferenceAttempt,
        "hooked_at",
        lambda t: (t.chat.workspace_id, hookbody.ended(t)),
    )
    mentions = Mention.objects.filter(hooked_at__isnull=True).select_related(
        "comment__author", "comment__tool__chat__workspace"
    )
    made += _each(
        mentions,
        Mention,
        "hooked_at",
        lambda m: (m.comment.tool.chat.workspace_id, hookbody.mentioned(m)),
    )
    return made
