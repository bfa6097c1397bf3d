"""Secrets an agent prints, masked before koruweb stores, indexes or pushes them.

docs/secrets.md lists every shape masked, with an example, and what cannot be masked. In short,
``mask`` hides:

- tokens with a vendor prefix: AWS access key ids (and the secret keys next to them),
  OpenAI/Anthropic ``sk-…``, Google ``AIza…``, GitHub, GitLab, Slack, Stripe, Hugging Face,
  npm, SendGrid, koruweb's own ``koru_…`` agent tokens, JWTs; bearer credentials; webhook URLs
  with a secret in their path (Slack, Discord, Teams, Zapier, IFTTT);
- the same tokens base64- (standard or URL-safe), hex- or %-encoded, and base64 private keys;
- PEM private-key blocks;
- passwords in URLs (``postgres://user:pw@host``), after ``curl -u user:`` and in a bare
  ``user:pw@host`` when that cannot be an e-mail address;
- the value after a key whose name says secret (password, token, api_key, client_secret,
  authorization, …) in ``KEY=value``, ``KEY: value``, ``"key": "value"``, ``key = "value"``,
  ``--key value`` and HTTP header forms.

A mask keeps a short recognisable prefix (``sk-proj-``, ``AKIA``, ``ghp_``, the key and
separator of a ``key: value``, a PEM block's BEGIN and END lines) and replaces every other
character of the secret by ``*`` — as many ``*`` as the character has UTF-8 bytes. So a masked
string has exactly the byte size of the original: byte offsets counted on the text as stored (a
call's ``text_offset`` in its reply) stay true, and a stored text can be masked again in place,
which changes nothing.

Every shape is found in time linear in the text, because a frame may carry a string of 1 MiB
and masking runs before anything else sees it: a slow pattern would stall the server. So no
pattern has two unbounded quantifiers that can match the same characters. Each match starts at
a cheap trigger (a literal, a word start), runs of characters are taken possessively (``*+``,
``++``) or within a bound, and a scan that fails gives up after a bounded number of characters
or at a character the next attempt cannot cross. What needs more than that (the kind of a key,
a value that is a ``$VAR`` reference, the END of a PEM block) is checked by code on the match.

``mask_junction`` masks where a new chunk meets the text already stored, for a secret that
arrives split across two chunks of a stream (a reply, its thoughts, a call's output).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from activity.core.masks.encoded import aws_secret_spans, encoded_spans, percent_spans
from activity.core.masks.keys import (
    BARE,
    KEY_END,
    key_start,
    key_value_spans,
    lower_ascii,
    secret_key,
)
from activity.core.masks.spans import JUNCTION_CHARS, PEM_CHARS, STAR, B, Span, apply_spans, stars
from activity.core.masks.tokens import (
    PEM_BEGIN,
    TOKEN_CHARS,
    TOKENS,
    USER_FLAG,
    bearer_spans,
    pem_spans,
    token_spans,
    url_spans,
    user_flag_spans,
    userinfo_spans,
)

# seen after its stars in the first pass already (``mask`` of masked text changes nothing).
SHAPES: tuple[Callable[[str], list[Span]], ...] = (
    pem_spans,
    encoded_spans,
    percent_spans,
    token_spans,
    bearer_spans,
    url_spans,
    user_flag_spans,
    userinfo_spans,
    key_value_spans,
    aws_secret_spans,  # after the access key id is masked
)


ROUNDS = 4  # passes of every shape at most: one, and one per mask that let another be seen


def mask(text: str) -> str:
    """``text`` with every secret of a known shape masked (see the module): the same byte size,
    and for ASCII secrets the same length, so byte offsets into it stay true.

    A mask can let another shape see more where it starts or ends: a token right after its
    stars now starts a word, a key right after them is shorter, a run that stopped before it
    goes on over its stars. So when a mask has a character next to it that a shape could go
    on from (``EDGE``), the shapes are applied again, until nothing changes: masking the
    result changes nothing."""
    if len(text) < 8:
        return text
    for _ in range(ROUNDS):
        again = False
        for shape in SHAPES:
            spans = shape(text)
            if spans:
                text, edge = apply_spans(text, sorted(spans))
                again = again or edge
        if not again:
            break
    return text


# --- secrets split across two chunks ------------------------------------------------------

# A masked token at the very end of a stored text (its stars taken off), and what continues it
# in a new chunk.
MASKED_END: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    *(
        (
            re.compile(B + "(?:" + "|".join(map(re.escape, t.leads)) + ")" + t.rest + r"\Z"),
            re.compile(t.more + "++"),
        )
        for t in TOKENS
    ),
    (re.compile(r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+\Z"), re.compile(r"[A-Za-z0-9._~+/\-]++=*+")),
    (re.compile(B + r"eyJ\*++\.eyJ\*++\.\Z"), re.compile(TOKEN_CHARS + "++")),  # a whole JWT
    (re.compile(USER_FLAG.pattern + r"\Z"), re.compile(r"[^\s\"']++")),
)
# A token, encoded or not, masked to the end: stars after a token character, at least 8 of
# them or after a run of 16 (a base64 private key masked from just after its header).
ENCODED_MORE = re.compile(r"[A-Za-z0-9+/_\-%]++=*+")
ENCODED_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-%"
KEY_END_AT_END = re.compile(KEY_END.pattern + r"(?P<open>(?:\\?[\"'`])?)\Z")


def _continuation(stored: str) -> re.Pattern[str] | None:
    """What continues the secret a stored text ends with, masked, if it does."""
    tail = stored[-256:]
    head = tail.rstrip(STAR)
    masked = len(tail) - len(head)
    if not masked:
        return None
    for end, more in MASKED_END:
        if end.search(head[-200:]):
            return more
    window = head[-120:]
    key = KEY_END_AT_END.search(lower_ascii(window))
    if key is not None:
        name = window[key_start(window, key.start("q")) : key.start("q")].lstrip("-.")
        if name and secret_key(name, "=" if key["sep"] in ("=", ":=") else ":"):
            opening = key["open"]
            if opening:
                return re.compile(r"[^\r\n\\" + re.escape(opening[-1]) + "]++")
            return BARE["=" if key["sep"] in ("=", ":=") else ":"]
    run = len(head[-16:]) - len(head[-16:].rstrip(ENCODED_CHARS))
    if run and (masked >= 8 or run >= 16):  # an encoded secret masked from inside its run
        return ENCODED_MORE
    return None


def mask_junction(stored: str, new: str) -> tuple[str, str]:
    """``(stored, new)`` masked where they meet, for ``stored + new`` (or with a separator
    between them) when a secret may be split across them: the stored tail and the new chunk
    are masked together, a masked secret the stored text ends with masks what continues it,
    and an open private-key block masks the new chunk up to its END line. Both parts keep
    their byte size, so offsets into the stored text stay true."""
    if not stored or not new:
        return stored, new
    more = _continuation(stored)
    if more is not None and (cont := more.match(new)):
        new = stars(cont.group(0)) + new[cont.end() :]
    start = max(len(stored) - JUNCTION_CHARS, 0)
    begin = stored.rfind("-----BEGIN ", max(start - PEM_CHARS, 0))
    open_key = start - PEM_CHARS < begin < start and "-----END " not in stored[begin:]
    if open_key and PEM_BEGIN.match(stored, begin):  # a private key still open: from its BEGIN
        start = begin
    tail = stored[start:]
    joined = tail + new
    masked = mask(joined)
    if masked == joined:
        return stored, new
    raw = masked.encode("utf-8", "surrogatepass")
    cut = len(tail.encode("utf-8", "surrogatepass"))
    # Masks are byte for byte, so the cut falls between characters of the masked text too.
    return stored[:start] + raw[:cut].decode("utf-8"), raw[cut:].decode("utf-8")
