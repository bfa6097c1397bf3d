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

import binascii
import bisect
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

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


def _apply(text: str, spans: Iterable[Span]) -> tuple[str, bool]:
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


# --- tokens with a vendor prefix ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    """A token with a prefix of its own: it starts with one of ``leads`` (plain strings, also
    the cheap substring check that skips the token's pattern), then ``rest`` (a pattern; both
    kept), then ``body`` (masked: its ``secret…`` groups, or all of it if it has none). ``body``
    includes ``*`` so that a masked token and what continues it in a later chunk are one token
    again (``mask_junction``); ``more`` is what continues a body that ``mask_junction`` finds
    masked to the stored text's end."""

    name: str
    leads: tuple[str, ...]
    rest: str
    body: str
    more: str
    pattern: re.Pattern[str]


def _token(name: str, leads: tuple[str, ...], rest: str, body: str, more: str) -> Token:
    # The lead first, then a look back past it for a token character before it: a pattern
    # that starts with a plain string is searched for that string (fast), not tried at each
    # position.
    starts = "|".join(
        re.escape(lead) + r"(?<![A-Za-z0-9_\-]" + re.escape(lead) + ")" for lead in leads
    )
    if "(?P<secret>" not in body:
        body = "(?P<secret>" + body + ")"
    pattern = re.compile("(?:" + starts + ")" + rest + body)
    return Token(name, leads, rest, body, more, pattern)


TOKEN_CHARS = r"[A-Za-z0-9_\-]"
TOKENS: tuple[Token, ...] = (
    _token("aws access key id", ("AKIA", "ASIA"), "", r"[A-Z0-9*]{16}" + E, "[A-Z0-9]"),
    _token(  # OpenAI sk-…, sk-proj-…, Anthropic sk-ant-api03-…
        "model-provider key",
        ("sk-",),
        r"(?:proj-|ant-(?:[a-z]{1,12}\d\d-)?|svcacct-|admin-)?",
        r"[A-Za-z0-9_\-*]{20,}+",
        TOKEN_CHARS,
    ),
    _token(
        "stripe key",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        "",
        r"[A-Za-z0-9*]{16,}+",
        "[A-Za-z0-9]",
    ),
    _token("stripe webhook secret", ("whsec_",), "", r"[A-Za-z0-9*]{20,}+", "[A-Za-z0-9]"),
    _token("google api key", ("AIza",), "", r"[A-Za-z0-9_\-*]{30,}+", TOKEN_CHARS),
    _token(
        "github token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        "",
        r"[A-Za-z0-9_*]{30,}+",
        "[A-Za-z0-9_]",
    ),
    _token(
        "gitlab token",
        ("gl",),
        r"(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-",
        r"[A-Za-z0-9_\-*]{20,}+",
        TOKEN_CHARS,
    ),
    _token("slack token", ("xox",), "[abposre]-", r"[A-Za-z0-9\-*]{10,}+", TOKEN_CHARS),
    _token("slack app token", ("xapp-",), "", r"[A-Za-z0-9\-*]{10,}+", TOKEN_CHARS),
    _token("hugging face token", ("hf_",), "", r"[A-Za-z0-9*]{30,}+", "[A-Za-z0-9]"),
    _token("npm token", ("npm_",), "", r"[A-Za-z0-9*]{30,}+", "[A-Za-z0-9]"),
    _token(
        "sendgrid key",  # SG.<key id>.<secret>: the id is kept
        ("SG.",),
        r"[A-Za-z0-9_\-]{16,32}+\.",
        r"[A-Za-z0-9_\-*]{20,}+",
        TOKEN_CHARS,
    ),
    _token("koruweb agent token", ("koru_",), "", r"[A-Za-z0-9_\-*]{20,}+", TOKEN_CHARS),
    _token(
        "json web token",
        ("eyJ",),
        "",
        # its three parts masked, its dots kept: masked parts never run together
        r"(?P<secret>[A-Za-z0-9_\-*]{8,}+)\.eyJ(?P<secret2>[A-Za-z0-9_\-*]{8,}+)\."
        r"(?P<secret3>[A-Za-z0-9_\-*]*+)",
        r"[A-Za-z0-9_\-.]",
    ),
    _token(
        "slack webhook",
        ("hooks.slack.com/",),
        "(?:services|workflows|triggers)/",
        r"[A-Za-z0-9_/\-*]{8,}+",
        r"[A-Za-z0-9_/\-]",
    ),
    _token(
        "discord webhook",
        ("discord",),
        r"(?:app)?\.com/api/(?:v\d{1,2}/)?webhooks/\d{1,25}+/",
        r"[A-Za-z0-9_\-*]{8,}+",
        TOKEN_CHARS,
    ),
    _token(
        "teams webhook",
        ("webhook.office.com/webhookb2/", "outlook.office.com/webhook/"),
        "",
        r"[A-Za-z0-9@/_\-*]{8,}+",
        r"[A-Za-z0-9@/_\-]",
    ),
    _token(
        "zapier webhook",
        ("hooks.zapier.com/hooks/catch/",),
        "",
        r"[A-Za-z0-9/*]{4,}+",
        "[A-Za-z0-9/]",
    ),
    _token(
        "ifttt webhook",
        ("maker.ifttt.com/trigger/",),
        r"[A-Za-z0-9_\-]{1,64}+/(?:json/)?with/key/",
        r"[A-Za-z0-9_\-*]{8,}+",
        TOKEN_CHARS,
    ),
)


