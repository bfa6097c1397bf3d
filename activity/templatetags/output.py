"""What a tool printed or changed, as a person reads it: ``{{ row.agent_output|output }}``.

``output`` renders any agent text: each unified diff in it as a diff (``activity/show/diffs.py``),
each Markdown code fence unwrapped and highlighted by its language, the rest as a terminal shows
it (``activity/show/terminal.py``), each block with a copy button
(``static/koruweb/live/output.js``).
``diff`` renders text that holds a change, such as what a permission prompt asks: its diffs the
same way, the words around them as words. Both escape every character of the text and give
their colours as classes (``static/koruweb/live/output.css``, ``/highlight.css``).

Rows are rendered again on every change pushed, so a rendering is kept for the next time the
same text comes (the text is the whole key: the functions are pure).
"""

from __future__ import annotations

import json
from functools import lru_cache

from django import template
from django.urls import reverse
from django.utils.html import escape, linebreaks
from django.utils.safestring import SafeString, mark_safe

from activity.core.contract import CUT_MARKER
from activity.show import diffs, highlight, terminal

register = template.Library()

# Fence languages that mean "what a terminal showed": ANSI colours are rendered for them.
TERMINAL_LANGUAGES = frozenset({"", "ansi", "terminal", "output", "stdout", "stderr", "log"})
DIFF_LANGUAGES = frozenset({"diff", "patch", "udiff"})
JSON_MAX_CHARS = 200_000


@register.filter(is_safe=True)
def output(text: str | None) -> SafeString:
    """A call's output: diffs, unwrapped fences, terminal text; a copy button on each block."""
    return mark_safe(render(text or "", prose=False))  # noqa: S308 — every part is escaped


@register.filter(is_safe=True, name="diff")
def diff_filter(text: str | None) -> SafeString:
    """Text holding a change (a permission prompt's): its diffs as diffs, the rest as words."""
    return mark_safe(render(text or "", prose=True))  # noqa: S308 — every part is escaped


@lru_cache(maxsize=128)
def render(text: str, prose: bool) -> str:
    cut = CUT_MARKER.search(text)
    if cut:
        text = text[: cut.start()]
    html = [block for part in diffs.split(text) for block in part_html(part, prose)]
    if cut:
        html.append(
            f'<p class="output-cut">{escape(cut.group(1))} more characters were cut here:'
            f" koruweb keeps the first part of what the agent sent.</p>"
        )
    return "".join(html)


def part_html(part: diffs.Part, prose: bool) -> list[str]:
    if isinstance(part, diffs.FileDiff):
        return [diffs.file_html(part)]
    if not part.strip():
        return []
    if prose:
        words = terminal.plain(part).strip()  # controls and escape sequences dropped
        return (
            [f'<div class="output-text">{linebreaks(words, autoescape=True)}</div>']
            if words
            else []
        )
    return [segment_html(segment) for segment in terminal.split_fences(part)]


def segment_html(segment: terminal.Segment) -> str:
    """One block of output: fenced (with its language) or loose."""
    text, language = segment.text, segment.language
    if language in DIFF_LANGUAGES:
        found = diffs.split(text)
        if any(isinstance(part, diffs.FileDiff) for part in found):
            return "".join(block for part in found for block in part_html(part, prose=False))
    if terminal.has_escapes(text) and language in TERMINAL_LANGUAGES | {"console", "shell"}:
        return block(terminal.to_html(text), language or "terminal", "ansi")
    lexer = highlight.lexer_named(language) if segment.fenced else None
    if lexer is None and not segment.fenced and looks_like_json(text):
        lexer, language = highlight.lexer_named("json"), "json"
    if lexer is not None:
        return block(highlight.highlight_block(clean(text), lexer), language, "hl")
    return block(terminal.to_html(text), language, "")


def block(html: str, label: str, kind: str) -> str:
    classes = f"output {kind}" if kind else "output"
    return (
        f'<div class="output-block"><div class="output-bar"><span class="output-lang">'
        f'{escape(label)}</span>{diffs.COPY_BUTTON}</div><pre class="{classes}"><code>{html}</code>'
        f"</pre></div>"
    )


def clean(text: str) -> str:
    """Text for the highlighter: terminal controls applied, escape sequences dropped."""
    return terminal.plain(text) if terminal.has_escapes(text) else text


def looks_like_json(text: str) -> bool:
    stripped = text.strip()
    if len(stripped) > JSON_MAX_CHARS or stripped[:1] not in "{[" or stripped[-1:] not in "}]":
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


@register.simple_tag
def highlight_css_url() -> str:
    """The URL of the highlighted code's stylesheet, with its version: cached a year."""
    return f"{reverse('highlight-css')}?v={highlight.version()}"
