"""What a search hit shows: the field whose text best matches, cut to a snippet around its
matches, every character escaped but the ``<mark>`` tags added here (activity/review/search.py,
step 3).
"""

from __future__ import annotations

import itertools
import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

SNIPPET_CHARS = 240
SNIPPET_BEFORE = 60  # characters of context before the first match
JOINER = re.compile(r"[^\w\s]{1,2}|_{1,2}")  # what may join two marked words into one mark


def best_snippet(texts: dict[str, str], pattern: re.Pattern[str]) -> tuple[str, SafeString]:
    """The field whose text holds the most distinct words of the query (the first on a tie),
    and its snippet; with no match anywhere, the first field with any text, unmarked."""
    best: tuple[int, str, SafeString] | None = None
    for name, text in texts.items():
        distinct, snippet = highlight(text, pattern)
        if distinct and (best is None or distinct > best[0]):
            best = (distinct, name, snippet)
    if best is not None:
        return best[1], best[2]
    name = next((name for name, text in texts.items() if text.strip()), next(iter(texts)))
    return name, highlight(texts[name], pattern)[1]


def highlight(text: str, pattern: re.Pattern[str]) -> tuple[int, SafeString]:
    """A window of ``text`` around its best cluster of matches, each match in ``<mark>``.

    Returns how many distinct words the window marks, and the snippet. Everything but the
    ``<mark>`` tags is escaped; runs of whitespace become one space.
    """
    matches = [m.span() for m in itertools.islice(pattern.finditer(text), 500)]
    anchor = _best_cluster(text, matches)
    # From the beginning when the matches are near it; else a little before them.
    start = anchor - SNIPPET_BEFORE
    start = _word_start(text, start) if start > SNIPPET_BEFORE // 2 else 0
    end = _word_end(text, start + SNIPPET_CHARS)
    parts = ["…"] if start > 0 else []
    shown = [(b, f) for b, f in matches if start <= b < end]
    marked = {text[b:f].lower() for b, f in shown}
    position = start
    for begin, finish in _joined(text, shown):
        end = max(end, finish)  # never cut a match in two
        parts += [_plain(text[position:begin]), "<mark>", escape(text[begin:finish]), "</mark>"]
        position = finish
    parts.append(_plain(text[position:end]))
    if end < len(text):
        parts.append("…")
    return len(marked), mark_safe("".join(parts))  # every part was escaped above


def _joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Matches one mark: those only a sign or two apart with no space ("test_greet", "greet.py"
    for the query ``test_greet.py``) read as the one thing a person typed."""
    joined: list[tuple[int, int]] = []
    for begin, finish in spans:
        if joined and JOINER.fullmatch(text[joined[-1][1] : begin]):
            joined[-1] = (joined[-1][0], finish)
        else:
            joined.append((begin, finish))
    return joined


def _best_cluster(text: str, matches: list[tuple[int, int]]) -> int:
    """Where the window holding the most distinct matched words begins (the first such)."""
    best, anchor = 0, matches[0][0] if matches else 0
    reach = SNIPPET_CHARS - SNIPPET_BEFORE
    for i, (begin, _) in enumerate(matches):
        inside = set()
        for b, e in matches[i:]:
            if e > begin + reach:
                break
            inside.add(text[b:e].lower())
        if len(inside) > best:
            best, anchor = len(inside), begin
    return anchor


def _word_start(text: str, at: int) -> int:
    """``at``, moved forward past a word it would cut (at most 20 characters)."""
    if at == 0 or text[at - 1].isspace():
        return at
    space = re.compile(r"\s").search(text, at, at + 20)
    return space.end() if space else at


def _word_end(text: str, at: int) -> int:
    """``at``, moved back to the end of the last whole word (at most 20 characters)."""
    if at >= len(text):
        return len(text)
    spaces = [m.start() for m in re.finditer(r"\s", text[max(at - 20, 0) : at])]
    return max(at - 20, 0) + spaces[-1] if spaces else at


def _plain(text: str) -> str:
    return escape(re.sub(r"\s+", " ", text))