def _tokens(text: str) -> list[Span]:
    spans: list[Span] = []
    for token in TOKENS:
        if any(lead in text for lead in token.leads):
            groups = [name for name in token.pattern.groupindex if name.startswith("secret")]
            for match in token.pattern.finditer(text):
                spans.extend(match.span(group) for group in groups)
    return sorted(spans)


# --- PEM private keys ------------------------------------------------------------------

PEM_BEGIN = re.compile(r"-----BEGIN (?P<kind>(?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?)-----")
# A block cut before its END line (or still streaming): its lines of base64 (or ``*``, masked
# already) and ``Name: value`` headers, each line taken whole or not at all. Lines may be broken
# by real line breaks or by ``\n`` escapes (a key inside a JSON string, printed).
PEM_LINES = re.compile(
    r"(?:[ \t]*+(?:\r?\n|\\r\\n|\\n)[ \t]*+"
    r"(?:[A-Za-z][A-Za-z0-9\-]{0,40}: [^\r\n\\]*+|[A-Za-z0-9+/=*]++)"
    r"(?=[ \t]*+(?:\r?\n|\\[rn]|[\"']|\Z)))*+"
)
PEM_SECRET = re.compile(r"\\[nrt]|(?P<secret>(?:[^\s\\]|\\(?![nrt]))++)")  # keeps line breaks


def _pem(text: str) -> list[Span]:
    """Each private key's body: up to its END line when that is within ``PEM_CHARS``, else
    the lines that look like a key's. One forward pass: the END line found is remembered, so
    no character is searched twice however many BEGIN lines there are."""
    spans: list[Span] = []
    if "PRIVATE KEY" not in text:
        return spans
    pos = 0
    end_at = -2  # where the next "-----END " is (-1: nowhere after pos), not looked for yet
    while (begin := text.find("-----BEGIN ", pos)) >= 0:
        header = PEM_BEGIN.match(text, begin)
        if header is None:
            pos = begin + 11
            continue
        body = header.end()
        if end_at != -1 and end_at < body:
            end_at = text.find("-----END ", body)
        closing = f"-----END {header['kind']}-----"
        if 0 <= end_at <= body + PEM_CHARS and text.startswith(closing, end_at):
            stop, pos = end_at, end_at + len(closing)
        else:
            lines = PEM_LINES.match(text, body)  # it matches, if only nothing
            stop = pos = lines.end() if lines else body
        for part in PEM_SECRET.finditer(text, body, stop):
            if part.start("secret") >= 0:
                spans.append(part.span("secret"))
    return spans


