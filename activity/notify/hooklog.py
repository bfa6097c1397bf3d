"""What the workspace page shows of its webhooks: each with its URL shown without its path's
token, the events it chose, and its last deliveries (docs/webhooks.md#the-delivery-log)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Prefetch

from activity.models import Delivery, HookEvent, HookFormat, Webhook, Workspace
from activity.notify import hookaddr

SHOWN = 10  # deliveries per webhook on the page
MAX_HOOKS = 20  # webhooks per workspace


@dataclass(frozen=True)
class Logged:
    """One delivery as the log shows it."""

    delivery: Delivery
    state: str  # delivered, retrying, failed, sending, waiting
    next_try_at: datetime | None


@dataclass(frozen=True)
class Listed:
    webhook: Webhook
    shown_url: str
    events: list[str]
    log: list[Logged]


def state(delivery: Delivery) -> str:
    if delivery.delivered_at is not None:
        return "delivered"
    if delivery.failed_at is not None:
        return "failed"
    if delivery.claimed_at is not None:
        return "sending"
    return "retrying" if delivery.attempts else "waiting"


def listed(workspace: Workspace) -> list[Listed]:
    recent = Delivery.objects.defer("payload").order_by("-created_at", "-pk")[:SHOWN]
    hooks = workspace.webhooks.select_related("created_by").prefetch_related(
        Prefetch("deliveries", queryset=recent, to_attr="recent")
    )
    words = dict(HookEvent.choices)
    return [
        Listed(
            hook,
            hookaddr.shown(hook.url),
            [words.get(e, e) for e in hook.events],
            [
                Logged(d, state(d), d.next_try_at if state(d) == "retrying" else None)
                for d in getattr(hook, "recent", [])
            ],
        )
        for hook in hooks
    ]


@dataclass(frozen=True)
class Section:
    """The page's webhooks section: the webhooks, and what the form offers."""

    listed: list[Listed]
    events: list[tuple[str, str]]
    formats: list[tuple[str, str]]
    most: int = MAX_HOOKS


def section(workspace: Workspace) -> Section:
    return Section(listed(workspace), list(HookEvent.choices), list(HookFormat.choices))
