"""A change as its page shows it: every file with its counts, and each file's diff drawn like
the diffs of calls (``diffs.py``). The files come from the runner's counts, which stay whole
when the diff's text was cut to fit; a file whose diff was cut away (or a binary file) is
listed without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from activity.show import diffs


@dataclass(frozen=True)
class File:
    path: str
    added: int | None  # None: a binary file
    removed: int | None
    html: SafeString | None  # its diff, drawn; None when the text holds none


@dataclass(frozen=True)
class Shown:
    files: list[File]
    more_files: int  # files past the runner's count, left out
    cut_bytes: int  # the diff's bytes left out of its text
    skipped: int  # files too big to snapshot

    @property
    def added(self) -> int:
        return sum(file.added or 0 for file in self.files)

    @property
    def removed(self) -> int:
        return sum(file.removed or 0 for file in self.files)


def shown(diff: Any, which: str) -> Shown:
    """``which`` ("turn" or "run") of a ``TurnDiff``, as its page shows it."""
    text: str = getattr(diff, f"{which}_diff")
    drawn = {part.path: part for part in diffs.split(text) if isinstance(part, diffs.FileDiff)}
    files = []
    for counted in getattr(diff, f"{which}_files"):
        path = str(counted.get("path", ""))
        part = drawn.pop(path, None)
        html = mark_safe(diffs.file_html(part)) if part is not None else None  # noqa: S308
        files.append(File(path, counted.get("added"), counted.get("removed"), html))
    return Shown(
        files=files,
        more_files=getattr(diff, f"{which}_more_files"),
        cut_bytes=getattr(diff, f"{which}_cut_bytes"),
        skipped=diff.skipped,
    )
