"""Secrets an agent prints, masked before koruweb stores, indexes or pushes them.

``mask`` hides known key and token shapes in a string: cloud and model-provider keys (AWS
access key ids and the secret keys next to them, OpenAI/Anthropic ``sk-…``, Google ``AIza…``,
GitHub, Slack, Stripe), koruweb's own ``koru_…`` agent tokens, JWTs, bearer credentials,
PEM private-key blocks and the values of ``KEY=value`` / ``export KEY=value`` lines whose name
says secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``PASSWORD``, …).

A mask keeps a short recognisable prefix (``sk-proj-``, ``AKIA``, ``ghp_``, the ``KEY=`` of a
line, a PEM block's BEGIN and END lines) and replaces every other character of the secret by
``*`` — as many ``*`` as the character has UTF-8 bytes. So a masked string has exactly the byte
size of the original (and, for an ASCII secret, its length too): byte offsets counted on the
text as stored (a call's ``text_offset`` in its reply) stay true, and a stored text can be
masked again in place.

``mask_junction`` masks where a new chunk meets the text already stored, for a secret that
arrives split across two chunks of a stream (a reply, its thoughts, a call's output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STAR = "*"
JUNCTION_CHARS = 4096  # how much of the stored tail is masked again with a new chunk
PEM_CHARS = 16384  # … or more, back to the BEGIN line of a private key still open


def stars(text: str) -> str:
    """``*`` for every UTF-8 byte of ``text``: the same byte size."""
    return STAR * (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))


@dataclass(frozen=True, slots=True)
class Shape:
    """One kind of secret: masked only when one of ``triggers`` occurs in the text (a cheap
    substring check), then everywhere ``pattern`` matches. Group ``keep`` (if any) stays as
    it is; group ``secret`` becomes stars."""

    name: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]

    def apply(self, text: str) -> str:
        if not any(trigger in text for trigger in self.triggers):
            return text
        return self.pattern.sub(_masked, text)


def _masked(match: re.Match[str]) -> str:
    """The match with its ``secret`` group(s) replaced by stars, the rest as it was."""
    whole = match.group(0)
    start = match.start(0)
    out = []
    at = 0
    for name in ("secret", "secret2"):
        if name not in match.re.groupindex or match.start(name) < 0:
            continue
        begin, end = match.start(name) - start, match.end(name) - start
        out.append(whole[at:begin])
        secret = whole[begin:end]
        if match.re is PEM.pattern:  # keep a key's line breaks
            out.append(re.sub(r"\S+", lambda m: stars(m.group(0)), secret))
        else:
            out.append(stars(secret))
        at = end
    out.append(whole[at:])
    return "".join(out)


B = r"(?<![A-Za-z0-9_\-])"  # a token starts where no token character precedes it
E = r"(?![A-Za-z0-9_\-])"  # … and ends where none follows

SHAPES: tuple[Shape, ...] = (
    Shape(
        "pem private key",
        ("PRIVATE KEY",),
        re.compile(
            r"-----BEGIN (?P<kind>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:(?P<secret>.*?)-----END (?P=kind)-----"
            # a block with no END (cut, or still streaming): its lines of base64 and headers
            r"|(?P<secret2>(?:[ \t]*\r?\n(?:[A-Za-z0-9+/=*]+|[A-Za-z\-]+: [^\r\n]*)[ \t]*"
            r"(?=\r?\n|\Z))*))",
            re.DOTALL,
        ),
    ),
    Shape(
        "aws access key id",
        ("AKIA", "ASIA"),
        re.compile(B + r"(?:AKIA|ASIA)(?P<secret>[A-Z0-9]{16})" + E),
    ),
    Shape(
        "model-provider key",  # OpenAI sk-…, sk-proj-…, Anthropic sk-ant-api03-…
        ("sk-",),
        re.compile(
            B + r"sk-(?:proj-|ant-(?:[a-z]+\d\d-)?|svcacct-|admin-)?(?P<secret>[A-Za-z0-9_\-]{20,})"
        ),
    ),
    Shape(
        "stripe key",
        ("_live_", "_test_"),
        re.compile(B + r"(?:sk|rk)_(?:live|test)_(?P<secret>[A-Za-z0-9]{16,})"),
    ),
    Shape("google api key", ("AIza",), re.compile(B + r"AIza(?P<secret>[A-Za-z0-9_\-]{30,})")),
    Shape(
        "github token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(B + r"(?:gh[pousr]_|github_pat_)(?P<secret>[A-Za-z0-9_]{30,})"),
    ),
    Shape("slack token", ("xox",), re.compile(B + r"xox[abposr]-(?P<secret>[A-Za-z0-9\-]{10,})")),
    Shape(
        "koruweb agent token", ("koru_",), re.compile(B + r"koru_(?P<secret>[A-Za-z0-9_\-]{20,})")
    ),
    Shape(
        "json web token",
        ("eyJ",),
        re.compile(
            B + r"eyJ(?P<secret>[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)"
        ),
    ),
    Shape(
        "bearer credential",  # a digit in it: "Bearer authentication" is prose
        ("earer", "EARER", "uthorization", "UTHORIZATION"),
        re.compile(
            r"(?i:\bauthorization:[ \t]*(?:bearer|basic|token)[ \t]+(?P<secret>[^\s\"']+)"
            r"|\bbearer[ \t]+(?P<secret2>(?=[A-Za-z._~+/\-]*\d)[A-Za-z0-9._~+/\-]{8,}=*))"
        ),
    ),
    Shape(
        "secret in a URL",  # postgres://user:password@host
        ("://",),
        re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<secret>[^\s/@]+)@", re.IGNORECASE),
    ),
    Shape(
        "KEY=value",
        ("=",),
        re.compile(
            r"(?<![\w$./])(?:export[ \t]+)?"
            r"(?i:(?:[A-Za-z0-9_]*_)?(?:KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|"
            r"CREDENTIALS?|PRIVATE_KEY)|SECRET[A-Za-z0-9_]*)"
            r"[ \t]*=(?!=)[ \t]*"
            r"(?:\"(?P<secret>[^\"\r\n]+)\"|'(?P<secret2>[^'\r\n]+)'|(?P<bare>[^\s\"'`;&|]+))"
        ),
    ),
)
_KEY_VALUE = SHAPES[-1]


def _key_value(match: re.Match[str]) -> str:
    if match.start("bare") < 0:
        return _masked(match)
    start = match.start("bare") - match.start(0)
    return match.group(0)[:start] + stars(match.group("bare"))


AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])[A-Za-z0-9/+]{40}"
    r"(?![A-Za-z0-9/+=])"
)
AWS_KEY_ID_MASKED = re.compile(B + r"(?:AKIA|ASIA)\*{16}")
PEM = SHAPES[0]


def mask(text: str) -> str:
    """``text`` with every secret of a known shape masked (see the module): the same byte size,
    and for ASCII secrets the same length, so byte offsets into it stay true."""
    if len(text) < 8:
        return text
    for shape in SHAPES:
        if shape is _KEY_VALUE:
            if "=" in text:
                text = shape.pattern.sub(_key_value, text)
            continue
        text = shape.apply(text)
    # An AWS secret access key is 40 characters of base64 with no prefix of its own: masked
    # when an access key id is in the same text (a git SHA has no capital letter).
    if "A**" in text and len(text) >= 40 and AWS_KEY_ID_MASKED.search(text):
        text = AWS_SECRET.sub(lambda m: stars(m.group(0)), text)
    return text


# A masked token at the very end of a stored text, and what continues it in a new chunk.
MASKED_END: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        re.compile(
            B + r"(?:(?:AKIA|ASIA)|sk-(?:proj-|ant-(?:[a-z]+\d\d-)?|svcacct-|admin-)?"
            r"|(?:sk|rk)_(?:live|test)_|AIza|gh[pousr]_|github_pat_|xox[abposr]-|koru_)\*+\Z"
        ),
        re.compile(r"\A[A-Za-z0-9_\-]+"),
    ),
    (re.compile(B + r"eyJ\*+\Z"), re.compile(r"\A[A-Za-z0-9_\-.]+")),
    (re.compile(r"(?i:\bbearer)[ \t]+\*+\Z"), re.compile(r"\A[A-Za-z0-9._~+/\-]+=*")),
    (re.compile(r"=[ \t]*\*+\Z"), re.compile(r"\A[^\s\"'`;&|]+")),
)
OPEN_PEM = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")


def mask_junction(stored: str, new: str) -> tuple[str, str]:
    """``(stored, new)`` masked where they meet, for ``stored + new`` (or with a separator
    between them) when a secret may be split across them: the stored tail and the new chunk
    are masked together, a masked token the stored text ends with masks what continues it, and
    an open private-key block masks the new chunk up to its END line. Both parts keep their
    byte size, so offsets into the stored text stay true."""
    if not stored or not new:
        return stored, new
    for end, more in MASKED_END:
        if end.search(stored[-200:]):
            cont = more.match(new)
            if cont:
                new = stars(cont.group(0)) + new[cont.end() :]
            break
    start = max(len(stored) - JUNCTION_CHARS, 0)
    begin = stored.rfind("-----BEGIN ")
    open_key = start - PEM_CHARS < begin < start and "-----END " not in stored[begin:]
    if open_key and OPEN_PEM.match(stored, begin):  # a private key still open: from its BEGIN
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
