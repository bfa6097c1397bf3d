"""The value after a key whose name says secret, in every common form: ``KEY=value``,
``key: value``, JSON, TOML, flags and HTTP headers
(docs/secrets.md#values-of-keys-whose-name-says-secret)."""

from __future__ import annotations

import functools
import re

from activity.core.masks.spans import Span, words

# --- key: value ------------------------------------------------------------------------

# Where a key whose name may say secret ends: its last word, a closing quote or bracket, and a
# separator (or ``SECRET_…``: a name that starts with it). The key's start is found backwards
# from there, at most KEY_CHARS characters.
# It is searched for in the text lower-cased: a plain, case-sensitive pattern is much faster.
KEY_END = re.compile(
    r"(?:key|token|s(?:ecret[a-z0-9_]{0,48}+|ig)|p(?:ass(?:word|wd|phrase)?|wd)|credentials?|"
    r"authorization)"
    r"(?P<q>(?:\\?[\"'`])?)\]?[ \t]*+(?P<sep>:=|=>|=(?![=~])|:(?![:/]))[ \t]*+"
)
# ``--token value``: a command-line flag whose name says secret, then a space.
FLAG = re.compile(
    r"-(?<!\S-)-?(?P<key>[A-Za-z][A-Za-z0-9_\-]{0,63}+)"
    r"(?i:(?<=key)|(?<=token)|(?<=secret)|(?<=password)|(?<=passwd)|(?<=pass)|(?<=credentials))"
    r"[ \t]++(?=[^\s\-])"
)
KEY_CHARS = 64
KEY_RUN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # snake, kebab, dotted and camelCase
SECRET_WORDS = words(
    "password passwd passphrase pass secret token apikey credential credentials authorization"
)
# ``<word> key`` that is a secret in any form (``api_key``, ``apiKey``, ``X-Api-Key``).
KEY_KINDS = words(
    "api access private secret signing encryption master account client auth app service "
    "license subscription webhook admin deploy session shared sas storage consumer"
)
# ``<word> key`` that is not a secret even as ``sort_key=…``.
NOT_SECRET_KEYS = words(
    "public pub sort primary foreign partition cache idempotency row group index lookup hash hot "
    "shortcut keyboard composite unique map object dedup"
)


@functools.lru_cache(maxsize=4096)  # the same few key names, again and again
def secret_key(name: str, sep: str) -> bool:
    """Whether the value after key ``name`` and separator ``sep`` is a secret: the key's last
    word is password, passwd, passphrase, pass, secret, token, apikey, credential(s) or
    authorization (``pwd`` only after another word: ``PWD`` is the working directory); or it
    is ``key`` after a kind of secret key (``api``, ``access``, ``private``, ``client``, …);
    or it is ``key`` in ``KEY=value`` or an upper-case ``ENV_KEY`` (``sort_key``,
    ``public_key`` and a JSON ``"key"`` are not); ``sig`` in ``sig=`` (an Azure SAS token's);
    or an upper-case ``SECRET_…``."""
    parts = [word.lower() for word in WORDS.findall(name)]
    if not parts:
        return False
    last, before = parts[-1], parts[-2] if len(parts) > 1 else ""
    upper = not any(char.islower() for char in name)
    if last in SECRET_WORDS:
        return True
    if last == "pwd":
        return before not in ("", "old")
    if last == "sig":
        return sep == "="
    if last.endswith("key") and last[:-3] in KEY_KINDS:  # apikey, privatekey, …
        return True
    if last == "key":
        if before in NOT_SECRET_KEYS:
            return False
        return before in KEY_KINDS or sep == "=" or upper
    return upper and parts[0] == "secret"


AUTHORIZATION_SCHEMES = sorted(
    words(
        "bearer basic token digest bot negotiate ntlm apikey api-key key oauth jwt dpop sso-key "
        "ssws hmac aws4-hmac-sha256"
    ),
    key=len,
    reverse=True,  # the longest first: "apikey" before "api-key" before "key"
)
AUTHORIZATION = re.compile(  # the scheme kept before a credential
    "(?i:" + "|".join(AUTHORIZATION_SCHEMES) + r")[ \t]++"
)
QUOTED = {  # a quoted value: up to its closing quote, or to the text's end (cut there)
    '"': re.compile(r"(?P<v>(?:[^\"\\\r\n]|\\.)*+)(?:\"|\Z)"),
    "'": re.compile(r"(?P<v>(?:[^'\\\r\n]|\\.)*+)(?:'|\Z)"),
    "`": re.compile(r"(?P<v>(?:[^`\\\r\n]|\\.)*+)(?:`|\Z)"),
    '\\"': re.compile(r"(?P<v>(?:[^\\\r\n]|\\[^\"\r\n])*+)(?:\\\"|\Z)"),
}
OPENING_QUOTE = re.compile(r"(?:[rbfuRBFU]{1,2}(?=[\"']))?(\\\"|[\"'`])")
BARE = {  # an unquoted value: up to a space, a quote, or what ends it in its kind of text
    "=": re.compile(r"[^\s\"'`;&|)\]}\\<>]++"),  # shell, .env, URL query, code
    ":": re.compile(r"[^\s\"'`,;&|)\]}\\<>]++"),  # YAML, JSON, headers, prose
}

