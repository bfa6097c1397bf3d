from __future__ import annotations

import re

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeData, SafeString, mark_safe

from activity.models import Comment
from activity.review import mentions
from activity.show import dom
from activity.show.markdown import render_markdown
from activity.show.timing import millis

register = template.Library()

# Unicode's explicit bidirectional controls: the embeddings and overrides (LRE, RLE, PDF, LRO,
# RLO), the isolates (LRI, RLI, FSI, PDI) and the marks (LRM, RLM, ALM).
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


@register.filter
def dom_id(pk: object, kind: str) -> str:
    """The DOM id of an object of ``kind`` (``activity/show/dom.py``):
    ``{{ row.pk|dom_id:"tool" }}``."""
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


register.filter("millis", millis)


@register.filter(is_safe=True)
def isolate(text: object) -> SafeString:
    """Text an agent or a person supplied (a run's title, a call's label, a workspace or user
    name) shown as written: without its bidirectional controls (U+202E before "gnp.exe" would
    make it read "exe.png"), in ``<bdi>``, so right-to-left words in it take a direction of
    their own without reordering the words around them (README, "Secrets and access")."""
    kept = BIDI_CONTROLS.sub("", str(text))
    if isinstance(text, SafeData):  # already HTML (a search hit's marks)
        return format_html("<bdi>{}</bdi>", mark_safe(kept))  # noqa: S308
    return format_html("<bdi>{}</bdi>", kept)


@register.filter(is_safe=True)
def unbidi(text: object) -> str:
    """Text without its bidirectional controls, for where no markup can isolate it: the page's
    ``<title>`` (the tab, the window list) and tooltips."""
    return BIDI_CONTROLS.sub("", str(text))
