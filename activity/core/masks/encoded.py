"""Tokens base64-, hex- or %-encoded, and the AWS secret access key next to its key id
(docs/secrets.md#encoded-tokens)."""

from __future__ import annotations

import binascii
import bisect
import re

from activity.core.masks.spans import B, Span
from activity.core.masks.tokens import TOKENS, pem_spans, token_spans

# --- base64, hex and %-encoded tokens ----------------------------------------------------

# A run of base64 characters (standard and URL-safe) long enough to hold a token: decoded at
# each of its 4 character offsets, one of which is where its encoding starts, so a token is
# found at any of the 3 byte alignments it can have in it. A run of hex digits is a run of
# base64 characters too: it is looked for inside those runs, and decoded at its 2 offsets.
BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}+")
HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}+")
PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
# A run of URL characters with a %-escape in it, from its start (so no run is scanned twice).
PERCENT_RUN = re.compile(
    r"(?<![A-Za-z0-9_.~+%\-])[A-Za-z0-9_.~+\-]*+(?:%[0-9A-Fa-f]{2}[A-Za-z0-9_.~+\-]*+)++"
)
ESCAPES = {
    f"%{a}{b}": chr(int(a + b, 16))
    for a in "0123456789abcdefABCDEF"
    for b in "0123456789abcdefABCDEF"
}
DECODED_TRIGGERS = tuple(
    {lead.encode() for token in TOKENS for lead in token.leads} | {b"PRIVATE KEY"}
)


def _decoded_spans(pieces: list[bytes]) -> list[tuple[int, int, int]]:
    """``(piece, start, end)`` of each token or private key in decoded pieces of text. The
    pieces are scanned joined by NULs, which no token crosses, and read one character per
    byte: one pass over them all, not one (with its overhead) per piece."""
    joined = b"\0".join(pieces)
    if not any(trigger in joined for trigger in DECODED_TRIGGERS):
        return []
    text = joined.decode("latin-1")
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece) + 1)
    found = []
    for start, end in token_spans(text):
        i = bisect.bisect_right(starts, start) - 1
        found.append((i, start - starts[i], min(end - starts[i], len(pieces[i]))))
    if b"PRIVATE KEY" in joined:  # a private key's body may be long: each piece on its own
        for i, piece in enumerate(pieces):
            if b"PRIVATE KEY" in piece:
                found.extend((i, start, end) for start, end in pem_spans(piece.decode("latin-1")))
    return found


def encoded_spans(text: str) -> list[Span]:
    """Tokens and private keys base64- or hex-encoded: each decoded span of a secret becomes
    the span of the characters that encode any of its bits (to the run's end, for a secret
    that reaches the end of what decodes)."""
    pieces: list[bytes] = []
    places: list[tuple[int, int, bool]] = []  # where a piece's characters start and end; hex?
    for run in BASE64_RUN.finditer(text):
        chars = run.group().replace("-", "+").replace("_", "/")  # URL-safe to standard
        for skip in range(4):
            usable = len(chars) - skip
            usable -= usable % 4 == 1  # a lone last character has no whole byte
            pieces.append(binascii.a2b_base64(chars[skip : skip + usable] + "=" * (-usable % 4)))
            places.append((run.start() + skip, run.end(), False))
        if run.end() - run.start() < 32:
            continue
        for hexes in HEX_RUN.finditer(text, run.start(), run.end()):
            for skip in range(2):
                at = hexes.start() + skip
                usable = (hexes.end() - at) // 2 * 2
                pieces.append(bytes.fromhex(text[at : at + usable]))
                places.append((at, hexes.end(), True))
    spans = []
    for i, start, end in _decoded_spans(pieces):
        at, run_end, hexed = places[i]
        if end == len(pieces[i]):
            spans.append((at + (2 * start if hexed else 8 * start // 6), run_end))
        elif hexed:
            spans.append((at + 2 * start, at + 2 * end))
        else:
            spans.append((at + 8 * start // 6, at + -(-8 * end // 6)))
    return sorted(spans)


def percent_spans(text: str) -> list[Span]:
    """Tokens with some or all of their characters %-encoded (``%73k-…``, ``a%20sk-…``)."""
    if "%" not in text or PERCENT.search(text) is None:
        return []
    runs = list(PERCENT_RUN.finditer(text))
    pieces = [PERCENT.sub(_unescape, run.group()).encode("latin-1") for run in runs]
    spans = []
    escapes: dict[int, list[int]] = {}  # decoded offset of each escape in a run, when needed
    for i, start, end in _decoded_spans(pieces):
        run = runs[i]
        if i not in escapes:
            found = PERCENT.finditer(run.group())
            escapes[i] = [escape.start() - 2 * k for k, escape in enumerate(found)]
        # A decoded offset, in the run: 2 more for each escape before it.
        first = start + 2 * bisect.bisect_left(escapes[i], start)
        last = end + 2 * bisect.bisect_left(escapes[i], end)
        spans.append((run.start() + first, run.start() + last))
    return sorted(spans)


def _unescape(escape: re.Match[str]) -> str:
    return ESCAPES[escape.group()]


# --- the AWS secret access key -------------------------------------------------------------

AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
AWS_KEY_ID_MASKED = re.compile(B + r"(?:AKIA|ASIA)\*{16}")
UPPER_AND_LOWER = re.compile(r"[A-Z].*?[a-z]|[a-z].*?[A-Z]")


def aws_secret_spans(text: str) -> list[Span]:
    """An AWS secret access key is 40 characters of base64 with no prefix of its own: masked
    when an access key id is in the same text, and when it has both upper- and lower-case
    letters (a git SHA has no capital letter)."""
    if "A**" not in text or len(text) < 40 or AWS_KEY_ID_MASKED.search(text) is None:
        return []
    return [m.span() for m in AWS_SECRET.finditer(text) if UPPER_AND_LOWER.search(m.group())]


# The encoded forms before the plain tokens: a token right after an encoded one masked is then
