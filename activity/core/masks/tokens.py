"""Secrets that show themselves: tokens with a vendor prefix, PEM private keys, bearer
credentials, passwords in URLs and command lines (docs/secrets.md#what-is-masked)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from activity.core.masks.keys import plain_value
from activity.core.masks.spans import PEM_CHARS, E, Span, words

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


def token_spans(text: str) -> list[Span]:
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


def pem_spans(text: str) -> list[Span]:
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


def bearer_spans(text: str) -> list[Span]:
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


def url_spans(text: str) -> list[Span]:
    if "://" not in text:
        return []
    return [
        match.span("secret")
        for match in URL.finditer(text)
        if text[match.start() - 1 : match.start()] in SCHEME_CHARS  # a scheme before it
        and not plain_value(match["secret"])
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


def user_flag_spans(text: str) -> list[Span]:
    """The password after ``-u user:``; not a ``uid:gid`` nor a ``user:group`` of one name."""
    if "-u" not in text and "-U" not in text:
        return []
    spans = []
    for match in USER_FLAG.finditer(text):
        password = USER_FLAG_PASSWORD[match["q"]].match(text, match.end())
        if password is None:
            continue
        value, user = password.group(), match["user"]
        if value == user or (value.isdigit() and user.isdigit()) or plain_value(value):
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


def userinfo_spans(text: str) -> list[Span]:
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
        if user.lower() in LABELS or plain_value(secret):
            continue
        local = host.lower() == "localhost" or IPV4.fullmatch(host) is not None
        if not (match["after"] or "." in host or local):
            continue  # not a host name
        if match["after"] or local or not secret.isalpha():
            spans.append(match.span("secret"))
    return spans
