from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from activity import dom, mentions
from activity.markdown import render_markdown
from activity.models import Comment

register = template.Library()


@register.filter
def dom_id(pk: object, kind: str) -> str:
    """The DOM id of an object of ``kind`` (``activity/dom.py``): ``{{ row.pk|dom_id:"tool" }}``."""
    return dom.dom_id(kind, str(pk))


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


@register.filter
def comment_html(comment: Comment) -> SafeString:
    """A comment's Markdown, sanitised, its members' mentions highlighted (``mentions.py``)."""
    return mentions.comment_html(comment)


@register.filter
def diff_lines(text: str | None) -> list[tuple[str, str]] | None:
    """A unified diff as (css class, line) pairs, or None when the text is not a diff."""
    if not text or not (text.startswith("--- ") and "\n+++ " in text[:2000]):
        return None
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [(kinds.get(line[:1], "ctx"), line) for line in text.split("\n")]


@register.filter
def millis(value: int | None) -> str:
    """A duration in milliseconds, for a person: 850 ms, 4.2 s, 3 min 5 s, 2 h 46 min."""
    if value is None or value < 0:
        return ""
    if value < 1000:
        return f"{value} ms"
    if value < 60_000:
        return f"{value / 1000:.1f} s"
    minutes, seconds = divmod(value // 1000, 60)
    if minutes >= 60:
        return f"{minutes // 60} h {minutes % 60} min"
    return f"{minutes} min {seconds} s"
