"""Code highlighted on the server with Pygments, as CSS classes (the CSP forbids inline styles).

The classes are Pygments' short ones (``k``, ``s2``, ``c1`` …) inside an element of class ``hl``;
their colours come from ``stylesheet()``, served at ``/highlight.css``: a light style, and a dark
one under ``prefers-color-scheme: dark``. Both start from a well-known Pygments style (Xcode,
GitHub dark) whose colours are then darkened or lightened, hue kept, until every one reads at
WCAG AA (4.5:1) on each background code is shown on: the code background and the added and
removed tints of a diff, as ``koruweb.css`` defines them for that scheme.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import pygments
from django.conf import settings
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from activity.show import contrast

SCOPE = ".hl"
LIGHT, DARK = "xcode", "github-dark"
# Behind highlighted code: the code background and a diff's tints (koruweb.css properties).
BACKGROUNDS = ("code-bg", "add-bg", "del-bg")
TARGET = contrast.AA_TEXT + 0.1  # a little over AA, so rounding never takes a colour under it
HIGHLIGHT_MAX_CHARS = 100_000  # longer text is shown plain: highlighting it would stall a render
# Names a fence or a file gives that mean "no language": shown as they are.
PLAIN_NAMES = frozenset({"", "text", "txt", "plain", "plaintext", "output", "none", "nohighlight"})

FORMATTER = HtmlFormatter(nowrap=True)


@cache
def lexer_named(name: str) -> Lexer | None:
    """The lexer for a fence's language (``python``, ``console``, ``json`` …), or None."""
    if name.lower() in PLAIN_NAMES or len(name) > 40:
        return None
    try:
        return get_lexer_by_name(name.lower(), stripnl=False, ensurenl=True)
    except ClassNotFound:
        return None


@cache
def lexer_for_path(path: str) -> Lexer | None:
    """The lexer for a file by its name (``greet.py`` → Python), or None."""
    name = path.rsplit("/", 1)[-1]
    if not name or len(name) > 200:
        return None
    try:
        lexer = get_lexer_for_filename(name, stripnl=False, ensurenl=True)
    except ClassNotFound:
        return None
    return None if lexer.name == "Text only" else lexer


def highlight_lines(code: str, lexer: Lexer) -> list[str]:
    """``code`` highlighted, one escaped HTML string per line of it (spans never cross lines)."""
    count = code.count("\n") + 1
    if len(code) > HIGHLIGHT_MAX_CHARS:
        from django.utils.html import escape

        return [str(escape(line)) for line in code.split("\n")]
    html: str = highlight(code, lexer, FORMATTER)
    lines = html.split("\n")[:count]
    return lines + [""] * (count - len(lines))


def highlight_block(code: str, lexer: Lexer) -> str:
    return "\n".join(highlight_lines(code, lexer))


# --- the stylesheet ---------------------------------------------------------------------------


def scheme_colours(scheme: str) -> dict[str, str]:
    """The colour properties of ``koruweb.css`` for ``"light"`` or ``"dark"``."""
    css = (Path(settings.BASE_DIR) / "static" / "koruweb" / "page" / "koruweb.css").read_text()
    return contrast.properties(css)[scheme]


def readable(colour: str, backgrounds: list[str], towards: str) -> str:
    """``colour``, mixed step by step towards ``towards`` (black or white) until it reads at
    ``TARGET`` on every one of ``backgrounds``."""
    rgb = contrast.parse_hex(colour)
    for step in range(21):
        mixed = contrast.mix(towards, step / 20, rgb)
        if all(contrast.ratio(mixed, bg) >= TARGET for bg in backgrounds):
            return "#{:02x}{:02x}{:02x}".format(*mixed)
    return towards


def rules(base: str, backgrounds: list[str], towards: str) -> list[str]:
    """One CSS rule for every Pygments token class: style ``base``'s colour made readable on
    ``backgrounds`` (or the text's own colour where it has none), weight, slant, underline.
    Every class gets every property, so the dark rules replace the light ones entirely.
    Backgrounds and borders are left out: code sits on the page's own backgrounds."""
    style = get_style_by_name(base)
    classes: dict[str, list[str]] = {}  # the declarations → the classes that have them
    for token, name in sorted(STANDARD_TYPES.items(), key=lambda item: item[1]):
        if not name:
            continue
        spec = style.style_for_token(token)
        colour = readable(f"#{spec['color']}", backgrounds, towards) if spec["color"] else "inherit"
        weight = "bold" if spec["bold"] else "normal"
        slant = "italic" if spec["italic"] else "normal"
        line = "underline" if spec["underline"] else "none"
        declarations = (
            f"color: {colour}; font-weight: {weight}; font-style: {slant}; text-decoration: {line}"
        )
        classes.setdefault(declarations, []).append(f"{SCOPE} .{name}")
    return [f"{', '.join(names)} {{ {declarations} }}" for declarations, names in classes.items()]


@cache
def stylesheet() -> str:
    """The CSS of highlighted code: light, then dark under ``prefers-color-scheme``."""
    parts = [
        f"/* Pygments {pygments.__version__} token colours (activity/show/highlight.py): {LIGHT},"
        f" and {DARK} when dark, each made to pass WCAG AA on every code background. */"
    ]
    for scheme, base, towards in (("light", LIGHT, "#000000"), ("dark", DARK, "#ffffff")):
        colours = scheme_colours(scheme)
        backgrounds = [colours[name] for name in BACKGROUNDS]
        body = "\n".join(rules(base, backgrounds, towards))
        parts.append(
            body if scheme == "light" else f"@media (prefers-color-scheme: dark) {{\n{body}\n}}"
        )
    return "\n".join(parts) + "\n"


@cache
def version() -> str:
    """A short hash of the stylesheet: its URL changes when it does, so it can be cached long."""
    return hashlib.sha256(stylesheet().encode()).hexdigest()[:12]
