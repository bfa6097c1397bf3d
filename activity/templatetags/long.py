"""Template tags for long runs: counts, times, durations apart from waits, usage.

Everything here renders the same for every viewer (pushes are rendered once): a time is a
``<time datetime>`` in UTC that static/koruweb/page/times.js says relatively, in the viewer's zone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from activity.live import usage
from activity.models import Chat, InferenceAttempt, ToolActivity
from activity.show import timeline, timing
from activity.show.timing import millis
from activity.templatetags.koruweb import unbidi

register = template.Library()


@register.filter
def thousands(n: int | None) -> str:
    """1234567 → 1,234,567."""
    return f"{n:,}" if isinstance(n, int) else ""


def _moment(value: datetime | int | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int):  # epoch milliseconds, the runner's clock
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@register.filter
def when(value: datetime | int | None) -> SafeString:
    """A moment as ``<time>``: UTC until times.js says "3 min ago" with the viewer's local
    time in its tooltip."""
    moment = _moment(value)
    if moment is None:
        return SafeString("")
    moment = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(timespec="seconds").replace("+00:00", "Z"),
        moment.strftime("%Y-%m-%d %H:%M:%S UTC"),
        moment.strftime("%Y-%m-%d %H:%M UTC"),
    )


@register.simple_tag
def call_time(row: ToolActivity) -> SafeString:
    """A row's duration cell: its running time, apart from its wait for a person."""
    t = timing.call(row)
    if t.waiting_since is not None:
        return format_html(
            '<span class="waited now">waiting for a person · asked {}</span>', when(t.waiting_since)
        )
    ran = millis(t.ran_ms)
    if t.waited_ms is None:
        return SafeString(ran)
    waited = format_html('<span class="waited">waited {} for a person</span>', millis(t.waited_ms))
    if t.never_ran:
        return format_html('{} · <span class="never-ran">did not run</span>', waited)
    if not ran:
        return waited
    return format_html('<span class="ran">ran {}</span> · {}', ran, waited)


@register.simple_tag
def turn_time(attempt: InferenceAttempt) -> SafeString:
    """A turn's start, and once it ended how long it ran and waited for a person."""
    started = format_html("started {}", when(attempt.started_at))
    t = timing.turn(attempt)
    if t.took_ms is None:
        return started
    if not t.waited_ms:
        return format_html('{} · <span class="ran">took {}</span>', started, millis(t.took_ms))
    return format_html(
        '{} · <span class="ran">ran {}</span> · <span class="waited">waited {} for a person</span>',
        started,
        millis(t.ran_ms),
        millis(t.waited_ms),
    )


def _figures(figures: usage.Figures, what: str) -> SafeString:
    if not figures:
        return SafeString("")
    said = [f for f in (figures.window, figures.tokens, figures.cost) if f]
    return format_html(
        '<span class="usage" title="{}">{}</span>',
        f"{what}: {figures.detail}" if figures.detail else what,
        " · ".join(said),
    )


@register.simple_tag
def turn_usage(attempt: InferenceAttempt) -> SafeString:
    return _figures(usage.turn(attempt), "What this turn used")


@register.simple_tag
def run_usage(chat: Chat) -> SafeString:
    reported = list(chat.attempts.filter(usage__isnull=False).only("usage"))
    return _figures(usage.run(chat, reported), "What this run used so far")


@register.filter
def version_label(chat: Any) -> str:
    """The agent and its version as a version reads: ``claude-code-acp v0.31.0``, ``demo v1``
    (a bare ``1`` after a name reads like a count), ``gemini (nightly)``."""
    name = chat.agent_name or "agent"
    version = (chat.agent_version or "").strip().removeprefix("v").removeprefix("V")
    if not version:
        return name
    if version[0].isdigit():
        return f"{name} v{version}"
    return f"{name} ({version})"


def _mark(mark: timeline.Mark) -> SafeString:
    failed = (
        format_html(
            '<rect class="run failed part" x="{}" y="{}" width="{}" height="{}"></rect>',
            mark.x,
            mark.failed_y,
            mark.width,
            mark.failed_height,
        )
        if mark.partly_failed
        else ""
    )
    return format_html(
        '<a href="{}"><title>{}</title><rect class="run {}" x="{}" y="2" width="{}" height="{}">'
        "</rect>{}</a>",
        mark.href,
        unbidi(mark.title),
        mark.css,
        mark.x,
        mark.width,
        mark.height,
        failed,
    )


@register.simple_tag
def lane_marks(lane: timeline.Lane) -> SafeString:
    """A lane's marks in its plot: drawn here rather than in the template, as a busy lane has
    up to ``timeline.SLOTS`` of them and the template language spends ~0.25 ms on each
    (bench/README.md, "Opening history")."""
    return format_html_join("", "{}", ((_mark(mark),) for mark in lane.marks))
