"""The reply's Markdown as safe HTML: markdown-it-py renders, nh3 sanitises.

Raw HTML in the agent's text is escaped by the renderer (``html: False``) and anything that
slipped through is removed by nh3, so no agent-supplied markup reaches a page.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code",
    "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )


HEADING_SHIFT = 2  # agent text sits under a run's h1 and a turn's h2: its "#" is an h3


def render_markdown(text: str) -> SafeString:
    parser = _parser()
    tokens = parser.parse(text)
    for token in tokens:  # keep the page's heading outline whole, whatever the agent wrote
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + HEADING_SHIFT, 6)}"
    html = parser.renderer.render(tokens, parser.options, {})
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