# --- bearer credentials and passwords in URLs and command lines ---------------------------

BEARER = re.compile(
    r"[bB](?<![A-Za-z0-9_][bB])(?i:earer)[ \t]++(?P<secret>[A-Za-z0-9._~+/\-*]{8,}+)"
)
DIGIT_OR_STAR = re.compile(r"[0-9*]")


def _bearer(text: str) -> list[Span]:
    """``Bearer <credential>`` anywhere: a digit in it (``Bearer authentication`` is prose).
    Its ``=`` padding is kept: as a ``*`` it would make the credential longer when masked
    again."""
    if "earer" not in text and "EARER" not in text:
        return []
    return [
        match.span("secret")
        for match in BEARER.finditer(text)
        if DIGIT_OR_STAR.search(match["secret"])
    ]


# The password between ``://user:`` and the last ``@`` before the host. Neither run crosses a
# ``/``, so a scan never passes the next ``://``.
URL = re.compile(r"://[^\s:/@\"'<>]{0,128}+:(?P<secret>[^\s/\"'<>]{1,256})@")
SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")


def _url(text: str) -> list[Span]:
    if "://" not in text:
        return []
    return [
        match.span("secret")
        for match in URL.finditer(text)
        if text[match.start() - 1 : match.start()] in SCHEME_CHARS  # a scheme before it
        and not _plain(match["secret"])
    ]


# ``curl -u user:password``, ``--user user:password``, ``--proxy-user``, ``-U``.
USER_FLAG = re.compile(
    r"-(?<![^\s\"']-)(?:-(?:proxy-)?user(?:[ \t]++|=)|[uU][ \t]*+)"
    r"(?P<q>[\"']?)(?P<user>[^\s:\"'@/]{1,128}+):"
)
USER_FLAG_PASSWORD = {
    "": re.compile(r"[^\s\"']++"),
    '"': re.compile(r"[^\"\r\n]++"),
    "'": re.compile(r"[^'\r\n]++"),
}


def _user_flag(text: str) -> list[Span]:
    """The password after ``-u user:``; not a ``uid:gid`` nor a ``user:group`` of one name."""
    if "-u" not in text and "-U" not in text:
        return []
    spans = []
    for match in USER_FLAG.finditer(text):
        password = USER_FLAG_PASSWORD[match["q"]].match(text, match.end())
        if password is None:
            continue
        value, user = password.group(), match["user"]
        if value == user or (value.isdigit() and user.isdigit()) or _plain(value):
            continue
        spans.append(password.span())
    return spans


# ``user:password@host`` without a scheme, found from its ``:``; the password's run does not
# cross the ``:`` the next one starts with. The user is found backwards from the ``:``.
USERINFO = re.compile(
    r":(?P<secret>[^\s:/@\"'<>]{1,128}+)@"
    r"(?P<host>[A-Za-z0-9\-]{1,63}+(?:\.[A-Za-z0-9\-]{1,63}+)*+)(?P<after>:\d|/)?"
)
USER_RUN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+-"
USER_CHARS = 64
BEFORE_USER = frozenset(" \t\r\n\"'=([{<>,;|")
# Words before a colon that make ``word:name@host`` an e-mail address, not a password.
LABELS = words(
    "mailto email e-mail mail from to cc bcc contact author sender reply-to committer by at sip "
    "sips xmpp tel acct im maintainer owner user login username"
)
IPV4 = re.compile(r"\d{1,3}+(?:\.\d{1,3}+){3}")


