"""Unified diffs for a person: one table row per line, old and new line numbers, a header per
file with its name and +N/−N counts, code highlighted by the file's language.

An ACP ``diff`` content item (path, oldText, newText) is stored in ``agent_output`` as a unified
diff (``render.unified_diff``), maybe beside other text and maybe cut at the content bound; a
command's output may hold one too (``git diff``). ``split`` finds each file's diff in such text
by its ``--- ``/``+++ ``/``@@`` lines and reads its hunks by their line counts, so a removed line
that itself starts with ``--`` is never taken for a header; ``file_html`` renders one. Pure
functions, no I/O; every character of the text is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils.html import escape

from activity.show import highlight

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
# Characters a page cannot show; the highlighter would take a carriage return for a new line.
UNSHOWN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MARKS = {"add": "+", "del": "\N{MINUS SIGN}", "ctx": " "}


@dataclass
class Line:
    kind: str  # "add", "del", "ctx", "hunk" (an @@ line), "note" (\ No newline at end of file)
    text: str
    old: int | None = None
    new: int | None = None


@dataclass
class FileDiff:
    old_path: str
    new_path: str
    lines: list[Line] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The file's name as a person knows it: the new one, or the old one if it was deleted."""
        name = self.old_path if self.new_path == "/dev/null" else self.new_path
        return re.sub(r"^[ab]/", "", name.split("\t")[0])

    @property
    def created(self) -> bool:
        return self.old_path.split("\t")[0] == "/dev/null"

    @property
    def deleted(self) -> bool:
        return self.new_path.split("\t")[0] == "/dev/null"

    @property
    def added(self) -> int:
        return sum(line.kind == "add" for line in self.lines)

    @property
    def removed(self) -> int:
        return sum(line.kind == "del" for line in self.lines)

    def patch(self) -> str:
        """The diff as a unified diff again (what a person copies)."""
        body = [
            line.text
            if line.kind in ("hunk", "note")
            else {"add": "+", "del": "-"}.get(line.kind, " ") + line.text
            for line in self.lines
        ]
        return "\n".join([f"--- {self.old_path}", f"+++ {self.new_path}", *body])


Part = str | FileDiff


def starts_file(lines: list[str], i: int) -> bool:
    return (
        i + 2 < len(lines)
        and lines[i].startswith("--- ")
        and lines[i + 1].startswith("+++ ")
        and HUNK.match(lines[i + 2]) is not None
    )


def split(text: str) -> list[Part]:
    """``text`` as its stretches of other text (str) and the file diffs (FileDiff) in it."""
    lines = text.split("\n")
    parts: list[Part] = []
    loose: list[str] = []
    i = 0
    while i < len(lines):
        if not starts_file(lines, i):
            loose.append(lines[i])
            i += 1
            continue
        if loose:
            parts.append("\n".join(loose))
            loose = []
        diff = FileDiff(lines[i][4:], lines[i + 1][4:])
        i = read_hunks(lines, i + 2, diff)
        parts.append(diff)
    if loose:
        parts.append("\n".join(loose))
    return parts


def read_hunks(lines: list[str], i: int, diff: FileDiff) -> int:
    """Read the hunks starting at ``lines[i]`` into ``diff``; the index after them."""
    while i < len(lines) and (hunk := HUNK.match(lines[i])):
        old, new = int(hunk.group(1)), int(hunk.group(3))
        old_left = int(hunk.group(2) or 1)
        new_left = int(hunk.group(4) or 1)
        diff.lines.append(Line("hunk", lines[i]))
        i += 1
        while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i].startswith("\\")):
            text = lines[i]
            mark, rest = text[:1], text[1:]
            if mark == "\\":
                diff.lines.append(Line("note", text))
            elif mark == "+" and new_left:
                diff.lines.append(Line("add", rest, new=new))
                new, new_left = new + 1, new_left - 1
            elif mark == "-" and old_left:
                diff.lines.append(Line("del", rest, old=old))
                old, old_left = old + 1, old_left - 1
            elif mark in (" ", "") and old_left and new_left:
                diff.lines.append(Line("ctx", rest, old=old, new=new))
                old, new, old_left, new_left = old + 1, new + 1, old_left - 1, new_left - 1
            else:
                break  # not what the counts promised: the diff ends here
            i += 1
    return i


def highlighted(diff: FileDiff) -> list[str]:
    """Each line's code as HTML: highlighted by the file's language, the old side's lines and
    the new side's each lexed in order within their hunk (a string opened on one line stays
    a string on the next), else escaped as it is."""
    lexer = highlight.lexer_for_path(diff.path)
    if lexer is None:
        return [str(escape(UNSHOWN.sub("", line.text))) for line in diff.lines]
    out = [""] * len(diff.lines)
    hunk: list[int] = []
    for n, line in enumerate([*diff.lines, Line("hunk", "")]):
        if line.kind != "hunk":
            hunk.append(n)
            continue
        for side in ("del", "add"):
            numbers = [k for k in hunk if diff.lines[k].kind in (side, "ctx")]
            if not numbers:
                continue
            code = "\n".join(UNSHOWN.sub("", diff.lines[k].text) for k in numbers)
            for k, html in zip(numbers, highlight.highlight_lines(code, lexer), strict=True):
                out[k] = html
        for k in hunk:
            if diff.lines[k].kind == "note":
                out[k] = str(escape(diff.lines[k].text))
        if n < len(diff.lines):
            out[n] = str(escape(line.text))
        hunk = []
    return out


def file_html(diff: FileDiff) -> str:
    """One file's diff: its header (name, what happened, +N −N, a copy button) and its lines."""
    name = escape(diff.path)
    state = ' <span class="diff-state">new file</span>' if diff.created else ""
    state = ' <span class="diff-state">deleted</span>' if diff.deleted else state
    counts = (
        f'<span class="diff-counts"><span class="diff-plus" title="lines added">'
        f'+{diff.added}</span> <span class="diff-minus" title="lines removed">'
        f"\N{MINUS SIGN}{diff.removed}</span></span>"
    )
    rows = []
    for line, code in zip(diff.lines, highlighted(diff), strict=True):
        if line.kind in ("hunk", "note"):
            numbers = '<td class="ln" colspan="3"></td>'
        else:
            old = "" if line.old is None else line.old
            new = "" if line.new is None else line.new
            mark = MARKS[line.kind]
            numbers = (
                f'<td class="ln">{old}</td><td class="ln">{new}</td><td class="mk">{mark}</td>'
            )
        rows.append(f'<tr class="{line.kind}">{numbers}<td class="code">{code}</td></tr>')
    return (
        f'<div class="output-block diff-file" data-from="{escape(diff.old_path)}"'
        f' data-to="{escape(diff.new_path)}">'
        f'<div class="output-bar"><span class="diff-path">{name}</span>{state} {counts}'
        f"{COPY_BUTTON}</div>"
        f'<div class="diff-scroll"><table class="diff hl"><tbody>{"".join(rows)}</tbody>'
        f"</table></div></div>"
    )


COPY_BUTTON = '<button type="button" class="copy" data-copy>Copy</button>'
