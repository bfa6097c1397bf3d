"""Terminal output for a person: ANSI colours as CSS classes, Markdown fences unwrapped.

What a tool printed reaches koruweb as text that may hold a terminal's escape sequences (colours,
cursor moves, window titles, hyperlinks) and, around it, the Markdown code fences an agent wraps
output in (```` ```console ````). Here both become safe HTML: every character is escaped, SGR
colours and styles become ``ansi-*`` classes (the stylesheet gives them colours for both schemes;
the CSP forbids inline styles), every other escape sequence and control character is dropped, a
carriage return overwrites its line as a terminal would, and fences are split off with the
language they name. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from django.utils.html import escape

# CSI (ESC [ or the 8-bit 0x9b) … final byte; OSC (ESC ]) … BEL or ST; DCS/SOS/PM/APC … ST;
# any other ESC + one character. A lone ESC at the very end is dropped too.
ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)([0-?]*)[ -/]*([@-~])"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
)
# C0 and C1 controls a page cannot show; tab, newline, carriage return and backspace are handled.
CONTROL = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")
HAS_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Pen:
    """The SGR state: what the next characters look like."""

    fg: int | None = None  # 0–7: black, red, green, yellow, blue, magenta, cyan, white
    bg: int | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    strike: bool = False

    def classes(self) -> str:
        names = [f"ansi-fg-{self.fg}"] if self.fg is not None else []
        if self.bg is not None:
            names.append(f"ansi-bg-{self.bg}")
        flags = ("bold", "dim", "italic", "underline", "inverse", "strike")
        names += [f"ansi-{flag}" for flag in flags if getattr(self, flag)]
        return " ".join(names)


PLAIN = Pen()
FLAGS_ON = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "inverse", 9: "strike"}
FLAGS_OFF = {22: ("bold", "dim"), 23: ("italic",), 24: ("underline",), 27: ("inverse",)}
FLAGS_OFF[29] = ("strike",)


def nearest(r: int, g: int, b: int) -> int:
    """The basic colour (0–7) nearest an RGB one: each channel near the brightest is on."""
    top = max(r, g, b)
    if top < 64:
        return 0
    if min(r, g, b) > 0.8 * top:
        return 7 if top > 160 else 0
    return sum(bit for bit, c in ((1, r), (2, g), (4, b)) if c >= 0.6 * top)


def indexed(n: int) -> int | None:
    """A 256-colour palette index as a basic colour."""
    if not 0 <= n <= 255:
        return None
    if n < 16:
        return n % 8
    if n < 232:
        n -= 16
        return nearest(*(round(c * 51) for c in (n // 36, n // 6 % 6, n % 6)))
    return 7 if n >= 244 else 0


def sgr(pen: Pen, params: str) -> Pen:
    """``pen`` after ``ESC [ params m``."""
    codes = [int(p) if p.isdigit() else 0 for p in re.split(r"[;:]", params)] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            pen = PLAIN
        elif code in FLAGS_ON:
            pen = replace(pen, **{FLAGS_ON[code]: True})
        elif code in FLAGS_OFF:
            pen = replace(pen, **dict.fromkeys(FLAGS_OFF[code], False))
        elif 30 <= code <= 37 or 90 <= code <= 97:
            pen = replace(pen, fg=code % 10)
        elif 40 <= code <= 47 or 100 <= code <= 107:
            pen = replace(pen, bg=code % 10)
        elif code == 39:
            pen = replace(pen, fg=None)
        elif code == 49:
            pen = replace(pen, bg=None)
        elif code in (38, 48) and i + 1 < len(codes):
            colour, i = extended(codes, i + 1)
            pen = replace(pen, fg=colour) if code == 38 else replace(pen, bg=colour)
        i += 1
    return pen


def extended(codes: list[int], i: int) -> tuple[int | None, int]:
    """A ``5;n`` or ``2;r;g;b`` colour starting at ``codes[i]``, and the last index it used."""
    if codes[i] == 5 and i + 1 < len(codes):
        return indexed(codes[i + 1]), i + 1
    if codes[i] == 2 and i + 3 < len(codes):
        r, g, b = (min(max(c, 0), 255) for c in codes[i + 1 : i + 4])
        return nearest(r, g, b), i + 3
    return None, i


Run = tuple[Pen, str]


def runs(text: str) -> list[list[Run]]:
    """``text`` as a terminal shows it: lines of (pen, characters) runs, controls applied."""
    screen = Screen()
    pen = PLAIN
    position = 0
    for match in [*ESCAPE.finditer(text), None]:
        end = match.start() if match else len(text)
        screen.write(pen, text[position:end])
        if match is None:
            break
        position = match.end()
        if match.group(2) == "m":
            pen = sgr(pen, match.group(1))
    return screen.lines


class Screen:
    """Lines as written so far. A carriage return starts its line again once more text comes
    (a progress bar shows its last state); a backspace takes back one character."""

    def __init__(self) -> None:
        self.lines: list[list[Run]] = [[]]
        self.returned = False

    def write(self, pen: Pen, chunk: str) -> None:
        chunk = CONTROL.sub("", chunk.replace("\r\n", "\n"))
        for n, piece in enumerate(chunk.split("\n")):
            if n:
                self.lines.append([])
                self.returned = False
            for k, part in enumerate(piece.split("\r")):
                self.returned = self.returned or k > 0
                if part and self.returned:
                    self.lines[-1].clear()
                    self.returned = False
                self.put(pen, part)

    def put(self, pen: Pen, text: str) -> None:
        line = self.lines[-1]
        if "\b" not in text:
            _append(line, pen, text)
            return
        first, *rest = text.split("\b")
        _append(line, pen, first)
        for part in rest:  # each backspace takes back the character before it (overstrike)
            if line:
                run_pen, run_text = line.pop()
                if len(run_text) > 1:
                    line.append((run_pen, run_text[:-1]))
            _append(line, pen, part)


def _append(line: list[Run], pen: Pen, text: str) -> None:
    if not text:
        return
    if line and line[-1][0] == pen:
        line[-1] = (pen, line[-1][1] + text)
    else:
        line.append((pen, text))


def has_escapes(text: str) -> bool:
    return bool(HAS_CONTROL.search(text))


def to_html(text: str) -> str:
    """Terminal output as escaped HTML: styled runs as ``<span class="ansi-…">``."""
    out: list[str] = []
    for line in runs(text):
        for pen, chars in line:
            classes = pen.classes()
            out.append(
                f'<span class="{classes}">{escape(chars)}</span>' if classes else escape(chars)
            )
        out.append("\n")
    return "".join(out[:-1])


def plain(text: str) -> str:
    """Terminal output as plain text: what a person would copy from the terminal."""
    return "\n".join("".join(chars for _, chars in line) for line in runs(text))


# --- Markdown code fences ---------------------------------------------------------------------

FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$")


@dataclass(frozen=True)
class Segment:
    """A stretch of output: text outside any fence (``fenced`` False), or a fence's body."""

    text: str
    language: str = ""
    fenced: bool = False


def split_fences(text: str) -> list[Segment]:
    """``text`` cut at its Markdown code fences; an unclosed fence runs to the end (a cut)."""
    segments: list[Segment] = []
    loose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        if not opened:
            loose.append(lines[i])
            i += 1
            continue
        fence = opened.group(1)
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        _flush(segments, loose)
        segments.append(Segment("\n".join(lines[i + 1 : end]), opened.group(2).lower(), True))
        i = end + 1
    _flush(segments, loose)
    return segments


def _flush(segments: list[Segment], loose: list[str]) -> None:
    body = "\n".join(loose).strip("\n")
    if body.strip():
        segments.append(Segment(body))
    loose.clear()
