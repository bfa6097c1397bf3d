"""What every shape of secret shares: spans of a text turned into stars of the same byte
size, and the boundaries of a token (docs/secrets.md#how)."""

from __future__ import annotations

from collections.abc import Iterable

STAR = "*"
JUNCTION_CHARS = 4096  # how much of the stored tail is masked again with a new chunk
PEM_CHARS = 16384  # … or more, back to the BEGIN line of a private key still open; and how far
# after its BEGIN line a private key's END line is looked for

Span = tuple[int, int]


def stars(text: str) -> str:
    """``*`` for every UTF-8 byte of ``text``: the same byte size."""
    return STAR * (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))


# Characters a shape can continue a match over or start one after: a mask next to one may let
# a shape see more on a second pass (``mask``).
EDGE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/.%~*")


def apply_spans(text: str, spans: Iterable[Span]) -> tuple[str, bool]:
    """``text`` with each span (sorted; overlaps are merged) replaced by stars — ``text``
    itself when every span is stars already, at no cost — and whether a span that changed
    has an ``EDGE`` character just before or after it."""
    out: list[str] = []
    at = 0
    edge = False
    for start, end in spans:
        start = max(start, at)
        if end <= start or text.count(STAR, start, end) == end - start:
            continue
        edge = edge or text[start - 1 : start] in EDGE or text[end : end + 1] in EDGE
        out.append(text[at:start])
        out.append(stars(text[start:end]))
        at = end
    if not out:
        return text, False
    out.append(text[at:])
    return "".join(out), edge


def words(text: str) -> frozenset[str]:
    """The words of ``text``, split at spaces: a long list of short words, readably."""
    return frozenset(text.split())


B = r"(?<![A-Za-z0-9_\-])"  # a token starts where no token character precedes it
E = r"(?![A-Za-z0-9_\-])"  # … and ends where none follows
