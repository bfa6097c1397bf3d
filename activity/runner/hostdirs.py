"""What an agent host lets the web see and choose of its disk: directories under its roots.

``resolve`` turns a root and a path relative to it into the real directory, symlinks resolved,
and refuses whatever is not inside one of the host's roots (``..``, a symlink out of the root,
an absolute path elsewhere), or is not a directory. ``listing`` lists one level of it:
directories first, then files, each by name (case-insensitive); hidden entries (a leading dot)
and symlinks that lead out of the roots are left out; at most ``MAX_ENTRIES``, the rest
counted in ``more``.
"""

from __future__ import annotations

import os

from activity.wire.hostframes import MAX_ENTRIES, Entry


class Outside(Exception):
    """Not a directory the host offers: the reason, in words, for the person who asked."""


def real_roots(roots: list[str]) -> dict[str, str]:
    """Each root as given (what the web sees) → its real path."""
    return {root: os.path.realpath(root) for root in roots}


def inside(path: str, real_root: str) -> bool:
    return os.path.commonpath([path, real_root]) == real_root


def resolve(roots: dict[str, str], root: str, path: str) -> str:
    """The real directory ``path`` names under ``root``; raises ``Outside``."""
    if root not in roots:
        raise Outside(f"“{root}” is not one of this host's directories")
    real_root = roots[root]
    if "\x00" in path:
        raise Outside("a path has no NUL character")
    real = os.path.realpath(os.path.join(real_root, path))
    if not inside(real, real_root):
        raise Outside(f"“{path}” is outside {root}: the host offers only what is under its roots")
    if not os.path.isdir(real):
        raise Outside(f"“{path}” is not a directory under {root}")
    return real


def listing(roots: dict[str, str], root: str, path: str) -> tuple[list[Entry], int]:
    """One level of the directory: its entries (directories first) and how many more there
    are past ``MAX_ENTRIES``; raises ``Outside``."""
    directory = resolve(roots, root, path)
    real_root = roots[root]
    dirs: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(directory) as found:
            for entry in found:
                if entry.name.startswith(".") or not shown(entry.name):
                    continue
                try:
                    if entry.is_symlink() and not inside(os.path.realpath(entry.path), real_root):
                        continue  # it leads out of the root: choosing it would be refused
                    (dirs if entry.is_dir() else files).append(entry.name)
                except OSError:
                    continue
    except OSError as error:
        raise Outside(f"“{path or root}” cannot be read: {error.strerror}") from None
    names = sorted(dirs, key=str.casefold) + sorted(files, key=str.casefold)
    entries = [Entry(name=name, dir=n < len(dirs)) for n, name in enumerate(names[:MAX_ENTRIES])]
    return entries, max(0, len(names) - MAX_ENTRIES)


def shown(name: str) -> bool:
    """A name a listing can carry: UTF-8 (no undecodable bytes), at most 255 characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(name) <= 255
