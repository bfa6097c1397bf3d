"""Status badges (activity/show/statuses.py): ``{% load badges %}`` then ``{% call_status row %}``,
``{% turn_status attempt %}``, ``{% run_status chat %}``, ``{% call_count status n %}`` or
``{% waiting_status prompt %}``."""

from __future__ import annotations

from django import template
from django.template import Context
from django.utils.html import format_html
from django.utils.safestring import SafeString

from activity.models import Chat, InferenceAttempt, Prompt, ToolActivity
from activity.show import statuses

register = template.Library()


def badge(shown: statuses.Shown) -> SafeString:
    if shown.elsewhere:  # both, for every viewer: the page shows the one that is theirs
        words = format_html(
            '<span class="if-yours">{}</span><span class="if-not-yours">{}</span>',
            shown.words,
            shown.elsewhere,
        )
    else:
        words = format_html("{}", shown.words)
    return format_html(
        '<span class="badge {}" title="{}">{}</span>', shown.tone, shown.title, words
    )


@register.simple_tag
def call_status(row: ToolActivity) -> SafeString:
    """A call's status, the agent's own word when ACP does not know it, a person's decision."""
    html = badge(statuses.call_status(row))
    if row.unknown_status:
        html += format_html(' <span class="raw-status">({})</span>', row.unknown_status)
    decision = statuses.call_decision(row)
    if decision is not None:
        html += format_html(
            ' <span class="approval {}" title="{}">{}</span>',
            decision.tone,
            decision.title,
            decision.words,
        )
    return html


@register.simple_tag(takes_context=True)
def turn_status(context: Context, attempt: InferenceAttempt) -> SafeString:
    """A turn's status; on a share link's page (``shared``) without who cancelled it."""
    named = attempt.stop_reason == "cancelled" and not context.get("shared")
    who = statuses.canceller(attempt) if named else None
    return badge(statuses.turn_status(attempt, who))


@register.simple_tag
def run_status(chat: Chat) -> SafeString:
    return badge(statuses.run_status(chat))


@register.simple_tag
def call_count(status: str, count: int) -> SafeString:
    return badge(statuses.count_words(status, count))


@register.simple_tag
def waiting_status(prompt: Prompt) -> SafeString:
    return badge(statuses.waiting_for_you(prompt.kind == "question"))