# Values that are not secrets: empty, null and booleans, references (``$VAR``, ``${VAR}``,
# ``%VAR%``, ``{{ var }}``, ``{var}``, ``process.env.X``, ``os.environ[…]``), placeholders
# (``<token>``, ``[REDACTED]``, ``***``, ``xxx``, ``...``), YAML tags (``!vault``), code (a
# call or a subscript, a nested ``{``/``[``/``(``) and — after a colon — a type (``str``).
PLAIN_WORDS = words(
    "null none nil true false undefined yes no on off ~ redacted hidden masked filtered removed"
)
# After a colon in prose (``the password: it is long``), a short word is not a value.
PROSE_WORDS = words("a an the it is are was be to of in on at by for see below above here there")
PLAIN = re.compile(
    r"[$!({\[]|%[A-Za-z_]\w*+%|<%|<[^<>]*+>\Z|\*++\Z|x++\Z|X++\Z|\.\.\.|…"
    r"|[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)*+[(\[]"
    r"|(?:process|import\.meta|os|env|ENV|secrets|self|this|settings|config|options|opts|args|"
    r"kwargs|params|props|ctx|context|request|req)\.[A-Za-z_]"
)
TYPE = re.compile(
    r"[&*?]?(?i:str|string|int|integer|bytes|bool|boolean|number|float|double|any|object|"
    r"unknown|char|text|secretstr|secretbytes|secretstring|optional|option|union|list|dict)"
    r"(?![A-Za-z0-9_])"
)


def plain_value(value: str, sep: str = "=") -> bool:
    """Whether ``value`` is clearly not a secret (see PLAIN above)."""
    value = value.strip()
    if not value or (len(value) <= 12 and value.lower() in PLAIN_WORDS):
        return True
    if sep == ":" and value.lower() in PROSE_WORDS:
        return True
    return PLAIN.match(value) is not None or (sep == ":" and TYPE.match(value) is not None)


def _value(text: str, at: int, sep: str, auth: bool) -> tuple[int, int, int] | None:
    """The value that starts at ``at``: ``(start, end, resume)`` of what to mask and where the
    next key may start, or None when there is none (a quote left open before the line ends is
    prose). After an authorization key, a scheme word (``Bearer``) is kept."""
    quote = OPENING_QUOTE.match(text, at)
    if quote is not None:
        quoted = QUOTED[quote[1]].match(text, quote.end())
        if quoted is None:
            return None
        start, end = quoted.span("v")
        if auth and (scheme := AUTHORIZATION.match(text, start, end)):
            start = scheme.end()
        return start, end, quoted.end()
    if auth and (scheme := AUTHORIZATION.match(text, at)):
        at = scheme.end()
    bare = BARE["=" if sep in ("=", ":=") else ":"].match(text, at)
    if bare is None:
        return None
    value = bare.group().lower()
    if auth and bare.end() == len(text) and any(s.startswith(value) for s in AUTHORIZATION_SCHEMES):
        return None  # a scheme, or part of one, its credential still to come
    return at, bare.end(), bare.end()


def lower_ascii(text: str) -> str:
    """``text`` lower-cased, each character to one, so offsets stay true: U+0130 (a capital I
    with a dot, the one character that lower-cases to two) becomes an I first."""
    return text.replace("\u0130", "I").lower()


def key_start(text: str, end: int) -> int:
    """Where the key that ends at ``end`` starts: back over key characters, at most
    ``KEY_CHARS`` of them (a slice of bounded size, stripped in C)."""
    window = text[max(end - KEY_CHARS, 0) : end]
    return end - (len(window) - len(window.rstrip(KEY_RUN)))


def key_value_spans(text: str) -> list[Span]:
    """The values after secret keys (``secret_key``), in every form of ``KEY_END`` and
    ``FLAG``; see ``plain_value`` for the values left as they are."""
    lowered = lower_ascii(text)
    if not any(
        word in lowered
        for word in ("key", "token", "secret", "pass", "pwd", "cred", "authoriz", "sig")
    ):
        return []
    spans: list[Span] = []
    pos = 0
    while (match := KEY_END.search(lowered, pos)) is not None:
        pos = match.end()
        word_end = match.start("q")
        start = key_start(text, word_end)
        key = text[start:word_end].lstrip("-.")
        if not key or not (key[0].isalpha() or key[0] == "_"):
            continue
        before = text[max(start - 2, 0) : start]
        if before.endswith("$") or before == "${":
            continue  # a reference: $TOKEN, ${TOKEN:-default}
        quote = match["q"]
        if quote and not before.endswith(quote):
            continue  # a closing quote without its opening one
        sep = match["sep"]
        if not secret_key(key, "=" if sep in ("=", ":=") else ":"):
            continue
        found = _value(text, match.end(), sep, auth=key.lower().endswith("authorization"))
        if found is None:
            continue
        value_start, value_end, pos = found
        value = text[value_start:value_end]
        if not plain_value(value, ":" if sep in (":", "=>") else "="):
            spans.append((value_start, value_end))
    if "-" in text:
        for match in FLAG.finditer(text):
            if secret_key(match["key"], "="):
                found = _value(text, match.end(), "=", auth=False)
                if found and not plain_value(text[found[0] : found[1]]):
                    spans.append(found[:2])
    return sorted(spans)