def _userinfo(text: str) -> list[Span]:
    """A bare ``user:password@host`` when it cannot be ``label:address@domain``: the host has
    a port or a path after it, or is ``localhost`` or an IP address, or the password has
    something other than letters in it (``Contact:bob@example.com`` stays)."""
    if "@" not in text or ":" not in text:
        return []
    spans = []
    for match in USERINFO.finditer(text):
        window = text[max(match.start() - USER_CHARS - 1, 0) : match.start()]
        user = window[len(window.rstrip(USER_RUN)) :]
        start = match.start() - len(user)
        if not user or len(user) > USER_CHARS or (start and text[start - 1] not in BEFORE_USER):
            continue
        secret, host = match["secret"], match["host"]
        if user.lower() in LABELS or _plain(secret):
            continue
        local = host.lower() == "localhost" or IPV4.fullmatch(host) is not None
        if not (match["after"] or "." in host or local):
            continue  # not a host name
        if match["after"] or local or not secret.isalpha():
            spans.append(match.span("secret"))
    return spans


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


def _plain(value: str, sep: str = "=") -> bool:
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


def _lower(text: str) -> str:
    """``text`` lower-cased, each character to one, so offsets stay true: U+0130 (a capital I
    with a dot, the one character that lower-cases to two) becomes an I first."""
    return text.replace("\u0130", "I").lower()


def _key_start(text: str, end: int) -> int:
    """Where the key that ends at ``end`` starts: back over key characters, at most
    ``KEY_CHARS`` of them (a slice of bounded size, stripped in C)."""
    window = text[max(end - KEY_CHARS, 0) : end]
    return end - (len(window) - len(window.rstrip(KEY_RUN)))


def _key_value(text: str) -> list[Span]:
    """The values after secret keys (``secret_key``), in every form of ``KEY_END`` and
    ``FLAG``; see ``_plain`` for the values left as they are."""
    lowered = _lower(text)
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
        start = _key_start(text, word_end)
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
        if not _plain(value, ":" if sep in (":", "=>") else "="):
            spans.append((value_start, value_end))
    if "-" in text:
        for match in FLAG.finditer(text):
            if secret_key(match["key"], "="):
                found = _value(text, match.end(), "=", auth=False)
                if found and not _plain(text[found[0] : found[1]]):
                    spans.append(found[:2])
    return sorted(spans)


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
    for start, end in _tokens(text):
        i = bisect.bisect_right(starts, start) - 1
        found.append((i, start - starts[i], min(end - starts[i], len(pieces[i]))))
    if b"PRIVATE KEY" in joined:  # a private key's body may be long: each piece on its own
        for i, piece in enumerate(pieces):
            if b"PRIVATE KEY" in piece:
                found.extend((i, start, end) for start, end in _pem(piece.decode("latin-1")))
    return found


def _encoded(text: str) -> list[Span]:
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


def _percent(text: str) -> list[Span]:
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


def _aws_secret(text: str) -> list[Span]:
    """An AWS secret access key is 40 characters of base64 with no prefix of its own: masked
    when an access key id is in the same text, and when it has both upper- and lower-case
    letters (a git SHA has no capital letter)."""
    if "A**" not in text or len(text) < 40 or AWS_KEY_ID_MASKED.search(text) is None:
        return []
    return [m.span() for m in AWS_SECRET.finditer(text) if UPPER_AND_LOWER.search(m.group())]


# The encoded forms before the plain tokens: a token right after an encoded one masked is then
# seen after its stars in the first pass already (``mask`` of masked text changes nothing).
SHAPES: tuple[Callable[[str], list[Span]], ...] = (
    _pem,
    _encoded,
    _percent,
    _tokens,
    _bearer,
    _url,
    _user_flag,
    _userinfo,
    _key_value,
    _aws_secret,  # after the access key id is masked
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
                text, edge = _apply(text, sorted(spans))
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
    key = KEY_END_AT_END.search(_lower(window))
    if key is not None:
        name = window[_key_start(window, key.start("q")) : key.start("q")].lstrip("-.")
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
